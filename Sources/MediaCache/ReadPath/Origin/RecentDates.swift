// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// When the origin last gave or confirmed the stored version of each resource, for the
/// resources validated most recently: at most `limit` of them, so memory stays bounded
/// however many resources a long-running server sees. When it is full, the older half is
/// forgotten. A resource forgotten counts as old as its stored answer (`generatedAt`), so its
/// next use that needs a recent validation asks the origin again: a request, never a wrong
/// byte.
final class ValidationMemory: Sendable {
    private let dates = Mutex<[CacheKey: Date]>([:])
    let limit: Int

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Records that the origin gave or confirmed `key`'s stored version at `date`.
    func record(_ key: CacheKey, at date: Date) {
        dates.withLock { dates in
            if dates[key] == nil, dates.count >= limit {
                let oldest = dates.sorted { $0.value < $1.value }.prefix(dates.count - limit / 2)
                for (forgotten, _) in oldest { dates[forgotten] = nil }
            }
            dates[key] = date
        }
    }

    /// When the origin last gave or confirmed `key`'s stored version, if remembered.
    func date(of key: CacheKey) -> Date? {
        dates.withLock { $0[key] }
    }

    /// How many resources are remembered.
    var count: Int {
        dates.withLock { $0.count }
    }
}
