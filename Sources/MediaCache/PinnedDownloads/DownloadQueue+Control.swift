// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import Synchronization

extension DownloadQueue {
    // MARK: Control

    /// Stops a job; what arrived stays pinned. A queued job is paused before it starts.
    /// - Throws: ``CacheError`` `.notCached` when there is no such job.
    @discardableResult
    public func pause(_ id: String) async throws -> DownloadJob {
        // A job whose download has just ended is not cancelled while its state is written.
        let (task, cancels) = try state.withLock { state -> (Task<Void, Never>?, Bool) in
            guard let job = state.jobs[id] else { throw Self.noJob(id) }
            if let running = state.running[id] {
                if !running.isSettling { state.running[id]!.stop = .pause }
                return (running.task, !running.isSettling)
            }
            if job.state == .queued {
                state.jobs[id]!.state = .paused
                state.publish(.changed(state.jobs[id]!))
            }
            return (nil, false)
        }
        if let task {
            if cancels { task.cancel() }
            await task.value
        } else {
            try await persist(id)
        }
        return try current(id)
    }

    /// Queues a paused or failed job again; it resumes with the bytes that are missing.
    @discardableResult
    public func resume(_ id: String) async throws -> DownloadJob {
        try state.withLock { state in
            guard let job = state.jobs[id] else { throw Self.noJob(id) }
            guard job.state == .paused || job.state == .failed else { return }
            state.jobs[id]!.state = .queued
            state.jobs[id]!.failure = nil
            state.publish(.changed(state.jobs[id]!))
        }
        try await persist(id)
        schedule()
        return try current(id)
    }

    /// Stops a job, forgets it and unpins its entries (their bytes stay, as streaming-cache
    /// entries the least-recently-used policy may evict).
    public func cancel(_ id: String) async throws {
        let (task, cancels) = try state.withLock { state -> (Task<Void, Never>?, Bool) in
            guard state.jobs[id] != nil else { throw Self.noJob(id) }
            guard let running = state.running[id] else { return (nil, false) }
            if !running.isSettling { state.running[id]!.stop = .cancel }
            return (running.task, !running.isSettling)
        }
        if cancels { task?.cancel() }
        await task?.value
        let removed = state.withLock { state in
            defer { state.publish(.removed(id: id)) }
            return state.jobs.removeValue(forKey: id)
        }
        guard let job = removed else { return }
        try await store.saveJob(id) { nil }
        try await store.unpin(job.keys)
        configuration.logger.info("Unpinned", metadata: ["job": "\(id)", "url": "\(job.url.absoluteString.prefix(200))"])
        schedule()
    }

    /// Stops every running job without changing what is kept (a restart resumes them) and
    /// ends the ``updates()`` streams. Call it before ``CachingReader/shutDown()``.
    public func shutDown() async {
        let (tasks, subscribers) = state.withLock { state in
            state.isShutDown = true
            state.watcher?.cancel()
            state.watcher = nil
            for id in state.running.keys where !state.running[id]!.isSettling { state.running[id]!.stop = .shutDown }
            defer { state.subscribers = [:] }
            return (state.running.values.compactMap { running in running.task.map { (task: $0, cancels: !running.isSettling) } }, Array(state.subscribers.values))
        }
        // A job whose download has ended is not cancelled: its last state (completed, say) is
        // being written, and a client that saw it settle may close the store next.
        for (task, cancels) in tasks where cancels { task.cancel() }
        for (task, _) in tasks { await task.value }
        for subscriber in subscribers { subscriber.finish() }
    }
}
