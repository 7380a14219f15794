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
@Suite(.stallLimit, .endToEnd) struct GrowingResourceTests {
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
                    while first + Int64(received[index].readableBytes) < made,
                        var chunk = try await iterators[index].next()
                    {
                        received[index].writeBuffer(&chunk)
                    }
                    #expect(first + Int64(received[index].readableBytes) == made, "player \(index)")
                }
            }
            growth.finish()
            for index in 0..<4 {
                while var chunk = try await iterators[index].next() { received[index].writeBuffer(&chunk) }
                #expect(
                    Int64(received[index].readableBytes) == length - first
                        && segment.firstMismatch(in: received[index], at: first) == nil)
            }
            #expect(h.origin.requests("/ll/chunk.m4s").count == 1, "\(h.origin.requests("/ll/chunk.m4s"))")
        }
    }

    /// Low-latency DASH: a segment asked for before it is available gets the origin's `404`,
    /// which the origin says is fresh for a minute; the player's next try, once the segment is
    /// made, reaches the origin (a live manifest's folder is noted when it is rewritten). Off a
    /// live presentation, such a `404` is reused while fresh.
    @Test func aSegmentAskedForBeforeItIsAvailableIsNotRememberedMissing() async throws {
        try await ProxyHarness.with { h in
            let text = """
                <?xml version="1.0"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" minimumUpdatePeriod="PT2S" availabilityStartTime="2026-01-01T00:00:00Z">
                  <Period start="PT0S"><AdaptationSet><Representation id="v" bandwidth="100000">
                    <SegmentTemplate media="seg-$Number$.m4s" startNumber="1" duration="2" timescale="1" availabilityTimeOffset="1.5" availabilityTimeComplete="false"/>
                  </Representation></AdaptationSet></Period>
                </MPD>
                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: "application/dash+xml"),
                at: "/lldash/m.mpd")
            let manifest = String(buffer: try await h.get(h.url("/lldash/m.mpd")).body)
            let base = try #require(
                manifest.split(separator: "<BaseURL>").dropFirst().first?.split(separator: "<").first.map(String.init))
            for (path, live) in [("/lldash/seg-9.m4s", true), ("/other/seg-9.m4s", false)] {
                var missing = TestOrigin.Resource(body: .bytes([]), mimeType: "video/iso.segment")
                missing.faults.status = 404
                missing.cacheControl = "max-age=60"
                h.origin.serve(missing, at: path)
                let url = live ? base + "seg-9.m4s" : h.url(path)
                #expect(try await h.get(url).status == 404)
                h.origin.serve(.generated(length: 10_000, seed: 86), at: path)
                let again = try await h.get(url)
                #expect(again.status == (live ? 200 : 404), "\(path)")
                // (Serving the path anew starts its request log again.)
                #expect(h.origin.requests(path).count == (live ? 1 : 0), "\(h.origin.requests(path))")
            }
        }
    }
}
