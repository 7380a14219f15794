// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// What a read waits on when it pauses at a hole (``CachingReader/Configuration/holeDelay``):
/// real time, or in tests a timer the test fires, so a test of the pause waits on the pause
/// itself and never on a duration.
package protocol PauseTimer: Sendable {
    /// Returns after `duration`, or throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// Real time.
package struct SystemPauseTimer: PauseTimer {
    package init() {}

    package func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
