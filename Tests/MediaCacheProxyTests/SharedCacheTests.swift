// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import Testing

/// The proxy as a shared cache (`serve --shared-cache`, implied by `--allow-remote`) and as
/// the private cache it is by default, side by side on the same origin answers (RFC 9111 §3,
/// §3.5, §4.2.1, §5.2.2): what each stores, how long it is fresh, when it may be served stale.
@Suite(.stallLimit, .endToEnd) struct SharedCacheTests {
    static func with(shared: Bool, _ body: (ProxyHarness, ManualClock) async throws -> Void) async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        fetcher.isSharedCache = shared
        try await ProxyHarness.with(store: store, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            try await body(h, clock)
        }
    }

    /// Serves 20,000 bytes at `path` with `cacheControl`, gets it twice through the proxy (the
    /// second time `after` seconds later, with `headers` both times), checks the bytes, and
    /// returns how many requests the origin saw.
    static func twice(
        _ h: ProxyHarness, _ clock: ManualClock, _ path: String, cacheControl: String, after: TimeInterval = 10,
        headers: [(String, String)] = []
    ) async throws -> Int {
        var resource = TestOrigin.Resource.generated(length: 20_000, seed: 120, mimeType: "audio/mpeg")
        resource.cacheControl = cacheControl
        h.origin.serve(resource, at: path)
        for round in 0..<2 {
            if round == 1 { clock.advance(by: after) }
            let reply = try await h.get(h.url(path), headers: headers)
            #expect(
                reply.status == 200 && resource.firstMismatch(in: reply.body, at: 0) == nil
                    && reply.body.readableBytes == 20_000, "\(path)")
        }
        return h.origin.requests(path).count
    }

    /// `private` is never stored by a shared cache, and is by a private one.
    @Test(arguments: [true, false])
    func privateAnswersAreKeptOnlyByAPrivateCache(shared: Bool) async throws {
        try await Self.with(shared: shared) { h, clock in
            let count1 = try await Self.twice(h, clock, "/p.mp3", cacheControl: "private, max-age=60")
            #expect(count1 == (shared ? 2 : 1))
            let stored = h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/p.mp3")))
            #expect((stored == nil) == shared, "\(String(describing: stored))")
        }
    }

    /// `s-maxage` gives a shared cache its lifetime in place of `max-age` (§5.2.2.10); a
    /// private cache ignores it.
    @Test(arguments: [true, false])
    func sMaxAgeIsASharedCachesLifetime(shared: Bool) async throws {
        try await Self.with(shared: shared) { h, clock in
            let count2 = try await Self.twice(h, clock, "/s.mp3", cacheControl: "max-age=1, s-maxage=60")
            #expect(count2 == (shared ? 1 : 2))
            let count3 = try await Self.twice(h, clock, "/s0.mp3", cacheControl: "max-age=60, s-maxage=0")
            #expect(count3 == (shared ? 2 : 1))
        }
    }

    /// A request with `Authorization`: a shared cache stores the answer only when the origin
    /// says `public`, `s-maxage` or `must-revalidate` (§3.5).
    @Test(arguments: [true, false])
    func answersToAuthorizedRequestsAreKeptByASharedCacheOnlyWhenAllowed(shared: Bool) async throws {
        try await Self.with(shared: shared) { h, clock in
            let credentials = [("Authorization", "Bearer 123")]
            let count4 = try await Self.twice(h, clock, "/a.mp3", cacheControl: "max-age=60", headers: credentials)
            #expect(count4 == (shared ? 2 : 1))
            let count5 = try await Self.twice(
                h, clock, "/a-public.mp3", cacheControl: "public, max-age=60", headers: credentials)
            #expect(count5 == 1)
            let count6 = try await Self.twice(h, clock, "/a-s.mp3", cacheControl: "s-maxage=60", headers: credentials)
            #expect(count6 == (shared ? 1 : 2))
            let count7 = try await Self.twice(h, clock, "/plain.mp3", cacheControl: "max-age=60")
            #expect(count7 == 1, "without credentials, stored by both")
        }
    }

    /// Once stale, `proxy-revalidate` (§5.2.2.8) keeps a shared cache from serving the stored
    /// answer when the origin fails; a private cache may.
    @Test(arguments: [true, false])
    func proxyRevalidateForbidsAStaleAnswerOnlyInASharedCache(shared: Bool) async throws {
        try await Self.with(shared: shared) { h, clock in
            var resource = TestOrigin.Resource.generated(length: 20_000, seed: 121, mimeType: "audio/mpeg")
            resource.cacheControl = "max-age=1, proxy-revalidate"
            h.origin.serve(resource, at: "/pr.mp3")
            let first = try await h.get(h.url("/pr.mp3"))
            #expect(first.status == 200 && resource.firstMismatch(in: first.body, at: 0) == nil)
            clock.advance(by: 10)
            h.origin.update("/pr.mp3") { $0.faults.status = 503 }
            let stale = try await h.get(h.url("/pr.mp3"))
            if shared {
                #expect(stale.status == 503, "the origin's failure, not the stale copy")
            } else {
                #expect(stale.status == 200 && resource.firstMismatch(in: stale.body, at: 0) == nil, "the stale copy")
            }
        }
    }
}
