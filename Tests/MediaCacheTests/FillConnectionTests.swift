// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// A fill goes on with the connection of the play that started it; once no player reads it,
/// that connection is a player's to have: a player that waits for a connection to the host
/// gets it at the fill's next chunk, and the fill goes on later as the cache's own, behind
/// players (once none waits on the origin). Against the scripted origin: each byte comes when
/// the test sends it.
@Suite(.stallLimit) struct FillConnectionTests {
    static let episode = URL(string: "https://scripted.example/episode.mp4")!
    static let other = URL(string: "https://scripted.example/other.mp4")!
    static let third = URL(string: "https://scripted.example/third.mp4")!

    @Test func aFillNoPlayerReadsLetsItsConnectionGoToAWaitingPlayer() async throws {
        var configuration = CachingReader.Configuration()
        configuration.fillOnPlay = .all
        configuration.originConnectionsPerHost = 2  // one of the cache's own at most
        try await ScriptedHarness.with(reader: configuration) { h in
            // Short enough that the 128 KiB the player reads is more than half: a play that went
            // on, whose fill new plays leave running (a play abandoned early stops its fill).
            let length: Int64 = 240 << 10
            h.origin.serve(Self.episode, length: length, seed: 41)
            h.origin.serve(Self.other, length: 300_000, seed: 42)
            h.origin.serve(Self.third, length: 300_000, seed: 43)
            // A player starts the episode, reads 128 KiB and leaves: the fill goes on, on the
            // play's connection.
            let first = try await h.reader.read(Self.episode)
            let playing = Task {
                var taken: Int64 = 0
                for try await chunk in first {
                    #expect(DeterministicContent(seed: 41).firstMismatch(in: chunk, at: taken) == nil)
                    taken += Int64(chunk.readableBytes)
                    if taken >= 128 << 10 { break }
                }
                first.cancel()
            }
            try await waitUntil { h.origin.exchanges.count == 1 }
            h.origin.exchanges[0].send(128 << 10)
            try await playing.value
            try await waitUntil { !h.reader.fills.progress.isEmpty }
            // Two more players: the second takes the other connection, the third waits for one.
            let second = Task { try await collect(try await h.reader.read(Self.other)) }
            try await waitUntil { h.origin.exchanges.count == 2 }
            let third = Task { try await collect(try await h.reader.read(Self.third)) }
            try await waitUntil { h.reader.fetcher.budget.playersWait(for: Self.third) }
            // The fill's next chunk: it lets the connection go, and the third player has it.
            h.origin.exchanges[0].send(64 << 10)
            try await waitUntil { h.origin.exchanges.count == 3 }
            #expect(h.origin.exchanges[2].url == Self.third)
            try await waitUntil { h.origin.exchanges[0].isCancelled }
            h.origin.exchanges[2].finish()
            let bytes = try await third.value
            #expect(
                bytes.readableBytes == 300_000 && DeterministicContent(seed: 43).firstMismatch(in: bytes, at: 0) == nil)
            // The second player gets its bytes; then, no player waiting, the fill goes on with a
            // request of its own from where it was, and stores the episode whole.
            h.origin.exchanges[1].finish()
            let other = try await second.value
            #expect(
                other.readableBytes == 300_000 && DeterministicContent(seed: 42).firstMismatch(in: other, at: 0) == nil)
            try await waitUntil { h.origin.exchanges.count == 4 }
            let resumed = h.origin.exchanges[3]
            #expect(resumed.url == Self.episode && resumed.range?.lowerBound == (128 << 10) + (64 << 10))
            resumed.finish()
            try await waitUntil { h.reader.fills.progress.isEmpty }
            try await waitUntil { h.store.spans(for: h.store.key(for: Self.episode)).contains(ByteRange(0, length)) }
            let stored = try await collect(try #require(h.reader.cachedRead(Self.episode, range: ByteRange(0, length))))
            #expect(DeterministicContent(seed: 41).firstMismatch(in: stored, at: 0) == nil)
            #expect(h.origin.exchanges.count == 4, "\(h.origin.exchanges.map(\.url.lastPathComponent))")
        }
    }
}
