// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization
public import Testing

/// Runs a test on one thread shared by every test that has this trait, not on the
/// cooperative pool.
///
/// The pool has a thread per core (two here), and a task keeps its thread until it next
/// suspends. A fuzz target that computes for tens of seconds without suspending held one of
/// the two; with a second one on the other, every server task of the process (the proxy's
/// answers, the test origin's) waited behind them: a curl through the proxy got its head and
/// then 14 KiB in ten seconds, while 97 KiB from the origin sat unread in the proxy's socket,
/// and ran into its 30 s limit. On one thread of their own such tests take at most one core,
/// and the servers' tasks run beside them. The thread has the usual priority: at `nice 19`
/// it got about 1.5 % of a core beside two busy processes, and the suite had no time bound.
public struct CPUBoundTrait: SuiteTrait, TestTrait, TestScoping {
    public typealias TestScopeProvider = Self  // (else `Never`: the scope would never be asked for)

    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(DedicatedThreadExecutor.cpuBound) {
            try await function()
        }
    }
}

extension Trait where Self == CPUBoundTrait {
    /// The test computes for long stretches without suspending: it runs on the thread shared
    /// by such tests, off the cooperative pool (see ``CPUBoundTrait``).
    public static var cpuBound: Self { CPUBoundTrait() }
}

extension Trait where Self == TimeLimitTrait {
    /// Every suite's time limit (Swift Testing's `.timeLimit`): a test that stalls (a player left
    /// waiting for good, a deadlock) fails by name instead of hanging the run until CI's own
    /// timeout. Six minutes, because the limit counts from a test's start: an end-to-end test may
    /// wait for its slot (``EndToEndTrait``), and a CPU-bound one for its thread
    /// (``CPUBoundTrait``), for much of the suite's two and a half minutes before its body runs.
    /// CI fails a suite without it.
    public static var stallLimit: Self { .timeLimit(.minutes(6)) }
}

/// A task executor with one thread of its own, which runs its jobs in order.
final class DedicatedThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// The thread of the tests marked ``CPUBoundTrait``.
    static let cpuBound = DedicatedThreadExecutor(name: "cpu-bound tests", niceness: 0)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    /// - Parameter niceness: the thread's `nice` value (Linux schedules each thread by its own).
    init(name: String, niceness: Int32 = 0) {
        let thread = Thread { [unowned self] in
            #if os(Linux)
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)  // 0: this thread, on Linux
            #endif
            run()
        }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func run() -> Never {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Lets at most ``width`` end-to-end tests (real servers, real clients, over loopback) run at
/// once in the process; the others wait for a slot before they start.
///
/// swift-testing starts every test at once. On a two-core machine some 200 end-to-end tests
/// together (each with its origin, often a proxy, TLS handshakes in a debug build) made each
/// one's requests wait so long behind the others' that the timeouts under test fired: a `504`
/// from the proxy for an origin that answered, a client's 20 s deadline. Each test is then as
/// fast as a few tests sharing the machine, whatever the size of the suite.
public struct EndToEndTrait: SuiteTrait, TestTrait, TestScoping {
    public typealias TestScopeProvider = Self

    /// How many end-to-end tests run at once.
    public static let width = 8

    static let slots = AsyncSemaphore(width)

    public var isRecursive: Bool { true }

    /// Each test case takes a slot, never a suite (a suite holding one while its tests wait
    /// for theirs could hold them all).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await Self.slots.wait()
        defer { Self.slots.signal() }
        try await function()
    }
}

extension Trait where Self == EndToEndTrait {
    /// The test runs real servers and clients: at most ``EndToEndTrait/width`` such tests run at
    /// once (see ``EndToEndTrait``).
    public static var endToEnd: Self { EndToEndTrait() }
}

/// A counting semaphore whose waiters suspend, woken in the order they came.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(available: count))
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func signal() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
