// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

extension TestOrigin {
    /// Serves a VOD media playlist at `folder + "index.m3u8"` naming `count` segments of 2 s,
    /// `seg0.ts`, `seg1.ts`, …, each `length` deterministic bytes (seeded `firstSeed`, then
    /// one more each), and the segments themselves.
    public func serveVODPlaylist(at folder: String, segments count: Int, length: Int64, firstSeed: UInt64 = 1) {
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<count {
            text += "#EXTINF:2.0,\nseg\(index).ts\n"
            serve(
                .generated(length: length, seed: firstSeed + UInt64(index), mimeType: "video/mp2t"),
                at: folder + "seg\(index).ts")
        }
        text += "#EXT-X-ENDLIST\n"
        serve(
            Resource(body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl"),
            at: folder + "index.m3u8")
    }
}
