// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// What RFC 9110 and RFC 9111 ask of a private cache, through the real proxy in front of the
/// in-process origin: origin answers passed on as they are, `Vary`, a player's own
/// conditional requests, one origin request per client request. Every test counts what the
/// origin was asked and checks statuses, fields and bytes.
@Suite(.stallLimit, .endToEnd) struct HTTPSemanticsTests {
    /// An answer that is not the resource's bytes reaches the player with its status, its
    /// fields and its body, costs one origin request; without freshness it is never stored,
    /// and is asked again next time.
    @Test(arguments: [400, 403, 404, 410, 500, 502, 503, 504, 599, 201, 202, 203, 204, 299])
    func originAnswersPassThroughAsTheyAre(status: Int) async throws {
        try await ProxyHarness.with { h in
            var resource = TestOrigin.Resource.generated(length: 1000, seed: 90)
            resource.cacheControl = nil
            resource.faults.status = status
            resource.faults.statusBody = status == 204 ? [] : Array("the origin's page for \(status)\n".utf8)
            resource.extraHeaders = [
                ("Retry-After", "120"), ("WWW-Authenticate", "Bearer realm=\"media\""), ("X-Origin", "yes"),
            ]
            h.origin.serve(resource, at: "/answer.mp4")
            for round in 1...2 {
                let reply = try await h.get(h.url("/answer.mp4"), headers: [("Range", "bytes=0-99")])
                #expect(reply.status == status, "round \(round)")
                #expect(
                    Array(reply.body.readableBytesView) == resource.faults.statusBody, "\(String(buffer: reply.body))")
                #expect(
                    reply.headers.first(name: "retry-after") == "120" && reply.headers.first(name: "x-origin") == "yes")
                #expect(reply.headers.first(name: "www-authenticate") == "Bearer realm=\"media\"")
                #expect(reply.headers.first(name: "date") != nil)
                #expect(
                    h.origin.requests("/answer.mp4").count == round,
                    "one origin request per client request, never reused: \(h.origin.requests("/answer.mp4"))")
            }
            let head = try await h.get(h.url("/answer.mp4"), method: .HEAD)
            #expect(head.status == status && head.body.readableBytes == 0)
            #expect(
                h.origin.requests("/answer.mp4").count == 3 && h.origin.requests("/answer.mp4").last?.method == "HEAD")
            #expect(
                h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/answer.mp4"))) == nil, "never stored")
        }
    }

    /// An answer the origin declares fresh is reused while fresh, whatever its status (RFC
    /// 9111 §3, §4.2): a player retrying a missing segment does not hammer the origin. It comes
    /// back with its status, fields and body and an `Age`; once stale it is asked for again.
    @Test(arguments: [203, 204, 400, 404, 410, 500, 503, 299])
    func aFreshAnswerOfAnyStatusIsReusedUntilStale(status: Int) async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await ProxyHarness.with(store: store, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            var resource = TestOrigin.Resource.generated(length: 1000, seed: 93)
            resource.cacheControl = "max-age=60"
            resource.faults.status = status
            resource.faults.statusBody = status == 204 ? [] : Array("gone for now: \(status)\n".utf8)
            resource.extraHeaders = [("X-Origin", "yes")]
            h.origin.serve(resource, at: "/fresh-answer.ts")
            let first = try await h.get(h.url("/fresh-answer.ts"))
            #expect(first.status == status && Array(first.body.readableBytesView) == resource.faults.statusBody)
            clock.advance(by: 30)
            let again = try await h.get(h.url("/fresh-answer.ts"), headers: [("Range", "bytes=0-99")])
            #expect(again.status == status && Array(again.body.readableBytesView) == resource.faults.statusBody)
            #expect(again.headers["x-origin"] == ["yes"] && again.headers["age"] == ["30"], "\(again.headers)")
            #expect(h.origin.requests("/fresh-answer.ts").count == 1, "reused while fresh")
            clock.advance(by: 31)
            let stale = try await h.get(h.url("/fresh-answer.ts"))
            #expect(
                stale.status == status && h.origin.requests("/fresh-answer.ts").count == 2, "asked again once stale")
            // Once the resource is there, its bytes replace the remembered answer.
            clock.advance(by: 61)
            h.origin.update("/fresh-answer.ts") { $0.faults.status = nil }
            let found = try await h.get(h.url("/fresh-answer.ts"))
            #expect(
                found.status == 200 && resource.firstMismatch(in: found.body, at: 0) == nil
                    && found.body.readableBytes == 1000)
        }
    }

    /// Without explicit freshness, only a status that allows a heuristic lifetime (a `404`,
    /// a `410`, RFC 9111 §4.2.2) with `Last-Modified` is reused; `no-store` and a `400` are not.
    @Test func heuristicFreshnessOnlyForTheStatusesThatAllowIt() async throws {
        try await ProxyHarness.with { h in
            for (path, status, cacheControl, reused) in [
                ("/h404.ts", 404, nil, true), ("/h410.ts", 410, nil, true), ("/h400.ts", 400, nil, false),
                ("/ns404.ts", 404, "no-store, max-age=60", false),
                ("/mu299.ts", 299, "max-age=60, must-understand, no-store", false),
                ("/mu404.ts", 404, "max-age=60, must-understand, no-store", true),
            ] as [(String, Int, String?, Bool)] {
                var resource = TestOrigin.Resource.generated(length: 1000, seed: 94)
                resource.cacheControl = cacheControl
                resource.faults.status = status
                resource.extraHeaders = [("Last-Modified", "Mon, 02 Jan 2023 10:00:00 GMT")]
                h.origin.serve(resource, at: path)
                for _ in 0..<2 {
                    let reply = try await h.get(h.url(path))
                    #expect(reply.status == status)
                }
                #expect(h.origin.requests(path).count == (reused ? 1 : 2), "\(path)")
            }
        }
    }

    /// An origin answer too large to hold is refused with a 502 that says why, not cut.
    @Test func anErrorPageOverTheBoundIsA502() async throws {
        try await ProxyHarness.with { h in
            var resource = TestOrigin.Resource.generated(length: 1000, seed: 91)
            resource.faults.status = 404
            resource.faults.statusBody = Array(repeating: UInt8(ascii: "x"), count: OriginAnswer.maximumBodySize + 1)
            h.origin.serve(resource, at: "/huge-404.mp4")
            let reply = try await h.get(h.url("/huge-404.mp4"))
            #expect(
                reply.status == 502 && String(buffer: reply.body).contains("body over"), "\(String(buffer: reply.body))"
            )
        }
    }

    /// `Vary`: a stored answer serves only requests whose varying fields match; another
    /// value is a miss that fetches and replaces; `Vary: *` is never reused.
    @Test func varyMatchesMismatchesAndStar() async throws {
        try await ProxyHarness.with { h in
            var resource = TestOrigin.Resource.generated(length: 300_000, seed: 92, mimeType: "audio/mpeg")
            resource.extraHeaders = [("Vary", "Accept-Language, x-variant"), ("Vary", "Accept-Encoding")]
            h.origin.serve(resource, at: "/v.mp3")
            func play(_ headers: [(String, String)]) async throws -> Int {
                let before = h.origin.requests("/v.mp3").count
                let reply = try await h.get(h.url("/v.mp3"), headers: headers)
                #expect(
                    reply.status == 200 && resource.firstMismatch(in: reply.body, at: 0) == nil
                        && reply.body.readableBytes == 300_000)
                #expect(reply.headers[canonicalForm: "vary"].joined(separator: ",").contains("Accept-Language"))
                return h.origin.requests("/v.mp3").count - before
            }
            #expect(try await play([("Accept-Language", "de, fr"), ("X-Variant", "a")]) > 0)
            #expect(
                try await play([("Accept-Language", "de,fr"), ("X-Variant", "a"), ("Accept-Encoding", "gzip")]) == 0,
                "the same values (whitespace aside) match; Accept-Encoding is the cache's own")
            #expect(try await play([("Accept-Language", "en"), ("X-Variant", "a")]) > 0, "another language: a miss")
            #expect(h.origin.requests("/v.mp3").last?.header("Accept-Language") == "en")
            #expect(
                try await play([("Accept-Language", "en"), ("X-Variant", "a")]) == 0,
                "the new answer replaced the old one")
            #expect(try await play([("Accept-Language", "en")]) > 0, "a field absent here but present before: a miss")
            #expect(try await play([("Accept-Language", "en")]) == 0)
            #expect(try await play([("accept-language", "EN")]) == 0, "language ranges compare without case")
            #expect(try await play([("Accept-Language", "en"), ("Accept-Language", "de")]) > 0)
            #expect(try await play([("Accept-Language", "en, DE")]) == 0, "two lines are one list")
            #expect(try await play([("Accept-Language", "de, en")]) > 0, "the order is a preference: a miss")

            var star = TestOrigin.Resource.generated(length: 200_000, seed: 93, mimeType: "audio/mpeg")
            star.extraHeaders = [("Vary", "*")]
            h.origin.serve(star, at: "/star.mp3")
            for round in 1...2 {
                let reply = try await h.get(h.url("/star.mp3"))
                #expect(reply.status == 200 && star.firstMismatch(in: reply.body, at: 0) == nil)
                #expect(h.origin.requests("/star.mp3").count == round, "Vary: * is never reused")
            }
        }
    }

    /// A player's own conditional requests are answered from the cache (RFC 9110 §13, RFC
    /// 9111 §4.3.2): `304` when the stored version matches (weak comparison for
    /// `If-None-Match`, which takes precedence over `If-Modified-Since`), the full answer
    /// when it does not, `412` for a failed `If-Match`, and `If-Range` decides whether the
    /// range applies; none of it costs an origin request.
    @Test func aPlayersConditionsAreAnsweredFromTheCache() async throws {
        try await ProxyHarness.with { h in
            let resource = TestOrigin.Resource.generated(length: 400_000, seed: 94, mimeType: "video/mp4")
            h.origin.serve(resource, at: "/c.mp4")
            let first = try await h.get(h.url("/c.mp4"))
            #expect(first.status == 200 && resource.firstMismatch(in: first.body, at: 0) == nil)
            let asked = h.origin.requests("/c.mp4").count
            let lastModified = try #require(resource.lastModified)
            let later = HTTPDate.format(try #require(HTTPDate.parse(lastModified)) + 60)
            let earlier = HTTPDate.format(try #require(HTTPDate.parse(lastModified)) - 60)
            let cases: [(fields: [(String, String)], status: Int)] = [
                ([("If-None-Match", "\"v1\"")], 304),
                ([("If-None-Match", "W/\"v1\"")], 304),
                ([("If-None-Match", "\"x\", \"v1\"")], 304),
                ([("If-None-Match", "\"x\""), ("If-None-Match", "\"v1\"")], 304),
                ([("If-None-Match", "*")], 304),
                ([("If-None-Match", "\"v2\"")], 200),
                ([("If-Modified-Since", lastModified)], 304),
                ([("If-Modified-Since", later)], 304),
                ([("If-Modified-Since", earlier)], 200),
                ([("If-Modified-Since", "not a date")], 200),
                ([("If-None-Match", "\"v2\""), ("If-Modified-Since", later)], 200),
                ([("If-Match", "\"v2\"")], 412),
                ([("If-Match", "\"v1\"")], 200),
                ([("If-Unmodified-Since", earlier)], 412),
                ([("Range", "bytes=100-199"), ("If-Range", "\"v1\"")], 206),
                ([("Range", "bytes=100-199"), ("If-Range", "\"v0\"")], 200),
                ([("Range", "bytes=100-199"), ("If-Range", lastModified)], 206),
                ([("Range", "bytes=100-199"), ("If-Range", earlier)], 200),
            ]
            for (fields, status) in cases {
                let reply = try await h.get(h.url("/c.mp4"), headers: fields)
                #expect(reply.status == status, "\(fields)")
                switch status {
                case 304:
                    #expect(reply.body.readableBytes == 0 && reply.headers.first(name: "etag") == "\"v1\"", "\(fields)")
                    #expect(
                        reply.headers.first(name: "cache-control") == "max-age=86400"
                            && reply.headers.first(name: "date") != nil)
                    #expect(reply.headers.first(name: "content-length") == nil)
                case 200:
                    #expect(
                        reply.body.readableBytes == 400_000 && resource.firstMismatch(in: reply.body, at: 0) == nil,
                        "\(fields)")
                case 206:
                    #expect(
                        reply.body.readableBytes == 100 && resource.firstMismatch(in: reply.body, at: 100) == nil,
                        "\(fields)")
                default:
                    break
                }
            }
            #expect(
                h.origin.requests("/c.mp4").count == asked,
                "answered from the cache: \(h.origin.requests("/c.mp4").dropFirst(asked))")
        }
    }

    /// With nothing stored, the player's condition goes to the origin, and its `304` comes
    /// back as it is: one origin request, nothing stored.
    @Test func aConditionWithNothingStoredGoesToTheOrigin() async throws {
        try await ProxyHarness.with { h in
            let resource = TestOrigin.Resource.generated(length: 400_000, seed: 95, mimeType: "video/mp4")
            h.origin.serve(resource, at: "/n.mp4")
            let reply = try await h.get(h.url("/n.mp4"), headers: [("If-None-Match", "\"v1\"")])
            #expect(
                reply.status == 304 && reply.body.readableBytes == 0 && reply.headers.first(name: "etag") == "\"v1\"")
            let requests = h.origin.requests("/n.mp4")
            #expect(
                requests.count == 1 && requests.first?.header("If-None-Match") == "\"v1\""
                    && requests.first?.status == 304, "\(requests)")
            let modified = try await h.get(
                h.url("/n.mp4"), headers: [("If-Modified-Since", "Mon, 02 Jan 2028 09:00:00 GMT")])
            #expect(
                modified.status == 200 && resource.firstMismatch(in: modified.body, at: 0) == nil
                    && modified.body.readableBytes == 400_000)
            #expect(h.origin.requests("/n.mp4").first(where: { $0.header("If-Modified-Since") != nil })?.status == 206)
            #expect(
                h.origin.requests("/n.mp4").dropFirst(2).allSatisfy { $0.header("If-Modified-Since") == nil },
                "the cache's own requests carry no condition")
        }
    }

    /// A `no-store` play costs exactly one origin request (the probe's answer is the stream),
    /// and a longer one never asks for a byte twice; nothing is written.
    @Test func aNoStorePlayCostsOneOriginRequest() async throws {
        try await ProxyHarness.with { h in
            var small = TestOrigin.Resource.generated(length: 200_000, seed: 96, mimeType: "audio/mpeg")
            small.cacheControl = "no-store"
            h.origin.serve(small, at: "/ns.mp3")
            let whole = try await h.get(h.url("/ns.mp3"))
            #expect(
                whole.status == 200 && small.firstMismatch(in: whole.body, at: 0) == nil
                    && whole.body.readableBytes == 200_000)
            #expect(
                h.origin.requests("/ns.mp3").count == 1, "\(h.origin.requests("/ns.mp3").map { "\($0) \($0.headers)" })"
            )
            let range = try await h.get(h.url("/ns.mp3"), headers: [("Range", "bytes=1000-1999")])
            #expect(
                range.status == 206 && small.firstMismatch(in: range.body, at: 1000) == nil
                    && range.body.readableBytes == 1000)
            #expect(h.origin.requests("/ns.mp3").count == 2)
            #expect(h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/ns.mp3"))) == nil)

            var large = TestOrigin.Resource.generated(length: 3_000_000, seed: 97, mimeType: "video/mp4")
            large.cacheControl = "no-store"
            h.origin.serve(large, at: "/ns.mp4")
            let film = try await h.get(h.url("/ns.mp4"))
            #expect(
                film.status == 200 && large.firstMismatch(in: film.body, at: 0) == nil
                    && film.body.readableBytes == 3_000_000)
            #expect(
                h.origin.bodyBytesSent("/ns.mp4") == 3_000_000, "no byte asked twice: \(h.origin.requests("/ns.mp4"))")
        }
    }

    /// A `304` to the cache's own validation updates the stored answer (RFC 9111 §3.2,
    /// §4.3.4): each field it carries replaces the stored fields of that name (one `Date`, the
    /// new `Cache-Control` and its lifetime), the rest stay as stored.
    @Test(arguments: [false, true])
    func aNotModifiedAnswerUpdatesTheStoredFields(lowercase: Bool) async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await ProxyHarness.with(store: store, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            var resource = TestOrigin.Resource.generated(length: 5_000, seed: 98, mimeType: "audio/mpeg")
            resource.cacheControl = "max-age=1"
            resource.extraHeaders = [("X-Version", "one"), ("Content-Disposition", "inline")]
            resource.faults.lowercaseHeaders = lowercase
            h.origin.serve(resource, at: "/u.mp3")
            let first = try await h.get(h.url("/u.mp3"))
            #expect(first.status == 200 && resource.firstMismatch(in: first.body, at: 0) == nil)
            clock.advance(by: 10)
            h.origin.update("/u.mp3") { resource in
                resource.cacheControl = "max-age=3600"
                resource.extraHeaders = [("X-Version", "two")]
            }
            let second = try await h.get(h.url("/u.mp3"))
            #expect(
                second.status == 200 && resource.firstMismatch(in: second.body, at: 0) == nil
                    && second.body.readableBytes == 5_000)
            #expect(h.origin.requests("/u.mp3").last?.status == 304, "\(h.origin.requests("/u.mp3"))")
            #expect(
                second.headers["date"] == [HTTPDate.format(Int64(clock.now.timeIntervalSince1970))], "\(second.headers)"
            )
            #expect(
                second.headers["x-version"] == ["two"] && second.headers["cache-control"] == ["max-age=3600"],
                "\(second.headers)")
            #expect(second.headers["content-disposition"] == ["inline"], "a field the 304 does not carry stays")
            #expect(second.headers["etag"] == ["\"v1\""] && second.headers["age"] == ["0"], "\(second.headers)")
            clock.advance(by: 100)
            let third = try await h.get(h.url("/u.mp3"))
            #expect(third.status == 200 && h.origin.requests("/u.mp3").count == 2, "fresh for the 304's max-age")
            #expect(third.headers["x-version"] == ["two"] && third.headers["date"].count == 1, "\(third.headers)")
        }
    }

    /// Every shape of answer costs one origin request per client request when it is not
    /// stored: an origin that ignores `Range` and sends the whole body, or one that sends it
    /// without a length (chunked), `no-store` or not.
    @Test(arguments: [(true, false), (false, true), (true, true)])
    func anAnswerThatIsNotStoredCostsOneOriginRequestWhateverItsShape(ignoresRanges: Bool, chunked: Bool) async throws {
        try await ProxyHarness.with { h in
            var resource = TestOrigin.Resource.generated(length: 90, seed: 99, mimeType: "application/octet-stream")
            resource.cacheControl = "no-store"
            resource.faults.ignoresRanges = ignoresRanges
            if chunked { resource.faults.lengthless = .chunked }
            h.origin.serve(resource, at: "/shape.bin")
            for round in 1...2 {
                let reply = try await h.get(h.url("/shape.bin"))
                #expect(
                    reply.status == 200 && reply.body.readableBytes == 90
                        && resource.firstMismatch(in: reply.body, at: 0) == nil)
                #expect(
                    h.origin.requests("/shape.bin").count == round,
                    "round \(round): \(h.origin.requests("/shape.bin").map { "\($0.method) \($0.range ?? "-")" })")
            }
            let ranged = try await h.get(h.url("/shape.bin"), headers: [("Range", "bytes=10-19")])
            #expect(
                [200, 206].contains(ranged.status) && h.origin.requests("/shape.bin").count == 3,
                "\(h.origin.requests("/shape.bin").map { "\($0.method) \($0.range ?? "-")" })")
            #expect(h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/shape.bin"))) == nil)
            // A playlist that says no type is told by its bytes, read once and rewritten.
            var playlist = TestOrigin.Resource(
                body: .bytes(Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n#EXT-X-ENDLIST\n".utf8)),
                mimeType: "application/octet-stream")
            playlist.cacheControl = "no-store"
            playlist.faults.ignoresRanges = ignoresRanges
            if chunked { playlist.faults.lengthless = .chunked }
            h.origin.serve(playlist, at: "/shape.m3u8")
            let rewritten = try await h.get(h.url("/shape.m3u8"))
            let text = String(buffer: rewritten.body)
            // Without a length nothing says it may be a playlist: it streams through as it is.
            #expect(
                rewritten.status == 200 && text.contains("s0.ts") && text.contains("127.0.0.1") != chunked, "\(text)")
            #expect(
                h.origin.requests("/shape.m3u8").count == 1,
                "\(h.origin.requests("/shape.m3u8").map { "\($0.method) \($0.range ?? "-")" })")
        }
    }
}
