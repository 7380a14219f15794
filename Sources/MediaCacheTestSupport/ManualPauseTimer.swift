// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import MediaCache
import Synchronization

/// A pause timer the test fires: a read that pauses at a hole waits until ``fire()`` (or
/// until its task is cancelled), so a test sees the pause begin and decides when it ends.
public final class ManualPauseTimer: PauseTimer {
    private struct Sleepers {
        var waiting: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var nextID: UInt64 = 0
        var begun = 0
    }

    private let sleepers = Mutex(Sleepers())

    public init() {}

    /// Reads pausing now.
    public var sleeping: Int { sleepers.withLock { $0.waiting.count } }
    /// Pauses begun since the timer was made.
    public var pausesBegun: Int { sleepers.withLock { $0.begun } }

    /// Ends every pause under way.
    public func fire() {
        let woken = sleepers.withLock { sleepers in
            defer { sleepers.waiting = [:] }
            return Array(sleepers.waiting.values)
        }
        for continuation in woken { continuation.resume() }
    }

    package func sleep(for duration: Duration) async throws {
        let id = sleepers.withLock { sleepers in
            defer {
                sleepers.nextID += 1
                sleepers.begun += 1
            }
            return sleepers.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = sleepers.withLock { sleepers in
                    if Task.isCancelled { return true }
                    sleepers.waiting[id] = continuation
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = sleepers.withLock { $0.waiting.removeValue(forKey: id) }
            continuation?.resume(throwing: CancellationError())
        }
    }
}
