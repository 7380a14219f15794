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

    @Test func noPlayerWaitingMeansNoWait() async {
        let timer = ManualPauseTimer()
        let priority = OriginPriority(grace: .milliseconds(250), timer: timer)
        var seen = priority.generation
        await priority.yieldToPlayers(seen: &seen)
        #expect(timer.pausesBegun == 0)
    }
}
