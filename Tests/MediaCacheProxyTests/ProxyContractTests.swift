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

@Suite(.stallLimit, .endToEnd) struct ProxyContractTests {
    static let size: Int64 = 1_500_000

    func serve(_ h: ProxyHarness, _ path: String = "/v.mp4") -> TestOrigin.Resource {
        h.origin.serve(.generated(length: Self.size, seed: 31, mimeType: "video/mp4"), at: path)
        return h.origin.resource(at: path)!
    }

    @Test(arguments: TestSetup.all)
    func wholeBodyWithoutRangeThenReplayFromCache(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            let resource = serve(h)
            let reply = try await h.get(h.url("/v.mp4"))
            #expect(reply.status == 200)
            #expect(reply.headers.first(name: "content-length") == "\(Self.size)")
            #expect(reply.headers.first(name: "accept-ranges") == "bytes")
            #expect(reply.headers.first(name: "content-type") == "video/mp4")
            #expect(reply.headers.first(name: "content-range") == nil)
            #expect(resource.firstMismatch(in: reply.body, at: 0) == nil && reply.body.readableBytes == Int(Self.size))
            // The first byte costs one round trip: a ranged GET whose head gives the length,
            // no HEAD before it, asking for what the player asked (all of it), in one request.
            let first = h.origin.requests("/v.mp4")
            #expect(first.map(\.method) == ["GET"] && first.first?.range == "bytes=0-", "\(first)")
            let requests = first.count
            let again = try await h.get(h.url("/v.mp4"))
            #expect(again.body == reply.body)
            #expect(h.origin.requests("/v.mp4").count == requests, "replay must not reach the origin")
        }
    }

    /// A cold whole-file GET asks the origin for every byte exactly once: the ranges it
    /// asks for add up to the file, and the origin sends the file's size exactly.
    @Test(arguments: TestSetup.all)
    func aColdWholeFileGetFetchesEachByteOnce(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            let size: Int64 = 32 << 20
            h.origin.serve(.generated(length: size, seed: 35, mimeType: "video/mp4"), at: "/big.mp4")
            let resource = h.origin.resource(at: "/big.mp4")!
            let reply = try await h.get(h.url("/big.mp4"))
            #expect(
                reply.status == 200 && reply.body.readableBytes == Int(size)
                    && resource.firstMismatch(in: reply.body, at: 0) == nil)
            let asked = h.origin.requests("/big.mp4").compactMap { request -> ByteRange? in
                guard let range = request.range, case .single(let specifier) = RangeSpecifier.parse(range) else {
                    return nil
                }
                return specifier.resolve(length: size)
            }
            #expect(asked.reduce(0) { $0 + $1.length } == size, "asked for \(asked)")
            #expect(h.origin.bodyBytesSent("/big.mp4") == size)
        }
    }

    /// Sixteen players start the same uncached file at once: one origin download serves
    /// them all (the first ranged GET, which also gives the length, is shared too).
    @Test(arguments: TestSetup.all)
    func sixteenClientsOnAColdFileShareOneDownload(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            let size: Int64 = 6_000_000
            h.origin.serve(.generated(length: size, seed: 33, mimeType: "video/mp4"), at: "/shared.mp4")
            let resource = h.origin.resource(at: "/shared.mp4")!
            let bodies = try await withThrowingTaskGroup(of: ByteBuffer.self) { group in
                for _ in 0..<16 { group.addTask { try await h.get(h.url("/shared.mp4")).body } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for body in bodies {
                #expect(body.readableBytes == Int(size) && resource.firstMismatch(in: body, at: 0) == nil)
            }
            let sent = h.origin.bodyBytesSent("/shared.mp4")
            // At most the file plus one probe (256 KiB).
            #expect(
                sent <= size + CachingReader.Configuration().minimumRequest,
                "origin sent \(sent) for a \(size)-byte file: \(h.origin.requests("/shared.mp4"))")
            #expect(!h.origin.requests("/shared.mp4").contains { $0.method == "HEAD" })
        }
    }

    @Test(
        arguments: TestSetup.all,
        [
            ("bytes=0-1", 0, 2),
            ("bytes=1000-1999", 1000, 1000),
            ("bytes=1499000-", 1_499_000, 1000),
            ("bytes=-500", 1_499_500, 500),
            ("bytes=1400000-9999999", 1_400_000, 100_000),
            ("bytes=10-19, 50-59", 10, 10),  // several ranges: the first is answered
        ] as [(String, Int64, Int64)])
    func singleRangesInEveryForm(setup: TestSetup, form: (range: String, start: Int64, length: Int64)) async throws {
        let (range, start, length) = form
        try await ProxyHarness.with(setup: setup) { h in
            let resource = serve(h)
            let reply = try await h.get(h.url("/v.mp4"), headers: [("Range", range)])
            #expect(reply.status == 206)
            #expect(reply.headers.first(name: "content-range") == "bytes \(start)-\(start + length - 1)/\(Self.size)")
            #expect(reply.headers.first(name: "content-length") == "\(length)")
            #expect(reply.headers.first(name: "accept-ranges") == "bytes")
            #expect(reply.headers.first(name: "content-type") == "video/mp4")
            #expect(reply.body.readableBytes == Int(length))
            #expect(resource.firstMismatch(in: reply.body, at: start) == nil)
        }
    }

    @Test(arguments: TestSetup.all)
    func headAnswersHeadersWithoutFetchingBytes(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            serve(h)
            let reply = try await h.get(h.url("/v.mp4"), method: .HEAD, headers: [("Range", "bytes=100-199")])
            #expect(reply.status == 206)
            #expect(reply.headers.first(name: "content-length") == "100")
            #expect(reply.headers.first(name: "content-range") == "bytes 100-199/\(Self.size)")
            #expect(reply.body.readableBytes == 0)
            #expect(h.origin.requests("/v.mp4").allSatisfy { $0.method == "HEAD" })
            #expect(h.origin.bodyBytesSent("/v.mp4") == 0)
        }
    }

    /// An empty file is a `200` with an empty body (it was a `416`: the first ranged GET
    /// of a cold read has nothing to return); any range of it is unsatisfiable.
    @Test(arguments: TestSetup.all)
    func anEmptyFileIsA200WithAnEmptyBody(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            h.origin.serve(.generated(length: 0, seed: 1, mimeType: "audio/mpeg"), at: "/empty.mp3")
            let whole = try await h.get(h.url("/empty.mp3"))
            #expect(whole.status == 200 && whole.body.readableBytes == 0)
            #expect(
                whole.headers.first(name: "content-length") == "0"
                    && whole.headers.first(name: "content-type") == "audio/mpeg")
            let again = try await h.get(h.url("/empty.mp3"))
            #expect(again.status == 200 && again.body.readableBytes == 0)
            let ranged = try await h.get(h.url("/empty.mp3"), headers: [("Range", "bytes=0-")])
            #expect(ranged.status == 416 && ranged.headers.first(name: "content-range") == "bytes */0")
        }
    }

    /// When the read finds that the file changed after the proxy planned its head, the
    /// head is planned again: Content-Length, Content-Range and ETag describe the bytes sent.
    /// (In the play that read the old version a range past byte 0 would be refused instead:
    /// the player would splice two versions. Here the play is over: a new play's read.)
    @Test(arguments: TestSetup.all)
    func theHeadDescribesTheVersionTheBytesComeFrom(setup: TestSetup) async throws {
        var reader = CachingReader.Configuration()
        reader.revalidationInterval = .zero  // every read with missing bytes asks the origin first
        let clock = ManualClock(start: Date())
        var (store, fetcher) = (CacheStore.Configuration(), HTTPOriginFetcher.Configuration())
        (store.clock, fetcher.clock) = (clock, clock)
        try await ProxyHarness.with(setup: setup, store: store, fetcher: fetcher, reader: reader) { h in
            h.origin.useClock(clock)
            h.origin.serve(.generated(length: 1_000_000, seed: 36, mimeType: "video/mp4"), at: "/grows.mp4")
            let first = try await h.get(h.url("/grows.mp4"), headers: [("Range", "bytes=0-999")])
            #expect(first.status == 206 && first.headers.first(name: "content-range") == "bytes 0-999/1000000")
            // A new version, longer, under a new ETag.
            h.origin.update("/grows.mp4") { resource in
                resource.body = .generated(DeterministicContent(seed: 37), length: 1_200_000)
                resource.etag = "\"v2\""
                resource.lastModified = "Wed, 03 Jan 2029 10:00:00 GMT"
            }
            let v2 = h.origin.resource(at: "/grows.mp4")!
            clock.advance(by: 601)  // the play is over
            let reply = try await h.get(h.url("/grows.mp4"), headers: [("Range", "bytes=500000-")])
            #expect(reply.status == 206)
            #expect(reply.headers.first(name: "content-range") == "bytes 500000-1199999/1200000")
            #expect(
                reply.headers.first(name: "content-length") == "\(reply.body.readableBytes)"
                    && reply.body.readableBytes == 700_000)
            #expect(reply.headers.first(name: "etag") == "\"v2\"")
            #expect(v2.firstMismatch(in: reply.body, at: 500_000) == nil)
        }
    }

    /// Media behind a login plays: the player's end-to-end fields reach the origin; the
    /// cache's own (range, validators, caching), hop-by-hop ones and the proxy token do not.
    @Test(arguments: TestSetup.all)
    func thePlayersHeadersReachTheOrigin(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup, token: "s3cret") { h in
            var login = TestOrigin.Faults()
            login.requiredHeader = ("Authorization", "Bearer abc")
            h.origin.serve(
                .generated(length: 600_000, seed: 38, mimeType: "audio/mpeg", faults: login), at: "/private.mp3")
            let resource = h.origin.resource(at: "/private.mp3")!
            let refused = try await h.get(h.url("/private.mp3", extra: "&token=s3cret"))
            #expect(
                refused.status == 401, "without the player's credentials the origin refuses, and the player is told so")
            let player: [(String, String)] = [
                ("Authorization", "Bearer abc"), ("Cookie", "session=1"), ("Referer", "https://app.example/player"),
                ("User-Agent", "TestPlayer/2"), ("Accept-Language", "de"), ("X-MediaCache-Token", "s3cret"),
                ("If-None-Match", "\"zzz\""), ("Cache-Control", "no-cache"), ("Connection", "keep-alive, X-Hop"),
                ("X-Hop", "1"),
                ("Range", "bytes=1000-"),
            ]
            let reply = try await h.get(h.url("/private.mp3"), headers: player)
            #expect(
                reply.status == 206 && reply.body.readableBytes == 599_000
                    && resource.firstMismatch(in: reply.body, at: 1000) == nil)
            let served = h.origin.requests("/private.mp3").filter { $0.status == 206 }
            #expect(!served.isEmpty)
            // The cache held nothing to answer the player's condition with, so it went to the
            // origin with the first request (RFC 9111 §4.3.2); the cache's own requests carry none.
            #expect(served.first?.header("If-None-Match") == "\"zzz\"", "\(served.first?.headers ?? [])")
            for (index, request) in served.enumerated() {
                #expect(request.header("Authorization") == "Bearer abc" && request.header("Cookie") == "session=1")
                #expect(
                    request.header("Referer") == "https://app.example/player"
                        && request.header("Accept-Language") == "de")
                #expect(request.header("User-Agent") == "TestPlayer/2")
                #expect(
                    request.header("X-MediaCache-Token") == nil
                        && (index == 0 || request.header("If-None-Match") == nil), "\(request.headers)")
                #expect(request.header("Cache-Control") == nil && request.header("X-Hop") == nil, "\(request.headers)")
            }
            // The cache held none of the bytes: it asked for the player's range, in one request.
            #expect(served.map(\.range) == ["bytes=1000-"], "\(served)")
        }
    }

    /// Credentials go with a redirect on the same origin, never to another one.
    @Test func credentialsDoNotFollowARedirectToAnotherHost() async throws {
        try await ProxyHarness.with { h in
            h.origin.serve(.generated(length: 300_000, seed: 39, mimeType: "audio/mpeg"), at: "/there.mp3")
            var away = TestOrigin.Faults()
            away.redirect = (302, "http://localhost:\(h.origin.port)/there.mp3")
            h.origin.serve(.generated(length: 10, faults: away), at: "/away.mp3")
            var near = TestOrigin.Faults()
            near.redirect = (302, "/there.mp3")
            h.origin.serve(.generated(length: 10, faults: near), at: "/near.mp3")
            let credentials = [
                ("Authorization", "Bearer abc"), ("Cookie", "session=1"), ("Referer", "https://app.example/"),
            ]
            // Each player's request is the one for its range: the fill of the first play (an MP3)
            // goes on asking for the rest of the file, without credentials, meanwhile.
            func asked(for range: String) -> [TestOrigin.Request] {
                h.origin.requests("/there.mp3").filter { $0.header("Range") == range }
            }
            let viaAway = try await h.get(h.url("/away.mp3"), headers: credentials + [("Range", "bytes=0-99")])
            #expect(viaAway.status == 206)
            let afterAway = try #require(asked(for: "bytes=0-99").last)
            #expect(
                afterAway.header("Authorization") == nil && afterAway.header("Cookie") == nil
                    && afterAway.header("Referer") == "https://app.example/")
            let viaNear = try await h.get(h.url("/near.mp3"), headers: credentials + [("Range", "bytes=0-99")])
            #expect(viaNear.status == 206)
            let afterNear = try #require(asked(for: "bytes=0-99").last)
            #expect(asked(for: "bytes=0-99").count == 2)
            #expect(afterNear.header("Authorization") == "Bearer abc" && afterNear.header("Cookie") == "session=1")
        }
    }

    /// `Cache-Control: no-store`: the bytes stream through to the player and nothing is
    /// written; every play goes to the origin.
    @Test(arguments: TestSetup.all)
    func noStoreIsStreamedThroughAndNeverWritten(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            var resource = TestOrigin.Resource.generated(length: 3_000_000, seed: 40, mimeType: "audio/mpeg")
            resource.cacheControl = "private, No-Store"
            h.origin.serve(resource, at: "/live.mp3")
            for _ in 0..<2 {
                let whole = try await h.get(h.url("/live.mp3"))
                #expect(
                    whole.status == 200 && whole.body.readableBytes == 3_000_000
                        && resource.firstMismatch(in: whole.body, at: 0) == nil)
                let part = try await h.get(h.url("/live.mp3"), headers: [("Range", "bytes=2000000-2099999")])
                #expect(
                    part.status == 206 && part.body.readableBytes == 100_000
                        && resource.firstMismatch(in: part.body, at: 2_000_000) == nil)
            }
            let key = h.base.store.key(for: h.origin.url("/live.mp3"))
            #expect(
                h.base.store.metadata(for: key) == nil && h.base.store.spans(for: key).byteCount == 0,
                "nothing of a no-store answer is kept")
            #expect(h.origin.bodyBytesSent("/live.mp3") >= 2 * 3_100_000, "every play goes to the origin")
            let dataFiles = try FileManager.default.contentsOfDirectory(
                atPath: h.base.directory.appendingPathComponent("store/data").path)
            #expect(dataFiles.isEmpty, "\(dataFiles)")
        }
    }

    /// The origin's end-to-end response fields are kept with the entry and sent again on every
    /// hit, with its `Date` and an `Age` that grows with the time the answer has been stored
    /// (RFC 9111 §5.1); hop-by-hop fields, cookies and the origin's CORS fields are not. A
    /// `304` replaces the fields it carries.
    @Test(arguments: TestSetup.all)
    func responseFieldsAreStoredAndSentAgainWithDateAndAge(setup: TestSetup) async throws {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await ProxyHarness.with(setup: setup, store: store, fetcher: fetcher) { h in
            var resource = TestOrigin.Resource.generated(length: 400_000, seed: 44, mimeType: "audio/mpeg")
            resource.cacheControl = "max-age=600"
            resource.extraHeaders = [
                (name: "Content-Disposition", value: "attachment; filename=\"a.mp3\""),
                (name: "Content-Language", value: "de"),
                (name: "Vary", value: "Accept-Language"), (name: "X-Origin-Note", value: "one"),
                (name: "Set-Cookie", value: "s=1"), (name: "Access-Control-Allow-Origin", value: "*"),
                (name: "Keep-Alive", value: "timeout=5"),
            ]
            h.origin.useClock(clock)
            h.origin.serve(resource, at: "/h.mp3")
            let originDate = HTTPDate.format(1_800_000_000)
            func check(
                _ reply: ProxyHarness.Reply, age: String, date: String, note: String,
                sourceLocation: SourceLocation = #_sourceLocation
            ) {
                let fields = reply.headers
                #expect(
                    fields.first(name: "content-disposition") == "attachment; filename=\"a.mp3\"",
                    sourceLocation: sourceLocation)
                #expect(
                    fields.first(name: "content-language") == "de" && fields.first(name: "vary") == "Accept-Language",
                    sourceLocation: sourceLocation)
                #expect(
                    fields.first(name: "cache-control") == "max-age=600" && fields.first(name: "x-origin-note") == note,
                    sourceLocation: sourceLocation)
                #expect(fields["date"] == [date] && fields["age"] == [age], "\(fields)", sourceLocation: sourceLocation)
                #expect(
                    fields["set-cookie"].isEmpty && fields["access-control-allow-origin"].isEmpty
                        && fields["keep-alive"].isEmpty, "\(fields)",
                    sourceLocation: sourceLocation)
                #expect(
                    fields["content-length"] == ["\(reply.status == 206 ? 1000 : 400_000)"]
                        && fields["etag"] == ["\"v1\""], sourceLocation: sourceLocation)
            }
            let cold = try await h.get(h.url("/h.mp3"))
            #expect(
                cold.status == 200 && resource.firstMismatch(in: cold.body, at: 0) == nil
                    && cold.body.readableBytes == 400_000)
            check(cold, age: "0", date: originDate, note: "one")
            clock.advance(by: 100)
            h.origin.resetCounters()
            let hit = try await h.get(h.url("/h.mp3"), headers: [("Range", "bytes=1000-1999")])
            #expect(
                hit.status == 206 && resource.firstMismatch(in: hit.body, at: 1000) == nil
                    && hit.body.readableBytes == 1000)
            check(hit, age: "100", date: originDate, note: "one")
            check(try await h.get(h.url("/h.mp3"), method: .HEAD), age: "100", date: originDate, note: "one")
            #expect(h.origin.requests("/h.mp3").isEmpty, "fresh hits ask nothing")
            // Stale: the 304 carries the origin's fields now, which replace the stored ones.
            h.origin.update("/h.mp3") { $0.extraHeaders[3].value = "two" }
            clock.advance(by: 600)
            let revalidated = try await h.get(h.url("/h.mp3"))
            #expect(h.origin.requests("/h.mp3").map(\.status) == [304] && h.origin.bodyBytesSent("/h.mp3") == 0)
            #expect(
                revalidated.status == 200 && resource.firstMismatch(in: revalidated.body, at: 0) == nil
                    && revalidated.body.readableBytes == 400_000)
            check(revalidated, age: "0", date: HTTPDate.format(1_800_000_700), note: "two")
        }
    }

    /// An origin that sends no length (chunked, or a body that ends when it closes: internet
    /// radio, a generated file): the body streams through as a `200` without a length (a
    /// `Range` is ignored), checked byte for byte; once it has come whole it is a complete
    /// entry, so replays (ranges too) are local. `no-store` keeps it from being written.
    @Test(arguments: TestSetup.all, [TestOrigin.LengthlessFraming.chunked, .closeDelimited])
    func aBodyWithoutALengthStreamsThroughAndIsStoredWhenWhole(setup: TestSetup, framing: TestOrigin.LengthlessFraming)
        async throws
    {
        try await ProxyHarness.with(setup: setup) { h in
            var resource = TestOrigin.Resource.generated(length: 2_000_000, seed: 45, mimeType: "audio/mpeg")
            resource.faults.lengthless = framing
            h.origin.serve(resource, at: "/gen.mp3")
            let first = try await h.get(h.url("/gen.mp3"), headers: [("Range", "bytes=1000-1999")])
            #expect(
                first.status == 200 && first.headers["content-length"].isEmpty
                    && first.headers.first(name: "accept-ranges") == "none")
            #expect(first.body.readableBytes == 2_000_000 && resource.firstMismatch(in: first.body, at: 0) == nil)
            let key = h.base.store.key(for: h.origin.url("/gen.mp3"))
            #expect(
                h.base.store.metadata(for: key)?.length == 2_000_000
                    && h.base.store.spans(for: key).byteCount == 2_000_000)
            h.origin.resetCounters()
            let part = try await h.get(h.url("/gen.mp3"), headers: [("Range", "bytes=1000-1999")])
            #expect(part.status == 206 && part.headers.first(name: "content-range") == "bytes 1000-1999/2000000")
            #expect(part.body.readableBytes == 1000 && resource.firstMismatch(in: part.body, at: 1000) == nil)
            let whole = try await h.get(h.url("/gen.mp3"))
            #expect(
                whole.status == 200 && whole.headers.first(name: "content-length") == "2000000"
                    && whole.body == first.body)
            #expect(h.origin.requests("/gen.mp3").isEmpty, "a replay of the stored body is local")

            var radio = TestOrigin.Resource.generated(length: 1_000_000, seed: 47, mimeType: "audio/mpeg")
            radio.faults.lengthless = framing
            radio.cacheControl = "no-store"
            h.origin.serve(radio, at: "/radio.mp3")
            for _ in 0..<2 {
                let reply = try await h.get(h.url("/radio.mp3"))
                #expect(
                    reply.status == 200 && reply.body.readableBytes == 1_000_000
                        && radio.firstMismatch(in: reply.body, at: 0) == nil)
            }
            let stream = try await h.base.reader.read(h.origin.url("/radio.mp3"), offset: 70_000, length: 200_000)
            var window = ByteBuffer()
            for try await chunk in stream { window.writeImmutableBuffer(chunk) }
            #expect(window.readableBytes == 200_000 && radio.firstMismatch(in: window, at: 70_000) == nil)
            #expect(stream.statistics.bytesFromOrigin == 200_000)
            #expect(
                h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/radio.mp3"))) == nil,
                "no-store: nothing is written")
            #expect(h.origin.bodyBytesSent("/radio.mp3") >= 2_070_000, "every play goes to the origin")
        }
    }

    /// A player that hangs up in the middle of a body without a length leaves nothing
    /// behind: bytes of a resource whose length is unknown cannot serve a later read. The
    /// next whole play stores it.
    @Test(arguments: TestSetup.all)
    func aBodyWithoutALengthCutShortIsNotKept(setup: TestSetup) async throws {
        try await ProxyHarness.with(setup: setup) { h in
            var resource = TestOrigin.Resource.generated(length: 3_000_000, seed: 48, mimeType: "audio/mpeg")
            resource.faults.lengthless = .chunked
            h.origin.serve(resource, at: "/cut.mp3")
            let url = h.origin.url("/cut.mp3")
            let stream = try await h.base.reader.read(url)
            var taken = 0
            for try await chunk in stream {
                taken += chunk.readableBytes
                if taken >= 100_000 { break }
            }
            stream.cancel()
            let key = h.base.store.key(for: url)
            // Removed, and the writer's place free again (a read that came before would stream
            // uncached: one writer per resource at a time).
            try await waitUntil {
                h.base.store.metadata(for: key) == nil && !h.base.reader.lengthless.isWritingThrough(url)
            }
            #expect(h.base.store.metadata(for: key) == nil, "the unfinished write is removed")
            let whole = try await h.get(h.url("/cut.mp3"))
            #expect(
                whole.status == 200 && whole.body.readableBytes == 3_000_000
                    && resource.firstMismatch(in: whole.body, at: 0) == nil)
            #expect(h.base.store.metadata(for: key)?.length == 3_000_000)
        }
    }
}
