// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Where the read path's tasks run. A front door that carries a request on a thread of its own
/// (the proxy: the event loop of the player's connection) sets ``executor`` for the request's
/// work, and every task the read path starts on its behalf (its download's transfer, a shared
/// validation, a read ahead in the file) prefers that executor too: the origin's bytes then go
/// from the origin's socket to the player's without a hop through Swift's cooperative pool and
/// back. `nil`, the default, leaves them on the pool.
///
/// A preference is not a promise: work that waits on blocking I/O still goes to the thread pool
/// made for it (``BlockingIO``), and resumes here when it is done.
package enum TaskPlacement {
    /// The executor the current request's tasks prefer.
    @TaskLocal package static var executor: (any TaskExecutor)?

    /// Starts `operation` on a task of its own that prefers ``executor``, as a task started
    /// inside the request's own work would if Swift passed the preference on to unstructured
    /// tasks (it passes it only to child tasks).
    @discardableResult
    package static func task<Success: Sendable>(
        _ operation: sending @escaping () async -> Success
    ) -> Task<Success, Never> {
        Task(executorPreference: executor, operation: operation)
    }

    /// ``task(_:)`` for work that throws.
    @discardableResult
    package static func throwingTask<Success: Sendable>(
        _ operation: sending @escaping () async throws -> Success
    ) -> Task<Success, any Error> {
        Task(executorPreference: executor, operation: operation)
    }
}
