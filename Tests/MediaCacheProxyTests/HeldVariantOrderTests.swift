// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Online, a master whose variants are partly held lists first the variants whose start is
/// held, so a player that starts on the first variant listed starts where the bytes are; the
/// rest of the master is as the origin wrote it.
@Suite(.stallLimit, .endToEnd) struct HeldVariantOrderTests {
    /// The variants' media playlists, in the order `master` lists them.
    static func variants(_ master: String) -> [String] {
        master.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
            ["v0.m3u8", "v1.m3u8"].first {
                line.contains($0) || line.contains($0.replacingOccurrences(of: ".", with: "%2E"))
            }
        }
    }

    @Test func theVariantWhoseStartIsHeldIsListedFirst() async throws {
        try await ProxyHarness.with { h in
            h.origin.serveRenditionAsset()
            let cold = try await h.get(h.url("/hls/master.m3u8"))
            #expect(Self.variants(String(buffer: cold.body)) == ["v0.m3u8", "v1.m3u8"], "as the origin lists them")
            // The second variant's start is stored (a play or a preload of it).
            try await h.base.reader.prefetchHLS(
                h.origin.url("/hls/master.m3u8"), options: HLSPrefetchOptions(variant: .highestBandwidth))
            let warm = try await h.get(h.url("/hls/master.m3u8"))
            let text = String(buffer: warm.body)
            #expect(Self.variants(text) == ["v1.m3u8", "v0.m3u8"], "\(text)")
            // Nothing else moved: the renditions and the header lines are where they were.
            let tags = { (body: String) in
                body.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-MEDIA") || $0 == "#EXTM3U" }
            }
            #expect(tags(text) == tags(String(buffer: cold.body)))
        }
    }

    /// The reordering itself: each variant moves with its lines; what is not a variant stays.
    @Test func variantsMoveWithTheirLines() throws {
        let master = """
            #EXTM3U
            #EXT-X-INDEPENDENT-SEGMENTS
            #EXT-X-STREAM-INF:BANDWIDTH=1
            a.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2
            # a comment of b's
            b.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=3
            c.m3u8

            """
        let playlist = try HLSPlaylist(parsing: Array(master.utf8))
        let base = URL(string: "https://h.example/m/master.m3u8")!
        let moved = playlist.withVariantsFirst(base: base) { $0.lastPathComponent != "a.m3u8" }
        #expect(
            moved == """
                #EXTM3U
                #EXT-X-INDEPENDENT-SEGMENTS
                #EXT-X-STREAM-INF:BANDWIDTH=2
                # a comment of b's
                b.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=3
                c.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=1
                a.m3u8

                """)
        #expect(playlist.withVariantsFirst(base: base) { $0.lastPathComponent == "a.m3u8" } == nil, "a leads already")
        #expect(playlist.withVariantsFirst(base: base) { _ in false } == nil)
    }
}
