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
        let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let player = Task {
            await priority.whilePlayerWaits(.player) {
                await withCheckedContinuation { continuation in release.withLock { $0 = continuation } }
            }
        }
        try await waitUntil { release.withLock { $0 != nil } && priority.playersWaiting == 1 }
        let wentOn = Atomic<Bool>(false)
        let transfer = Task {
            var seen = priority.generation
            await priority.yieldToPlayers(seen: &seen)
            wentOn.store(true, ordering: .releasing)
        }
        try await waitUntil { priority.parkedTransfers == 1 }
        // The player's wait ends, and no other begins.
        release.withLock { $0 }?.resume()
        await player.value
        try await waitUntil { timer.sleeping == 1 || wentOn.load(ordering: .acquiring) }
        let early = wentOn.load(ordering: .acquiring)
        #expect(!early, "the transfer went on before the quiet period")
        timer.fire()
        await transfer.value
        let after = wentOn.load(ordering: .acquiring)
        #expect(after)
    }

    @Test func noPlayerWaitingMeansNoWait() async {
        let timer = ManualPauseTimer()
        let priority = OriginPriority(grace: .milliseconds(250), timer: timer)
        var seen = priority.generation
        await priority.yieldToPlayers(seen: &seen)
        #expect(timer.pausesBegun == 0)
    }
}
