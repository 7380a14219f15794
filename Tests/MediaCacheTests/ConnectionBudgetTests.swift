// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Who may hold an origin connection: the cache's own requests within their share, players
/// first for every connection that comes free. Pure, then the async gate over it.
@Suite(.stallLimit) struct ConnectionBudgetTests {
    typealias Machine = ConnectionBudgetStateMachine

    static func player(_ id: UInt64) -> Machine.Waiter { .init(id: id, isOwn: false) }
    static func own(_ id: UInt64) -> Machine.Waiter { .init(id: id, isOwn: true) }

    @Test func theCachesOwnHoldAtMostTheirShareAndPlayersTheRest() {
        var machine = Machine(limit: 4, ownLimit: 1)
        let admitted = [Self.own(1), Self.own(2), Self.player(3), Self.player(4), Self.player(5), Self.player(6)].map {
            machine.acquire($0)
        }
        #expect(
            admitted == [true, false, true, true, true, false],
            "a second own request waits (the share is one), then all four are in use")
        #expect(machine.inUse == 4 && machine.ownInUse == 1)
        // The own request lets go: the waiting player gets it, not the waiting own request.
        #expect(machine.release(isOwn: true) == [6])
        #expect(machine.ownInUse == 0 && machine.own == [2])
        // A player lets go while no player waits: the own request may hold one again.
        #expect(machine.release(isOwn: false) == [2])
        #expect(machine.ownInUse == 1 && machine.inUse == 4)
    }

    @Test func anOwnRequestWaitsWhilePlayersWaitEvenWithItsShareFree() {
        var machine = Machine(limit: 2, ownLimit: 1)
        #expect(
            [Self.player(1), Self.player(2), Self.player(3), Self.own(4)].map { machine.acquire($0) } == [
                true, true, false, false,
            ])
        #expect(machine.release(isOwn: false) == [3], "the player first")
        #expect(machine.release(isOwn: false) == [4], "then the own request, its share free and no player waiting")
        // A player that gives up lets the own request behind it in.
        var waiting = Machine(limit: 1, ownLimit: 1)
        #expect([Self.player(1), Self.player(2), Self.own(3)].map { waiting.acquire($0) } == [true, false, false])
        let cancelled = waiting.cancel(Self.player(2))
        #expect(cancelled.wasWaiting && cancelled.admitted.isEmpty, "nothing is free yet")
        #expect(waiting.release(isOwn: false) == [3])
        let late = waiting.cancel(Self.own(3))
        #expect(!late.wasWaiting, "it holds one: it must let it go")
    }

    /// Random acquires, releases and cancellations against the rules: never more than the
    /// limit in use, never more own than their share, a player never waits while a connection
    /// is free, and an own request never holds one while a player waits.
    @Test func randomTrafficKeepsTheRules() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let limit = Int.random(in: 1...8, using: &random)
            var machine = Machine(limit: limit, ownLimit: Int.random(in: 1...limit, using: &random))
            var holding: [Machine.Waiter] = []
            var waiting: [Machine.Waiter] = []
            var next: UInt64 = 0
            for _ in 0..<300 {
                switch Int.random(in: 0..<3, using: &random) {
                case 0:
                    next += 1
                    let waiter = Machine.Waiter(id: next, isOwn: Bool.random(using: &random))
                    if machine.acquire(waiter) { holding.append(waiter) } else { waiting.append(waiter) }
                case 1 where !holding.isEmpty:
                    let released = holding.remove(at: Int.random(in: 0..<holding.count, using: &random))
                    for id in machine.release(isOwn: released.isOwn) {
                        let index = waiting.firstIndex { $0.id == id }!
                        holding.append(waiting.remove(at: index))
                    }
                case 2 where !waiting.isEmpty:
                    let gone = waiting.remove(at: Int.random(in: 0..<waiting.count, using: &random))
                    let (wasWaiting, admitted) = machine.cancel(gone)
                    #expect(wasWaiting, "a waiter that gives up was waiting")
                    for id in admitted {
                        let index = waiting.firstIndex { $0.id == id }!
                        holding.append(waiting.remove(at: index))
                    }
                default:
                    break
                }
                #expect(machine.inUse == holding.count && machine.inUse <= machine.limit)
                #expect(machine.ownInUse == holding.count { $0.isOwn } && machine.ownInUse <= machine.ownLimit)
                let playersWait = waiting.contains { !$0.isOwn }
                #expect(!playersWait || machine.inUse == machine.limit, "a player waits while a connection is free")
                #expect(machine.waiting == waiting.count)
            }
        }
    }

    /// The gate: a player waiting for a connection gets the one an own request lets go; a
    /// waiter whose task is cancelled stops waiting and holds nothing.
    @Test func theGateHandsConnectionsOverAndHonoursCancellation() async throws {
        let budget = ConnectionBudget(
            limit: 2, ownLimit: 1, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let url = URL(string: "http://origin.test/a")!
        let elsewhere = URL(string: "http://other.test/a")!
        let own = try await budget.acquire(for: url, isOwn: true)
        let player = try await budget.acquire(for: url, isOwn: false)
        #expect(!budget.playersWait(for: url), "every connection is held, but no player waits")
        let waiting = Task { try await budget.acquire(for: url, isOwn: false) }
        let cancelled = Task { try await budget.acquire(for: url, isOwn: false) }
        try await waitUntil { budget.usage(of: url).waiting >= 2 }
        #expect(budget.playersWait(for: url) && !budget.playersWait(for: elsewhere))
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { _ = try await cancelled.value }
        #expect(budget.usage(of: url).inUse == 2 && budget.usage(of: url).waiting == 1)
        #expect(budget.playersWait(for: url), "one player still waits")
        own.release()
        let handed = try await waiting.value
        #expect(budget.usage(of: url).inUse == 2 && budget.usage(of: url).waiting == 0)
        #expect(!budget.playersWait(for: url), "the player that waited holds a connection")
        own.release()  // a second release changes nothing
        #expect(budget.usage(of: url).inUse == 2)
        player.release()
        handed.release()
        #expect(budget.usage(of: url).inUse == 0 && budget.usage(of: url).waiting == 0)
    }

    /// A player that joins a download of the cache's own whose request waits for the own share
    /// makes the request a player's: it is let in as players are (the own share full did not
    /// stop it), and holds its connection as a player's. (Without it a player waited on a
    /// read-ahead queued behind parked transfers that wait for that player: a deadlock.)
    @Test func aRequestAPlayerJoinsWaitsAndHoldsAsAPlayers() async throws {
        var machine = Machine(limit: 3, ownLimit: 1)
        #expect([Self.own(1), Self.own(2)].map { machine.acquire($0) } == [true, false])
        let promoted = machine.promote(2)
        #expect(promoted.promoted && promoted.admitted == [2] && machine.ownInUse == 1 && machine.inUse == 2)
        #expect(machine.promote(2).promoted == false, "it holds one now")

        let budget = ConnectionBudget(
            limit: 3, ownLimit: 1, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let url = URL(string: "http://origin.test/a")!
        let own = try await budget.acquire(for: url, isOwn: true)
        let promotion = ConnectionBudget.Promotion()
        let waiting = Task { try await budget.acquire(for: url, isOwn: true, promotion: promotion) }
        try await waitUntil { budget.usage(of: url).waiting >= 1 }
        promotion.promote()
        let joined = try await waiting.value
        #expect(budget.usage(of: url).inUse == 2)
        // The own share is still the first request's alone: a third own request waits.
        let third = Task { try await budget.acquire(for: url, isOwn: true) }
        try await waitUntil { budget.usage(of: url).waiting >= 1 }
        joined.release()
        #expect(budget.usage(of: url).waiting == 1, "a player's connection let go does not free the own share")
        own.release()
        let admitted = try await third.value
        admitted.release()
        #expect(budget.usage(of: url).inUse == 0)
        // Promoted before it asks: it is a player's from the start.
        let early = ConnectionBudget.Promotion()
        early.promote()
        let first = try await budget.acquire(for: url, isOwn: true)
        let second = try await budget.acquire(for: url, isOwn: true, promotion: early)
        #expect(budget.usage(of: url).inUse == 2)
        first.release()
        second.release()
    }
}
