// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// A token bucket: at most `rate` bytes per second on average, with bursts of at most one
/// second's worth. Pure: time is given.
struct RateBucket: Sendable, Equatable {
    let rate: Int64
    private(set) var tokens: Double
    private(set) var last: Duration?

    init(bytesPerSecond rate: Int64) {
        self.rate = max(1, rate)
        tokens = Double(self.rate)
    }

    /// Takes `bytes` at `now` (since any fixed start); returns how long to wait before they may
    /// be sent (zero when the bucket held them).
    mutating func take(_ bytes: Int, at now: Duration) -> Duration {
        if let last {
            let elapsed = Double((now - last).components.seconds) + Double((now - last).components.attoseconds) / 1e18
            tokens = min(Double(rate), tokens + max(0, elapsed) * Double(rate))
        }
        last = now
        tokens -= Double(bytes)
        guard tokens < 0 else { return .zero }
        return .nanoseconds(Int64((-tokens / Double(rate) * 1e9).rounded(.up)))
    }
}

/// The rate cap of the pinned downloads (``DownloadQueue/Configuration/maxBytesPerSecond``),
/// shared by every job: an origin transfer of the cache's own waits in ``take(_:)`` before it
/// takes each chunk. A transfer a player reads is never held back.
final class DownloadRate: Sendable {
    /// The cap in force for the transfers started from the current task (a job's).
    @TaskLocal static var current: DownloadRate?

    private let bucket: Mutex<RateBucket>
    private let start = ContinuousClock.now

    init(bytesPerSecond: Int64) {
        bucket = Mutex(RateBucket(bytesPerSecond: bytesPerSecond))
    }

    /// Waits until `bytes` more are within the rate.
    func take(_ bytes: Int) async {
        let now = ContinuousClock.now - start
        let wait = bucket.withLock { $0.take(bytes, at: now) }
        if wait > .zero { try? await Task.sleep(for: wait) }
    }
}
