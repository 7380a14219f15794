// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import NIOCore
import NIOPosix
import Synchronization

/// An event loop as a task executor: a request's work that needs the origin runs on the loop
/// of the player's connection, as the request's head and its answer's bytes do, instead of
/// hopping to Swift's cooperative pool and back at each step (two context switches each).
/// AsyncHTTPClient then prefers that loop for the origin's connection too (its group's `any()`
/// is the calling loop), so a miss's bytes can go from the origin's socket to the player's on
/// one thread, as nginx's do. Blocking work still leaves the loop for the thread pool made for
/// it (`BlockingIO`). One executor per loop, so the runtime sees a job for the loop it is
/// already on as such.
final class LoopExecutor: TaskExecutor {
    let loop: any EventLoop

    private init(_ loop: any EventLoop) {
        self.loop = loop
    }

    private static let executors = Mutex<[ObjectIdentifier: LoopExecutor]>([:])

    /// The executor of `loop` when it is one of SwiftNIO's own loops and the calling thread
    /// runs it; `nil` for another kind of loop (a test's, which runs only when the test says).
    static func of(_ loop: any EventLoop) -> LoopExecutor? {
        guard let current = MultiThreadedEventLoopGroup.currentEventLoop, current === loop else { return nil }
        return executors.withLock { executors in
            if let known = executors[ObjectIdentifier(loop)] { return known }
            let made = LoopExecutor(loop)
            executors[ObjectIdentifier(loop)] = made
            return made
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
