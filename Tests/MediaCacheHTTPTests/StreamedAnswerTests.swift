// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCacheHTTP

/// Origin answers through AsyncHTTPClient's delegate interface (`StreamedAnswer`), against
/// the test origin on loopback: only the head is timed, a body that takes longer than that
/// limit arrives whole and right, a head that never comes is a timeout, and a body its reader leaves ends
/// its request.
@Suite(.stallLimit) struct StreamedAnswerTests {
    static func withFetcher(
        responseTimeout: Duration, connectionsPerHost: Int = 8,
        _ body: (HTTPOriginFetcher, TestOrigin) async throws -> Void
    ) async throws {
        // The origin first: the first use of NIO's shared event loops starts them (reading how
        // many cores there are), a blocking call better made by the test's own code.
        let origin = try await TestOrigin.start()
        var configuration = HTTPOriginFetcher.Configuration()
        configuration.responseTimeout = responseTimeout
        configuration.connectionsPerHost = connectionsPerHost
        let fetcher = HTTPOriginFetcher(configuration: configuration)
        do {
            try await body(fetcher, origin)
        } catch {
            try await fetcher.shutdown()
            try await origin.shutdown()
            throw error
        }
        try await fetcher.shutdown()
        try await origin.shutdown()
    }

    static func collect(_ response: OriginResponse) async throws -> ByteBuffer {
        var collected = ByteBuffer()
        for try await var part in response.body { collected.writeBuffer(&part) }
        return collected
    }

    /// The head and the first bytes at once, the rest held by the origin until well past the
    /// 2 s the head may take (a wait that only has to be long enough: on a slow machine it is
    /// longer, never too short): the body still arrives whole and right.
    @Test func onlyTheHeadIsTimed() async throws {
        try await Self.withFetcher(responseTimeout: .seconds(2)) { fetcher, origin in
            var held = TestOrigin.Faults()
            held.bodyGate = TestOrigin.Gate()
            held.bodyGateOffset = 1_000
            origin.serve(.generated(length: 48 << 10, seed: 7, faults: held), at: "/held.mp4")
            let response = try await fetcher.fetch(origin.url("/held.mp4"), range: nil, ifRange: nil, headers: [])
            try await Task.sleep(for: .seconds(3))
            held.bodyGate?.open()
            let body = try await Self.collect(response)
            #expect(body.readableBytes == 48 << 10)
            #expect(DeterministicContent(seed: 7).firstMismatch(in: body, at: 0) == nil)
        }
    }

    @Test func aHeadThatNeverComesTimesOut() async throws {
        try await Self.withFetcher(responseTimeout: .milliseconds(250)) { fetcher, origin in
            var silent = TestOrigin.Faults()
            silent.gate = TestOrigin.Gate()
            origin.serve(.generated(length: 10, faults: silent), at: "/silent.mp4")
            await #expect {
                _ = try await fetcher.fetch(origin.url("/silent.mp4"), range: nil, ifRange: nil, headers: [])
            } throws: {
                ($0 as? CacheError)?.code == .originTimedOut
            }
            silent.gate?.open()
        }
    }

    /// The first part of a body whose rest the origin holds back, then the reader leaves: the
    /// request ends without the held bytes, its connection closed, and the next request (one
    /// connection allowed: it would wait for ever behind a request that did not end) is
    /// answered right on a new one.
    @Test func aBodyItsReaderLeavesEndsTheRequest() async throws {
        try await Self.withFetcher(responseTimeout: .seconds(30), connectionsPerHost: 1) { fetcher, origin in
            var held = TestOrigin.Faults()
            held.bodyGate = TestOrigin.Gate()
            held.bodyGateOffset = 1_000
            origin.serve(.generated(length: 1 << 20, seed: 8, faults: held), at: "/held.mp4")
            origin.serve(.generated(length: 5_000, seed: 9), at: "/next.mp4")
            let response = try await fetcher.fetch(origin.url("/held.mp4"), range: nil, ifRange: nil, headers: [])
            var iterator = response.body.makeAsyncIterator()
            let first = try #require(try await iterator.next())
            #expect(first.readableBytes <= 1_000)
            #expect(DeterministicContent(seed: 8).firstMismatch(in: first, at: 0) == nil)
            _ = consume iterator
            let next = try await fetcher.fetch(origin.url("/next.mp4"), range: nil, ifRange: nil, headers: [])
            let body = try await Self.collect(next)
            #expect(body.readableBytes == 5_000)
            #expect(DeterministicContent(seed: 9).firstMismatch(in: body, at: 0) == nil)
            #expect(origin.connectionsAccepted == 2)
            held.bodyGate?.open()
        }
    }
}
