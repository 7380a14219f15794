// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

extension CacheStore {
    /// Work the store starts for an entry the moment a write makes it whole: what uses the store
    /// (the origin digest check of `Integrity`) gives it with ``startWhenWhole(_:)``; the store
    /// knows only that it runs, one at a time per entry, and waits for it when it closes.
    package struct WholeEntryWork: Sendable {
        /// Whether the work applies to an entry whole now with this metadata.
        package let applies: @Sendable (ContentMetadata) -> Bool
        /// The work, on its own task at a low priority (never on a player's path).
        package let run: @Sendable (CacheStore, CacheKey) async -> Void

        package init(
            applies: @escaping @Sendable (ContentMetadata) -> Bool,
            run: @escaping @Sendable (CacheStore, CacheKey) async -> Void
        ) {
            self.applies = applies
            self.run = run
        }
    }

    /// Starts `work` for each entry that becomes whole from now on (it replaces the work given
    /// before).
    package func startWhenWhole(_ work: WholeEntryWork) {
        state.withLock { $0.wholeEntryWork = work }
    }

    /// Waits for the work started for whole entries that runs now (tests, `verify`, closing).
    package func wholeEntryWorkSettled() async {
        while let running = state.withLock({ $0.wholeEntryTasks.values.first }) { await running.value }
    }
}

extension CacheStore.State {
    /// The write that made `key` whole, with `metadata`, tells it here, under the store's lock: the
    /// work is known to run as soon as the entry shows whole.
    mutating func entryBecameWhole(_ key: CacheKey, metadata: ContentMetadata, store: CacheStore) {
        guard !isClosed, wholeEntryTasks[key] == nil, let work = wholeEntryWork, work.applies(metadata) else { return }
        wholeEntryTasks[key] = Task.detached(priority: .background) {
            await work.run(store, key)
            store.state.withLock { _ = $0.wholeEntryTasks.removeValue(forKey: key) }
        }
    }
}
