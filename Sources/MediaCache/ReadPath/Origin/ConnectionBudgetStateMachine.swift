// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Who may hold an origin connection to one host, as a pure machine: no I/O, no clock.
///
/// Each origin request holds a connection from when it is sent until its body has been read
/// or dropped. A host has ``limit`` of them (the origin client's pool is as large, so a
/// request admitted here never waits in the pool, where it would fail after the connect
/// timeout). The cache's own requests (read-ahead, prefetch, preload, pinned downloads,
/// recordings) hold at most ``ownLimit`` of them at once and are admitted only while no
/// player waits, so a player always finds `limit - ownLimit` connections that only players
/// use, and players go first in the queue for every connection that comes free. A player
/// that finds every connection in use waits for one, without a time limit (its read has its
/// own), and the caller logs and counts the wait.
struct ConnectionBudgetStateMachine {
    /// A request waiting for a connection.
    struct Waiter: Equatable {
        var id: UInt64
        var isOwn: Bool
    }

    let limit: Int
    let ownLimit: Int
    private(set) var inUse = 0
    private(set) var ownInUse = 0
    /// Players waiting, in order of arrival; then the cache's own.
    private(set) var players: [UInt64] = []
    private(set) var own: [UInt64] = []

    /// - Parameters:
    ///   - limit: the connections to the host, at least 1.
    ///   - ownLimit: how many of them the cache's own requests may hold, at least 1 and at
    ///     most `limit - 1` when `limit` allows (else 1: a single connection is shared).
    init(limit: Int, ownLimit: Int) {
        self.limit = max(1, limit)
        self.ownLimit = max(1, min(ownLimit, self.limit - 1))
    }

    var waiting: Int { players.count + own.count }

    /// A request asks for a connection: `true` when it holds one now, else it waits (its
    /// `id` is queued) until ``release(isOwn:)`` or ``cancel(_:)`` hands it one or drops it.
    mutating func acquire(_ waiter: Waiter) -> Bool {
        if waiter.isOwn {
            guard players.isEmpty, own.isEmpty, inUse < limit, ownInUse < ownLimit else {
                own.append(waiter.id)
                return false
            }
            inUse += 1
            ownInUse += 1
            return true
        }
        guard players.isEmpty, inUse < limit else {
            players.append(waiter.id)
            return false
        }
        inUse += 1
        return true
    }

    /// A request let its connection go: the waiters who now hold one, players first.
    mutating func release(isOwn: Bool) -> [UInt64] {
        precondition(inUse > 0 && (!isOwn || ownInUse > 0), "a connection released that was not held")
        inUse -= 1
        if isOwn { ownInUse -= 1 }
        return admit()
    }

    /// The waiters who may hold a connection now, players first, counted as holding one.
    private mutating func admit() -> [UInt64] {
        var admitted: [UInt64] = []
        while inUse < limit, !players.isEmpty {
            admitted.append(players.removeFirst())
            inUse += 1
        }
        while players.isEmpty, inUse < limit, ownInUse < ownLimit, !own.isEmpty {
            admitted.append(own.removeFirst())
            inUse += 1
            ownInUse += 1
        }
        return admitted
    }

    /// A request of the cache's own that waits became a player's (a player joined the download
    /// it is for): it waits with the players from now on, and so holds its connection as a
    /// player's. `false` when it was not waiting as the cache's own. Returns the waiters who
    /// may hold a connection now.
    mutating func promote(_ id: UInt64) -> (promoted: Bool, admitted: [UInt64]) {
        guard let index = own.firstIndex(of: id) else { return (false, []) }
        own.remove(at: index)
        players.append(id)
        return (true, admit())
    }

    /// A waiter gave up (its task was cancelled): whether it was still waiting (`false`: it
    /// had been handed a connection meanwhile, which it must then release), and the waiters
    /// who may now hold one (the cache's own, once the last player waiting is gone).
    mutating func cancel(_ waiter: Waiter) -> (wasWaiting: Bool, admitted: [UInt64]) {
        if waiter.isOwn, let index = own.firstIndex(of: waiter.id) {
            own.remove(at: index)
            return (true, [])
        }
        if !waiter.isOwn, let index = players.firstIndex(of: waiter.id) {
            players.remove(at: index)
            return (true, admit())
        }
        return (false, [])
    }
}
