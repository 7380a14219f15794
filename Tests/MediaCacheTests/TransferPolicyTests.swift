// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Each rule of a transfer's policy, without I/O: what it does next for what it sees.
@Suite(.stallLimit) struct TransferPolicyTests {
    typealias Policy = TransferPolicy
    typealias Situation = TransferPolicy.Situation

    static let player = Situation(servesPlayer: true)
    static let nobody = Situation(servesPlayer: false)
    static var waitedFor: Situation {
        var situation = nobody
        situation.playerWaitsForConnection = true
        return situation
    }

    static func answer(covered: Bool = true, length: Int64? = 1_000) -> Policy.Answer {
        Policy.Answer(
            stores: true, isStorable: true, isFullBody: false, isFilling: false, length: length, isCovered: covered)
    }

    @Test func aPlayersRequestIsAPlayersAndTheCachesOwnYieldsFirst() {
        var played = Policy(startedBy: .player, answered: false)
        let r1 = played.next(Self.player)
        #expect(r1 == .send(.player))
        // The cache's own work gives way to players before its request, then asks as its kind.
        var pinned = Policy(startedBy: .own(.preload), answered: false)
        let r2 = pinned.next(Self.nobody)
        #expect(r2 == .yield)
        #expect(pinned.holdsConnection == false, "it yields holding nothing")
        let r3 = pinned.yielded(Self.nobody)
        #expect(r3 == .send(.own(.preload)))
        // A player that joined while it yielded makes the request a player's.
        var joined = Policy(startedBy: .own(.readAhead), answered: false)
        let r4 = joined.next(Self.nobody)
        #expect(r4 == .yield)
        #expect(joined.endsWait(Self.player))
        let r5 = joined.yielded(Self.player)
        #expect(r5 == .send(.player))
        // A player's download no player reads any more (a fill) asks as a fill.
        var fill = Policy(startedBy: .player, answered: false)
        let r6 = fill.next(Self.nobody)
        #expect(r6 == .yield)
        let r7 = fill.yielded(Self.nobody)
        #expect(r7 == .send(.own(.fill)))
    }

    @Test func onlyAPlayersDownloadOfACoveredFileFills() {
        var played = Policy(startedBy: .player, answered: true)
        let r8 = played.answered(Self.answer())
        #expect(r8 == .receive(filling: true))
        var uncovered = Policy(startedBy: .player, answered: true)
        let r9 = uncovered.answered(Self.answer(covered: false))
        #expect(r9 == .receive(filling: false))
        var lengthless = Policy(startedBy: .player, answered: true)
        let r10 = lengthless.answered(Self.answer(length: nil))
        #expect(r10 == .receive(filling: false))
        var own = Policy(startedBy: .own(.prefetch), answered: true)
        let r11 = own.answered(Self.answer())
        #expect(r11 == .receive(filling: false), "the cache's own work never fills")
        var unstored = Self.answer()
        unstored.isStorable = false
        var noStore = Policy(startedBy: .player, answered: true)
        let r12 = noStore.answered(unstored)
        #expect(r12 == .receive(filling: false))
        var filling = Self.answer()
        filling.isFilling = true
        var again = Policy(startedBy: .player, answered: true)
        let r13 = again.answered(filling)
        #expect(r13 == .receive(filling: false), "a fill is started once")
    }

    @Test func aChunkForAPlayerIsDeliveredAtOnce() {
        var policy = Policy(startedBy: .own(.pin, pacer: Self.pacer), answered: true)
        var situation = Self.player
        situation.playerWaitsForConnection = true  // another player's wait: this one serves one
        let r14 = policy.chunkArrived(situation)
        #expect(r14 == .deliver, "no yield, no pacing, no letting go")
    }

    @Test func aChunkNoPlayerReadsYieldsThenKeepsToItsRate() {
        var policy = Policy(startedBy: .own(.pin, pacer: Self.pacer), answered: true)
        let r15 = policy.chunkArrived(Self.nobody)
        #expect(r15 == .yield)
        let r16 = policy.yielded(Self.nobody)
        #expect(r16 == .pace)
        let r17 = policy.paced(Self.nobody)
        #expect(r17 == .deliver)
        // The next chunk yields again (at once when no player waited meanwhile).
        let r18 = policy.chunkArrived(Self.nobody)
        #expect(r18 == .yield)
        var unpaced = Policy(startedBy: .own(.preload), answered: true)
        let r19 = unpaced.chunkArrived(Self.nobody)
        #expect(r19 == .yield)
        let r20 = unpaced.yielded(Self.nobody)
        #expect(r20 == .deliver, "no pacer: no pace")
    }

    /// Whatever it was doing with a chunk in hand, a transfer no player reads lets its connection
    /// go when a player waits for one: at the chunk, after a yield, after a pause for its rate.
    @Test func aPlayerWaitingForAConnectionGetsItFromWorkNoPlayerReads() {
        var atChunk = Policy(startedBy: .player, answered: true)
        let r21 = atChunk.chunkArrived(Self.waitedFor)
        #expect(r21 == .deliverAndLetGo)
        #expect(!atChunk.holdsConnection)
        let r22 = atChunk.next(Self.waitedFor)
        #expect(r22 == .yield, "the rest waits for players first")

        var yielding = Policy(startedBy: .own(.recording), answered: true)
        let r23 = yielding.chunkArrived(Self.nobody)
        #expect(r23 == .yield)
        #expect(yielding.endsWait(Self.waitedFor), "the wait ends when a player waits for a connection")
        let r24 = yielding.yielded(Self.waitedFor)
        #expect(r24 == .deliverAndLetGo)

        var pacing = Policy(startedBy: .own(.pin, pacer: Self.pacer), answered: true)
        let r25 = pacing.chunkArrived(Self.nobody)
        #expect(r25 == .yield)
        let r26 = pacing.yielded(Self.nobody)
        #expect(r26 == .pace)
        #expect(pacing.endsWait(Self.waitedFor))
        let r27 = pacing.paced(Self.waitedFor)
        #expect(r27 == .deliverAndLetGo)

        // Before a request it holds nothing: a player's wait for a connection does not end its yield.
        var idle = Policy(startedBy: .own(.prefetch), answered: false)
        let r28 = idle.next(Self.waitedFor)
        #expect(r28 == .yield)
        #expect(!idle.endsWait(Self.waitedFor))
    }

    @Test func aFillStopsOnAMeteredNetworkAndGoesOnPastStoredBytes() {
        var policy = Policy(startedBy: .player, answered: true)
        var metered = Self.player
        metered.isFilling = true
        metered.fillsAllowed = false
        let r29 = policy.chunkArrived(metered)
        #expect(r29 == .stopFilling(.metered))
        metered.isFilling = false
        let r30 = policy.chunkArrived(metered)
        #expect(r30 == .deliver, "its player's bytes still come")
        var filling = Self.nobody
        filling.isFilling = true
        #expect(policy.goesOnPastStoredBytes(filling))
        #expect(!policy.goesOnPastStoredBytes(Self.player), "a download that is no fill has served its readers")
    }

    /// A fill whose play is not proven fetches nothing past its players: it waits, its requests
    /// end where its players' reads end, and a skip ends it; a player's bytes still come.
    @Test func aFillWaitsForItsPlayToProveItself() {
        func filling(_ play: Policy.PlayProof, servesPlayer: Bool = false) -> Situation {
            var situation = Situation(servesPlayer: servesPlayer, isFilling: true)
            situation.play = play
            return situation
        }
        var idle = Policy(startedBy: .player, answered: false)
        let pendingIdle = idle.next(filling(.pending))
        #expect(pendingIdle == .awaitProof)
        #expect(!idle.holdsConnection && !idle.endsWait(Self.waitedFor), "waiting, it holds no connection")
        #expect(idle.endsWait(filling(.pending, servesPlayer: true)), "a player who joins ends the wait")
        let joined = idle.proofAwaited(filling(.pending, servesPlayer: true))
        #expect(joined == .send(.player))
        #expect(idle.requestEnd(from: 100, holeEnd: 5_000, playersEnd: 300, filling(.pending)) == 300)
        #expect(idle.requestEnd(from: 100, holeEnd: 5_000, playersEnd: 300, filling(.proven)) == 5_000)
        #expect(idle.requestEnd(from: 100, holeEnd: 5_000, playersEnd: nil, filling(.pending)) == 5_000)
        #expect(idle.requestEnd(from: 100, holeEnd: 200, playersEnd: 300, filling(.pending)) == 200)
        var notFilling = filling(.pending)
        notFilling.isFilling = false
        #expect(idle.requestEnd(from: 100, holeEnd: 5_000, playersEnd: 300, notFilling) == 5_000)

        var reading = Policy(startedBy: .player, answered: true)
        let forPlayer = reading.chunkArrived(filling(.pending, servesPlayer: true))
        #expect(forPlayer == .deliver, "its player's bytes come at once")
        let past = reading.chunkArrived(filling(.pending))
        #expect(past == .awaitProof)
        #expect(reading.endsWait(Self.waitedFor), "holding its connection, a waiting player ends the wait")
        var waited = filling(.pending)
        waited.playerWaitsForConnection = true
        let letGo = reading.proofAwaited(waited)
        #expect(letGo == .deliverAndLetGo)
        let skippedIdle = reading.next(filling(.skipped))
        #expect(skippedIdle == .stopFilling(.skipped))

        var skipped = Policy(startedBy: .player, answered: true)
        let ends = skipped.chunkArrived(filling(.skipped))
        #expect(ends == .stopFilling(.skipped))
        var proven = Policy(startedBy: .player, answered: true)
        let goesOn = proven.chunkArrived(filling(.proven))
        #expect(goesOn == .yield, "a proven fill no player reads goes on as the cache's own")
    }

    @Test func aFailureOrTheBodysEndLeavesNothingHeldAndSaysWhatNext() {
        var policy = Policy(startedBy: .player, answered: false)
        let r31 = policy.next(Self.player)
        #expect(r31 == .send(.player))
        #expect(policy.holdsConnection)
        let r31b = policy.failed(nil)
        #expect(r31b == .retry(attempt: 1), "a broken connection is asked again")
        #expect(!policy.holdsConnection)
        let r32 = policy.next(Self.player)
        #expect(r32 == .send(.player))
        let r32b = policy.answered(Self.answer(covered: false))
        #expect(r32b == .receive(filling: false))
        let r33 = policy.chunkArrived(Self.player)
        #expect(r33 == .deliver)
        let r34 = policy.bodyEnded(.whole, Self.player)
        #expect(r34 == .requestNext)
        #expect(!policy.holdsConnection)
        let r35 = policy.bodyEnded(.letGo, Self.nobody)
        #expect(r35 == .requestNext, "the rest with a request of the cache's own")
    }

    /// Bytes stored ahead by another download: a fill goes on at the next hole, any other
    /// download has served its readers.
    @Test func bytesStoredAheadCompleteAllButAFill() {
        var policy = Policy(startedBy: .player, answered: true)
        let r36 = policy.bodyEnded(.storedAhead, Self.player)
        #expect(r36 == .complete)
        var filling = Self.nobody
        filling.isFilling = true
        let r37 = policy.bodyEnded(.storedAhead, filling)
        #expect(r37 == .requestNext)
    }

    /// Failures in a row are retried up to the limit, each after a longer pause; a delivered chunk
    /// starts the count again; a failure that no retry mends (a refusal) gives up at once.
    @Test func failuresAreRetriedWhileBytesComeAndRefusalsAreNot() {
        var policy = Policy(startedBy: .player, answered: false, maxRetries: 2)
        let r38 = policy.failed(.originTimedOut)
        #expect(r38 == .retry(attempt: 1))
        let r39 = policy.failed(.originUnavailable)  // a body cut short, too
        #expect(r39 == .retry(attempt: 2))
        _ = policy.next(Self.player)
        _ = policy.answered(Self.answer(covered: false))
        let r40 = policy.chunkArrived(Self.player)
        #expect(r40 == .deliver)
        let r41 = policy.failed(.originUnavailable)
        #expect(r41 == .retry(attempt: 1), "bytes came: the count starts again")
        let r42 = policy.failed(.originUnavailable)
        #expect(r42 == .retry(attempt: 2))
        let r43 = policy.failed(.originUnavailable)
        #expect(r43 == .giveUp, "past the limit")
        var refused = Policy(startedBy: .player, answered: false)
        let r44 = refused.failed(.rangeNotSatisfiable)
        #expect(r44 == .giveUp)
        let r45 = refused.failed(.resourceChanged)
        #expect(r45 == .giveUp)
    }

    /// An answer of another version than the bytes held is never read on: the held version goes.
    @Test func anAnswerOfAnotherVersionDropsTheHeldOne() {
        var policy = Policy(startedBy: .player, answered: false)
        _ = policy.next(Self.player)
        var changed = Self.answer()
        changed.isOtherVersion = true
        let r46 = policy.answered(changed)
        #expect(r46 == .dropVersion)
        #expect(!policy.holdsConnection)
    }

    static let pacer = DownloadPacer(rates: [], store: nil)
}
