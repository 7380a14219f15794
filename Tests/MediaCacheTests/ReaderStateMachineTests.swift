// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// A read's decisions without I/O: what it gives from the store, from a download's memory,
/// when it pauses, joins, waits, finishes and fails, for every download state.
@Suite(.stallLimit) struct ReaderStateMachineTests {
    typealias Machine = ReaderStateMachine
    typealias Seen = ReaderStateMachine.Observation

    struct Failure: Error {}

    static func held(_ count: Int) -> ByteBuffer { ByteBuffer(repeating: 9, count: count) }

    static func download(
        _ state: DownloadStateMachine.State, start: Int64 = 0, end: Int64 = 1000, position: Int64,
        held: ByteBuffer? = nil
    ) -> Machine.DownloadView {
        Machine.DownloadView(start: start, end: end, position: position, state: state, held: held)
    }

    /// A read of 100..<1000 moved to `cursor`.
    static func machine(at cursor: Int64 = 100, pauses: Bool = true) -> Machine {
        var machine = Machine(range: ByteRange(100, 1000), pausesAtHoles: pauses)
        if cursor > 100 { machine.advance(to: cursor) }
        return machine
    }

    @Test func storedBytesAreReadFromTheStoreAndTheEndFinishes() {
        var machine = Self.machine()
        #expect(machine.next(Seen(stored: ByteRange(0, 500))) == .readStored(span: ByteRange(0, 500)))
        machine.advance(to: 1000)
        #expect(machine.next(Seen(stored: nil)) == .finish(storedUpTo: 1000))
    }

    /// At a download's front its memory wins; a reader further behind reads the longer stored
    /// span in one part, except from an encrypted entry, where memory always wins.
    @Test func heldBytesWinAtTheFrontAndAlwaysWhenEncrypted() {
        var machine = Self.machine()
        let chunk = Self.held(64)
        let front = Self.download(.receiving, position: 164, held: chunk)
        #expect(machine.next(Seen(stored: ByteRange(0, 164), download: front)) == .takeHeld(chunk))
        #expect(machine.next(Seen(stored: nil, download: front)) == .takeHeld(chunk))
        let behind = Self.download(.receiving, position: 900, held: chunk)
        #expect(machine.next(Seen(stored: ByteRange(0, 900), download: behind)) == .readStored(span: ByteRange(0, 900)))
        #expect(machine.next(Seen(stored: ByteRange(0, 900), download: behind, encrypted: true)) == .takeHeld(chunk))
        // A download that has ended still gives what it holds (bytes it does not store).
        #expect(
            machine.next(Seen(stored: nil, download: Self.download(.completed, position: 1000, held: chunk)))
                == .takeHeld(chunk))
    }

    /// Right after stored bytes, at a hole, the read pauses once per cursor, then joins a
    /// download; at the range's start, after bytes not stored, or with no delay it joins at once.
    @Test func aHoleAfterStoredBytesPausesOncePerCursor() {
        var machine = Self.machine(at: 500)
        let hole = Seen(stored: nil, storedBefore: true)
        #expect(machine.next(hole) == .pause)
        machine.paused()
        #expect(machine.next(Seen(stored: ByteRange(0, 550))) == .readStored(span: ByteRange(0, 550)))
        machine.advance(to: 550)
        #expect(machine.next(hole) == .pause, "a new cursor pauses again")
        machine.paused()
        #expect(machine.next(hole) == .attach(at: 550))
        var notAfterStored = Self.machine(at: 600)
        #expect(notAfterStored.next(Seen(stored: nil, storedBefore: false)) == .attach(at: 600))
        var atStart = Self.machine()
        #expect(atStart.next(hole) == .attach(at: 100), "nothing given yet: no player is leaving")
        var noDelay = Self.machine(at: 500, pauses: false)
        #expect(noDelay.next(hole) == .attach(at: 500))
    }

    /// Which reads pause at all: those to the resource's end (or of an unknown length); a
    /// closed range that stops short of the end asks for its holes at once.
    @Test func onlyAReadToTheResourcesEndPauses() {
        #expect(ReaderStateMachine.pausesAtHoles(reading: ByteRange(100, 1_000), of: 1_000))
        #expect(ReaderStateMachine.pausesAtHoles(reading: ByteRange(100, 1_000), of: nil))
        #expect(!ReaderStateMachine.pausesAtHoles(reading: ByteRange(100, 999), of: 1_000))
        #expect(!ReaderStateMachine.pausesAtHoles(reading: ByteRange(0, 2), of: 1_000))
    }

    /// Once the read has waited on the origin its client takes bytes as they come: a later
    /// hole after stored bytes is asked for at once (a read across five holes of a file read
    /// at random paused 20 ms at each). Before that, a hole after stored bytes pauses.
    @Test func aReadThatHasWaitedOnTheOriginDoesNotPauseAgain() {
        var machine = Self.machine()
        #expect(machine.next(Seen(stored: nil)) == .attach(at: 100))
        machine.advance(to: 300)
        #expect(machine.next(Seen(stored: ByteRange(300, 400))) == .readStored(span: ByteRange(300, 400)))
        machine.advance(to: 400)
        #expect(machine.next(Seen(stored: nil, storedBefore: true)) == .attach(at: 400))
        var fruitless = Self.machine(at: 500)
        let ended = Self.download(.completed, start: 450, end: 900, position: 450)
        #expect(fruitless.next(Seen(stored: nil, storedBefore: false, download: ended)) == .attach(at: 500))
        fruitless.advance(to: 600)
        #expect(fruitless.next(Seen(stored: nil, storedBefore: true)) == .attach(at: 600))
    }

    /// A download that does not cover the cursor, or none, means joining another.
    @Test func aCursorOutsideTheDownloadJoinsAnother() {
        var machine = Self.machine(at: 500)
        #expect(
            machine.next(Seen(stored: nil, download: Self.download(.receiving, start: 0, end: 400, position: 300)))
                == .attach(at: 500))
        #expect(
            machine.next(Seen(stored: nil, download: Self.download(.receiving, start: 600, end: 900, position: 600)))
                == .attach(at: 500))
    }

    /// On the download that covers the cursor: wait while it runs (receiving, awaiting its
    /// answer, resuming); look again when it has passed the cursor; fail when it failed.
    @Test func onTheCoveringDownloadTheReadWaitsLooksAgainOrFails() {
        var machine = Self.machine(at: 500)
        for state in [DownloadStateMachine.State.awaitingResponse, .receiving, .resuming(failures: 2)] {
            #expect(machine.next(Seen(stored: nil, download: Self.download(state, position: 500))) == .waitForBytes)
        }
        #expect(machine.next(Seen(stored: nil, download: Self.download(.receiving, position: 700))) == .lookAgain)
        #expect(
            machine.next(Seen(stored: nil, download: Self.download(.receiving, position: 700), hasEntry: false))
                == .fail(.lost(at: 500)))
        let failed = machine.next(Seen(stored: nil, download: Self.download(.failed(Failure()), position: 500)))
        guard case .fail(.download(let error)) = failed else {
            Issue.record("a failed download fails the read: \(failed)")
            return
        }
        #expect(error is Failure)
        // A failed download fails the read wherever it was.
        #expect(
            machine.next(
                Seen(stored: nil, download: Self.download(.failed(Failure()), start: 0, end: 100, position: 100)))
                == .fail(.download(Failure())))
    }

    /// Downloads that end before the cursor are replaced, three in a row at most; a byte
    /// given in between starts the count again.
    @Test func downloadsEndingBeforeTheCursorAreReplacedThreeTimesAtMost() {
        var machine = Self.machine(at: 500)
        for state in [DownloadStateMachine.State.completed, .cancelled, .completed] {
            #expect(machine.next(Seen(stored: nil, download: Self.download(state, position: 450))) == .attach(at: 500))
        }
        #expect(
            machine.next(Seen(stored: nil, download: Self.download(.completed, position: 450)))
                == .fail(.fruitless(at: 500)))
        var again = Self.machine(at: 500)
        for round in 0..<10 {
            #expect(
                again.next(Seen(stored: nil, download: Self.download(.completed, position: 450)))
                    == .attach(at: 500 + Int64(round)))
            again.advance(to: 501 + Int64(round))
        }
    }

    @Test func aClosedReadFailsWhateverItSees() {
        var machine = Self.machine()
        machine.close()
        #expect(machine.next(Seen(stored: ByteRange(0, 1000))) == .fail(.closed))
        #expect(
            machine.next(Seen(stored: nil, download: Self.download(.receiving, position: 100, held: Self.held(10))))
                == .fail(.closed))
    }

    @Test func aBodyStreamedThroughIsReadUntilTheRangeEnds() {
        var machine = Self.machine()
        #expect(machine.next(Seen(passesThrough: true)) == .readPassThrough)
        machine.advance(to: 1000)
        #expect(machine.next(Seen(passesThrough: true)) == .finish(storedUpTo: 1000))
    }

    /// Random observations never move the cursor backwards or past the range, and every
    /// action is one the observation allows.
    @Test func randomObservationsGiveOnlyAllowedActions() {
        var random = UInt64(0x5eed)
        func next(_ bound: Int64) -> Int64 {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int64((random >> 33) % UInt64(bound))
        }
        let states: [DownloadStateMachine.State] = [
            .awaitingResponse, .receiving, .resuming(failures: 1), .completed, .cancelled, .failed(Failure()),
        ]
        for _ in 0..<2000 {
            var machine = Self.machine(at: 100 + next(900), pauses: next(2) == 0)
            for _ in 0..<20 {
                let cursor = machine.cursor
                let storedEnd = cursor + next(50)
                var seen = Seen(
                    stored: next(2) == 0 && storedEnd > cursor ? ByteRange(cursor - next(10), storedEnd) : nil,
                    storedBefore: next(2) == 0,
                    encrypted: next(4) == 0, hasEntry: next(8) != 0)
                if next(3) != 0 {
                    let start = next(1000)
                    seen.download = Self.download(
                        states[Int(next(Int64(states.count)))], start: start, end: start + next(1000) + 1,
                        position: start + next(500), held: next(2) == 0 ? Self.held(Int(next(64)) + 1) : nil)
                }
                let action = machine.next(seen)
                switch action {
                case .takeHeld: #expect(seen.download?.held != nil)
                case .readStored(let span):
                    #expect(seen.hasEntry && span.lowerBound <= cursor && cursor < span.upperBound)
                case .pause:
                    #expect(
                        machine.pausesAtHoles && !machine.hasWaitedOnOrigin && seen.storedBefore
                            && (seen.stored == nil || !seen.hasEntry))
                case .attach(let at): #expect(at == cursor)
                case .waitForBytes: #expect(seen.download.map { !$0.state.isTerminal && $0.position <= cursor } == true)
                case .finish: #expect(cursor == 1000)
                case .lookAgain, .fail, .readPassThrough: break
                }
                if case .pause = action { machine.paused() }
                if case .takeHeld = action { machine.advance(to: min(1000, cursor + 1)) }
                if case .readStored = action { machine.advance(to: min(1000, cursor + 1)) }
                #expect(machine.cursor >= cursor && machine.cursor <= 1000)
            }
        }
    }
}

extension ReaderStateMachineTests {
    /// The pause at a hole: `holeDelay` after a few cached bytes, the time a 40 Mbit/s client
    /// takes to take in a long cached run (a preloaded item's seconds), 500 ms at most.
    @Test func thePauseAtAHoleGrowsWithTheCachedBytesJustGiven() {
        let configuration = CachingReader.Configuration()
        #expect(configuration.holePause(afterCached: 0) == .milliseconds(20))
        #expect(configuration.holePause(afterCached: 64 << 10) == .milliseconds(20))
        let twoMiB = configuration.holePause(afterCached: 2 << 20)
        #expect(twoMiB > .milliseconds(399) && twoMiB < .milliseconds(401))
        #expect(configuration.holePause(afterCached: 1 << 30) == .milliseconds(500))
        #expect(configuration.holePause(afterCached: ByteRange.maximumOffset) == .milliseconds(500))
    }
}
