// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// What a read (``ReadSession``) works with, handed to it by the ``CachingReader`` that opens
/// it: the store, the scheduler and the transfers it starts, the players' priority, the
/// configuration, the tasks that outlive a read, and the counts every read shares. A session
/// never reaches into the reader.
final class ReadContext: Sendable {
    let store: CacheStore
    let configuration: CachingReader.Configuration
    let fetcher: MeteredFetcher
    let scheduler: DownloadScheduler
    /// When the origin last confirmed each resource and a player last read it, on the store's
    /// clock.
    let plays: Plays
    /// Where the cache's own fetches give way to players waiting on the origin.
    let priority: OriginPriority
    /// Removals of unfinished entries, and the reader's other tasks that outlive a read.
    let owned: OwnedTasks
    /// How many streams are open (see ``CachingReader/Configuration/readBufferBudget``).
    let openStreams = Atomic<Int>(0)
    /// The fills on play under way, and whether they may start.
    let fills: FillOnPlay
    /// Resources whose body without a length a read is writing to the store.
    let passThroughWriters = Mutex<Set<CacheKey>>([])

    init(
        store: CacheStore, configuration: CachingReader.Configuration, fetcher: MeteredFetcher,
        scheduler: DownloadScheduler,
        plays: Plays, priority: OriginPriority, owned: OwnedTasks, fills: FillOnPlay
    ) {
        self.fills = fills
        (self.store, self.configuration, self.fetcher, self.scheduler) = (store, configuration, fetcher, scheduler)
        (self.plays, self.priority, self.owned) = (plays, priority, owned)
    }

    /// A transfer for `download`, given what it needs (it does not call back into the reader);
    /// `firstResponse`: the probe's answer, which its first request takes.
    func transfer(for download: SharedDownload, firstResponse: OriginResponse?) -> OriginTransfer {
        OriginTransfer(
            store: store, fetcher: fetcher, configuration: configuration, plays: plays,
            download: download, firstResponse: firstResponse.map(HeldResponse.init), priority: priority, fills: fills)
    }

    /// The chunk size for a stream now, given how many are open.
    var currentChunkSize: Int64 {
        share(of: configuration.readBufferBudget / 3, upTo: configuration.chunkSize)
    }

    /// The file region size for a stream now, given how many are open.
    var currentRegionSize: Int64 {
        share(of: configuration.fileRegionBudget, upTo: configuration.fileRegionSize)
    }

    /// One open stream's share of `budget`, in whole 16 KiB, within ``CachingReader/Configuration/minimumChunkSize`` ... `maximum`.
    private func share(of budget: Int, upTo maximum: Int) -> Int64 {
        let open = max(1, openStreams.load(ordering: .relaxed))
        let share = budget / open / (16 << 10) * (16 << 10)
        return Int64(min(maximum, max(configuration.minimumChunkSize, share)))
    }
}
