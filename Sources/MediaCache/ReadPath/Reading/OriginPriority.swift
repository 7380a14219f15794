// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// Player first: the cache's own fetches (read-ahead, prefetch, preload, pinned downloads)
/// yield the origin to players waiting on it.
///
/// Work is the cache's own when its ``Requester`` says so. A player's read registers each wait
/// on the origin (``whilePlayerWaits(_:_:)``); a transfer that serves no player calls
/// ``yieldToPlayers(seen:unless:)`` when its ``TransferPolicy`` says to (before each request
/// and each chunk it takes from the origin), and goes on only when no player waits and none
/// has begun to for ``grace``. While
/// it waits it takes no bytes from the origin's body, so the connection's window closes and
/// the link is the player's; it resumes where it stopped, fetching nothing twice.
///
/// A player may join a transfer that is yielding (its bytes are what the player wants): every
/// wait that begins wakes the yielding transfers, and one that now serves a player goes on at
/// once, so a player never waits on a transfer that waits for it.
final class OriginPriority: Sendable {
    private struct State {
        /// Player reads waiting on the origin now.
        var waiting = 0
        /// Counts every wait that began: a transfer that saw the same number twice knows no
        /// player waited in between.
        var generation: UInt64 = 0
        /// Yielding transfers, woken whenever a wait begins or the last one ends.
        var parked: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0

        mutating func wakeAll() -> [CheckedContinuation<Void, Never>] {
            defer { parked = [:] }
            return Array(parked.values)
        }
    }

    private let state = Mutex(State())
    private let grace: Duration
    private let timer: any PauseTimer

    init(grace: Duration, timer: any PauseTimer) {
        self.grace = grace
        self.timer = timer
    }

    /// How many player reads wait on the origin now.
    var playersWaiting: Int { state.withLock { $0.waiting } }
    /// How many of the cache's own transfers are parked now.
    var parkedTransfers: Int { state.withLock { $0.parked.count } }
    /// The wait count a transfer starts from.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Runs `wait`, `requester`'s wait on the origin, registered as a player's when it is one;
    /// the cache's own work runs it as it is.
    func whilePlayerWaits<T>(_ requester: Requester, _ wait: () async throws -> T) async rethrows -> T {
        guard requester.isPlayer else { return try await wait() }
        let woken = state.withLock { state in
            state.waiting += 1
            state.generation &+= 1
            return state.wakeAll()
        }
        woken.forEach { $0.resume() }
        defer {
            let woken = state.withLock { state in
                state.waiting -= 1
                return state.waiting == 0 ? state.wakeAll() : []
            }
            woken.forEach { $0.resume() }
        }
        return try await wait()
    }

    /// Wakes the yielding transfers to look again at what they hold (a player began to wait for
    /// an origin connection: a fill nobody reads lets its connection go).
    func wake() {
        let woken = state.withLock { state in
            state.generation &+= 1
            return state.wakeAll()
        }
        woken.forEach { $0.resume() }
    }

    /// Returns once no player waits on the origin and none has begun to for ``grace`` (at once
    /// when none has since the wait count `seen`, which it updates), or as soon as `servesPlayer`
    /// holds, or when the task is cancelled.
    func yieldToPlayers(seen: inout UInt64, unless servesPlayer: () -> Bool = { false }) async {
        var yielded = false
        // A player was seen waiting: going on needs a whole quiet period first, even when no
        // other wait began (the count `seen` may have been taken while that wait was under way).
        var needsQuiet = false
        while !Task.isCancelled {
            // The count before the look: a player who joins after the look began a wait since.
            let (waiting, generation) = state.withLock { ($0.waiting, $0.generation) }
            if servesPlayer() { return }
            if waiting == 0, generation == seen, !needsQuiet { return }
            if !yielded {
                yielded = true
                CacheMetrics.yieldedToPlayer()
            }
            if waiting > 0 {
                needsQuiet = true
                await park(unlessChangedFrom: (waiting, generation))
                continue
            }
            // Players' reads wait chunk by chunk: quiet for a while means the player has its
            // bytes. A wait that begins meanwhile ends the quiet at once.
            seen = generation
            needsQuiet = false
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await self.timer.sleep(for: self.grace) }
                group.addTask { await self.park(unlessChangedFrom: (waiting, generation)) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Waits `duration` (a pinned download's rate caps), or less when `ends` holds at a player's
    /// wait that begins (or the last one that ends) meanwhile, or the task is cancelled: a
    /// connection a player waits for is let go at once, not after the pause.
    func pause(for duration: Duration, unless ends: () -> Bool) async {
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline, !Task.isCancelled {
            let seen = state.withLock { ($0.waiting, $0.generation) }
            if ends() { return }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await Task.sleep(until: deadline) }
                group.addTask { await self.park(unlessChangedFrom: seen) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Waits `duration` on the quiet timer, or less when `ends` holds at a player's wait that
    /// begins (or the last one that ends) meanwhile, or the task is cancelled: whether the whole
    /// of it passed.
    func wait(_ duration: Duration, unless ends: () -> Bool) async -> Bool {
        // One sleep on the timer for the whole wait, whatever wakes the parks meanwhile: the
        // wait is measured on the timer's clock alone. (Each wake-up once slept again for what
        // was left by the real clock, so with a test's manual timer a play on one busy core
        // proved itself without the test firing it.)
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await self.timer.sleep(for: duration)) != nil }
            defer { group.cancelAll() }
            while !Task.isCancelled {
                let seen = state.withLock { ($0.waiting, $0.generation) }
                if ends() { return false }
                group.addTask {
                    await self.park(unlessChangedFrom: seen)
                    return false
                }
                // `true` only from the timer: the whole of it passed. A park that returns
                // (a player's wait began or ended) looks at `ends` again.
                if await group.next() == true { return !Task.isCancelled }
            }
            return false
        }
    }

    /// Waits until a player's wait begins, the last one ends, or the task is cancelled; at once
    /// if either happened since the state `seen` was read (its wake-up would be lost). Callers
    /// read `seen` before they look at what ends their wait (a player who joins the transfer
    /// does so before its wait begins), so a join between the look and the park is never lost.
    private func park(unlessChangedFrom seen: (waiting: Int, generation: UInt64)) async {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = state.withLock { state -> Bool in
                    guard !Task.isCancelled, state.generation == seen.generation,
                        (state.waiting == 0) == (seen.waiting == 0)
                    else { return false }
                    state.parked[id] = continuation
                    return true
                }
                if !parked { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.parked.removeValue(forKey: id) }?.resume()
        }
    }
}
