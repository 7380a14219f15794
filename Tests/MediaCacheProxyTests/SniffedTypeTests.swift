// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCacheProxy

/// A small file of a generic type may be a playlist: its start is looked at once (a request from
/// its middle is taken for media without a look, as before). What the look
/// learned is kept with the version, so the file's next ranges take the store's fast road (issue
/// 79: 240,565 instructions per hot range before, 94,510 after); a playlist sent as such a type
/// is never marked, and is rewritten every time.
@Suite(.stallLimit, .endToEnd) struct SniffedTypeTests {
    @Test func aGenericFilesLookIsKeptAndAPlaylistsIsNot() async throws {
        try await ProxyHarness.with { h in
            let blob = TestOrigin.Resource.generated(length: 1_000_000, seed: 7, mimeType: "application/octet-stream")
            h.origin.serve(blob, at: "/blob.bin")
            let playlist = TestOrigin.Resource(
                body: .bytes(Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n#EXT-X-ENDLIST\n".utf8)),
                mimeType: "application/octet-stream")
            h.origin.serve(playlist, at: "/list")
            let (blobKey, listKey) = (
                h.base.store.key(for: h.origin.url("/blob.bin")), h.base.store.key(for: h.origin.url("/list"))
            )
            for round in 1...3 {
                // From its start first, as a player opens a file; then further on.
                let range = Int64(round - 1) * 100_000
                let reply = try await h.get(
                    h.url("/blob.bin"), headers: [("Range", "bytes=\(range)-\(range + 65_535)")])
                #expect(reply.status == 206 && reply.body.readableBytes == 65_536, "round \(round)")
                #expect(blob.firstMismatch(in: reply.body, at: range) == nil, "round \(round)")
                let list = try await h.get(h.url("/list"))
                #expect(list.status == 200 && list.text.contains("127.0.0.1"), "round \(round): \(list.text)")
                try await h.base.waitUntilQuiet("/blob.bin")
                #expect(h.base.store.metadata(for: blobKey)?.startIsMedia == true, "round \(round)")
                #expect(h.base.store.metadata(for: listKey)?.startIsMedia == nil, "round \(round)")
            }
        }
    }
}
