// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

@testable import MediaCacheHTTP

/// An origin on the internet never redirects the cache to this machine or its networks, by
/// address or by a name that resolves there; an origin inside may redirect anywhere. Over a
/// scripted transport and a scripted resolver: no network.
@Suite(.stallLimit) struct RedirectReachTests {
    /// Redirects `http://media.example.com/…` and `http://nas.example/…` to `location`; answers
    /// anything else with `200` and four bytes. Records what it was sent.
    final class Transport: OriginTransport {
        let location: String
        let sent = Mutex<[URL]>([])
        init(location: String) { self.location = location }

        func send(_ request: OriginRequest) async throws -> OriginReply {
            sent.withLock { $0.append(request.url) }
            let empty = AsyncStream<ByteBuffer> { $0.finish() }
            if ["media.example.com", "nas.example"].contains(request.url.host) {
                return OriginReply(
                    status: 302, reason: "Found", headers: ["Location": location, "Content-Length": "0"],
                    body: empty.map { $0 })
            }
            let body = AsyncStream<ByteBuffer> { continuation in
                continuation.yield(ByteBuffer(string: "abcd"))
                continuation.finish()
            }
            return OriginReply(status: 200, reason: "OK", headers: ["Content-Length": "4"], body: body.map { $0 })
        }
    }

    /// The names these tests know, and where they lead.
    static let resolver = AddressResolver { name in
        switch name {
        case "media.example.com", "cdn.example.net": [.publicInternet]
        case "intranet.example", "nas.example": [.privateNetwork]
        case "rebound.example": [.publicInternet, .loopback]
        default: []
        }
    }

    static func fetch(_ from: String, redirectedTo location: String) async -> (Result<Int64?, CacheError>, [URL]) {
        let transport = Transport(location: location)
        var configuration = HTTPOriginFetcher.Configuration()
        configuration.addressResolver = resolver
        let exchange = OriginExchange(transport: transport, policy: configuration.policy)
        do {
            let response = try await exchange.fetch(URL(string: from)!, range: nil, ifRange: nil, headers: [])
            return (.success(response.metadata.length), transport.sent.withLock { $0 })
        } catch {
            return (
                .failure(error as? CacheError ?? CacheError(.ioFailure, "\(error)")), transport.sent.withLock { $0 }
            )
        }
    }

    @Test func anOriginOnTheInternetRedirectsOnlyToTheInternet() async {
        for inside in [
            "http://127.0.0.1:22/", "http://localhost:631/jobs", "http://0x7f.1/a", "http://10.1.2.3/a.ts",
            "http://[::ffff:192.168.1.1]/a", "http://169.254.169.254/latest/meta-data", "http://intranet.example/a",
            "http://rebound.example/a",
        ] {
            let (result, sent) = await Self.fetch("http://media.example.com/a.mp4", redirectedTo: inside)
            guard case .failure(let error) = result else {
                Issue.record("followed a redirect to \(inside)")
                continue
            }
            #expect(error.code == .originRejected && error.message.contains("may not lead"), "\(error.message)")
            #expect(sent.count == 1, "\(inside): \(sent)")
        }
        let (result, sent) = await Self.fetch(
            "http://media.example.com/a.mp4", redirectedTo: "http://cdn.example.net/a")
        #expect((try? result.get()) == 4 && sent.count == 2)
    }

    @Test func anOriginInsideRedirectsAnywhere() async {
        for location in ["http://10.0.0.9/a.mp4", "http://127.0.0.1:8080/a.mp4", "http://cdn.example.net/a"] {
            let (result, sent) = await Self.fetch("http://nas.example/a.mp4", redirectedTo: location)
            #expect((try? result.get()) == 4 && sent.count == 2, "\(location): \(result)")
        }
    }
}
