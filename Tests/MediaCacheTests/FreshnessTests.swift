// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import Testing

/// Freshness as RFC 9111 defines it for a private cache, with the store's and the fetcher's
/// clock one manual clock, so time passes without sleeping. Every read is checked byte for
/// byte; the origin's requests and body bytes are counted.
@Suite(.stallLimit, .endToEnd) struct FreshnessTests {
    static let size: Int64 = 600_000

    static func with(
        _ scheme: OriginScheme, prefersCache: Bool = false, servesStale: Bool = true,
        _ body: (Harness, ManualClock) async throws -> Void
    ) async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var reader = CachingReader.Configuration()
        reader.prefersCache = prefersCache
        reader.servesStaleOnOriginFailure = servesStale
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await Harness.with(scheme: scheme, store: store, reader: reader, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            try await body(h, clock)
        }
    }

    /// Serves deterministic bytes at `path` with the given freshness headers.
    static func serve(
        _ h: Harness, _ path: String, cacheControl: String?, expires: String? = nil,
        lastModified: String? = "Mon, 02 Jan 2028 10:00:00 GMT"
    ) {
        var resource = TestOrigin.Resource.generated(length: size, seed: 50, mimeType: "audio/mpeg")
        resource.cacheControl = cacheControl
        resource.expires = expires
        resource.lastModified = lastModified
        h.origin.serve(resource, at: path)
    }

    /// Reads the whole file, checks it, and returns what the origin was asked meanwhile.
    @discardableResult
    static func play(_ h: Harness, _ path: String, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> [TestOrigin.Request]
    {
        h.origin.resetCounters()
        try await ReadPathTests.readAndCheck(h, path, sourceLocation: sourceLocation)
        return h.origin.requests(path)
    }

    @Test(arguments: OriginScheme.allCases)
    func withinMaxAgeNoRequestThenA304RefreshesIt(scheme: OriginScheme) async throws {
        try await Self.with(scheme) { h, clock in
            Self.serve(h, "/a.mp3", cacheControl: "max-age=60")
            try await Self.play(h, "/a.mp3")
            #expect(try await Self.play(h, "/a.mp3").isEmpty, "fresh: served with no origin request")
            clock.advance(by: 61)
            let revalidation = try await Self.play(h, "/a.mp3")
            #expect(revalidation.count == 1 && revalidation.first?.status == 304, "\(revalidation)")
            #expect(revalidation.first?.header("If-None-Match") == "\"v1\"")
            #expect(h.origin.bodyBytesSent("/a.mp3") == 0, "a 304 costs no body bytes")
            #expect(try await Self.play(h, "/a.mp3").isEmpty, "the 304 made it fresh again")
        }
    }

    @Test(arguments: OriginScheme.allCases)
    func noCacheRevalidatesEveryPlayAndAChangeGivesOnlyTheNewVersion(scheme: OriginScheme) async throws {
        try await Self.with(scheme) { h, _ in
            Self.serve(h, "/b.mp3", cacheControl: "no-cache")
            try await Self.play(h, "/b.mp3")
            let again = try await Self.play(h, "/b.mp3")
            #expect(again.map(\.status) == [304], "\(again)")
            h.origin.changeContent(at: "/b.mp3")
            let changed = try await Self.play(h, "/b.mp3")  // readAndCheck compares with the new version
            #expect(changed.first?.header("If-None-Match") == "\"v1\"" && changed.first?.status == 206, "\(changed)")
            #expect(h.origin.bodyBytesSent("/b.mp3") == Self.size, "the new version is fetched once, whole")
        }
    }

    /// Eight range requests on a `no-cache` entry while one validation is under way share it:
    /// the origin holds its answer until all eight wait on it, and sees one conditional request.
    @Test(arguments: OriginScheme.allCases)
    func concurrentRequestsShareOneRevalidation(scheme: OriginScheme) async throws {
        try await Self.with(scheme) { h, _ in
            Self.serve(h, "/c.mp3", cacheControl: "no-cache")
            try await Self.play(h, "/c.mp3")
            h.origin.resetCounters()
            let gate = TestOrigin.Gate()
            h.origin.update("/c.mp3") { $0.faults.gate = gate }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await ReadPathTests.readAndCheck(h, "/c.mp3", offset: Int64(index) * 50_000, length: 40_000)
                    }
                }
                try await waitUntil { h.reader.contentInfoWaiters == 8 }
                gate.open()
                try await group.waitForAll()
            }
            #expect(h.origin.requests("/c.mp3").map(\.status) == [304], "\(h.origin.requests("/c.mp3"))")
            // Once it is over, the next use is validated again.
            h.origin.resetCounters()
            try await ReadPathTests.readAndCheck(h, "/c.mp3", offset: 0, length: 40_000)
            #expect(h.origin.requests("/c.mp3").map(\.status) == [304])
        }
    }

    /// `no-cache`, `max-age=0` and a stale `must-revalidate`: a file changed at the origin
    /// half a second after a play is never served from the old copy.
    @Test(arguments: OriginScheme.allCases, ["no-cache", "max-age=0", "max-age=1, must-revalidate"])
    func aChangeHalfASecondAfterAPlayIsSeen(scheme: OriginScheme, cacheControl: String) async throws {
        try await Self.with(scheme) { h, clock in
            Self.serve(h, "/h.mp3", cacheControl: cacheControl)
            try await Self.play(h, "/h.mp3")
            clock.advance(by: cacheControl.contains("max-age=1") ? 1.5 : 0.5)
            h.origin.changeContent(at: "/h.mp3")
            let changed = try await Self.play(h, "/h.mp3")  // checked against the new version
            #expect(changed.first?.header("If-None-Match") == "\"v1\"", "\(changed)")
            #expect(h.origin.bodyBytesSent("/h.mp3") == Self.size, "the new version, whole, once")
        }
    }

    @Test(arguments: OriginScheme.allCases)
    func aStaleCopyIsServedWhenTheOriginIsDownUnlessTurnedOff(scheme: OriginScheme) async throws {
        for servesStale in [true, false] {
            try await Self.with(scheme, servesStale: servesStale) { h, clock in
                Self.serve(h, "/d.mp3", cacheControl: "max-age=60")
                try await Self.play(h, "/d.mp3")
                clock.advance(by: 120)
                h.origin.update("/d.mp3") { $0.faults.status = 503 }
                if servesStale {
                    try await Self.play(h, "/d.mp3")
                } else {
                    await #expect { _ = try await h.reader.read(h.origin.url("/d.mp3")) } throws: {
                        ($0 as? CacheError)?.originAnswer?.status == 503
                    }
                }
            }
        }
    }

    /// RFC 9111 §5.3: an `Expires` that is not one valid date means already expired; §5.1:
    /// `Age` is its first member, and one that is not a number is ignored.
    @Test(arguments: OriginScheme.allCases)
    func anInvalidExpiresIsStaleAndAgeTakesItsFirstMember(scheme: OriginScheme) async throws {
        try await Self.with(scheme) { h, clock in
            let later = HTTPDate.format(Int64(clock.now.timeIntervalSince1970) + 3600)
            let cases: [(path: String, cacheControl: String?, fields: [(String, String)], fresh: Bool)] = [
                ("/x1.mp3", nil, [("Expires", "Thu, 32 Jan 2099 00:00:00 GMT")], false),
                ("/x2.mp3", nil, [("Expires", later), ("Expires", later)], false),
                ("/x3.mp3", nil, [("Expires", "0")], false),
                ("/x4.mp3", nil, [("Expires", later)], true),
                ("/a1.mp3", "max-age=3600", [("Age", "7200, 0")], false),
                ("/a2.mp3", "max-age=3600", [("Age", "0, 7200")], true),
                ("/a3.mp3", "max-age=3600", [("Age", "old, 0")], true),
                ("/a4.mp3", "max-age=3600", [("Age", "7200"), ("Age", "0")], false),
            ]
            for item in cases {
                var resource = TestOrigin.Resource.generated(length: 100_000, seed: 51, mimeType: "audio/mpeg")
                resource.cacheControl = item.cacheControl
                resource.extraHeaders = item.fields.map { (name: $0.0, value: $0.1) }
                h.origin.serve(resource, at: item.path)
                try await ReadPathTests.readAndCheck(h, item.path)
                h.origin.resetCounters()
                try await ReadPathTests.readAndCheck(h, item.path)
                let asked = h.origin.requests(item.path)
                #expect(asked.isEmpty == item.fresh, "\(item.path) \(item.fields): \(asked)")
            }
        }
    }

    /// `must-revalidate` and `no-cache` forbid a stale answer: a failing origin is an error.
    @Test(arguments: OriginScheme.allCases, ["max-age=60, must-revalidate", "no-cache"])
    func mustRevalidateAndNoCacheAreNeverServedStale(scheme: OriginScheme, cacheControl: String) async throws {
        try await Self.with(scheme) { h, clock in
            Self.serve(h, "/m.mp3", cacheControl: cacheControl)
            try await Self.play(h, "/m.mp3")
            clock.advance(by: 120)
            h.origin.update("/m.mp3") { $0.faults.status = 503 }
            await #expect { _ = try await h.reader.read(h.origin.url("/m.mp3")) } throws: {
                ($0 as? CacheError)?.originAnswer?.status == 503
            }
            h.origin.update("/m.mp3") { $0.faults.status = nil }
            #expect(
                try await Self.play(h, "/m.mp3").map(\.status) == [304], "once the origin is back it is revalidated")
        }
    }

    /// A `304` refreshes the stored answer by RFC 9111 §4.3.4: its fields replace those of
    /// the same name, and one that says nothing of freshness starts the stored lifetime again.
    @Test func aNotModifiedAnswerRefreshesTheStoredFields() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var stored = ContentMetadata(length: 10, etag: "\"a\"")
        stored.generatedAt = start
        stored.freshUntil = start.addingTimeInterval(60)
        stored.requiresRevalidation = true
        stored.responseHeaders = [
            ContentMetadata.HeaderField(name: "Cache-Control", value: "max-age=60, must-revalidate"),
            ContentMetadata.HeaderField(name: "X-A", value: "1"),
        ]
        var bare = ContentMetadata()
        bare.generatedAt = start.addingTimeInterval(500)
        bare.freshUntil = bare.generatedAt
        bare.responseHeaders = [ContentMetadata.HeaderField(name: "x-a", value: "2")]
        let refreshed = stored.refreshed(by: bare)
        #expect(refreshed.freshUntil == start.addingTimeInterval(560), "the stored 60 s start again from the 304")
        #expect(refreshed.requiresRevalidation && refreshed.length == 10 && refreshed.etag == "\"a\"")
        #expect(
            refreshed.responseHeaders == [
                ContentMetadata.HeaderField(name: "Cache-Control", value: "max-age=60, must-revalidate"),
                ContentMetadata.HeaderField(name: "x-a", value: "2"),
            ])
        var explicit = bare
        explicit.responseHeaders = [ContentMetadata.HeaderField(name: "Cache-Control", value: "max-age=5")]
        explicit.freshUntil = start.addingTimeInterval(505)
        let shortened = stored.refreshed(by: explicit)
        #expect(shortened.freshUntil == start.addingTimeInterval(505) && !shortened.requiresRevalidation)
        #expect(shortened.responseHeader("cache-control") == "max-age=5" && shortened.responseHeader("X-A") == "1")
    }

    @Test(arguments: OriginScheme.allCases)
    func preferCacheNeverAsksTheOrigin(scheme: OriginScheme) async throws {
        try await Self.with(scheme, prefersCache: true) { h, clock in
            Self.serve(h, "/e.mp3", cacheControl: "no-cache")
            try await Self.play(h, "/e.mp3")
            clock.advance(by: 3600)
            #expect(try await Self.play(h, "/e.mp3").isEmpty)
        }
    }

    @Test(arguments: OriginScheme.allCases)
    func expiresAndLastModifiedGiveLifetimesToo(scheme: OriginScheme) async throws {
        try await Self.with(scheme) { h, clock in
            // From the shared clock, as the origin's Date is: a real-time `now` drifted from it
            // while a loaded test run set the harness up, and lengthened the lifetime.
            let now = Int64(clock.now.timeIntervalSince1970)
            Self.serve(h, "/f.mp3", cacheControl: nil, expires: HTTPDate.format(now + 120))
            // 10 % of the ten days since Last-Modified, capped at a day: a day.
            Self.serve(h, "/g.mp3", cacheControl: nil, lastModified: HTTPDate.format(now - 10 * 86400))
            try await Self.play(h, "/f.mp3")
            try await Self.play(h, "/g.mp3")
            clock.advance(by: 100)
            #expect(try await Self.play(h, "/f.mp3").isEmpty, "Expires is 120 s after Date")
            clock.advance(by: 30)
            #expect(try await Self.play(h, "/f.mp3").map(\.status) == [304])
            clock.advance(by: 86000 - 130)
            #expect(try await Self.play(h, "/g.mp3").isEmpty, "heuristic freshness: within a day")
            clock.advance(by: 1000)
            #expect(try await Self.play(h, "/g.mp3").map(\.status) == [304])
        }
    }
}
