// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension CacheStore {
    // MARK: Pins

    /// Pins the entries for `keys` (creating empty ones for keys with none, so the bytes
    /// that arrive later are pinned too): they are never evicted by size or age, and their
    /// bytes count against ``Configuration/pinnedQuota``. Removing an entry (``remove(_:)``)
    /// still removes it. The pin is committed before this returns.
    public func pin(_ keys: some Sequence<CacheKey>) async throws {
        let now = configuration.clock.now
        try state.withLock { state in
            guard !state.isClosed else { throw CacheError(.storeClosed, "The cache store is closed.") }
            for key in keys {
                if state.records[key] == nil {
                    state.records[key] = Record(
                        fileName: Self.newFileName(), generation: state.makeGeneration(), metadata: ContentMetadata(),
                        spans: SpanSet(), createdAt: now, lastAccess: now, isPinned: true, isInPinnedFolder: true,
                        isDirty: true)
                }
                state.records[key]!.isPinned = true
                state.records[key]!.isDirty = true
            }
        }
        try await flush()
        // Committed pinned first: a crash before the move leaves a pinned entry in the cache
        // folder, which the next open moves (never a cache entry in the pinned one, unbounded).
        await placeFiles(of: keys)
    }

    /// Gives the entries for `keys` back to the least-recently-used policy (their bytes stay
    /// until it evicts them); empty entries are removed. Then trims the store.
    public func unpin(_ keys: some Sequence<CacheKey>) async throws {
        state.withLock { state in
            for key in keys where state.records[key]?.isPinned == true {
                state.records[key]!.isPinned = false
                state.records[key]!.isDirty = true
                if state.records[key]!.spans.isEmpty, state.records[key]!.openBy.isEmpty { state.drop(key) }
            }
        }
        try await trim()
        await placeFiles(of: keys)
    }

    /// Whether the entry for `key` is pinned.
    public func isPinned(_ key: CacheKey) -> Bool {
        state.withLock { $0.records[key]?.isPinned ?? false }
    }

    /// The bytes stored in pinned entries.
    public var pinnedBytes: Int64 {
        state.withLock { $0.pinnedBytes }
    }

    /// The download jobs kept with the store (JSON bodies, by id), from memory: read from the
    /// index when the store opened, and kept as they are saved since.
    func loadJobs() throws -> [(id: String, body: Data)] {
        jobs.withLock { $0.sorted { $0.key < $1.key }.map { (id: $0.key, body: $0.value) } }
    }

    /// Keeps the job `id` with the store as `body` gives it then (JSON), or forgets it when
    /// `body` gives `nil` (see ``CacheIndex/saveJob(_:body:)``).
    func saveJob(_ id: String, body: @escaping @Sendable () throws -> Data?) async throws {
        guard !state.withLock({ $0.isClosed }) else { throw CacheError(.storeClosed, "The cache store is closed.") }
        // The body is taken on the index's queue, in call order; memory follows the same order.
        try await index.saveJob(id) { [self] in
            let saved = try body()
            self.jobs.withLock { $0[id] = saved }
            return saved
        }
    }

    /// Evicts expired entries and, if the store is over its limit, what its eviction policy
    /// chooses, then flushes.
    public func trim() async throws {
        let now = configuration.clock.now
        state.withLock { _ = $0.evict(limit: configuration.maxBytes, maxAge: configuration.maxAgeSeconds, now: now) }
        try await flush()
    }
}
