// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// A probe shared by several reads: one run, its result handed to every waiter, and a
/// waiter that is cancelled stops at once while the others keep waiting. The work waits on a
/// gate the test opens; the test waits on the waiters' registration, never on time.
@Suite(.stallLimit) struct SharedTaskTests {
    struct Failure: Error, Equatable {}

    /// Work that waits for the gate, then gives `value` (or throws), counting its runs.
    final class Work: Sendable {
        let runs = Atomic(0)
        let gate = AsyncStream<Void>.makeStream()

        func run(_ value: Int, throwing: Bool = false) async throws -> Int {
            runs.add(1, ordering: .relaxed)
            for await _ in gate.stream { break }
            if throwing { throw Failure() }
            return value
        }

        func open() { gate.continuation.yield(()) }
    }

    static func waitUntil(_ shared: SharedTask<Int>, hasWaiting count: Int) async throws {
        try await MediaCacheTestSupport.waitUntil { shared.waiting == count }
    }

    @Test func aResultReachesEveryWaiterFromOneRun() async throws {
        let work = Work()
        let shared = SharedTask { try await work.run(42) }
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 { group.addTask { try await shared.value() } }
            try await Self.waitUntil(shared, hasWaiting: 3)
            work.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values == [42, 42, 42])
        #expect(work.runs.load(ordering: .relaxed) == 1)
        #expect(try await shared.value() == 42, "a waiter that comes after the end gets the result at once")
        #expect(shared.waiting == 0)
    }

    @Test func aCancelledWaiterStopsAtOnceWhileTheOthersGetTheResult() async throws {
        let work = Work()
        let shared = SharedTask { try await work.run(7) }
        let cancelled = Task { try await shared.value() }
        let kept = Task { try await shared.value() }
        try await Self.waitUntil(shared, hasWaiting: 2)
        cancelled.cancel()
        // The gate is still shut: the cancelled waiter's error cannot come from the work.
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(shared.waiting == 1)
        work.open()
        #expect(try await kept.value == 7)
        #expect(work.runs.load(ordering: .relaxed) == 1)
    }

    @Test func aCallerCancelledBeforeItWaitsIsNotRegistered() async throws {
        let work = Work()
        let shared = SharedTask { try await work.run(1) }
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await shared.value()
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(shared.waiting == 0)
        work.open()
        #expect(try await shared.value() == 1)
    }

    @Test func aFailureReachesEveryWaiterAndLaterOnes() async throws {
        let work = Work()
        let shared = SharedTask { try await work.run(0, throwing: true) }
        let first = Task { try await shared.value() }
        try await Self.waitUntil(shared, hasWaiting: 1)
        work.open()
        await #expect(throws: Failure.self) { try await first.value }
        await #expect(throws: Failure.self) { try await shared.value() }
        if case .success = await shared.result { Issue.record("the work's own result is its failure") }
    }

    @Test func cancellingTheWorkEndsItForItsWaiters() async throws {
        let shared = SharedTask { () async throws -> Int in
            // Work that ends only when cancelled.
            while !Task.isCancelled { await Task.yield() }
            throw CancellationError()
        }
        let waiter = Task { try await shared.value() }
        try await Self.waitUntil(shared, hasWaiting: 1)
        shared.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
    }
}
