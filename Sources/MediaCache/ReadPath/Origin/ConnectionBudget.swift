// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import Synchronization

/// The origin connections of a reader, per host (scheme, host and port): a
/// ``ConnectionBudgetStateMachine`` each, and the requests waiting for a connection.
///
/// Every origin request the reader makes takes a ``Hold`` first and keeps it until its body
/// has been read or dropped (``MeteredFetcher``): the cache's own transfers never hold more
/// than their share, a transfer that yields to players keeps no more than that share
/// parked, and players go first for every connection that comes free. A player that waits
/// is logged at warning level and counted (`mediacache_origin_connection_waits_total`).
final class ConnectionBudget: Sendable {
    private struct State {
        var hosts: [String: ConnectionBudgetStateMachine] = [:]
        var continuations: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Waiters handed a connection before they stored their continuation.
        var admitted: Set<UInt64> = []
        /// Waiters that gave up.
        var cancelled: Set<UInt64> = []
        /// Waiters of the cache's own that became players' (``Promotion``).
        var promoted: Set<UInt64> = []
        /// Players' waits not yet logged, per host, and when a wait was last logged.
        var unloggedWaits: [String: Int] = [:]
        var lastLogged: [String: ContinuousClock.Instant] = [:]
        var nextID: UInt64 = 0
    }

    /// A request of the cache's own that a player may come to need (a read-ahead or prefetch
    /// download a player joins): ``promote()`` makes it a player's, in the queue and in the
    /// count, so the player never waits behind the cache's own share. The download's transfer
    /// makes one for each request it sends (``SharedDownload/sending(_:)``) and hands it to
    /// ``ConnectionBudget/acquire(for:isOwn:promotion:)``; a player that joins calls it.
    final class Promotion: Sendable {
        private struct Waiting {
            var budget: ConnectionBudget
            var host: String
            var id: UInt64
        }
        private let state = Mutex<(waiting: Waiting?, promoted: Bool)>((nil, false))

        init() {}

        var isPromoted: Bool { state.withLock { $0.promoted } }

        /// The request now serves a player.
        func promote() {
            let waiting = state.withLock { state -> Waiting? in
                state.promoted = true
                defer { state.waiting = nil }
                return state.waiting
            }
            if let waiting { waiting.budget.promote(host: waiting.host, id: waiting.id) }
        }

        /// The request waits as the cache's own; `false` when it was promoted already.
        fileprivate func waits(in budget: ConnectionBudget, host: String, id: UInt64) -> Bool {
            state.withLock { state in
                guard !state.promoted else { return false }
                state.waiting = Waiting(budget: budget, host: host, id: id)
                return true
            }
        }
    }

    /// A connection held for one request: let go once, when the body ends or is dropped.
    final class Hold: Sendable {
        private let budget: ConnectionBudget
        private let host: String
        private let isOwn: Bool
        private let released = Atomic<Bool>(false)

        fileprivate init(budget: ConnectionBudget, host: String, isOwn: Bool) {
            self.budget = budget
            self.host = host
            self.isOwn = isOwn
        }

        func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            budget.release(host: host, isOwn: isOwn)
        }

        deinit {
            release()
        }
    }

    let limit: Int
    let ownLimit: Int
    private let logger: Logger
    private let state = Mutex(State())

    /// - Parameters:
    ///   - limit: the connections each host may have (the origin client's pool per host).
    ///   - ownLimit: how many of them the cache's own requests may hold.
    ///   - onPlayerWait: called when a player begins to wait for a connection (the reader wakes
    ///     the transfers that may hold one it should have).
    init(limit: Int, ownLimit: Int, logger: Logger, onPlayerWait: @escaping @Sendable () -> Void = {}) {
        self.limit = limit
        self.ownLimit = ownLimit
        self.logger = logger
        self.onPlayerWait = onPlayerWait
    }

    private let onPlayerWait: @Sendable () -> Void

    /// How many requests to `url`'s host hold a connection, and how many wait.
    func usage(of url: URL) -> (inUse: Int, waiting: Int) {
        state.withLock { state in
            let machine = state.hosts[OriginReachability.origin(of: url)]
            return (machine?.inUse ?? 0, machine?.waiting ?? 0)
        }
    }

    /// Whether a player waits for a connection to `url`'s host. Asked at every part of every
    /// transfer's body, when nearly always no player waits: that is known without the lock and
    /// without working out the host.
    func playersWait(for url: URL) -> Bool {
        guard waitingPlayers.load(ordering: .acquiring) > 0 else { return false }
        return state.withLock { $0.hosts[OriginReachability.origin(of: url)]?.players.isEmpty == false }
    }

    /// How many players wait for a connection, over every host (changed only under the lock).
    private let waitingPlayers = Atomic<Int>(0)

    /// Sets `host`'s machine (`nil`: none), keeping ``waitingPlayers`` true.
    private func put(_ machine: ConnectionBudgetStateMachine?, for host: String, in state: inout State) {
        let change = (machine?.players.count ?? 0) - (state.hosts[host]?.players.count ?? 0)
        if change != 0 { waitingPlayers.add(change, ordering: .releasing) }
        state.hosts[host] = machine
    }

    /// A connection to `url`'s host for one request, waiting for one if need be (a player
    /// ahead of the cache's own work). Throws `CancellationError` when the task is
    /// cancelled while it waits.
    /// - Parameter promotion: for a request of the cache's own (`isOwn`), what makes it a
    ///   player's when a player comes to need it.
    func acquire(for url: URL, isOwn: Bool, promotion: Promotion? = nil) async throws -> Hold {
        let host = OriginReachability.origin(of: url)
        let promotion = isOwn ? promotion : nil
        let isOwn = isOwn && promotion?.isPromoted != true
        let (id, holds, inUse, waitsToLog) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            var machine = state.hosts[host] ?? ConnectionBudgetStateMachine(limit: limit, ownLimit: ownLimit)
            let holds = machine.acquire(.init(id: id, isOwn: isOwn))
            put(machine, for: host, in: &state)
            return (id, holds, machine.inUse, holds || isOwn ? 0 : Self.noteWait(of: host, in: &state))
        }
        if holds { return Hold(budget: self, host: host, isOwn: isOwn) }
        // A player that joins the download this request is for makes it a player's.
        if isOwn, let promotion, !promotion.waits(in: self, host: host, id: id) { promote(host: host, id: id) }
        if !isOwn {
            CacheMetrics.connectionWaits.increment()
            onPlayerWait()
        }
        if waitsToLog > 0 {
            logger.warning(
                "Players wait for origin connections: every one the host may have is in use",
                metadata: ["origin": "\(host)", "in use": "\(inUse)", "limit": "\(limit)", "waits": "\(waitsToLog)"])
        }
        let waiter = ConnectionBudgetStateMachine.Waiter(id: id, isOwn: isOwn)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.admitted.remove(id) != nil || state.cancelled.contains(id) { return true }
                    state.continuations[id] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let (continuation, admitted) = state.withLock { state in
                guard var machine = state.hosts[host] else {
                    return (nil as CheckedContinuation<Void, Never>?, [] as [CheckedContinuation<Void, Never>])
                }
                let current = ConnectionBudgetStateMachine.Waiter(
                    id: id, isOwn: waiter.isOwn && !state.promoted.contains(id))
                let (wasWaiting, admittedIDs) = machine.cancel(current)
                put(machine, for: host, in: &state)
                let others = Self.take(admittedIDs, from: &state)
                guard wasWaiting else { return (nil, others) }
                state.cancelled.insert(id)
                return (state.continuations.removeValue(forKey: id), others)
            }
            continuation?.resume()
            admitted.forEach { $0.resume() }
        }
        let (gaveUp, wasPromoted) = state.withLock { ($0.cancelled.remove(id) != nil, $0.promoted.remove(id) != nil) }
        // It never held a connection when it gave up: nothing to let go.
        guard !gaveUp else { throw CancellationError() }
        return Hold(budget: self, host: host, isOwn: isOwn && !wasPromoted)
    }

    /// Makes the waiting request `id` of the cache's own a player's (see ``Promotion``).
    fileprivate func promote(host: String, id: UInt64) {
        let (promoted, admitted) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            guard var machine = state.hosts[host] else { return (false, []) }
            let (promoted, ids) = machine.promote(id)
            put(machine, for: host, in: &state)
            if promoted { state.promoted.insert(id) }
            return (promoted, Self.take(ids, from: &state))
        }
        admitted.forEach { $0.resume() }
        // It waits with the players now: the transfers that may hold a connection it should
        // have look again (as for any player's wait).
        if promoted { onPlayerWait() }
    }

    /// Counts a player's wait for `host`; the waits to log now (at most one line per host every
    /// ten seconds, with the waits since the last), or 0.
    private static func noteWait(of host: String, in state: inout State) -> Int {
        state.unloggedWaits[host, default: 0] += 1
        let now = ContinuousClock.now
        if let last = state.lastLogged[host], now - last < .seconds(10) { return 0 }
        if state.lastLogged.count > 256 { state.lastLogged = [:] }
        state.lastLogged[host] = now
        return state.unloggedWaits.removeValue(forKey: host) ?? 0
    }

    /// The continuations of the waiters `ids` (handed a connection), or marks them admitted
    /// when they have not stored one yet.
    private static func take(_ ids: [UInt64], from state: inout State) -> [CheckedContinuation<Void, Never>] {
        ids.compactMap { id in
            if let continuation = state.continuations.removeValue(forKey: id) { return continuation }
            state.admitted.insert(id)
            return nil
        }
    }

    private func release(host: String, isOwn: Bool) {
        let admitted = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard var machine = state.hosts[host] else { return [] }
            let ids = machine.release(isOwn: isOwn)
            put(machine.inUse == 0 && machine.waiting == 0 ? nil : machine, for: host, in: &state)
            return Self.take(ids, from: &state)
        }
        admitted.forEach { $0.resume() }
    }
}
