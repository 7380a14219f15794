// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// Which host a request's connection is counted against when its origin fails over: the host it
/// is sent to first. Over a scripted fetcher: no network, the manual clock.
@Suite(.stallLimit) struct OriginStackTests {
    /// `a.test` cannot be reached; `b.test` answers with a body that stays open until the test
    /// ends it. Records the hosts asked, in order.
    final class Origins: OriginFetcher {
        let asked = Mutex<[String]>([])
        let bodies = Mutex<[AsyncStream<ByteBuffer>.Continuation]>([])

        func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
            throw CacheError(.originUnavailable, "not asked in this test")
        }

        func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws
            -> OriginResponse
        {
            asked.withLock { $0.append(url.host ?? "") }
            guard url.host == "b.test" else { throw CacheError(.originUnavailable, "Cannot reach \(url.host ?? "")") }
            let (body, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
            bodies.withLock { $0.append(continuation) }
            var metadata = ContentMetadata()
            metadata.length = 100
            return OriginResponse(metadata: metadata, bodyOffset: 0, body: body.map { $0 })
        }
    }

    @Test func aRequestIsCountedAgainstTheHostItIsSentToFirst() async throws {
        let origins = Origins()
        var configuration = CachingReader.Configuration()
        configuration.originFallbacks = ["a.test": ["b.test"]]
        let budget = ConnectionBudget(limit: 4, ownLimit: 1, logger: Logger(label: "test"))
        let (metered, _) = OriginStack.compose(
            origins, configuration: configuration, budget: budget, clock: ManualClock())
        let a = URL(string: "http://a.test/song.mp3")!
        let b = URL(string: "http://b.test/song.mp3")!

        // A fails as it is asked: the request goes on to B within the same call, still counted
        // against A, where it began (its connection there ended).
        let first = try await metered.fetch(a, range: nil, ifRange: nil, headers: [], as: .player)
        #expect(origins.asked.withLock { $0 } == ["a.test", "b.test"])
        #expect(budget.usage(of: a).inUse == 1 && budget.usage(of: b).inUse == 0)
        origins.bodies.withLock { $0.forEach { $0.finish() } }
        for try await _ in first.body {}
        #expect(budget.usage(of: a).inUse == 0)

        // While A backs off, a request for it is sent to B first, and takes B's connection.
        let second = try await metered.fetch(a, range: nil, ifRange: nil, headers: [], as: .player)
        #expect(origins.asked.withLock { $0 } == ["a.test", "b.test", "b.test"])
        #expect(budget.usage(of: b).inUse == 1 && budget.usage(of: a).inUse == 0)
        origins.bodies.withLock { $0.forEach { $0.finish() } }
        for try await _ in second.body {}
        #expect(budget.usage(of: b).inUse == 0)
    }
}
