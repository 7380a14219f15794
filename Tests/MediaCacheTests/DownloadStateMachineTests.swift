// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The download's lifecycle without I/O: every transition, a cancel in every state, a
/// failure in every state, and who is woken by what.
@Suite(.stallLimit) struct DownloadStateMachineTests {
    typealias Machine = DownloadStateMachine

    /// The states a download passes through, reached by events from a new machine with one
    /// reader at 0 (the reader's id is 0).
    enum Stage: String, CaseIterable, CustomTestStringConvertible {
        case awaitingResponse, receiving, resuming, resumingBeforeAnyResponse, completed, failed, cancelled
        var testDescription: String { rawValue }
        var isTerminal: Bool { [.completed, .failed, .cancelled].contains(self) }
    }

    struct Failure: Error, Equatable {
        var name: String
    }

    static func bytes(_ count: Int, _ value: UInt8 = 7) -> ByteBuffer {
        ByteBuffer(repeating: value, count: count)
    }

    static func machine(at stage: Stage) -> Machine {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        _ = machine.addReader(at: 0)
        switch stage {
        case .awaitingResponse:
            break
        case .receiving:
            _ = machine.responseReceived()
            _ = machine.bytesArrived(bytes(10), storage: .stored)
        case .resuming:
            _ = machine.responseReceived()
            _ = machine.bytesArrived(bytes(10), storage: .stored)
            machine.retrying(attempt: 1)
        case .resumingBeforeAnyResponse:
            machine.retrying(attempt: 1)
        case .completed:
            _ = machine.responseReceived()
            _ = machine.allBytesArrived()
        case .failed:
            _ = machine.fail(Failure(name: "bad answer"))
        case .cancelled:
            _ = machine.removeReader(0)
        }
        return machine
    }

    static func name(_ state: Machine.State) -> String {
        switch state {
        case .awaitingResponse: "awaitingResponse"
        case .receiving: "receiving"
        case .resuming(let failures): "resuming(\(failures))"
        case .completed: "completed"
        case .failed(let error): "failed(\((error as? Failure)?.name ?? "\(error)"))"
        case .cancelled: "cancelled"
        }
    }

    @Test(arguments: Stage.allCases) func eachStageIsReachedAsDescribed(stage: Stage) {
        let machine = Self.machine(at: stage)
        let expected: String =
            switch stage {
            case .awaitingResponse: "awaitingResponse"
            case .receiving: "receiving"
            case .resuming, .resumingBeforeAnyResponse: "resuming(1)"
            case .completed: "completed"
            case .failed: "failed(bad answer)"
            case .cancelled: "cancelled"
            }
        #expect(Self.name(machine.state) == expected)
        #expect(machine.isFinished == stage.isTerminal)
    }

    // MARK: Transitions

    @Test func theResponseWakesOnlyThoseWaitingForIt() {
        var machine = Machine(position: 100, storedChunkLimit: 1 << 20)
        _ = machine.addReader(at: 100)
        let response = machine.makeWaiterID()
        let bytes = machine.makeWaiterID()
        let suspended = machine.wait(response, for: .response)
        #expect(suspended)
        let suspended2 = machine.wait(bytes, for: .bytes(at: 100))
        #expect(suspended2)
        #expect(!machine.hasResponse)
        let actions = machine.responseReceived()
        #expect(actions == Machine.Actions(wake: [response]))
        #expect(Self.name(machine.state) == "receiving")
        #expect(machine.hasResponse)
        #expect(machine.waiterCount == 1)
        // Once answered, a new wait for the response does not suspend.
        let suspended3 = machine.wait(machine.makeWaiterID(), for: .response)
        #expect(!suspended3)
    }

    @Test func arrivingBytesWakeOnlyTheReadersTheyReach() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        _ = machine.addReader(at: 0)
        _ = machine.responseReceived()
        let waitsAt0 = machine.makeWaiterID()
        let waitsAt15 = machine.makeWaiterID()
        let waitsAt30 = machine.makeWaiterID()
        let suspended = machine.wait(waitsAt0, for: .bytes(at: 0))
        #expect(suspended)
        let suspended2 = machine.wait(waitsAt15, for: .bytes(at: 15))
        #expect(suspended2)
        let suspended3 = machine.wait(waitsAt30, for: .bytes(at: 30))
        #expect(suspended3)
        let actions = machine.bytesArrived(Self.bytes(10), storage: .stored)
        #expect(actions.wake == [waitsAt0])
        #expect(machine.position == 10)
        let actions2 = machine.bytesArrived(Self.bytes(10), storage: .stored)
        #expect(actions2.wake == [waitsAt15])
        #expect(machine.waiterCount == 1)
        let actions3 = machine.bytesArrived(Self.bytes(11), storage: .stored)
        #expect(actions3.wake == [waitsAt30])
        #expect(machine.position == 31)
    }

    /// A retry (the transfer's policy decides it) keeps the response and everyone waiting; giving
    /// up fails the download and wakes them.
    @Test func aRetryKeepsWaitersAndGivingUpWakesThem() {
        var machine = Self.machine(at: .awaitingResponse)
        let waiter = machine.makeWaiterID()
        let suspended = machine.wait(waiter, for: .response)
        #expect(suspended)
        machine.retrying(attempt: 1)
        #expect(Self.name(machine.state) == "resuming(1)")
        #expect(machine.waiterCount == 1, "the response waiter keeps waiting through a resume")
        machine.resuming()
        #expect(Self.name(machine.state) == "awaitingResponse")
        machine.retrying(attempt: 2)
        #expect(machine.retries == 2)
        let actions = machine.fail(Failure(name: "two"))
        #expect(actions == Machine.Actions(wake: [waiter]))
        #expect(Self.name(machine.state) == "failed(two)")
        machine.retrying(attempt: 3)
        #expect(Self.name(machine.state) == "failed(two)", "an ended download is not resumed")
        #expect(machine.retries == 2)
    }

    @Test func allBytesArrivingCompletesAndWakesEveryone() {
        var machine = Self.machine(at: .receiving)
        let reader = machine.makeWaiterID()
        let room = machine.makeWaiterID()
        let suspended = machine.wait(reader, for: .bytes(at: 50))
        #expect(suspended)
        _ = machine.bytesArrived(Self.bytes(40), storage: .stored)  // 50 ahead of the reader at 0
        let suspended2 = machine.wait(room, for: .room(lead: 20))
        #expect(suspended2)
        let actions = machine.allBytesArrived()
        #expect(actions == Machine.Actions(wake: [reader, room]))
        #expect(Self.name(machine.state) == "completed")
        let readerNow = machine.addReader(at: 0)
        #expect(readerNow == nil)
    }

    // MARK: A cancel in every state

    @Test(arguments: Stage.allCases) func theLastReaderLeaving(stage: Stage) {
        var machine = Self.machine(at: stage)
        let waiter = machine.makeWaiterID()
        let suspended = machine.wait(waiter, for: .bytes(at: 1000))
        #expect(suspended == !stage.isTerminal)
        let before = Self.name(machine.state)
        let actions = machine.removeReader(0)
        if stage.isTerminal {
            // Over already: nothing to cancel, nothing changes.
            #expect(actions == Machine.Actions())
            #expect(Self.name(machine.state) == before)
        } else {
            #expect(actions == Machine.Actions(wake: [waiter], cancelsTransfer: true))
            #expect(Self.name(machine.state) == "cancelled")
            // Nothing the transfer still reports changes that.
            let position = machine.position
            let actionsNow = machine.bytesArrived(Self.bytes(8), storage: .stored)
            #expect(actionsNow == Machine.Actions())
            #expect(machine.position == position)
            let actions2 = machine.responseReceived()
            #expect(actions2 == Machine.Actions())
            machine.retrying(attempt: 1)
            let actions3 = machine.allBytesArrived()
            #expect(actions3 == Machine.Actions())
            #expect(Self.name(machine.state) == "cancelled")
        }
        let reader = machine.addReader(at: 0)
        #expect(reader == nil)
    }

    @Test(arguments: Stage.allCases) func aReaderLeavingWhileAnotherStaysCancelsNothing(stage: Stage) {
        var machine = Self.machine(at: stage)
        let second = machine.addReader(at: 0)
        guard let second else {
            #expect(stage.isTerminal)  // an ended download takes no readers
            return
        }
        let actions = machine.removeReader(second)
        #expect(actions.cancelsTransfer == false)
        #expect(!machine.isFinished)
        let actions2 = machine.removeReader(second)
        #expect(actions2 == Machine.Actions())  // twice: nothing more
    }

    // MARK: A failure in every state

    @Test(arguments: Stage.allCases) func aFinalFailure(stage: Stage) {
        var machine = Self.machine(at: stage)
        let waiter = machine.makeWaiterID()
        _ = machine.wait(waiter, for: .response)
        let before = Self.name(machine.state)
        let actions = machine.fail(Failure(name: "refused"))
        if stage.isTerminal {
            #expect(actions == Machine.Actions())
            #expect(Self.name(machine.state) == before)
        } else {
            // A waiter for the response is only registered while there is none yet.
            let woken: [UInt64] = machine.hasResponse ? [] : [waiter]
            #expect(actions == Machine.Actions(wake: woken))
            #expect(Self.name(machine.state) == "failed(refused)")
        }
    }

    @Test(arguments: Stage.allCases) func aFailureOfTheTransfersOwn(stage: Stage) {
        var machine = Self.machine(at: stage)
        let before = Self.name(machine.state)
        _ = machine.fail(Failure(name: "changed"))
        #expect(Self.name(machine.state) == (stage.isTerminal ? before : "failed(changed)"))
    }

    // MARK: Pacing and kept bytes

    @Test func pacingFollowsTheFastestReaderWhileBytesAreStored() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        let slow = machine.addReader(at: 0)!
        let fast = machine.addReader(at: 0)!
        _ = machine.responseReceived()
        _ = machine.bytesArrived(Self.bytes(100), storage: .stored)
        let room = machine.makeWaiterID()
        let suspended = machine.wait(room, for: .room(lead: 50))
        #expect(suspended)
        let actions = machine.moveReader(slow, to: 40)
        #expect(actions.wake.isEmpty)  // the fastest is still at 0
        let actions2 = machine.moveReader(fast, to: 60)
        #expect(actions2.wake == [room])
        #expect(machine.lead == 40)
    }

    @Test func pacingFollowsTheSlowestReaderWhileBytesAreOnlyInMemory() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        let slow = machine.addReader(at: 0)!
        let fast = machine.addReader(at: 0)!
        _ = machine.responseReceived()
        _ = machine.bytesArrived(Self.bytes(100), storage: .memoryOnly)
        #expect(machine.holdsUnstoredBytes)
        let room = machine.makeWaiterID()
        let suspended = machine.wait(room, for: .room(lead: 50))
        #expect(suspended)
        let actions = machine.moveReader(fast, to: 100)
        #expect(actions.wake.isEmpty)
        let actions2 = machine.moveReader(slow, to: 60)
        #expect(actions2.wake == [room])
    }

    @Test func keptChunksServeReadersUntilEveryReaderHasPassedThem() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        let first = machine.addReader(at: 0)!
        let second = machine.addReader(at: 0)!
        _ = machine.responseReceived()
        _ = machine.bytesArrived(Self.bytes(10, 1), storage: .stored)
        _ = machine.bytesArrived(Self.bytes(10, 2), storage: .stored)
        #expect(machine.bytes(at: 5).map { Array($0.readableBytesView) } == Array(repeating: 1, count: 5))
        #expect(machine.bytes(at: 12)?.readableBytes == 8)
        #expect(machine.bytes(at: 20) == nil)
        _ = machine.moveReader(first, to: 20)
        #expect(machine.bytes(at: 0) != nil)  // the second reader has not taken it yet
        _ = machine.moveReader(second, to: 10)
        #expect(machine.bytes(at: 0) == nil)
        #expect(machine.chunks.count == 1)
    }

    /// A reader behind the front can take several kept chunks at once: the one holding its
    /// cursor (cut there) and its neighbours, until the limit is held.
    @Test func keptChunksFromACursorComeWithTheirNeighboursUpToALimit() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        _ = machine.addReader(at: 0)
        _ = machine.responseReceived()
        for value in 1...4 { _ = machine.bytesArrived(Self.bytes(10, UInt8(value)), storage: .stored) }
        #expect(machine.bytes(from: 15, upTo: 1).map { Array($0.readableBytesView) } == [Array(repeating: 2, count: 5)])
        #expect(machine.bytes(from: 15, upTo: 6).map(\.readableBytes) == [5, 10])
        #expect(machine.bytes(from: 15, upTo: 100).map(\.readableBytes) == [5, 10, 10])
        #expect(
            machine.bytes(from: 0, upTo: 40).flatMap { Array($0.readableBytesView) }
                == (1...4).flatMap { Array(repeating: UInt8($0), count: 10) })
        #expect(machine.bytes(from: 40, upTo: 10).isEmpty)
    }

    @Test func storedChunksAreKeptUpToTheLimitAndUnstoredOnesWhateverTheLimit() {
        var machine = Machine(position: 0, storedChunkLimit: 25)
        _ = machine.addReader(at: 0)
        _ = machine.responseReceived()
        for _ in 0..<4 { _ = machine.bytesArrived(Self.bytes(10), storage: .stored) }
        // 40 stored bytes, the limit is 25: the oldest go (readers read them from the store).
        #expect(machine.chunks.map(\.offset) == [20, 30])
        var unstored = Machine(position: 0, storedChunkLimit: 25)
        _ = unstored.addReader(at: 0)
        _ = unstored.responseReceived()
        for _ in 0..<4 { _ = unstored.bytesArrived(Self.bytes(10), storage: .memoryOnly) }
        #expect(unstored.chunks.map(\.offset) == [0, 10, 20, 30])
    }

    @Test func bytesBeingWrittenStayUntilTheWriteEndsWhateverTheReaders() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        let reader = machine.addReader(at: 0)!
        _ = machine.responseReceived()
        _ = machine.bytesArrived(Self.bytes(10), storage: .writing)
        _ = machine.bytesArrived(Self.bytes(10), storage: .writing)  // delivered while the first is written
        let stored = machine.makeWaiterID()
        let suspended = machine.wait(stored, for: .stored(upTo: 20))
        #expect(suspended)
        _ = machine.moveReader(reader, to: 20)
        // Passed by every reader, but not in the store yet: a reader joining behind needs it.
        #expect(machine.bytes(at: 0) != nil)
        let finished = machine.writeFinished(upTo: 10, stored: true)
        #expect(finished.wake.isEmpty && !finished.cancelsTransfer, "bytes 10..<20 are still being written")
        #expect(machine.chunks.map(\.offset) == [10], "stored and passed: read from the store from now on")
        let finishedAll = machine.writeFinished(upTo: 20, stored: true)
        #expect(finishedAll.wake == [stored])
        #expect(machine.chunks.isEmpty)
        #expect(!machine.holdsUnstoredBytes)
    }

    @Test func aFailedWriteLeavesTheBytesInMemoryOnly() {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        let slow = machine.addReader(at: 0)!
        let fast = machine.addReader(at: 0)!
        _ = machine.responseReceived()
        _ = machine.bytesArrived(Self.bytes(100), storage: .writing)
        _ = machine.moveReader(fast, to: 100)
        let room = machine.makeWaiterID()
        let suspended = machine.wait(room, for: .room(lead: 50))
        #expect(!suspended, "while writing, the fastest reader sets the pace")
        _ = machine.writeFinished(upTo: 100, stored: false)
        #expect(machine.holdsUnstoredBytes)
        #expect(machine.chunks.map(\.storage) == [.memoryOnly])
        #expect(machine.lead == 100, "now the slowest reader sets the pace")
        _ = machine.moveReader(slow, to: 100)
        #expect(machine.chunks.isEmpty)
        let again = machine.writeFinished(upTo: 100, stored: true)
        #expect(again == Machine.Actions(), "nothing was being written")
    }

    @Test func aWaitThatHoldsAlreadyDoesNotSuspendAndACancelledOneIsRemoved() {
        var machine = Self.machine(at: .receiving)  // position 10
        let suspended = machine.wait(machine.makeWaiterID(), for: .bytes(at: 9))
        #expect(!suspended)
        let suspended2 = machine.wait(machine.makeWaiterID(), for: .room(lead: 100))
        #expect(!suspended2)
        let waiter = machine.makeWaiterID()
        let suspended3 = machine.wait(waiter, for: .bytes(at: 10))
        #expect(suspended3)
        let wasWaiting = machine.removeWaiter(waiter)
        #expect(wasWaiting)
        let wasWaiting2 = machine.removeWaiter(waiter)
        #expect(!wasWaiting2)
        let actions = machine.bytesArrived(Self.bytes(1), storage: .stored)
        #expect(actions.wake.isEmpty)
    }

    /// A machine whose one reader has taken `count` bytes that are still being written.
    static func takenWhileWriting(_ count: Int) -> (machine: Machine, reader: UInt64) {
        var machine = Machine(position: 0, storedChunkLimit: 1 << 20)
        let reader = machine.addReader(at: 0)!
        _ = machine.responseReceived()
        _ = machine.bytesArrived(Self.bytes(count), storage: .writing)
        _ = machine.moveReader(reader, to: Int64(count))
        return (machine, reader)
    }

    /// A download can end (every byte arrived, or its last reader left) while its bytes are
    /// still being written; the player had them from memory and may ask again at once. A wait
    /// for them to be stored then holds until the write ends, not until the download ends
    /// (found under load: the bytes of a finished download were not in the store yet, so a
    /// replay fetched them a second time, and from an origin that had begun to lie, got 502).
    @Test(arguments: ["completed", "cancelled", "failed"])
    func aWaitForStoredBytesOutlivesTheDownloadUntilTheWriteEnds(_ ending: String) {
        var (machine, reader) = Self.takenWhileWriting(1000)
        let bytesWaiter = machine.makeWaiterID()
        let waitsForBytes = machine.wait(bytesWaiter, for: .bytes(at: 1000))
        #expect(waitsForBytes)
        switch ending {
        case "completed": _ = machine.allBytesArrived()
        case "cancelled": _ = machine.removeReader(reader)
        default: _ = machine.fail(Failure(name: "origin gone"))
        }
        #expect(machine.isFinished && machine.isWriting(in: ByteRange(0, 1000)))
        // A reader that comes now waits for the write, and the end of the download (which
        // woke the wait for bytes) did not end it.
        let storedWaiter = machine.makeWaiterID()
        let waitsForStored = machine.wait(storedWaiter, for: .stored(upTo: 1000))
        #expect(waitsForStored)
        let endedAgain = machine.allBytesArrived()
        #expect(endedAgain.wake.isEmpty)
        let written = machine.writeFinished(upTo: 1000, stored: true)
        #expect(written.wake == [storedWaiter])
        #expect(!machine.isWriting(in: ByteRange(0, 1000)))
        let lateWaiter = machine.makeWaiterID()
        let lateWaits = machine.wait(lateWaiter, for: .stored(upTo: 1000))
        #expect(!lateWaits, "the bytes are stored: nothing to wait for")
    }

    /// When the transfer ends, writes it never made (the entry was replaced) end the wait too.
    @Test func theTransfersEndEndsEveryWaitForStoredBytes() {
        var (machine, _) = Self.takenWhileWriting(500)
        _ = machine.allBytesArrived()
        let waiter = machine.makeWaiterID()
        let waits = machine.wait(waiter, for: .stored(upTo: 500))
        #expect(waits)
        let ended = machine.transferEnded()
        #expect(ended.wake == [waiter])
        #expect(!machine.isWriting(in: ByteRange(0, 500)) && machine.holdsUnstoredBytes)
    }
}
