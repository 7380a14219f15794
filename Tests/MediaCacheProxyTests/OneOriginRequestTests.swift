// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The player comes first, and costs the origin one request: a whole-file `GET` through an
/// empty cache is one origin request on one connection, whatever the file's size and the
/// origin's speed (an origin that records each request's range and connection).
@Suite(.stallLimit, .endToEnd) struct OneOriginRequestTests {
    static let shapes: [(Int64, Int64?)] = [
        (100_000, nil), (4 << 20, nil), (16 << 20, nil), (4 << 20, 8 << 20), (2 << 20, 1 << 20),
    ]

    @Test(arguments: TestSetup.all)
    func aWholeFileIsOneOriginRequestOnOneConnection(setup: TestSetup) async throws {
        for (length, bytesPerSecond) in Self.shapes {
            try await Self.check(setup, length: length, bytesPerSecond: bytesPerSecond)
        }
    }

    static func check(_ setup: TestSetup, length: Int64, bytesPerSecond: Int64?) async throws {
        try await ProxyHarness.with(setup: setup) { proxy in
            var film = TestOrigin.Resource.generated(length: length, seed: 7, mimeType: "video/mp4")
            film.faults.bytesPerSecond = bytesPerSecond
            proxy.origin.serve(film, at: "/one/film.mp4")
            let reply = try await proxy.get(proxy.url("/one/film.mp4"))
            #expect(reply.status == 200 && Int64(reply.body.readableBytes) == length)
            #expect(DeterministicContent(seed: 7).firstMismatch(in: reply.body, at: 0) == nil)
            let requests = proxy.origin.requests("/one/film.mp4")
            #expect(
                requests.count == 1 && Set(requests.map(\.connection)).count == 1,
                "\(setup): \(length) bytes at \(bytesPerSecond.map(String.init) ?? "full") B/s: \(requests)")
        }
    }
}
