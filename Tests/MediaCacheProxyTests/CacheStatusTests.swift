// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// `Cache-Status` (RFC 9211) says what the cache did for each answer: a hit with the freshness
/// left, or why it went to the origin — nothing stored, a stale copy to validate (and what the
/// origin said), part stored, or an answer it does not keep — and whether it stores the answer.
/// On one manual clock; every answer's bytes are the origin's. (``ProxyHarness/get`` checks
/// that every answer of every proxy test carries one, in the field's grammar.)
@Suite(.stallLimit, .endToEnd) struct CacheStatusTests {
    static func status(_ reply: ProxyHarness.Reply) -> String {
        reply.headers.first(name: "cache-status") ?? "missing"
    }

    /// Serves generated MP3 bytes at `path` with `cacheControl`; returns what is served.
    @discardableResult
    static func serve(_ h: ProxyHarness, _ path: String, length: Int64, seed: UInt64, cacheControl: String)
        -> TestOrigin.Resource
    {
        var resource = TestOrigin.Resource.generated(length: length, seed: seed, mimeType: "audio/mpeg")
        resource.cacheControl = cacheControl
        h.origin.serve(resource, at: path)
        return resource
    }

    /// A miss, then a hit, then (stale) a revalidation the origin confirms, then a new version.
    @Test func hitsMissesAndRevalidationsSayWhatTheyWere() async throws {
        try await ProxyHarness.withClock { h, clock in
            Self.serve(h, "/a.mp3", length: 300_000, seed: 150, cacheControl: "max-age=60")
            func get() async throws -> String {
                let reply = try await h.get(h.url("/a.mp3"))
                let served = try #require(h.origin.resource(at: "/a.mp3"))
                #expect(reply.status == 200 && served.firstMismatch(in: reply.body, at: 0) == nil)
                return Self.status(reply)
            }
            #expect(try await get() == "MediaCache; fwd=uri-miss; stored")
            try await h.base.waitUntilQuiet("/a.mp3")
            #expect(try await get() == "MediaCache; hit; ttl=60")
            clock.advance(by: 70)
            #expect(try await get() == "MediaCache; fwd=stale; fwd-status=304; stored")
            #expect(try await get() == "MediaCache; hit; ttl=60", "the 304 made it fresh again")
            clock.advance(by: 70)
            h.origin.changeContent(at: "/a.mp3")
            #expect(try await get() == "MediaCache; fwd=stale; fwd-status=200; stored")
        }
    }

    /// A range beyond what is stored: the rest is asked for.
    @Test func aRangeOnlyPartlyStoredIsPartial() async throws {
        try await ProxyHarness.withClock { h, _ in
            let resource = TestOrigin.Resource.generated(length: 2_000_000, seed: 151, mimeType: "video/mp4")
            h.origin.serve(resource, at: "/v.mp4")
            let first = try await h.get(h.url("/v.mp4"), headers: [("Range", "bytes=0-99999")])
            #expect(Self.status(first) == "MediaCache; fwd=uri-miss; stored")
            try await h.base.waitUntilQuiet("/v.mp4")
            let stored = h.base.store.spans(for: h.base.store.key(for: h.origin.url("/v.mp4"))).byteCount
            let rest = try await h.get(h.url("/v.mp4"), headers: [("Range", "bytes=\(stored - 1000)-")])
            #expect(rest.status == 206 && resource.firstMismatch(in: rest.body, at: stored - 1000) == nil)
            #expect(Self.status(rest) == "MediaCache; fwd=partial; stored")
        }
    }

    /// Served stale because the origin failed: a hit whose `ttl` is negative.
    @Test func aStaleCopyServedWhileTheOriginFailsIsAHitPastItsFreshness() async throws {
        try await ProxyHarness.withClock { h, clock in
            let resource = Self.serve(h, "/s.mp3", length: 100_000, seed: 152, cacheControl: "max-age=10")
            #expect(try await h.get(h.url("/s.mp3")).status == 200)
            try await h.base.waitUntilQuiet("/s.mp3")
            clock.advance(by: 30)
            h.origin.update("/s.mp3") { $0.faults.status = 503 }
            let reply = try await h.get(h.url("/s.mp3"))
            #expect(reply.status == 200 && resource.firstMismatch(in: reply.body, at: 0) == nil)
            #expect(Self.status(reply) == "MediaCache; hit; ttl=-20")
        }
    }

    /// What the cache does not keep passes by; the origin's error page says its status; the
    /// proxy's own refusal says so.
    @Test func passThroughErrorsAndRefusals() async throws {
        try await ProxyHarness.withClock { h, _ in
            let secret = Self.serve(h, "/n.mp3", length: 50_000, seed: 153, cacheControl: "no-store")
            let passed = try await h.get(h.url("/n.mp3"))
            #expect(passed.status == 200 && secret.firstMismatch(in: passed.body, at: 0) == nil)
            #expect(Self.status(passed) == "MediaCache; fwd=bypass")
            let missing = try await h.get(h.url("/gone.mp3"))
            #expect(missing.status == 404 && Self.status(missing) == "MediaCache; fwd=uri-miss; fwd-status=404")
            let refused = try await h.get(h.url("/n.mp3"), headers: [("Range", "bytes=x")])
            #expect(refused.status == 400 && Self.status(refused) == "MediaCache; detail=refused")
        }
    }
}
