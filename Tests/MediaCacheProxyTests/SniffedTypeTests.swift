// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// A small file of a generic type may be a playlist: its start is looked at once (a request from
/// its middle is taken for media without a look, as before). What the look
/// learned is kept with the version, so the file's next ranges take the store's fast road (issue
/// 79: 240,565 instructions per hot range before, 94,510 after); a playlist sent as such a type
/// is never marked, and is rewritten every time. A stored range from the middle of such a file
/// whose start is not stored takes the fast road too, as the general path takes it for media.
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

    @Test func aStoredMiddleRangeOfAnUnlookedFileTakesTheFastRoad() async throws {
        try await ProxyHarness.with { h in
            let blob = TestOrigin.Resource.generated(length: 4_000_000, seed: 9, mimeType: "application/octet-stream")
            h.origin.serve(blob, at: "/middle.bin")
            let range = "bytes=2000000-2065535"
            let first = try await h.get(h.url("/middle.bin"), headers: [("Range", range)])
            #expect(first.status == 206 && blob.firstMismatch(in: first.body, at: 2_000_000) == nil)
            try await h.base.waitUntilQuiet("/middle.bin")
            let key = h.base.store.key(for: h.origin.url("/middle.bin"))
            #expect(h.base.store.metadata(for: key)?.startIsMedia == nil, "its start was never looked at")

            // The proxy's own answer to the same request, asked of its handler as its event loop asks.
            var configuration = ProxyConfiguration()
            configuration.port = h.port
            let handler = ProxyHandler(reader: h.base.reader, configuration: configuration)
            let uri = String(h.url("/middle.bin").dropFirst("http://127.0.0.1:\(h.port)".count))
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
            head.headers.add(name: "Host", value: "127.0.0.1:\(h.port)")
            head.headers.add(name: "Range", value: range)
            var repeated = RepeatedRequestCheck()
            guard
                case .answered(let response) = handler.respondFromStore(
                    to: head, localPort: h.port, checking: &repeated)
            else {
                Issue.record("a stored middle range went the general way")
                return
            }
            #expect(response.status == .partialContent)
            // From the start it is still looked at first (the general path).
            head.headers.replaceOrAdd(name: "Range", value: "bytes=0-65535")
            guard case .needsGeneralPath = handler.respondFromStore(to: head, localPort: h.port, checking: &repeated)
            else {
                Issue.record("an unlooked start was answered without a look")
                return
            }
            let again = try await h.get(h.url("/middle.bin"), headers: [("Range", range)])
            #expect(again.status == 206 && blob.firstMismatch(in: again.body, at: 2_000_000) == nil)
            #expect(h.origin.requests("/middle.bin").count == 1, "the second read was the store's")
        }
    }
}
