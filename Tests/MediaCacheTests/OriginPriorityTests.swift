// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// Players first, without I/O: a player's wait held by the test, the quiet period on a timer
/// the test fires.
@Suite(.stallLimit) struct OriginPriorityTests {
    /// Found in CI under load: a transfer that began yielding while a player already waited
    /// went on as soon as that wait ended, without the quiet period, when no other wait began
    /// first (the count it started from was taken during the wait).
    @Test func aWaitUnderWayWhenTheTransferBeganStillCostsAQuietPeriod() async throws {
        let timer = ManualPauseTimer()
        let priority = OriginPriority(grace: .milliseconds(250), timer: timer)
        let player = try await PlayerWait.begin(on: priority)
        let wentOn = Atomic<Bool>(false)
        let transfer = Task {
            var seen = priority.generation
            await priority.yieldToPlayers(seen: &seen)
            wentOn.store(true, ordering: .releasing)
        }
        try await waitUntil { priority.parkedTransfers == 1 }
        // The player's wait ends, and no other begins.
        await player.end()
        try await waitUntil { timer.sleeping == 1 || wentOn.load(ordering: .acquiring) }
        let early = wentOn.load(ordering: .acquiring)
        #expect(!early, "the transfer went on before the quiet period")
        timer.fire()
        await transfer.value
        let after = wentOn.load(ordering: .acquiring)
        #expect(after)
    }

    /// Found in CI under load (a schedule of ``TransferScheduleTests`` whose player never got its
    /// bytes): a transfer looked whether a player read it, a player joined it and began to wait
    /// before the transfer read the wait count, and the transfer parked on the count that already
    /// held that wait, so no wake-up came. Each of the three waits is checked with the player's
    /// join put in exactly that gap: the look says no, and the join and its wait follow at once.
    @Test(arguments: Wait.allCases) func aPlayerWhoJoinsRightAfterTheLookStillEndsTheWait(_ wait: Wait) async throws {
        let timer = ManualPauseTimer()
        let priority = OriginPriority(grace: .milliseconds(250), timer: timer)
        // Another player waits on the origin all along, so a yield has a reason to park.
        let other = try await PlayerWait.begin(on: priority)
        let joined = Atomic<Bool>(false)
        let looks = Atomic<Int>(0)
        @Sendable func joinsAfterTheFirstLook() -> Bool {
            let seen = joined.load(ordering: .acquiring)
            if looks.add(1, ordering: .relaxed).oldValue == 0 {
                joined.store(true, ordering: .releasing)
                priority.wake()  // the joined player's wait begins
            }
            return seen
        }
        let ended = Atomic<Bool>(false)
        let transfer = Task {
            switch wait {
            case .yield:
                var seen = priority.generation
                await priority.yieldToPlayers(seen: &seen, unless: joinsAfterTheFirstLook)
            case .proof: _ = await priority.wait(.seconds(3600), unless: joinsAfterTheFirstLook)
            case .pace: await priority.pause(for: .seconds(3600), unless: joinsAfterTheFirstLook)
            }
            ended.store(true, ordering: .releasing)
        }
        try await waitUntil { ended.load(ordering: .acquiring) || priority.parkedTransfers > 0 }
        let endedAtOnce = ended.load(ordering: .acquiring)
        #expect(endedAtOnce, "the \(wait) parked, deaf to the player who joined")
        transfer.cancel()
        await transfer.value
        await other.end()
    }

    /// A player's wait on the origin that lasts until the test ends it.
    final class PlayerWait: Sendable {
        private let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let task = Mutex<Task<Void, Never>?>(nil)

        /// Begins the wait, and returns once it is counted.
        static func begin(on priority: OriginPriority) async throws -> PlayerWait {
            let wait = PlayerWait()
            let task = Task {
                await priority.whilePlayerWaits(.player) {
                    await withCheckedContinuation { continuation in wait.release.withLock { $0 = continuation } }
                }
            }
            wait.task.withLock { $0 = task }
            try await waitUntil { wait.release.withLock { $0 != nil } && priority.playersWaiting >= 1 }
            return wait
        }

        func end() async {
            release.withLock { $0 }?.resume()
            await task.withLock { $0 }?.value
        }
    }

    enum Wait: CaseIterable, Sendable {
        case yield, proof, pace
    }

    /// Found running the whole suite on one core: a skipped song was filled whole though its
    /// test never fired the quiet timer. The fill's probation (``OriginPriority/wait(_:unless:)``)
    /// slept again on each wake-up of its park for what was left by the real clock, and a
    /// wake-up after the duration had passed in real time (a scheduling delay of seconds) ended
    /// the wait as passed. It is measured on its timer alone now.
    @Test func aWaitPassesOnlyWhenItsTimerSaysSoWhateverTheRealClock() async throws {
        let timer = ManualPauseTimer()
        let priority = OriginPriority(grace: .milliseconds(250), timer: timer)
        let passed = Atomic<Int>(-1)
        let waiting = Task {
            let result = await priority.wait(.milliseconds(1), unless: { false })
            passed.store(result ? 1 : 0, ordering: .releasing)
        }
        try await waitUntil { timer.sleeping == 1 && priority.parkedTransfers == 1 }
        // Far more than the wait's duration passes on the real clock (a wait for an event would
        // not tell: what is tested is that the real clock does not count)...
        try await Task.sleep(for: .milliseconds(20))
        // ...and a player's wait begins and ends, which wakes the park: it looks again and parks.
        let player = try await PlayerWait.begin(on: priority)
        await player.end()
        try await waitUntil { priority.parkedTransfers == 1 || passed.load(ordering: .acquiring) != -1 }
        #expect(passed.load(ordering: .acquiring) == -1, "the wait passed without its timer")
        #expect(timer.sleeping == 1)
        timer.fire()
        await waiting.value
        #expect(passed.load(ordering: .acquiring) == 1)
    }

    @Test func noPlayerWaitingMeansNoWait() async {
        let timer = ManualPauseTimer()
        let priority = OriginPriority(grace: .milliseconds(250), timer: timer)
        var seen = priority.generation
        await priority.yieldToPlayers(seen: &seen)
        #expect(timer.pausesBegun == 0)
    }
}
