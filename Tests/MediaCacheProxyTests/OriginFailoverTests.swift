// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Two origins that serve the same bytes (`--origin-fallback A=B`): the first stops in the
/// middle of a play (its connection dropped, then `503` for everything), and the read goes on
/// from the second at the byte where it stopped, under the same entry; the player gets every
/// byte right, the failover is logged, and a replay asks neither.
@Suite(.stallLimit, .endToEnd) struct OriginFailoverTests {
    @Test func aPlayGoesOnFromTheAlternateWhenTheOriginStops() async throws {
        let (first, second) = (try await TestOrigin.start(), try await TestOrigin.start())
        defer {
            Task {
                try? await first.shutdown()
                try? await second.shutdown()
            }
        }
        let recorder = LogRecorder()
        var reader = CachingReader.Configuration()
        reader.originFallbacks = ["127.0.0.1:\(first.port)": ["127.0.0.1:\(second.port)"]]
        reader.logger = recorder.logger()
        let length: Int64 = 3_000_000
        let episode = TestOrigin.Resource.generated(length: length, seed: 160, mimeType: "audio/mpeg")
        second.serve(episode, at: "/ep.mp3")
        var failing = episode
        failing.faults.dropAfterBytes = length / 2
        failing.faults.dropCount = 1
        failing.faults.onDrop = { first.update("/ep.mp3") { $0.faults.status = 503 } }
        first.serve(failing, at: "/ep.mp3")
        try await ProxyHarness.with(reader: reader) { proxy in
            let url = proxy.proxyURL(for: first.url("/ep.mp3").absoluteString)
            let played = try await proxy.get(url)
            #expect(played.status == 200 && Int64(played.body.readableBytes) == length)
            #expect(episode.firstMismatch(in: played.body, at: 0) == nil, "every byte the origin's")
            // The alternate was asked once, for the rest from the first byte the cache did not get
            // (the drop lost what was still in the sockets), and sent just that.
            let asked = second.requests("/ep.mp3").map { $0.range ?? "-" }
            let start = asked.first.flatMap { Int64($0.dropFirst(6).prefix { $0 != "-" }) } ?? 0
            #expect(asked.count == 1 && start > 0 && start <= length / 2, "\(asked)")
            #expect(second.bodyBytesSent("/ep.mp3") == length - start)
            #expect(recorder.all.contains { $0.level == .warning && $0.message.contains("asking an alternate") })
            first.resetCounters()
            second.resetCounters()
            let replay = try await proxy.get(url)
            #expect(replay.status == 200 && episode.firstMismatch(in: replay.body, at: 0) == nil)
            #expect(first.requests("/ep.mp3").isEmpty && second.requests("/ep.mp3").isEmpty)
            // The first origin gone altogether (nothing listens): a new play starts from the
            // alternate.
            try await first.shutdown()
            let next = TestOrigin.Resource.generated(length: 500_000, seed: 161, mimeType: "audio/mpeg")
            second.serve(next, at: "/ep2.mp3")
            let started = try await proxy.get(proxy.proxyURL(for: first.url("/ep2.mp3").absoluteString))
            #expect(started.status == 200 && next.firstMismatch(in: started.body, at: 0) == nil)
            #expect(started.body.readableBytes == 500_000)
        }
    }

    /// `HOST[:PORT]=HOST2[:PORT]` pairs, several alternates per host in order; anything else is
    /// refused.
    @Test func fallbacksAreReadAsHostPairs() throws {
        let alternates = try #require(OriginFailover.alternates(["a.example=b.example", "a.example=c.example:8443"]))
        #expect(alternates.count == 1 && alternates.values.first?.count == 2)
        for wrong in ["a.example", "a.example=", "=b.example", "a=b=c", "a.example=a.example", "a b=c"] {
            #expect(OriginFailover.alternates([wrong]) == nil, "\(wrong)")
        }
    }
}
