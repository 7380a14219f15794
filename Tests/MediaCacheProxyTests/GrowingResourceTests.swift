// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// A resource that grows while it is sent (a chunked CMAF segment of low-latency DASH, an
/// LL-HLS open-ended hint): any number of players waiting on it share one origin request.
@Suite(.endToEnd) struct GrowingResourceTests {
    /// Four players on one growing segment (asked whole, or from a byte as an LL-HLS hint is):
    /// one origin request; each gets every byte, each piece before the next is made.
    @Test(arguments: [nil, 20_000] as [Int64?])
    func fourPlayersOnOneGrowingSegmentShareOneOriginRequest(_ start: Int64?) async throws {
        try await ProxyHarness.with { h in
            let length: Int64 = 120_000
            let growth = TestOrigin.Growth(made: 30_000)
            var segment = TestOrigin.Resource.generated(length: length, seed: 44, mimeType: "video/iso.segment")
            segment.faults.growth = growth
            h.origin.serve(segment, at: "/ll/chunk.m4s")
            let first = start ?? 0
            var iterators: [HTTPClientResponse.Body.AsyncIterator] = []
            for _ in 0..<4 {
                var request = HTTPClientRequest(url: h.url("/ll/chunk.m4s"))
                if let start { request.headers.add(name: "Range", value: "bytes=\(start)-") }
                let response = try await h.client.execute(request, timeout: .seconds(30))
                #expect(response.status == (start == nil ? .ok : .partialContent))
                iterators.append(response.body.makeAsyncIterator())
            }
            var received = [ByteBuffer](repeating: ByteBuffer(), count: 4)
            for made in stride(from: 45_000, through: length, by: 15_000) {
                growth.make(upTo: made)
                for index in 0..<4 {
                    while first + Int64(received[index].readableBytes) < made, var chunk = try await iterators[index].next() {
                        received[index].writeBuffer(&chunk)
                    }
                    #expect(first + Int64(received[index].readableBytes) == made, "player \(index)")
                }
            }
            growth.finish()
            for index in 0..<4 {
                while var chunk = try await iterators[index].next() { received[index].writeBuffer(&chunk) }
                #expect(Int64(received[index].readableBytes) == length - first && segment.firstMismatch(in: received[index], at: first) == nil)
            }
            #expect(h.origin.requests("/ll/chunk.m4s").count == 1, "\(h.origin.requests("/ll/chunk.m4s"))")
        }
    }
}
