// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The preload queue's decisions without I/O: replacement, concurrency, the byte budget.
@Suite(.stallLimit, .cpuBound) struct PreloadQueueStateMachineTests {
    static func item(_ name: String, _ seconds: Double = 5) -> PreloadItem {
        PreloadItem(URL(string: "https://cdn.example/\(name)")!, seconds: seconds)
    }

    static func names(_ starts: [PreloadQueueStateMachine.Start]) -> [String] {
        starts.map(\.item.url.lastPathComponent)
    }

    @Test func itemsStartInOrderOneAtATimeByDefault() {
        var machine = PreloadQueueStateMachine(maxBytes: 1 << 30, maxConcurrent: 1)
        let started = machine.replace(with: [Self.item("a"), Self.item("b"), Self.item("c")])
        #expect(Self.names(started) == ["a"])
        #expect(machine.status.map(\.state) == [.preloading, .queued, .queued])
        let step1 = machine.finished(started[0].id, error: nil)
        #expect(Self.names(step1) == ["b"])
        let c = machine.finished(started[0].id + 1, error: "404")
        #expect(Self.names(c) == ["c"])
        let step2 = machine.finished(c[0].id, error: nil)
        #expect(step2.isEmpty)
        #expect(machine.status.map(\.state) == [.done, .failed, .done])
        #expect(machine.status[1].error == "404")
    }

    @Test func aNewQueueDropsWhatHadNotStartedAndStopsWhatItNoLongerNames() {
        var machine = PreloadQueueStateMachine(maxBytes: 1 << 30, maxConcurrent: 1)
        let a = machine.replace(with: [Self.item("a"), Self.item("b")])[0]
        // The feed moved: b never starts; a stops at its next boundary and holds the transfer until then.
        let started = machine.replace(with: [Self.item("c"), Self.item("d")])
        #expect(started.isEmpty)
        #expect(machine.status.map(\.url.lastPathComponent) == ["c", "d"])
        #expect(machine.stopping.map(\.id) == [a.id])
        let step3 = machine.boundary(a.id, missing: 0) == .fetch
        #expect(!step3)
        let step4 = machine.finished(a.id, error: nil)
        #expect(Self.names(step4) == ["c"])
        #expect(machine.stopping.isEmpty)
        #expect(!machine.status.contains { $0.url.lastPathComponent == "b" })
    }

    @Test func aStartedItemTheNewQueueNamesGoesOn() {
        var machine = PreloadQueueStateMachine(maxBytes: 1 << 30, maxConcurrent: 1)
        let a = machine.replace(with: [Self.item("a"), Self.item("b")])[0]
        let step5 = machine.boundary(a.id, missing: 100) == .fetch
        #expect(step5)
        machine.fetched(a.id, bytes: 100, reserved: 100)
        let step6 = machine.replace(with: [Self.item("x"), Self.item("a", 8)])
        #expect(step6.isEmpty)
        let step7 = machine.boundary(a.id, missing: 10) == .fetch
        #expect(step7)
        #expect(machine.status.map(\.state) == [.queued, .preloading])
        #expect(machine.status[1].seconds == 8 && machine.status[1].bytesFetched == 100)
        // Named again after it was told to stop, before it reached its boundary: it goes on.
        let step8 = machine.replace(with: [Self.item("y")])
        #expect(step8.isEmpty)
        let step9 = machine.boundary(a.id, missing: 0) == .fetch
        #expect(!step9)
        let step10 = machine.replace(with: [Self.item("a")])
        #expect(step10.isEmpty)
        let step11 = machine.boundary(a.id, missing: 0) == .fetch
        #expect(step11)
        #expect(machine.stopping.isEmpty)
    }

    @Test func concurrencyCountsItemsStillStopping() {
        var machine = PreloadQueueStateMachine(maxBytes: 1 << 30, maxConcurrent: 2)
        let first = machine.replace(with: [Self.item("a"), Self.item("b"), Self.item("c")])
        #expect(Self.names(first) == ["a", "b"])
        let next = machine.replace(with: [Self.item("b"), Self.item("d"), Self.item("e")])
        #expect(next.isEmpty)  // a is stopping, b goes on: two transfers
        let step12 = machine.finished(first[0].id, error: nil)
        #expect(Self.names(step12) == ["d"])
    }

    @Test func theBudgetStopsAtAPieceThatDoesNotFitAndNothingMoreStarts() {
        var machine = PreloadQueueStateMachine(maxBytes: 1000, maxConcurrent: 1)
        let a = machine.replace(with: [Self.item("a"), Self.item("b")])[0]
        let step13 = machine.boundary(a.id, missing: 600) == .fetch
        #expect(step13)
        machine.fetched(a.id, bytes: 400, reserved: 600)  // less came than was missing: the rest is free again
        let step14 = machine.boundary(a.id, missing: 600) == .fetch
        #expect(step14)
        machine.fetched(a.id, bytes: 600, reserved: 600)
        let step15 = machine.boundary(a.id, missing: 1) == .fetch
        #expect(!step15)
        #expect(machine.budgetSpent)
        let step16 = machine.finished(a.id, error: nil)
        #expect(step16.isEmpty)
        #expect(machine.status.map(\.state) == [.overBudget, .queued])
        #expect(machine.status[0].bytesFetched == 1000)
        // A new queue has a budget of its own.
        let step17 = machine.replace(with: [Self.item("b")])
        #expect(Self.names(step17) == ["b"])
    }

    @Test func aURLNamedTwiceIsOneItem() {
        var machine = PreloadQueueStateMachine(maxBytes: 1 << 30, maxConcurrent: 3)
        let step18 = machine.replace(with: [Self.item("a"), Self.item("a", 9), Self.item("b")])
        #expect(Self.names(step18) == ["a", "b"])
        #expect(machine.status.count == 2 && machine.status[0].seconds == 5)
    }

    /// Random event sequences against the invariants: never more transfers than allowed, never
    /// more bytes than the budget in one queue, never an item started twice at once.
    @Test func randomSequencesKeepTheInvariants() {
        var random = SplitMix(seed: 50)
        for _ in 0..<2000 {
            var machine = PreloadQueueStateMachine(
                maxBytes: Int64(1 + random.below(5000)), maxConcurrent: 1 + random.below(3))
            var running: [UInt64] = []
            for _ in 0..<40 {
                switch random.below(4) {
                case 0:
                    let items = (0..<random.below(5)).map { _ in Self.item(String(random.below(6))) }
                    running += machine.replace(with: items).map(\.id)
                case 1 where !running.isEmpty:
                    let id = running.remove(at: random.below(running.count))
                    running += machine.finished(id, error: random.below(2) == 0 ? nil : "x").map(\.id)
                case 2 where !running.isEmpty:
                    let id = running[random.below(running.count)]
                    let missing = Int64(random.below(2000))
                    if machine.boundary(id, missing: missing) == .fetch {
                        machine.fetched(id, bytes: Int64(random.below(Int(missing) + 1)), reserved: missing)
                    }
                default: break
                }
                #expect(machine.running == running.count)
                #expect(running.count <= machine.maxConcurrent)
                #expect(Set(running).count == running.count)
                #expect(machine.bytesUsed <= machine.maxBytes)
            }
        }
    }
}
