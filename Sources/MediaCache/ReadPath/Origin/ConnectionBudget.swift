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
        var nextID: UInt64 = 0
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
    init(limit: Int, ownLimit: Int, logger: Logger) {
        self.limit = limit
        self.ownLimit = ownLimit
        self.logger = logger
    }

    /// How many requests to `url`'s host hold a connection, and how many wait.
    func usage(of url: URL) -> (inUse: Int, waiting: Int) {
        state.withLock { state in
            let machine = state.hosts[OriginReachability.origin(of: url)]
            return (machine?.inUse ?? 0, machine?.waiting ?? 0)
        }
    }

    /// A connection to `url`'s host for one request, waiting for one if need be (a player
    /// ahead of the cache's own work). Throws `CancellationError` when the task is
    /// cancelled while it waits.
    func acquire(for url: URL, isOwn: Bool) async throws -> Hold {
        let host = OriginReachability.origin(of: url)
        let (id, holds, inUse) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            var machine = state.hosts[host] ?? ConnectionBudgetStateMachine(limit: limit, ownLimit: ownLimit)
            let holds = machine.acquire(.init(id: id, isOwn: isOwn))
            state.hosts[host] = machine
            return (id, holds, machine.inUse)
        }
        let hold = Hold(budget: self, host: host, isOwn: isOwn)
        if holds { return hold }
        if !isOwn {
            CacheMetrics.connectionWaits.increment()
            logger.warning(
                "A player waits for an origin connection: every one to its host is in use",
                metadata: ["origin": "\(host)", "in use": "\(inUse)", "limit": "\(limit)"])
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
                guard var machine = state.hosts[host] else { return (nil as CheckedContinuation<Void, Never>?, [] as [CheckedContinuation<Void, Never>]) }
                let (wasWaiting, admittedIDs) = machine.cancel(waiter)
                state.hosts[host] = machine
                let others = Self.take(admittedIDs, from: &state)
                guard wasWaiting else { return (nil, others) }
                state.cancelled.insert(id)
                return (state.continuations.removeValue(forKey: id), others)
            }
            continuation?.resume()
            admitted.forEach { $0.resume() }
        }
        let gaveUp = state.withLock { $0.cancelled.remove(id) != nil }
        guard !gaveUp else {
            // It never held a connection: nothing to let go.
            hold.forget()
            throw CancellationError()
        }
        return hold
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
            state.hosts[host] = machine.inUse == 0 && machine.waiting == 0 ? nil : machine
            return Self.take(ids, from: &state)
        }
        admitted.forEach { $0.resume() }
    }
}

extension ConnectionBudget.Hold {
    /// Marks a hold that never held a connection (its wait was cancelled) as let go.
    fileprivate func forget() {
        _ = released.exchange(true, ordering: .acquiringAndReleasing)
    }
}
