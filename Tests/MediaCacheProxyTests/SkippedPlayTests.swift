// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// Issue 88, every flag at its default: a fill waits for its play to prove itself. A song left
/// for another after two closed ranges (a skip, as AVPlayer asks) costs the origin what was
/// played; a play that goes on, or one with nothing after it, is still filled whole.
@Suite(.stallLimit, .endToEnd) struct SkippedPlayTests {
    static let length: Int64 = 4 << 20
    static let range: Int64 = 256 << 10

    static func serve(_ names: [String], seed: UInt64, on proxy: ProxyHarness) {
        for (index, name) in names.enumerated() {
            proxy.origin.serve(
                .generated(length: length, seed: seed + UInt64(index), mimeType: "audio/mpeg"), at: "/skip/\(name).mp3")
        }
    }

    /// Reads ranges `first ..< last` (each ``range`` long) of `name` as a player asks them,
    /// closed, and checks each against the origin's bytes.
    static func play(
        _ name: String, ranges: Range<Int64>, seed: UInt64, on proxy: ProxyHarness
    ) async throws {
        for index in ranges {
            let start = index * range
            let reply = try await proxy.get(
                proxy.url("/skip/\(name).mp3"), headers: [("Range", "bytes=\(start)-\(start + range - 1)")])
            #expect(reply.status == 206 && Int64(reply.body.readableBytes) == range, "\(name) range \(index)")
            #expect(DeterministicContent(seed: seed).firstMismatch(in: reply.body, at: start) == nil, "\(name)")
        }
    }

    /// Whether the store holds `name` whole, every byte the origin's.
    static func isWhole(_ name: String, seed: UInt64, on proxy: ProxyHarness) async throws -> Bool {
        let url = proxy.origin.url("/skip/\(name).mp3")
        guard proxy.base.store.spans(for: proxy.base.store.key(for: url)).contains(ByteRange(0, length)) else {
            return false
        }
        let stream = try #require(proxy.base.reader.cachedRead(url, range: ByteRange(0, length)))
        var all = ByteBuffer()
        for try await chunk in stream { all.writeImmutableBuffer(chunk) }
        #expect(
            Int64(all.readableBytes) == length && DeterministicContent(seed: seed).firstMismatch(in: all, at: 0) == nil)
        return true
    }

    /// The proxy, every flag at its default, with a quiet timer the test fires: a fill's
    /// probation passes only when the test says, never because the machine was slow between two
    /// requests.
    static func with(_ body: (ProxyHarness, ManualPauseTimer) async throws -> Void) async throws {
        let timer = ManualPauseTimer()
        var reader = CachingReader.Configuration()
        reader.quietTimer = timer
        try await ProxyHarness.with(reader: reader) { try await body($0, timer) }
    }

    /// Plays `ranges` of `first`, then the first range of `second` (seeds `seed` and `seed + 1`);
    /// then lets the probation pass until no fill runs.
    static func play(
        _ first: String, ranges: Range<Int64>, thenStart second: String, seed: UInt64, on proxy: ProxyHarness,
        timer: ManualPauseTimer
    ) async throws {
        serve([first, second], seed: seed, on: proxy)
        try await play(first, ranges: ranges, seed: seed, on: proxy)
        try await play(second, ranges: 0..<1, seed: seed + 1, on: proxy)
        try await waitUntil {
            timer.fire()
            return proxy.base.reader.fills.progress.isEmpty && proxy.base.reader.activeDownloads == 0
        }
    }

    @Test func aSongSkippedAfterTwoRangesCostsWhatWasPlayed() async throws {
        try await Self.with { proxy, timer in
            try await Self.play("skipped", ranges: 0..<2, thenStart: "next", seed: 880, on: proxy, timer: timer)
            let skipped = proxy.origin.requests("/skip/skipped.mp3").map(\.range)
            #expect(skipped == ["bytes=0-262143", "bytes=262144-524287"], "\(skipped)")
            #expect(proxy.origin.bodyBytesSent("/skip/skipped.mp3") == 2 * Self.range)
            let key = proxy.base.store.key(for: proxy.origin.url("/skip/skipped.mp3"))
            let stored = proxy.base.store.spans(for: key)
            #expect(stored.byteCount == 2 * Self.range && stored.contains(ByteRange(0, 2 * Self.range)), "\(stored)")
            // The song played last has nothing after it: a moment's play, filled whole.
            #expect(try await Self.isWhole("next", seed: 881, on: proxy))
            #expect(proxy.origin.bodyBytesSent("/skip/next.mp3") == Self.length, "nothing fetched twice")
            // What was played of the skipped song reads back as the origin's bytes.
            try await Self.play("skipped", ranges: 0..<2, seed: 880, on: proxy)
            #expect(proxy.origin.requests("/skip/skipped.mp3").count == 2, "replayed from the store")
        }
    }

    @Test func aPlayThatGoesOnPastItsProofIsFilledWholeThoughAnotherFollows() async throws {
        try await Self.with { proxy, timer in
            try await Self.play("kept", ranges: 0..<5, thenStart: "after", seed: 890, on: proxy, timer: timer)
            #expect(try await Self.isWhole("kept", seed: 890, on: proxy))
            #expect(proxy.origin.bodyBytesSent("/skip/kept.mp3") == Self.length, "nothing fetched twice")
            #expect(proxy.origin.requests("/skip/kept.mp3").count <= 6, "a request per range at most, then the rest")
        }
    }
}
