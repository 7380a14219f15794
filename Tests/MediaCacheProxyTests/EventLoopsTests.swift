// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCacheProxy

/// The proxy with two event loops, each listening at the port (`SO_REUSEPORT`): many clients
/// on their own connections, some cold, some hot, each get the origin's bytes, and the first
/// player's fetch of a range serves the others whichever loop they came in on.
@Suite(.stallLimit, .endToEnd) struct EventLoopsTests {
    @Test func twoLoopsServeManyClientsTheOriginsBytes() async throws {
        try await ProxyHarness.with(configure: {
            var configuration = $0
            configuration.eventLoops = 2
            return configuration
        }) { h in
            let length: Int64 = 4_000_000
            h.origin.serve(.generated(length: length, seed: 91), at: "/m.bin")
            let resource = try #require(h.origin.resource(at: "/m.bin"))
            let ranges = (0..<24).map { i -> ByteRange in
                let start = Int64(i % 8) * 400_000
                return ByteRange(start, start + 65_536)
            }
            for round in 0..<2 {
                try await withThrowingTaskGroup(of: (ByteRange, Int, ByteBuffer).self) { group in
                    for range in ranges {
                        group.addTask {
                            // Each on its own connection: curl, as a player opening one per request.
                            let run = try await ChildProcess.run([
                                "curl", "-s", "-r", "\(range.lowerBound)-\(range.upperBound - 1)", h.url("/m.bin"),
                            ])
                            var body = ByteBuffer()
                            body.writeBytes(run.output)
                            return (range, Int(run.status), body)
                        }
                    }
                    for try await (range, status, body) in group {
                        #expect(status == 0 && body.readableBytes == Int(range.length), "round \(round): \(range)")
                        #expect(
                            resource.firstMismatch(in: body, at: range.lowerBound) == nil, "round \(round): \(range)")
                    }
                }
                if round == 0 {
                    try await h.base.waitUntilQuiet("/m.bin")
                    h.origin.resetCounters()
                }
            }
            // The second round was all held: nothing asked of the origin, on either loop.
            #expect(h.origin.requests("/m.bin").isEmpty, "\(h.origin.requests("/m.bin"))")
        }
    }
}
