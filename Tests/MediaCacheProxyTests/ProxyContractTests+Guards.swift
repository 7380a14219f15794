// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import MediaCacheProxy

extension ProxyContractTests {
    @Test(arguments: TestSetup.all)
    func unsatisfiableRangeGets416WithTheLength(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            serve(h)
            for range in ["bytes=1500000-", "bytes=2000000-2000010", "bytes=-0"] {
                let reply = try await h.get(h.url("/v.mp4"), headers: [("Range", range)])
                #expect(reply.status == 416, "\(range)")
                #expect(reply.headers.first(name: "content-range") == "bytes */\(Self.size)", "\(range)")
            }
        }
    }

    /// A stored range that fits in one file region is answered on the event loop in one step
    /// (no task): the answer must be the one the general path gives, on keep-alive and
    /// HTTP/1.0 connections alike, and reach no origin.
    @Test func aStoredRangeAnsweredAtOnceIsTheSameAnswer() async throws {
        try await ProxyHarness.with { h in
            let resource = serve(h)
            let range = ("Range", "bytes=1000-70999")
            let cold = try await h.get(h.url("/v.mp4"), headers: [range])  // fetched: the general path
            let requests = h.origin.requests("/v.mp4").count
            let hot = try await h.get(h.url("/v.mp4"), headers: [range])
            #expect(h.origin.requests("/v.mp4").count == requests, "a stored range must not reach the origin")
            for reply in [cold, hot] {
                #expect(reply.status == 206)
                #expect(reply.body.readableBytes == 70_000)
                #expect(resource.firstMismatch(in: reply.body, at: 1000) == nil)
            }
            let fields = { (reply: ProxyHarness.Reply) in
                reply.headers.filter { !["date", "age", "cache-status"].contains($0.name.lowercased()) }.map {
                    "\($0.name.lowercased()): \($0.value)"
                }.sorted()
            }
            #expect(fields(hot) == fields(cold))
            // The same answer, but what the cache did differs (RFC 9211).
            #expect(cold.headers.first(name: "cache-status") == "MediaCache;fwd=uri-miss;stored")
            #expect(hot.headers.first(name: "cache-status")?.hasPrefix("MediaCache;hit;ttl=") == true)
            #expect(hot.headers.first(name: "content-range") == "bytes 1000-70999/\(Self.size)")

            let raw = RawHTTPClient(port: h.port)
            let target =
                "/?url=" + h.origin.url("/v.mp4").absoluteString.addingPercentEncoding(
                    withAllowedCharacters: .alphanumerics)!
            // Two requests on one keep-alive connection, sent together.
            let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\nRange: bytes=1000-70999\r\n\r\n"
            let twice = try await raw.exchange([String(repeating: request, count: 2)], expectedResponses: 2)
            #expect(twice.responses.count == 2 && !twice.closedByServer)
            // HTTP/1.0 without keep-alive: the answer, then the server closes.
            let once = try await raw.exchange(
                ["GET \(target) HTTP/1.0\r\nRange: bytes=1000-70999\r\n\r\n"], expectedResponses: 2)
            #expect(once.responses.count == 1 && once.closedByServer)
            for response in twice.responses + once.responses {
                #expect(response.status == 206 && response.isComplete)
                #expect(resource.firstMismatch(in: ByteBuffer(bytes: response.body), at: 1000) == nil)
                #expect(response.body.count == 70_000)
            }
            #expect(h.origin.requests("/v.mp4").count == requests)
        }
    }

    @Test func badRequestsGetAClear4xx() async throws {
        try await ProxyHarness.with { h in
            serve(h)
            let cases: [(String, [(String, String)], Int)] = [
                ("http://127.0.0.1:\(h.port)/", [], 400),
                ("http://127.0.0.1:\(h.port)/?url=", [], 400),
                ("http://127.0.0.1:\(h.port)/?url=not%20a%20url", [], 400),
                (h.proxyURL(for: "ftp://example.com/a.mp3"), [], 400),
                (h.proxyURL(for: "file:///etc/passwd"), [], 400),
                (h.url("/v.mp4"), [("Range", "bytes=abc")], 400),
                (h.url("/v.mp4"), [("Range", "items=0-1")], 400),
                (h.url("/v.mp4"), [("Range", "bytes=5-1")], 400),
            ]
            for (url, headers, status) in cases {
                let reply = try await h.get(url, headers: headers)
                #expect(reply.status == status, "\(url) \(headers)")
                let text = String(buffer: reply.body)
                #expect(text.hasSuffix("\n") && text.split(separator: "\n").count == 1 && text.count > 10, "\(text)")
            }
            // Still serving correctly afterwards.
            let good = try await h.get(h.url("/v.mp4"), headers: [("Range", "bytes=0-99")])
            #expect(good.status == 206)
        }
    }

    @Test(arguments: TestSetup.all)
    func theProxysOwnFailuresGet502Or504(setup: TestSetup) async throws {
        // The origin's own answer and an unreachable origin, with the default timeouts: a 404
        // over TLS took more than 8 s to arrive with the whole suite and two CPU burners beside
        // it, and a shorter limit turned it into the proxy's 504.
        try await ProxyHarness.with(setup: setup) { h in
            var missing = TestOrigin.Faults()
            missing.status = 404
            h.origin.serve(.generated(length: 10, faults: missing), at: "/missing.mp4")
            let missingReply = try await h.get(h.url("/missing.mp4"))
            #expect(missingReply.status == 404, "the origin's answer, not the proxy's failure")
            let unreachable = try await h.get(h.proxyURL(for: "http://127.0.0.1:1/x.mp4"))
            #expect(unreachable.status == 502)
            #expect(
                String(buffer: unreachable.body) == "Cannot reach 127.0.0.1:1: Connection refused.\n",
                "\(String(buffer: unreachable.body))")
        }
        // An origin that never answers (its head held by a gate nobody opens): a 504 after the
        // response timeout, however loaded the machine.
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.responseTimeout = .milliseconds(500)
        try await ProxyHarness.with(setup: setup, fetcher: fetcher) { h in
            var silent = TestOrigin.Faults()
            silent.gate = TestOrigin.Gate()
            h.origin.serve(.generated(length: 10, faults: silent), at: "/slow.mp4")
            let timedOut = try await h.get(h.url("/slow.mp4"))
            #expect(timedOut.status == 504)
            silent.gate?.open()
        }
    }

    @Test func allowListAndTokenAreEnforced() async throws {
        try await ProxyHarness.with(allowedHosts: ["127.0.0.1"], token: "s3cret") { h in
            let resource = serve(h)
            #expect(try await h.get(h.url("/v.mp4")).status == 403)
            #expect(try await h.get(h.url("/v.mp4", extra: "&token=wrong")).status == 403)
            let byQuery = try await h.get(h.url("/v.mp4", extra: "&token=s3cret"), headers: [("Range", "bytes=0-9")])
            #expect(byQuery.status == 206)
            #expect(resource.firstMismatch(in: byQuery.body, at: 0) == nil)
            let byHeader = try await h.get(
                h.url("/v.mp4"), headers: [("X-MediaCache-Token", "s3cret"), ("Range", "bytes=0-9")])
            #expect(byHeader.status == 206)
            let otherHost = try await h.get(
                h.proxyURL(for: "http://localhost:\(h.origin.port)/v.mp4", extra: "&token=s3cret"))
            #expect(otherHost.status == 403)
            #expect(h.origin.requests("/v.mp4").filter { $0.method == "GET" }.count == 1)
        }
    }

    @Test func oversizedHeadersAndHangUpsLeaveTheServerServing() async throws {
        try await ProxyHarness.with { h in
            let resource = serve(h)
            // A header section beyond the limit: refused or dropped, never served.
            let huge = String(repeating: "a", count: 40_000)
            if let reply = try? await h.get(h.url("/v.mp4"), headers: [("X-Huge", huge)]) {
                #expect(reply.status >= 400)
            }
            // A client that hangs up in the middle of a body.
            var request = HTTPClientRequest(url: h.url("/v.mp4"))
            request.method = .GET
            let response = try await h.client.execute(request, timeout: .seconds(10))
            var iterator = response.body.makeAsyncIterator()
            _ = try await iterator.next()
            // Dropping the iterator closes the connection mid-body.
            _ = consume iterator
            // Still serving correctly afterwards.
            let reply = try await h.get(h.url("/v.mp4"), headers: [("Range", "bytes=1000000-1099999")])
            #expect(reply.status == 206)
            #expect(resource.firstMismatch(in: reply.body, at: 1_000_000) == nil)
        }
    }

    /// A connection that sends nothing is closed by the proxy once idle for the timeout (and
    /// only the idle rule can close it before the client's own limit of 60 s). When a
    /// connection is idle is decided by `ConnectionStateMachine`, tested without waiting (`ConnectionStateMachineTests`).
    @Test func anIdleConnectionIsClosed() async throws {
        try await ProxyHarness.with(configure: { configuration in
            var configuration = configuration
            configuration.idleTimeout = .milliseconds(300)
            configuration.requestTimeout = .seconds(600)
            return configuration
        }) { h in
            let exchange = try await RawHTTPClient(port: h.port).exchange([String](), timeout: .seconds(60))
            #expect(exchange.closedByServer && exchange.responses.isEmpty)
        }
    }
}
