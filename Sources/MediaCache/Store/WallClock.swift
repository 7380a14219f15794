// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Synchronization

/// The source of wall-clock time for last-access times and age-based eviction.
///
/// Times are stored in the index, so they must be wall-clock dates that survive a restart.
/// Tests inject a ``ManualClock`` to drive age expiry without sleeping.
package protocol WallClock: Sendable {
    /// The current time.
    var now: Date { get }
}

/// The system's clock.
package struct SystemClock: WallClock {
    /// Creates the system clock.
    public init() {}
    /// The current time.
    public var now: Date { Date() }
}

/// A clock that moves only when told to, for tests.
package final class ManualClock: WallClock {
    private let current: Mutex<Date>

    /// Creates a clock showing `start`.
    public init(start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        current = Mutex(start)
    }

    /// The time the clock shows.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward by `seconds`.
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}
