// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

/// The tests' child processes: waiting for one to end holds nothing another task needs.
@Suite(.stallLimit) struct ChildProcessTests {
    /// A task that waits for a process to end leaves `isRunning` and `terminate()` free for
    /// others. (The wait held the process's lock: a second task asking whether it ran was
    /// blocked, on a thread of the cooperative pool, until the process ended by itself, and
    /// the signal that would have ended it was never sent.)
    @Test func waitingForTheEndLeavesTheProcessFreeToBeEnded() async throws {
        let process = try SpawnedProcess("sleep", ["600"], searchingPath: true)
        let waiting = Task { await process.exited() }
        try await waitUntil { Self.aThreadWaitsForAChild() }
        #expect(process.isRunning)
        process.terminate()
        await waiting.value
        #expect(process.terminationStatus == 128 + SIGTERM && !process.isRunning)
    }

    /// Whether a thread of this process is in the kernel waiting for a child (`wait4` or
    /// `waitid`, as `/proc/self/task/*/syscall` shows on x86_64 and arm64).
    static func aThreadWaitsForAChild() -> Bool {
        #if arch(x86_64)
            let waits: Set<String> = ["61", "247"]
        #else
            let waits: Set<String> = ["260", "95"]
        #endif
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return threads.contains { thread in
            let text = (try? String(contentsOfFile: "/proc/self/task/\(thread)/syscall", encoding: .utf8)) ?? ""
            return text.split(separator: " ").first.map { waits.contains(String($0)) } ?? false
        }
    }

    /// A tool on the `PATH` is found without starting a process; a missing one is not.
    @Test func toolsAreFoundOnThePath() {
        #expect(ChildProcess.toolExists("sh") && !ChildProcess.toolExists("no-such-tool-\(getpid())"))
    }
}
