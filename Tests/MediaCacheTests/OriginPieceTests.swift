// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// A host asked in pieces (``CachingReader/Configuration/originPieces``): a long read becomes
/// consecutive ranged requests of at most the piece size, each after the first with `If-Range`
/// (the first piece's ETag), the reader's bytes the origin's; a version that changes between
/// pieces ends the read, no byte of the new version spliced in; an origin that ignores ranges
/// is read as before, in one request.
@Suite(.stallLimit, .endToEnd) struct OriginPieceTests {
    static let piece: Int64 = 256 << 10

    static func configuration() -> CachingReader.Configuration {
        var configuration = CachingReader.Configuration()
        configuration.originPieces = ["127.0.0.1": piece]
        return configuration
    }

    @Test func aLongReadIsAskedInPiecesOfOneVersion() async throws {
        try await Harness.with(reader: Self.configuration()) { h in
            let length: Int64 = 2_000_000
            h.origin.serve(.generated(length: length, seed: 91), at: "/long.mp4")
            let url = h.origin.url("/long.mp4")
            let whole = try await collect(try await h.reader.read(url))
            #expect(whole.readableBytes == Int(length))
            #expect(h.origin.resource(at: "/long.mp4")!.firstMismatch(in: whole, at: 0) == nil)
            let requests = h.origin.requests("/long.mp4").filter { $0.method == "GET" }
            // Consecutive pieces, none longer than the piece size, the later ones under If-Range.
            var next: Int64 = 0
            for (index, request) in requests.enumerated() {
                let range = try #require(request.range.flatMap(Self.parse), "request \(index): \(request)")
                #expect(range.lowerBound == next && range.count <= Self.piece, "request \(index): \(request)")
                next = range.upperBound
                if index > 0 { #expect(request.ifRange == h.origin.resource(at: "/long.mp4")!.etag, "\(request)") }
            }
            #expect(next == length && requests.count == Int((length + Self.piece - 1) / Self.piece), "\(requests)")
            // A range from the middle: pieces from there, to its end.
            h.origin.resetCounters()
            let tail = try await collect(try await h.reader.read(h.origin.url("/long.mp4"), offset: 1_000_000))
            #expect(h.origin.resource(at: "/long.mp4")!.firstMismatch(in: tail, at: 1_000_000) == nil)
            #expect(tail.readableBytes == 1_000_000)
        }
    }

    /// Each piece is a request on a connection of its own from the budget: with one connection
    /// per host, the piece asked ahead waits for the one before it to end before it is asked
    /// (never two requests on one connection), and the read's bytes are the origin's.
    @Test func eachPieceTakesAConnectionOfItsOwnFromTheBudget() async throws {
        var configuration = CachingReader.Configuration()
        configuration.originPieces = ["scripted.example": 64 << 10]
        let budget = ConnectionBudget(limit: 1, ownLimit: 1, logger: configuration.logger)
        let origin = ScriptedOrigin()
        let url = URL(string: "https://scripted.example/long.mp4")!
        let length: Int64 = 200_000
        origin.serve(url, length: length, seed: 5)
        let (metered, _) = OriginStack.compose(
            origin, configuration: configuration, budget: budget, clock: SystemClock())
        let response = try await metered.fetch(url, range: ByteRange(0, length), ifRange: nil, headers: [], as: .player)
        let reading = Task {
            var bytes = ByteBuffer()
            for try await chunk in response.body { bytes.writeImmutableBuffer(chunk) }
            return bytes
        }
        // The first piece holds the one connection; the piece after it waits for it.
        try await waitUntil { budget.usage(of: url).waiting == 1 }
        #expect(origin.exchanges.count == 1 && budget.usage(of: url).inUse == 1)
        for index in 0..<4 {
            try await waitUntil { origin.exchanges.count > index }
            let before = origin.exchanges.prefix(index)
            #expect(before.allSatisfy { $0.takenUpTo == $0.bodyRange.upperBound }, "piece \(index)")
            #expect(budget.usage(of: url).inUse == 1, "piece \(index)")
            origin.exchanges[index].finish()
        }
        let bytes = try await reading.value
        #expect(
            bytes.readableBytes == Int(length) && DeterministicContent(seed: 5).firstMismatch(in: bytes, at: 0) == nil)
        #expect(origin.exchanges.map(\.bodyRange.length) == [65_536, 65_536, 65_536, length - 3 * 65_536])
        #expect(budget.usage(of: url) == (0, 0))
    }

    /// Found by ``TransferScheduleTests`` (seed 1 on one core): a player who joined a prefetch
    /// asked in pieces after its first answer's head waited behind the cache's own share for the
    /// next piece, until the quiet period let the cache's own work go. The download's promotion
    /// now lasts past the head, so the piece asked ahead becomes a player's when the player joins.
    @Test func aPlayerWhoJoinsAPiecedPrefetchMakesTheNextPieceAPlayers() async throws {
        var configuration = CachingReader.Configuration()
        configuration.originPieces = ["scripted.example": 64 << 10]
        configuration.originConnectionsPerHost = 2
        configuration.quietTimer = ManualPauseTimer()  // never fires: no wait may end by it
        try await ScriptedHarness.with(reader: configuration) { h in
            let url = URL(string: "https://scripted.example/long.mp4")!
            let length: Int64 = 200_000
            h.origin.serve(url, length: length, seed: 6)
            let budget = h.reader.fetcher.budget
            let prefetch = Task {
                try await h.reader.prefetch(url, range: ByteRange(0, length), as: .own(.prefetch))
            }
            // The first piece holds the cache's own one connection; the next waits as its own.
            try await waitUntil { h.origin.exchanges.count == 1 && budget.usage(of: url) == (1, 1) }
            let player = Task { try await collect(try await h.reader.read(url, offset: 0, length: length)) }
            // The player joins: the piece asked ahead takes the host's second connection now,
            // while the first piece's body has not ended.
            try await waitUntil { h.origin.exchanges.count == 2 }
            #expect(!h.origin.exchanges[0].isEnded && budget.usage(of: url) == (2, 0))
            for index in 0..<4 {
                try await waitUntil { h.origin.exchanges.count > index }
                h.origin.exchanges[index].finish()
            }
            let bytes = try await player.value
            #expect(
                bytes.readableBytes == Int(length)
                    && DeterministicContent(seed: 6).firstMismatch(in: bytes, at: 0) == nil)
            _ = try await prefetch.value
            #expect(budget.usage(of: url) == (0, 0))
        }
    }

    @Test func aVersionThatChangesBetweenPiecesEndsTheRead() async throws {
        try await Harness.with(reader: Self.configuration()) { h in
            var resource = TestOrigin.Resource.generated(length: 2_000_000, seed: 92)
            resource.etag = "\"one\""
            // After the first piece's head, the origin has a new version (same length, new bytes).
            resource.faults.onBodyBytes = { [origin = h.origin] _ in
                origin.update("/changing.mp4") { changed in
                    guard changed.etag == "\"one\"" else { return }
                    changed = TestOrigin.Resource.generated(length: 2_000_000, seed: 93)
                    changed.etag = "\"two\""
                }
            }
            h.origin.serve(resource, at: "/changing.mp4")
            var bytes = ByteBuffer()
            do {
                for try await chunk in try await h.reader.read(h.origin.url("/changing.mp4")) {
                    bytes.writeImmutableBuffer(chunk)
                }
                Issue.record("the read ended without an error")
            } catch let error as CacheError {
                #expect(error.code == .resourceChanged, "\(error)")
            }
            // What came is the first version's, and no more than its first piece.
            #expect(bytes.readableBytes <= Int(Self.piece))
            #expect(DeterministicContent(seed: 92).firstMismatch(in: bytes, at: 0) == nil)
        }
    }

    @Test func anOriginThatIgnoresRangesIsReadInOneRequest() async throws {
        try await Harness.with(reader: Self.configuration()) { h in
            var resource = TestOrigin.Resource.generated(length: 1_000_000, seed: 94)
            resource.faults.ignoresRanges = true
            h.origin.serve(resource, at: "/whole.mp3")
            let whole = try await collect(try await h.reader.read(h.origin.url("/whole.mp3")))
            #expect(h.origin.resource(at: "/whole.mp3")!.firstMismatch(in: whole, at: 0) == nil)
            #expect(whole.readableBytes == 1_000_000)
            #expect(h.origin.requests("/whole.mp3").filter { $0.method == "GET" }.count == 1)
        }
    }

    /// `bytes=a-b` as the half-open range `a..<b+1`.
    static func parse(_ text: String) -> Range<Int64>? {
        guard text.hasPrefix("bytes=") else { return nil }
        let parts = text.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Int64(parts[0]), let end = Int64(parts[1]) else { return nil }
        return start..<(end + 1)
    }
}
