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

extension HTTPSemanticsTests {
    /// `stale-while-revalidate` (RFC 5861): within the window a stale answer is served at
    /// once while one revalidation runs in the background, which brings the new version for
    /// the next request; past the window the request waits for the origin, never stale.
    @Test func staleWhileRevalidateServesStaleOnlyWithinItsWindow() async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await ProxyHarness.with(store: store, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            var resource = TestOrigin.Resource.generated(length: 5_000, seed: 100, mimeType: "audio/mpeg")
            resource.cacheControl = "max-age=1, stale-while-revalidate=60"
            h.origin.serve(resource, at: "/swr.mp3")
            let first = try await h.get(h.url("/swr.mp3"))
            #expect(first.status == 200 && resource.firstMismatch(in: first.body, at: 0) == nil)

            clock.advance(by: 10)  // stale, within the window
            h.origin.changeContent(at: "/swr.mp3")
            let second = try await h.get(h.url("/swr.mp3"))
            #expect(
                second.status == 200 && resource.firstMismatch(in: second.body, at: 0) == nil,
                "the stored version, at once")
            try await waitUntil {
                h.origin.requests("/swr.mp3").count == 2 && h.base.reader.backgroundRevalidationCount == 0
            }
            #expect(h.origin.requests("/swr.mp3").last?.header("If-None-Match") == "\"v1\"")
            let changed = try #require(h.origin.resource(at: "/swr.mp3"))
            let third = try await h.get(h.url("/swr.mp3"))
            #expect(
                third.status == 200 && changed.firstMismatch(in: third.body, at: 0) == nil
                    && third.body.readableBytes == 5_000, "the new version")
            #expect(h.origin.requests("/swr.mp3").count == 2, "\(h.origin.requests("/swr.mp3"))")

            clock.advance(by: 100)  // past max-age and the window
            h.origin.changeContent(at: "/swr.mp3")
            let before = h.origin.requests("/swr.mp3").count
            let fourth = try await h.get(h.url("/swr.mp3"))
            let latest = try #require(h.origin.resource(at: "/swr.mp3"))
            #expect(
                fourth.status == 200 && latest.firstMismatch(in: fourth.body, at: 0) == nil,
                "past the window: never stale")
            #expect(h.origin.requests("/swr.mp3").count > before && h.base.reader.backgroundRevalidationCount == 0)
        }
    }

    /// Eight live playlists without validators, each polled by eight players at once every
    /// 4.5 s: every answer is the version the origin has then, and each poll of a playlist
    /// costs one origin request, shared by its eight players.
    @Test func eightPlayersOnEachOfEightLivePlaylistsNeverGetAnOldOne() async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await ProxyHarness.with(store: store, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            @Sendable func playlist(_ index: Int, _ sequence: Int) -> TestOrigin.Resource {
                let text =
                    "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:\(sequence)\n#EXTINF:2,\nl\(index)s\(sequence).ts\n"
                var resource = TestOrigin.Resource(
                    body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl", etag: nil,
                    lastModified: nil)
                resource.cacheControl = "max-age=1"
                return resource
            }
            for index in 0..<8 { h.origin.serve(playlist(index, 0), at: "/live\(index).m3u8") }
            for sequence in 0..<4 {
                if sequence > 0 {
                    clock.advance(by: 4.5)
                    for index in 0..<8 { h.origin.update("/live\(index).m3u8") { $0 = playlist(index, sequence) } }
                }
                try await withThrowingTaskGroup(of: (Int, String).self) { group in
                    for index in 0..<8 {
                        for _ in 0..<8 {
                            group.addTask { (index, String(buffer: try await h.get(h.url("/live\(index).m3u8")).body)) }
                        }
                    }
                    for try await (index, text) in group {
                        #expect(
                            text.contains("#EXT-X-MEDIA-SEQUENCE:\(sequence)\n")
                                && text.contains("l\(index)s\(sequence).ts"),
                            "poll \(sequence), playlist \(index): \(text)")
                    }
                }
                for index in 0..<8 {
                    #expect(
                        h.origin.requests("/live\(index).m3u8").count == sequence + 1,
                        "playlist \(index), poll \(sequence): one origin request, not \(h.origin.requests("/live\(index).m3u8"))"
                    )
                }
            }
        }
    }

    /// The origin's fields come back as it sent them, an odd `Content-Range` on a whole
    /// answer too; a partial answer carries only the proxy's own.
    @Test func anOddFieldOnAWholeAnswerComesBackAsSent() async throws {
        try await ProxyHarness.with { h in
            var resource = TestOrigin.Resource.generated(length: 5_000, seed: 101, mimeType: "audio/mpeg")
            resource.faults.ignoresRanges = true
            resource.extraHeaders = [("Content-Range", "bytes 0-4999/5000"), ("X-Odd", "a, b")]
            h.origin.serve(resource, at: "/odd.mp3")
            for _ in 0..<2 {
                let whole = try await h.get(h.url("/odd.mp3"))
                #expect(whole.status == 200 && resource.firstMismatch(in: whole.body, at: 0) == nil)
                #expect(
                    whole.headers["content-range"] == ["bytes 0-4999/5000"] && whole.headers["x-odd"] == ["a, b"],
                    "\(whole.headers)")
            }
            let part = try await h.get(h.url("/odd.mp3"), headers: [("Range", "bytes=10-19")])
            #expect(part.status == 206 && part.headers["content-range"] == ["bytes 10-19/5000"], "\(part.headers)")
            #expect(h.origin.requests("/odd.mp3").count == 1)
        }
    }

    /// A live playlist (`max-age=1`, target duration 2 s) polled every 4.5 s is never older
    /// than its freshness allows: each poll gets the version the origin has then, for one
    /// origin request. Without validators every version has the same length, so only the
    /// answer itself tells them apart.
    @Test(arguments: [true, false])
    func aLivePlaylistPolledEvery4Point5SecondsIsNeverOld(validators: Bool) async throws {
        let clock = ManualClock(start: Date())
        var store = CacheStore.Configuration()
        store.clock = clock
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.clock = clock
        try await ProxyHarness.with(store: store, fetcher: fetcher) { h in
            h.origin.useClock(clock)
            @Sendable func playlist(_ sequence: Int) -> TestOrigin.Resource {
                let text =
                    "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:\(sequence)\n#EXTINF:2,\ns\(sequence).ts\n#EXTINF:2,\ns\(sequence + 1).ts\n"
                var resource = TestOrigin.Resource(
                    body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl")
                resource.etag = validators ? "\"p\(sequence)\"" : nil
                resource.lastModified = nil
                resource.cacheControl = "max-age=1"
                return resource
            }
            for sequence in 0..<5 {
                if sequence > 0 { clock.advance(by: 4.5) }
                if sequence == 0 {
                    h.origin.serve(playlist(sequence), at: "/live/index.m3u8")
                } else {
                    h.origin.update("/live/index.m3u8") { $0 = playlist(sequence) }
                }
                let reply = try await h.get(h.url("/live/index.m3u8"))
                let text = String(buffer: reply.body)
                #expect(
                    reply.status == 200 && text.contains("#EXT-X-MEDIA-SEQUENCE:\(sequence)\n")
                        && text.contains("s\(sequence + 1).ts"), "poll \(sequence): \(text)")
                #expect(h.origin.requests("/live/index.m3u8").count == sequence + 1, "one origin request per poll")
            }
        }
    }
}

extension HTTPSemanticsTests {
    /// A `301` without a `Location` cannot be followed: it is the origin's answer, and reaches
    /// the player as every other status does (not a `502`), its body with it, and is reused
    /// for its explicit freshness (RFC 9111 §3: a `301` is cacheable by default).
    @Test func aRedirectWithoutLocationReachesThePlayerAsItCame() async throws {
        try await ProxyHarness.with { h in
            var moved = TestOrigin.Resource.generated(length: 1_000, seed: 3, mimeType: "text/html")
            moved.faults.status = 301
            moved.faults.statusBody = Array("<p>Moved, somewhere.</p>".utf8)
            moved.cacheControl = "max-age=600"
            h.origin.serve(moved, at: "/nowhere.mp4")
            for round in 0..<2 {
                let reply = try await h.get(h.url("/nowhere.mp4"))
                #expect(
                    reply.status == 301 && String(buffer: reply.body) == "<p>Moved, somewhere.</p>",
                    "round \(round): \(reply.status)")
                #expect(reply.headers.first(name: "location") == nil)
            }
            #expect(
                h.origin.requests("/nowhere.mp4").count == 1,
                "the second from the stored answer: \(h.origin.requests("/nowhere.mp4"))")
        }
    }
}
