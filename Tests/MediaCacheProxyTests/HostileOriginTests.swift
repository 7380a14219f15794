// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import Testing

/// Origins that lie, overflow, garble or redirect where they should not, behind the real
/// proxy. A lie is rejected (`502`) or cuts the response; never is a wrong byte served or
/// stored: after every case the fault is switched off and a clean read of the same URL is
/// checked byte for byte, and a cached file still comes back right.
@Suite(.stallLimit, .endToEnd) struct HostileOriginTests {
    static let size: Int64 = 300_000

    /// A raw answer: the head lines, then `body` bytes of the resource.
    static func answer(_ lines: [String], body: Range<Int64>? = nil, of resource: TestOrigin.Resource) -> [UInt8] {
        var bytes = Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
        if let body { bytes += resource.bytes(body).readableBytesView }
        return bytes
    }

    /// The range the proxy asked for, resolved against the file.
    static func asked(_ range: String?) -> Range<Int64> {
        guard let range, case .single(let specifier) = RangeSpecifier.parse(range),
            let resolved = specifier.resolve(length: size)
        else {
            return 0..<size
        }
        return resolved.lowerBound..<resolved.upperBound
    }

    struct Lie: CustomStringConvertible, Sendable {
        var name: String
        /// The raw answer, given the resource and the `Range` header the origin got.
        var answer: @Sendable (TestOrigin.Resource, String?) -> [UInt8]
        /// Whether the answer can only be refused (502), rather than maybe cut after good bytes.
        var is502 = true
        var description: String { name }
    }

    static let lies: [Lie] = [
        Lie(name: "Content-Range past Int64") { r, _ in
            answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9223372036854775807/*",
                    "Content-Length: 1000",
                ], body: 0..<1000, of: r)
        },
        Lie(name: "Content-Range with a 25-digit total") { r, _ in
            answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-999/9999999999999999999999999",
                    "Content-Length: 1000",
                ], body: 0..<1000, of: r)
        },
        Lie(name: "Content-Range starting elsewhere") { r, range in
            let start = asked(range).lowerBound + 100
            return answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes \(start)-\(start + 999)/\(size)",
                    "Content-Length: 1000",
                ], body: start..<(start + 1000), of: r)
        },
        Lie(name: "Content-Range past what was asked, or past the end") { r, range in
            // A bounded ask gets the rest of the file; an open-ended one (`bytes=a-`, the
            // proxy's first request) a range one byte longer than the file.
            let wanted = asked(range)
            let end = range?.hasSuffix("-") == true ? size + 1 : size
            return answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes \(wanted.lowerBound)-\(end - 1)/\(size)",
                    "Content-Length: \(end - wanted.lowerBound)",
                ],
                body: wanted.lowerBound..<min(end, size), of: r)
        },
        Lie(name: "206 without Content-Range") { r, _ in
            answer(["HTTP/1.1 206 Partial Content", "Content-Length: 1000"], body: 0..<1000, of: r)
        },
        Lie(name: "Content-Length longer than the range") { r, range in
            let start = asked(range).lowerBound
            return answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes \(start)-\(start + 999)/\(size)",
                    "Content-Length: 2000",
                ], body: start..<(start + 2000), of: r)
        },
        Lie(name: "two different Content-Lengths") { r, range in
            let start = asked(range).lowerBound
            return answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes \(start)-\(start + 999)/\(size)",
                    "Content-Length: 1000", "Content-Length: 999",
                ],
                body: start..<(start + 1000), of: r)
        },
        Lie(name: "negative Content-Length") { r, _ in
            answer(["HTTP/1.1 200 OK", "Content-Length: -1"], body: 0..<1000, of: r)
        },
        Lie(name: "Content-Length with a plus sign") { r, _ in
            answer(["HTTP/1.1 200 OK", "Content-Length: +1000"], body: 0..<1000, of: r)
        },
        Lie(name: "Content-Length past Int64") { r, _ in
            answer(["HTTP/1.1 200 OK", "Content-Length: 99999999999999999999999"], body: 0..<1000, of: r)
        },
        Lie(name: "garbage status line") { r, _ in
            answer(["HTTP/1.1 abc Fine", "Content-Length: 1000"], body: 0..<1000, of: r)
        },
        Lie(name: "not HTTP at all") { _, _ in
            Array("SSH-2.0-OpenSSH_9.2\r\n".utf8) + (0..<500).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        },
        Lie(name: "100 KB of headers") { r, range in
            let start = asked(range).lowerBound
            let junk = (0..<100).map { "X-Junk-\($0): " + String(repeating: "j", count: 1000) }
            return answer(
                [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes \(start)-\(start + 999)/\(size)",
                    "Content-Length: 1000",
                ] + junk, body: start..<(start + 1000), of: r)
        },
        Lie(
            name: "body cut short on every answer",
            answer: { r, range in
                // An honest head, then 50,000 bytes and a close: resumed until the file is whole.
                // (At 10,000 bytes the 30 resumes, each a new connection after a retry pause, took
                // longer than the client's 15 s while every suite ran at once over three schemes.)
                let wanted = asked(range)
                let sent = wanted.lowerBound..<min(wanted.upperBound, wanted.lowerBound + 50_000)
                return answer(
                    [
                        "HTTP/1.1 206 Partial Content", "Accept-Ranges: bytes", "ETag: \"v1\"",
                        "Content-Range: bytes \(wanted.lowerBound)-\(wanted.upperBound - 1)/\(size)",
                        "Content-Length: \(wanted.count)",
                    ], body: sent, of: r)
            }, is502: false),
    ]

    @Test(arguments: lies)
    func aLyingOriginNeverGetsAWrongByteThrough(_ lie: Lie) async throws {
        try await HostileHarness.with { h in
            var faults = TestOrigin.Faults()
            let answer = lie.answer
            let resource = TestOrigin.Resource.generated(length: Self.size, seed: 78, mimeType: "audio/mpeg")
            faults.rawResponse = { range in answer(resource, range) }
            h.proxy.origin.serve(
                .generated(length: Self.size, seed: 78, mimeType: "audio/mpeg", faults: faults), at: "/lie.mp3")
            // The timeout only ends a test that failed: the body cut short takes 6 resumes.
            let exchange = try await h.client.exchange([h.raw(h.target("/lie.mp3"))], timeout: .seconds(60))
            if let response = exchange.first {
                if lie.is502 {
                    #expect(
                        response.status == 502,
                        "\(lie.name): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
                } else {
                    #expect(
                        response.status == 200 && response.isComplete,
                        "\(lie.name): \(response.status), \(response.body.count) body bytes, closed by the server: \(exchange.closedByServer)"
                    )
                }
                if (200..<300).contains(response.status) {
                    #expect(
                        resource.firstMismatch(in: ByteBuffer(bytes: response.body), at: 0) == nil,
                        "\(lie.name): wrong bytes served")
                }
            } else {
                #expect(!lie.is502, "\(lie.name): no answer")
            }
            try await h.expectStillServing()
            try await h.expectCleanRead("/lie.mp3", resource: resource)
        }
    }

    /// An origin that gives a known file another length under the same ETag is lying: the
    /// answer is refused and the bytes already cached stay.
    @Test func aLengthThatContradictsTheKnownOneIsRefusedAndTheCacheKept() async throws {
        try await HostileHarness.with { h in
            let resource = TestOrigin.Resource.generated(length: Self.size, seed: 79, mimeType: "video/mp4")
            h.proxy.origin.serve(resource, at: "/known.mp4")
            let first = try await h.client.exchange([h.raw(h.target("/known.mp4"), extra: ["Range: bytes=0-999"])])
            #expect(first.first?.status == 206)
            h.proxy.origin.update("/known.mp4") { stored in
                stored.faults.rawResponse = { range in
                    let wanted = Self.asked(range)
                    return Self.answer(
                        [
                            "HTTP/1.1 206 Partial Content", "Accept-Ranges: bytes", "ETag: \"v1\"",
                            "Last-Modified: Mon, 02 Jan 2028 10:00:00 GMT",
                            "Content-Range: bytes \(wanted.lowerBound)-\(wanted.upperBound - 1)/400000",
                            "Content-Length: \(wanted.count)",
                        ],
                        body: wanted, of: resource)
                }
            }
            // Past what the first request's download fetched (256 KiB), so the origin is asked (a
            // video file: an audio one would be filled on play, on purpose, and the rest stored).
            let lied = try await h.client.exchange([
                h.raw(h.target("/known.mp4"), extra: ["Range: bytes=290000-290999"])
            ])
            if let response = lied.first, response.status == 206 {
                #expect(!response.isComplete, "a contradicted answer must not be served whole")
            } else {
                #expect(lied.first?.status == 502)
            }
            // The first bytes are still cached: served while the origin keeps lying.
            let cached = try await h.client.exchange([h.raw(h.target("/known.mp4"), extra: ["Range: bytes=0-999"])])
            #expect(cached.first?.status == 206)
            #expect(
                cached.first.map {
                    resource.firstMismatch(in: ByteBuffer(bytes: $0.body), at: 0) == nil && $0.body.count == 1000
                } == true)
            try await h.expectCleanRead("/known.mp4", resource: resource)
        }
    }

    @Test func redirectLoopsLongChainsAndOddSchemesAreRefused() async throws {
        try await HostileHarness.with { h in
            let origin = h.proxy.origin
            func redirect(_ path: String, to location: String, status: Int = 302) {
                var faults = TestOrigin.Faults()
                faults.redirect = (status, location)
                origin.serve(.generated(length: 10, faults: faults), at: path)
            }
            redirect("/loop-a", to: "/loop-b")
            redirect("/loop-b", to: origin.url("/loop-a").absoluteString, status: 307)
            for hop in 0..<7 { redirect("/chain\(hop)", to: "/chain\(hop + 1)") }
            origin.serve(.generated(length: 10), at: "/chain7")
            redirect("/to-file", to: "file:///etc/passwd")
            redirect("/to-gopher", to: "gopher://127.0.0.1/")
            redirect("/to-bad-port", to: "http://127.0.0.1:99999999999/x")
            redirect("/no-location", to: "")
            for path in ["/loop-a", "/chain0", "/to-file", "/to-gopher", "/to-bad-port", "/no-location"] {
                let exchange = try await h.client.exchange([h.raw(h.target(path))])
                #expect(exchange.first?.status == 502, "\(path)")
            }
            #expect(origin.requests("/loop-a").count == 1 && origin.requests("/loop-b").count == 1)
            #expect(
                origin.requests("/chain5").count == 1 && origin.requests("/chain6").isEmpty,
                "five hops are followed, the sixth is not")
            try await h.expectStillServing()
        }
    }

    /// Refused answers are visible: a warning with the cause, for the operator to read.
    @Test func refusedAnswersAreLoggedAsWarningsWithTheirCause() async throws {
        let recorder = LogRecorder()
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.logger = recorder.logger()
        try await ProxyHarness.with(allowedHosts: ["127.0.0.1"], fetcher: fetcher) { proxy in
            var away = TestOrigin.Faults()
            away.redirect = (302, "http://localhost:\(proxy.origin.port)/x.mp3")
            proxy.origin.serve(.generated(length: 10, faults: away), at: "/away")
            var lying = TestOrigin.Faults()
            lying.rawResponse = { _ in
                Array(
                    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9223372036854775807/*\r\nContent-Length: 0\r\n\r\n"
                        .utf8)
            }
            proxy.origin.serve(.generated(length: 10, faults: lying), at: "/lying")
            let refused = try await proxy.get(proxy.url("/away"))
            let lied = try await proxy.get(proxy.url("/lying"))
            #expect(refused.status == 502 && lied.status == 502)
            let warnings = recorder.all.filter { $0.level == .warning }
            #expect(
                warnings.contains {
                    $0.metadata["reason"]?.contains("localhost") == true
                        && $0.metadata["reason"]?.contains("allow-list") == true
                },
                "\(warnings.map(\.metadata))")
            #expect(
                warnings.contains {
                    $0.metadata["reason"]?.contains("Content-Range") == true
                        && $0.metadata["url"]?.contains("/lying") == true
                },
                "\(warnings.map(\.metadata))")
        }
    }

    @Test func aRedirectOffTheAllowListIsNeverFollowed() async throws {
        try await ProxyHarness.with(allowedHosts: ["127.0.0.1"]) { proxy in
            let origin = proxy.origin
            let resource = TestOrigin.Resource.generated(length: Self.size, seed: 80, mimeType: "audio/mpeg")
            origin.serve(resource, at: "/target.mp3")
            var away = TestOrigin.Faults()
            away.redirect = (302, "http://localhost:\(origin.port)/target.mp3")
            origin.serve(.generated(length: 10, faults: away), at: "/away")
            var within = TestOrigin.Faults()
            within.redirect = (301, "/target.mp3")
            origin.serve(.generated(length: 10, faults: within), at: "/moved")

            let refused = try await proxy.get(proxy.url("/away"))
            #expect(refused.status == 502)
            #expect(origin.requests("/target.mp3").isEmpty, "the redirect target off the list must not be fetched")

            // A redirect that stays on the list is followed, and the file is cached under the URL asked for.
            let moved = try await proxy.get(proxy.url("/moved"))
            #expect(
                moved.status == 200 && resource.firstMismatch(in: moved.body, at: 0) == nil
                    && moved.body.readableBytes == Int(Self.size))
            let requests = origin.requests("/moved").count
            let again = try await proxy.get(proxy.url("/moved"), headers: [("Range", "bytes=5000-5999")])
            #expect(again.status == 206 && resource.firstMismatch(in: again.body, at: 5000) == nil)
            #expect(
                origin.requests("/moved").count == requests, "a replay of the redirected file needs no origin request")
        }
    }
}

extension HostileHarness {
    /// With the origin's faults off, the whole file at `path` comes through the proxy right.
    func expectCleanRead(
        _ path: String, resource: TestOrigin.Resource, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        proxy.origin.update(path) { $0.faults = TestOrigin.Faults() }
        let exchange = try await client.exchange([raw(target(path))])
        let response = try #require(exchange.first, sourceLocation: sourceLocation)
        #expect(response.status == 200 && response.body.count == Int(resource.length), sourceLocation: sourceLocation)
        #expect(
            resource.firstMismatch(in: ByteBuffer(bytes: response.body), at: 0) == nil, "a wrong byte was stored",
            sourceLocation: sourceLocation)
    }
}
