// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// Stores resources ahead of a player, as a player's reads would, `options.concurrency` at a
/// time, as the cache's own work of its ``Requester`` (its origin transfers give way to players,
/// ``TransferPolicy``): what ``CachingReader``'s prefetches, pins, preloads and segment
/// read-ahead run.
struct Prefetcher: Sendable {
    let reader: any PrefetchSource
    /// Whose work it is (never a player: see ``CachingReader/read(_:offset:length:headers:planned:)``).
    let requester: Requester

    /// Stores `items`, `options.concurrency` at a time, reporting progress.
    func run(
        _ items: [PrefetchItem], playlists: [URL], options: HLSPrefetchOptions,
        progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws -> PrefetchProgress {
        let tracker = PrefetchTracker(items: items, playlists: playlists, progress: progress)
        try await prefetchAll(items, options: options, tracker: tracker)
        return tracker.progress
    }

    private func prefetchAll(_ items: [PrefetchItem], options: HLSPrefetchOptions, tracker: PrefetchTracker)
        async throws
    {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var pending = items[...]
            func startNext() {
                guard let item = pending.popFirst() else { return }
                group.addTask {
                    try await store(item, options: options) { length in
                        tracker.learned(length, of: item)
                    } stored: { bytes, wasCached in
                        tracker.report {
                            $0.bytesDone += bytes
                            if wasCached { $0.bytesAlreadyCached += bytes }
                        }
                    }
                    tracker.report { $0.resourcesDone += 1 }
                }
            }
            for _ in 0..<max(1, options.concurrency) { startNext() }
            while try await group.next() != nil { startNext() }
        }
    }

    /// Stores `item`, telling `length` the resource's byte count once known and `stored`
    /// each run of bytes stored (and whether it was cached already).
    private func store(
        _ item: PrefetchItem, options: HLSPrefetchOptions, length: (Int64) -> Void,
        stored: (Int64, _ wasCached: Bool) -> Void
    ) async throws {
        try Task.checkCancellation()
        // Already stored and current: nothing to fetch.
        if let total = reader.storedLength(ifHolding: item, as: requester) {
            let range = item.range.map { ByteRange($0.lowerBound, min($0.upperBound, total)) } ?? ByteRange(0, total)
            if item.range == nil { length(total) }
            stored(range.length, true)
            return
        }
        // A pinned download waits for disk space rather than fetch what it cannot keep.
        try requester.pacer?.admit(item.range?.length ?? DownloadPacer.piece)
        // One round trip for an uncached resource: its first GET gives the content
        // information, and its body is the download the read joins.
        try await reader.probe(item, headers: options.headers, as: requester)
        let stream = try await reader.read(item, headers: options.headers, as: requester)
        defer { stream.cancel() }
        if item.range == nil { length(stream.range.length) }
        // Stored parts come as file regions, which need not be read at all.
        while let part = try await stream.nextPart() {
            switch part {
            case .bytes(let buffer): stored(Int64(buffer.readableBytes), false)
            case .file(let region): stored(region.range.length, false)
            }
        }
    }
}

/// What ``Prefetcher`` stores through. (``CachingReader`` conforms.)
protocol PrefetchSource: Sendable {
    /// The resource's length when every byte of `item` is stored and current; `nil` otherwise.
    func storedLength(ifHolding item: PrefetchItem, as requester: Requester) -> Int64?
    /// Asks for `item`'s content information as a read of it would (one `GET` for an uncached
    /// resource, whose body the read joins).
    func probe(_ item: PrefetchItem, headers: RequestHeaders, as requester: Requester) async throws
    /// A read of `item` for `requester`.
    func read(_ item: PrefetchItem, headers: RequestHeaders, as requester: Requester) async throws -> ReadStream
}

/// One resource a prefetch stores: a segment or init section, whole or a byte range of a file.
struct PrefetchItem: Hashable, Sendable {
    var url: URL
    var range: ByteRange?
}

/// A prefetch's progress, updated by its concurrent fetches and reported after each change.
final class PrefetchTracker: Sendable {
    private struct State {
        var progress = PrefetchProgress()
        /// The whole resources whose length is known.
        var known: Set<PrefetchItem> = []
        /// The bytes of the byte ranges and of the whole resources in `known`.
        var knownBytes: Int64 = 0
        /// How many whole resources have no known length yet.
        var unknown = 0
        /// How many changes there have been.
        var changes = 0
    }

    private let state: Mutex<State>
    /// The number of the last change reported: concurrent fetches change the progress in one
    /// order, and `onChange` hears them in that order, a change already overtaken left out (a
    /// progress bar never goes back).
    private let reported = Mutex<Int>(0)
    private let onChange: @Sendable (PrefetchProgress) -> Void

    init(items: [PrefetchItem], playlists: [URL], progress: @escaping @Sendable (PrefetchProgress) -> Void) {
        var initial = State()
        initial.progress.playlists = playlists
        initial.progress.resourcesTotal = items.count
        for item in items {
            if let range = item.range { initial.knownBytes += range.length } else { initial.unknown += 1 }
        }
        initial.progress.bytesTotal = initial.unknown == 0 ? initial.knownBytes : nil
        state = Mutex(initial)
        onChange = progress
        progress(initial.progress)
    }

    var progress: PrefetchProgress { state.withLock { $0.progress } }

    func report(_ change: (inout PrefetchProgress) -> Void) {
        publish { change(&$0.progress) }
    }

    /// Records the byte count of a whole resource (`item.range == nil`), once known.
    func learned(_ length: Int64, of item: PrefetchItem) {
        publish { state in
            if item.range == nil, state.known.insert(item).inserted {
                state.knownBytes += length
                state.unknown -= 1
                if state.unknown == 0 { state.progress.bytesTotal = state.knownBytes }
            }
        }
    }

    /// Applies `change` and reports the progress after it, unless a later change has been
    /// reported already.
    private func publish(_ change: (inout State) -> Void) {
        let (snapshot, number) = state.withLock { state in
            change(&state)
            state.changes += 1
            return (state.progress, state.changes)
        }
        reported.withLock { last in
            guard number > last else { return }
            last = number
            onChange(snapshot)
        }
    }
}
