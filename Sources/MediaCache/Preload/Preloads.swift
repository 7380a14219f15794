// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// The read path's preload queue: its state machine under a lock, and the resources it
/// preloaded that no player has read yet (for the hits metric).
final class Preloads: Sendable {
    private let machine: Mutex<PreloadQueueStateMachine>
    /// Resources preloaded and not read by a player since (at most ``rememberedLimit``).
    private let unplayed = Mutex<Set<CacheKey>>([])
    /// How many are in ``unplayed``: a player's read looks at the set only when there are any.
    private let unplayedCount = Atomic<Int>(0)
    static let rememberedLimit = 1024

    init(maxBytes: Int64, maxConcurrent: Int) {
        machine = Mutex(PreloadQueueStateMachine(maxBytes: maxBytes, maxConcurrent: maxConcurrent))
    }

    func withMachine<T>(_ body: (inout PreloadQueueStateMachine) -> T) -> T {
        machine.withLock { body(&$0) }
    }

    /// Remembers that `key` was preloaded.
    func preloaded(_ key: CacheKey) {
        let count = unplayed.withLock { keys in
            if keys.count >= Self.rememberedLimit { keys.remove(keys.first!) }
            keys.insert(key)
            return keys.count
        }
        unplayedCount.store(count, ordering: .relaxed)
    }

    /// A player reads `key`: counted as a hit the first time after it was preloaded.
    func played(_ key: CacheKey) {
        guard unplayedCount.load(ordering: .relaxed) > 0, !OriginPriority.isCachesOwn else { return }
        let (hit, count) = unplayed.withLock { keys in (keys.remove(key) != nil, keys.count) }
        guard hit else { return }
        unplayedCount.store(count, ordering: .relaxed)
        CacheMetrics.preloadHits.increment()
    }
}
