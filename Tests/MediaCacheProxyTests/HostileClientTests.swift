// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// Requests no honest player sends, over raw TCP against the real proxy. After every case
/// the proxy must still serve, and a range of a cached file must have the right bytes.
@Suite(.stallLimit, .endToEnd) struct HostileClientTests {
    static let size: Int64 = 300_000

    /// One hostile request and the status it must get.
    struct Case: CustomStringConvertible, Sendable {
        var name: String
        var status: Int
        var request: @Sendable (HostileHarness) -> String
        /// For a 206 or 200: where the body starts in the file and how long it is.
        var body: (offset: Int64, length: Int64)?
        var allow: String?
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "last position at Int64.max", status: 206, request: { $0.get(range: "bytes=0-9223372036854775807") },
            body: (0, size)),
        Case(
            name: "first position at Int64.max", status: 416, request: { $0.get(range: "bytes=9223372036854775807-") }),
        Case(
            name: "first position with 30 digits", status: 416,
            request: { $0.get(range: "bytes=999999999999999999999999999999-") }),
        Case(
            name: "suffix with 30 digits", status: 206,
            request: { $0.get(range: "bytes=-999999999999999999999999999999") }, body: (0, size)),
        Case(
            name: "both positions past Int64", status: 416,
            request: { $0.get(range: "bytes=99999999999999999999-999999999999999999999") }),
        Case(
            name: "last position past the end", status: 206,
            request: { $0.get(range: "bytes=299990-9223372036854775806") }, body: (299_990, 10)),
        Case(name: "signed first position", status: 400, request: { $0.get(range: "bytes=+5-10") }),
        Case(name: "negative last position", status: 400, request: { $0.get(range: "bytes=5--10") }),
        Case(name: "last before first", status: 400, request: { $0.get(range: "bytes=10-5") }),
        Case(name: "range of only commas", status: 400, request: { $0.get(range: "bytes=,,,") }),
        Case(
            name: "1000 ranges", status: 206,
            request: {
                $0.get(range: "bytes=" + (0..<1000).map { "\($0 * 10)-\($0 * 10 + 5)" }.joined(separator: ","))
            }, body: (0, 6)),
        Case(
            name: "url with a port past 65535", status: 400,
            request: { $0.raw("/?url=http%3A%2F%2F127.0.0.1%3A99999999999999999999%2Fa.mp4") }),
        Case(name: "url with port 0", status: 400, request: { $0.raw("/?url=http%3A%2F%2F127.0.0.1%3A0%2Fa.mp4") }),
        Case(name: "url without a host", status: 400, request: { $0.raw("/?url=http%3A%2F%2F%2Fa.mp4") }),
        Case(name: "url with a bad percent escape", status: 400, request: { $0.raw("/?url=http%ZZ%2F%2F127.0.0.1") }),
        Case(name: "gopher url", status: 400, request: { $0.raw("/?url=gopher%3A%2F%2F127.0.0.1%2F") }),
        Case(
            name: "request target over the limit", status: 414,
            request: { $0.raw("/?url=http%3A%2F%2F127.0.0.1%2F" + String(repeating: "a", count: 9000)) }),
        Case(
            name: "header fields over the limit", status: 431,
            request: { $0.get(extra: ["X-Big: " + String(repeating: "b", count: 20_000)]) }),
        Case(
            name: "head over what the parser buffers", status: 431,
            request: { $0.get(extra: (0..<30).map { "X-Big\($0): " + String(repeating: "c", count: 1000) }) }),
        Case(name: "POST", status: 405, request: { $0.raw($0.target(), method: "POST") }, allow: "GET, HEAD"),
        Case(name: "DELETE", status: 405, request: { $0.raw($0.target(), method: "DELETE") }, allow: "GET, HEAD"),
        Case(name: "made-up method", status: 400, request: { $0.raw($0.target(), method: "BREW") }, allow: "GET, HEAD"),
        Case(name: "garbage request line", status: 400, request: { _ in "GARBAGE\r\n\r\n" }),
        Case(
            name: "binary junk", status: 400,
            request: { _ in
                String(decoding: (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) }, as: UTF8.self) + "\r\n\r\n"
            }),
        Case(
            name: "rebinding Host", status: 421, request: { $0.raw($0.target(), host: "attacker.example:\($0.port)") }),
        Case(name: "Host with another port", status: 421, request: { $0.raw($0.target(), host: "127.0.0.1:1") }),
        Case(
            name: "Host with a port past 65535", status: 400,
            request: { $0.raw($0.target(), host: "127.0.0.1:99999999999999999999") }),
        Case(
            name: "two Host headers", status: 400,
            request: { $0.raw($0.target(), extra: ["Host: localhost:\($0.port)"]) }),
        Case(name: "HTTP/1.1 without Host", status: 400, request: { $0.raw($0.target(), host: nil) }),
        Case(
            name: "HTTP/1.0 without Host", status: 206,
            request: { $0.raw($0.target(), host: nil, version: "HTTP/1.0", extra: ["Range: bytes=10-19"]) },
            body: (10, 10)),
        Case(
            name: "Host localhost", status: 206,
            request: { $0.raw($0.target(), host: "LocalHost:\($0.port)", extra: ["Range: bytes=10-19"]) },
            body: (10, 10)),
        Case(
            name: "Host [::1]", status: 206,
            request: { $0.raw($0.target(), host: "[::1]:\($0.port)", extra: ["Range: bytes=10-19"]) }, body: (10, 10)),
    ]

    @Test(arguments: cases)
    func hostileRequestGetsAClearAnswerAndTheProxyKeepsServing(_ hostile: Case) async throws {
        try await HostileHarness.with { h in
            let exchange = try await h.client.exchange([hostile.request(h)])
            let response = try #require(exchange.first, "no answer to \(hostile.name)")
            #expect(
                response.status == hostile.status,
                "\(hostile.name): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
            if let allow = hostile.allow { #expect(response.header("Allow") == allow) }
            if let (offset, length) = hostile.body {
                #expect(
                    response.body.count == Int(length)
                        && h.resource.firstMismatch(in: ByteBuffer(bytes: response.body), at: offset) == nil)
            } else if response.status >= 400 {
                let text = String(decoding: response.body, as: UTF8.self)
                #expect(
                    text.hasSuffix("\n") && text.split(separator: "\n").count == 1 && text.count > 10,
                    "\(hostile.name): \(text)")
            }
            try await h.expectStillServing()
        }
    }

    /// Two thousand requests in one write, then a malformed one: each is answered in order
    /// with its own bytes (the connection holds what the decoder gives while an answer is
    /// written, and does not read the socket meanwhile), and the malformed one gets its `400`
    /// after them all, never in the middle of an answer.
    @Test func aFloodOfPipelinedRequestsIsAnsweredInOrderThenTheMalformedOneRefused() async throws {
        try await HostileHarness.with { h in
            let count = 2_000
            let requests = (0..<count).map { h.raw(h.target(), extra: ["Range: bytes=\($0 * 37)-\($0 * 37 + 99)"]) }
            let exchange = try await h.client.exchange(
                [requests.joined() + "GARBAGE\r\n\r\n"], expectedResponses: count + 1, timeout: .seconds(120))
            #expect(exchange.responses.count == count + 1)
            for (index, response) in exchange.responses.prefix(count).enumerated() {
                #expect(response.status == 206 && response.body.count == 100, "request \(index)")
                #expect(
                    h.resource.firstMismatch(in: ByteBuffer(bytes: response.body), at: Int64(index * 37)) == nil,
                    "request \(index)")
            }
            let refusal = exchange.responses.last
            #expect(refusal?.status == 400)
            #expect(
                refusal?.headers.contains { $0.0.lowercased() == "connection" && $0.1 == "close" } == true,
                "the connection ends with it")
            try await h.expectStillServing()
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await HostileHarness.with { h in
            let one = h.raw(h.target(), extra: ["Range: bytes=0-99"])
            let two = h.raw(h.target(), extra: ["Range: bytes=1000-1999"])
            let three = h.raw(h.target(), method: "PUT")
            let exchange = try await h.client.exchange([one + two + three], expectedResponses: 3)
            #expect(exchange.responses.map(\.status) == [206, 206, 405])
            if exchange.responses.count == 3 {
                #expect(h.resource.firstMismatch(in: ByteBuffer(bytes: exchange.responses[0].body), at: 0) == nil)
                #expect(h.resource.firstMismatch(in: ByteBuffer(bytes: exchange.responses[1].body), at: 1000) == nil)
                #expect(exchange.responses[1].body.count == 1000)
            }
            try await h.expectStillServing()
        }
    }

    @Test func aHalfSentRequestIsCutOffWhileOthersAreServed() async throws {
        try await HostileHarness.with(configure: { $0.requestTimeout = .milliseconds(500) }) { h in
            // A head sent a few bytes at a time, never finished. Only the request timer can close
            // it before the client's own limit of 60 s (the idle timeout is 120 s), so no time
            // bound is asserted: a loaded machine closes it later, never not at all.
            let slow = Task {
                try await h.client.exchange(
                    ["GET / HTTP/1.1\r\n", "Host: 127.0.0.1\r\n", "X-A: 1\r\n", "X-B: 2\r\n"],
                    pause: .milliseconds(200), timeout: .seconds(60))
            }
            try await h.expectStillServing()
            let exchange = try await slow.value
            #expect(exchange.closedByServer && exchange.responses.isEmpty)
            try await h.expectStillServing()
        }
    }

    @Test func aHalfSentRequestAfterAnAnsweredOneIsCutOff() async throws {
        try await HostileHarness.with(configure: { $0.requestTimeout = .milliseconds(500) }) { h in
            // The timer's one check was scheduled for the first request, which ended long before
            // it ran: it must then wait for the request under way, not for none.
            let exchange = try await h.client.exchange(
                [
                    h.get(range: "bytes=0-9"), "GET / HTTP/1.1\r\n", "Host: 127.0.0.1\r\n", "X-A: 1\r\n", "X-B: 2\r\n",
                    "X-C: 3\r\n",
                ],
                pause: .milliseconds(200), expectedResponses: 2, timeout: .seconds(60))
            #expect(exchange.closedByServer)
            #expect(exchange.responses.count == 1)
            #expect(exchange.responses.first?.status == 206)
            if let first = exchange.responses.first {
                #expect(h.resource.firstMismatch(in: ByteBuffer(bytes: first.body), at: 0) == nil)
                #expect(first.body.count == 10)
            }
            try await h.expectStillServing()
        }
    }

    @Test func connectionsOverTheCapGet503WhileTheOthersAreServed() async throws {
        try await HostileHarness.with(configure: { $0.maxConnections = 3 }) { h in
            // Three connections held open without a request, until the test lets them go (a
            // hold of 3 s ended before a loaded machine had counted them, once in ten runs
            // beside two CPU burners, and the cap was never reached).
            let held = (0..<3).map { _ in
                Task { try await h.client.exchange([String](), timeout: .seconds(600)) }
            }
            // The server counts a connection when it accepts it, which a loaded machine may do
            // later than the client's connect returns: ask until the cap is in force (a fixed
            // 300 ms pause was too short once, with every suite running over three schemes).
            var refused: RawHTTPClient.Exchange?
            try await waitUntil {
                refused = try await h.client.exchange([h.get(range: "bytes=0-9")])
                return refused?.first?.status == 503
            }
            #expect(refused?.first?.status == 503)
            #expect(refused?.first?.header("Retry-After") == "1")
            for task in held { task.cancel() }
            for task in held { _ = try? await task.value }
            // The held ones are gone: served again, once the server has seen them close.
            try await waitUntil { (try? await h.client.exchange([h.get(range: "bytes=0-9")]))?.first?.status == 206 }
            try await h.expectStillServing()
        }
    }
}

/// The proxy on port 0 with one file cached, and a raw client for it.
struct HostileHarness {
    let proxy: ProxyHarness
    let client: RawHTTPClient
    let resource: TestOrigin.Resource
    var port: Int { proxy.port }

    static func with(
        configure: @escaping (inout ProxyConfiguration) -> Void = { _ in },
        _ body: (HostileHarness) async throws -> Void
    ) async throws {
        try await ProxyHarness.with(configure: {
            var c = $0
            configure(&c)
            return c
        }) { proxy in
            proxy.origin.serve(
                .generated(length: HostileClientTests.size, seed: 77, mimeType: "audio/mpeg"), at: "/a.mp3")
            let harness = HostileHarness(
                proxy: proxy, client: RawHTTPClient(port: proxy.port), resource: proxy.origin.resource(at: "/a.mp3")!)
            // Cache the whole file first, so "still serving" reads come from the cache.
            let whole = try await proxy.get(proxy.url("/a.mp3"))
            #expect(whole.status == 200 && harness.resource.firstMismatch(in: whole.body, at: 0) == nil)
            try await body(harness)
        }
    }

    /// The request target for `path` on the origin.
    func target(_ path: String = "/a.mp3") -> String {
        String(proxy.url(path).dropFirst("http://127.0.0.1:\(port)".count))
    }

    /// A raw request: the request line, `Host` (none when `nil`), `extra` header lines.
    func raw(
        _ target: String, method: String = "GET", host: String? = "", version: String = "HTTP/1.1", extra: [String] = []
    ) -> String {
        var lines = ["\(method) \(target) \(version)"]
        if let host { lines.append("Host: \(host.isEmpty ? "127.0.0.1:\(port)" : host)") }
        lines += extra
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    /// A GET of the cached file with an optional `Range` and extra header lines.
    func get(range: String? = nil, extra: [String] = []) -> String {
        raw(target(), extra: (range.map { ["Range: \($0)"] } ?? []) + extra)
    }

    /// A range of the cached file comes back right, on a new connection.
    func expectStillServing(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let exchange = try await client.exchange([get(range: "bytes=100000-164999")])
        let response = try #require(exchange.first, "the proxy did not answer", sourceLocation: sourceLocation)
        #expect(response.status == 206, sourceLocation: sourceLocation)
        #expect(
            response.body.count == 65000
                && resource.firstMismatch(in: ByteBuffer(bytes: response.body), at: 100_000) == nil,
            "wrong bytes after a hostile request", sourceLocation: sourceLocation)
    }
}
