// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// Tasks started beside the main work that still need an owner: each is kept until it ends,
/// and ``cancelAndWait()`` cancels the running ones and returns when they have ended. The
/// read path keeps the waiters on shared probes and the removal of unfinished entries here;
/// the proxy keeps its connections' answers.
package final class OwnedTasks: Sendable {
    private struct State {
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var next: UInt64 = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// How many are running.
    package var count: Int { state.withLock { $0.tasks.count } }

    /// Runs `body` on a task of its own, kept until it ends, that prefers `executor` (and
    /// whose own tasks do: ``TaskPlacement``).
    @discardableResult
    package func run(
        on executor: (any TaskExecutor)? = TaskPlacement.executor, _ body: @escaping @Sendable () async -> Void
    ) -> Task<Void, Never> {
        state.withLock { state in
            let id = state.next
            state.next += 1
            // The lock held here makes the task's own removal wait until it is in.
            let task = Task(executorPreference: executor) { [weak self] in
                await TaskPlacement.$executor.withValue(executor) { await body() }
                _ = self?.state.withLock { $0.tasks.removeValue(forKey: id) }
            }
            state.tasks[id] = task
            return task
        }
    }

    /// Cancels every running task and returns once each has ended.
    package func cancelAndWait() async {
        for task in state.withLock({ Array($0.tasks.values) }) {
            task.cancel()
            await task.value
        }
    }
}
