// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// A task whose result several callers wait for, each able to stop waiting at once when its
/// own task is cancelled while the work goes on for the others. The task hands its result to
/// the waiters itself when it ends: a waiter costs a continuation, not a task of its own that
/// waits for the result and passes it on (one hop between threads less before a cold read's
/// first byte).
final class SharedTask<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T, any Error>?
        var waiters: [UInt64: CheckedContinuation<T, any Error>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())
    private let task: Mutex<Task<T, any Error>?> = Mutex(nil)

    /// Starts `operation` on a task of its own.
    init(_ operation: @escaping @Sendable () async throws -> T) {
        let started = TaskPlacement.throwingTask { [self] in
            let result: Result<T, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            let waiters = self.state.withLock { state in
                state.result = result
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume(with: result) }
            return try result.get()
        }
        task.withLock { $0 = started }
    }

    /// The task's value, or `CancellationError` as soon as the calling task is cancelled,
    /// whether or not the task has ended.
    func value() async throws -> T {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                // Cancellation is marked before its handler runs: a caller cancelled before
                // it is registered sees it here, under the lock the handler takes.
                let ready: Result<T, any Error>? = state.withLock { state in
                    if let result = state.result { return result }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }

    /// How many callers wait now (tests wait on it).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Cancels the work (every waiter then gets what it ends with).
    func cancel() {
        task.withLock { $0 }?.cancel()
    }

    /// Waits for the work to end, whatever the calling task's cancellation.
    var result: Result<T, any Error> {
        get async {
            guard let task = task.withLock({ $0 }) else { return .failure(CancellationError()) }
            return await task.result
        }
    }
}
