// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization
public import Testing

/// Runs each test case on a thread of its own, one of as many as the process may use cores, not
/// on the cooperative pool; and bounds the processor time the test spends, not its wall time.
///
/// The pool has a thread per core (two here), and a task keeps its thread until it next
/// suspends. A fuzz target that computes for tens of seconds without suspending held one of
/// the two; with a second one on the other, every server task of the process (the proxy's
/// answers, the test origin's) waited behind them: a curl through the proxy got its head and
/// then 14 KiB in ten seconds, while 97 KiB from the origin sat unread in the proxy's socket,
/// and ran into its 30 s limit. On threads of their own such tests take at most the cores there
/// are, and the servers' tasks run beside them at the same priority.
///
/// Such a test is pure computation bounded by its iteration count, so how long it takes is a
/// matter of the machine's speed and load, never a stall: it has no wall-clock limit. What would
/// hang the run is a computation that never ends, and that shows as processor time:
/// ``StallLimitTrait/cpuLimit`` of it on the test's thread fails the test by name, whatever the
/// machine's speed. A test that needs this trait must not wait on anything outside itself.
public struct CPUBoundTrait: SuiteTrait, TestTrait, TestScoping {
    public typealias TestScopeProvider = Self  // (else `Never`: the scope would never be asked for)

    public var isRecursive: Bool { true }

    /// Each test case takes a thread, never a suite (a suite holding one while its tests wait
    /// for theirs could hold them all).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let thread = await CPUBoundThreads.shared.take()
        defer { CPUBoundThreads.shared.give(thread) }
        try await withTaskExecutorPreference(thread) {
            try await StallLimitTrait.watching(test, cpuOf: thread, function)
        }
    }
}

extension Trait where Self == CPUBoundTrait {
    /// The test computes for long stretches without suspending: it runs on a thread of its own,
    /// off the cooperative pool, bounded by its processor time (see ``CPUBoundTrait``).
    public static var cpuBound: Self { CPUBoundTrait() }
}

/// Every suite's limit: a test that stalls (a player left waiting for good, a deadlock) fails
/// by name instead of hanging the run until CI's own timeout. CI fails a suite without it.
///
/// The limit counts the test's own waiting, from when its body starts: never the time it
/// queued for a slot (``EndToEndTrait``) or a thread (``CPUBoundTrait``). Swift Testing's own
/// `.timeLimit` counts from the test's start, queue included, so on a machine half as fast the
/// last fuzz target in the line for the one CPU-bound thread ran out of its six minutes
/// before its body had begun. A test that queues has its limit started by the trait it queues
/// in, once it has its place; for a ``CPUBoundTrait`` test the limit is processor time.
///
/// When the limit passes, the test gets an issue naming it and is cancelled (every wait in the
/// tests, `waitUntil` among them, ends when cancelled). A test that still has not returned a
/// minute later ignores cancellation for good: the process says which and exits with a
/// failure rather than hang CI.
public struct StallLimitTrait: SuiteTrait, TestTrait, TestScoping {
    public typealias TestScopeProvider = Self

    /// How long a test's body may wait, in all. The longest body of the suite takes about 40 s
    /// on an unloaded two-core machine (docs/testing.md, "Time limits"); this leaves room for a
    /// machine three times slower with two busy processes beside it.
    public static let limit = Duration.seconds(480)

    /// How much processor time a ``CPUBoundTrait`` test may take: the largest takes about 20 s.
    public static let cpuLimit = Duration.seconds(240)

    /// How long a test that ran out of its limit has to end once cancelled.
    static let grace = Duration.seconds(60)

    public var isRecursive: Bool { true }

    /// Each test case is watched, never a suite. A test that queues is watched by the trait it
    /// queues in, from when it has its place.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        guard testCase != nil else { return nil }
        return test.traits.contains { $0 is CPUBoundTrait || $0 is EndToEndTrait } ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await Self.watching(test, cpuOf: nil, function)
    }

    /// Runs `body` under the limit: ``limit`` of wall time from now, or, with `thread`, ``cpuLimit``
    /// of that thread's processor time from now.
    static func watching(
        _ test: Test, cpuOf thread: DedicatedThreadExecutor?, _ body: @Sendable () async throws -> Void
    ) async throws {
        let budget = thread == nil ? limit : cpuLimit
        let started = (clock: ContinuousClock.now, cpu: thread?.cpuTime)
        let finished = Flag()
        defer {
            finished.set()
            if let times = ProcessInfo.processInfo.environment["MEDIACACHE_TEST_TIMES"] {
                let cpu = started.cpu.flatMap { start in thread?.cpuTime.map { $0 - start } }
                let line = "\(test.id)\t\(ContinuousClock.now - started.clock)\t\(cpu.map { "\($0)" } ?? "-")\n"
                TestTimes.append(line, to: times)
            }
        }
        try await withoutActuallyEscaping(body) { body in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await body()
                    return true
                }
                // The watch runs on the pool, not on a CPU-bound test's thread, which its body
                // may never let go of.
                // Cancelled, it says nothing: the body ended first.
                group.addTask(executorPreference: globalConcurrentExecutor) {
                    // Processor time passes no faster than wall time: sleep what is left of it.
                    var used = Duration.zero
                    repeat {
                        guard (try? await Task.sleep(for: budget - used)) != nil else { return true }
                        guard let thread, let start = started.cpu else { break }
                        used = (thread.cpuTime ?? start) - start
                    } while used < budget
                    let kind = thread == nil ? "waited" : "computed"
                    Issue.record(
                        "Stalled: \(test.name) \(kind) for \(budget) without finishing; cancelled.",
                        sourceLocation: test.sourceLocation)
                    Task.detached {
                        try await Task.sleep(for: grace)
                        guard !finished.isSet else { return }
                        print("✘ \(test.name) ignored cancellation for \(grace) after its stall limit: ending the run.")
                        exit(1)
                    }
                    return false
                }
                _ = try await group.next()
                group.cancelAll()
                while try await group.next() != nil {}
            }
        }
    }
}

/// A one-way flag that tasks on any thread read.
private final class Flag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}

/// `MEDIACACHE_TEST_TIMES=FILE`: each test's body time (and a CPU-bound test's processor time)
/// appended to FILE as a tab-separated line, to size the limits (docs/testing.md).
private enum TestTimes {
    static let lock = Mutex(())

    static func append(_ line: String, to path: String) {
        lock.withLock { _ in
            guard let file = fopen(path, "a") else { return }
            fputs(line, file)
            fclose(file)
        }
    }
}

extension Trait where Self == StallLimitTrait {
    /// Every suite's limit on a test's own waiting (see ``StallLimitTrait``).
    public static var stallLimit: Self { StallLimitTrait() }
}

/// The threads of the tests marked ``CPUBoundTrait``: as many as the cores the process may run
/// on (its affinity, so `taskset -c 0` gives one), each lent to one test at a time.
final class CPUBoundThreads: Sendable {
    static let shared = CPUBoundThreads(count: usableCores())

    private struct State {
        var free: [DedicatedThreadExecutor]
        var waiters: [CheckedContinuation<DedicatedThreadExecutor, Never>] = []
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(
            State(free: (0..<max(1, count)).map { DedicatedThreadExecutor(name: "cpu-bound tests \($0)") }))
    }

    func take() async -> DedicatedThreadExecutor {
        await withCheckedContinuation { continuation in
            let thread = state.withLock { state -> DedicatedThreadExecutor? in
                if let thread = state.free.popLast() { return thread }
                state.waiters.append(continuation)
                return nil
            }
            if let thread { continuation.resume(returning: thread) }
        }
    }

    func give(_ thread: DedicatedThreadExecutor) {
        let next = state.withLock { state -> CheckedContinuation<DedicatedThreadExecutor, Never>? in
            if state.waiters.isEmpty {
                state.free.append(thread)
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume(returning: thread)
    }

    /// The cores this process may run on: its affinity mask (`Cpus_allowed` in
    /// `/proc/self/status`) where the system shows one.
    static func usableCores() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let mask = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed:") }?.dropFirst(13)
        let count = (mask ?? "").reduce(0) { $0 + (Int(String($1), radix: 16)?.nonzeroBitCount ?? 0) }
        return count > 0 ? count : ProcessInfo.processInfo.activeProcessorCount
    }
}

/// A task executor with one thread of its own, which runs its jobs in order.
final class DedicatedThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` is touched only with `condition` locked; `clock` is written once, by the
    // thread itself before it takes a job, and read after `ready` says it was written.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var clock: clockid_t?

    init(name: String) {
        let thread = Thread { [unowned self] in
            #if os(Linux)
                var clock = clockid_t()
                if pthread_getcpuclockid(pthread_self(), &clock) == 0 {
                    condition.lock()
                    self.clock = clock
                    condition.unlock()
                }
            #endif
            run()
        }
        thread.name = name
        thread.start()
    }

    /// The processor time the thread has used so far, where the system tells it.
    var cpuTime: Duration? {
        condition.lock()
        let clock = self.clock
        condition.unlock()
        guard let clock else { return nil }
        var time = timespec()
        guard clock_gettime(clock, &time) == 0 else { return nil }
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
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
/// once in the process; the others wait for a slot before they start, and their stall limit
/// starts when they have one.
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
        try await StallLimitTrait.watching(test, cpuOf: nil, function)
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
