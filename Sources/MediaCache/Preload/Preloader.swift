// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import Synchronization

/// What a preload asks of the read path: its narrow view of stored bytes and fetching.
protocol PreloadSource: Sendable {
    /// The resource's content information (``CachingReader/contentInfo(for:readingFrom:length:headers:maximumAge:)``).
    func metadata(of url: URL) async throws -> ContentMetadata
    /// Whether `url` is an HLS playlist or a DASH manifest (looking at its first bytes if its
    /// type does not say).
    func manifestKind(of url: URL, _ metadata: ContentMetadata) async throws -> CachingReader.ManifestKind?
    /// What a prefetch of the asset at `url` stores.
    func assetPlan(_ url: URL, kind: CachingReader.ManifestKind, options: HLSPrefetchOptions) async throws
        -> PrefetchPlan
    /// The bytes of `range` of `url`, read through the cache (and so stored).
    func bytes(of url: URL, in range: ByteRange) async throws -> [UInt8]
    /// The store's key for `url` (its key rules applied).
    func key(for url: URL) -> CacheKey
    /// How many bytes of `url` are stored.
    func storedByteCount(of url: URL) -> Int64
    /// How many bytes of `piece` are not stored; `nil` while its length is unknown.
    func missingBytes(of piece: PrefetchItem) -> Int64?
    /// Stores `piece` as the cache's own fetch; returns how many bytes it added to the store.
    func store(_ piece: PrefetchItem) async throws -> Int64
    /// Whether the read path has shut down (a preload that fails then is not news).
    var hasShutDown: Bool { get }
}

/// The preload queue and its runner: the first seconds of each item, in order, stored ahead
/// of the user (``CachingReader/preload(_:)``).
///
/// The queue's rules are the pure ``PreloadQueueStateMachine``; this type runs the items it
/// starts on the read path's owned tasks as the cache's own work (``OriginPriority``), plans
/// each with the variant a player last played (``PlayedVariants``), and counts a preloaded
/// resource a player then reads as a hit. It sees the read path only through
/// ``PreloadSource``.
final class Preloader: Sendable {
    private let machine: Mutex<PreloadQueueStateMachine>
    /// Resources preloaded and not read by a player since (at most ``rememberedLimit``).
    private let unplayed = Mutex<Set<CacheKey>>([])
    /// How many are in ``unplayed``: a player's read looks at the set only when there are any.
    private let unplayedCount = Atomic<Int>(0)
    /// The HLS variant a player played last, per asset.
    let playedVariants = PlayedVariants()
    private let owned: OwnedTasks
    private let logger: Logger

    static let rememberedLimit = 1024
    /// The most items a queue holds: it is what plays next, not a library.
    static let maximumItems = 100
    /// The most bytes of a file fetched between two of a preload's boundaries.
    static let piece: Int64 = 1 << 20

    init(maxBytes: Int64, maxConcurrent: Int, owned: OwnedTasks, logger: Logger) {
        machine = Mutex(PreloadQueueStateMachine(maxBytes: maxBytes, maxConcurrent: maxConcurrent))
        self.owned = owned
        self.logger = logger
    }

    /// The queue's items and where each is.
    var status: [PreloadItem.Status] { machine.withLock { $0.status } }

    /// Replaces the queue with the first ``maximumItems`` of `items` that have a positive
    /// number of seconds and an http(s) URL, fetched from `source`.
    func replace(with items: [PreloadItem], from source: some PreloadSource) {
        let valid = items.filter {
            $0.seconds.isFinite && $0.seconds > 0 && ["http", "https"].contains($0.url.scheme?.lowercased() ?? "")
        }
        .prefix(Self.maximumItems)
        start(machine.withLock { $0.replace(with: Array(valid)) }, from: source)
    }

    /// Holds the queue for `reason` (`"power"`: nothing starts, a started item stops at its
    /// next boundary and waits), or lets it go on (`nil`), fetching from `source`.
    func hold(_ reason: String?, from source: some PreloadSource) {
        let starts = machine.withLock { machine -> [PreloadQueueStateMachine.Start]? in
            guard machine.hold != reason else { return nil }
            return machine.setHold(reason)
        }
        guard let starts else { return }
        logger.info(reason.map { "Preloads wait: \($0)" } ?? "Preloads go on")
        start(starts, from: source)
    }

    /// A player reads `key`: counted as a hit the first time after it was preloaded.
    func played(_ key: CacheKey) {
        guard unplayedCount.load(ordering: .relaxed) > 0 else { return }
        let (hit, count) = unplayed.withLock { keys in (keys.remove(key) != nil, keys.count) }
        guard hit else { return }
        unplayedCount.store(count, ordering: .relaxed)
        CacheMetrics.preloadHits.increment()
    }

    private func preloaded(_ key: CacheKey) {
        let count = unplayed.withLock { keys in
            if keys.count >= Self.rememberedLimit { keys.remove(keys.first!) }
            keys.insert(key)
            return keys.count
        }
        unplayedCount.store(count, ordering: .relaxed)
    }

    private func start(_ starts: [PreloadQueueStateMachine.Start], from source: some PreloadSource) {
        for start in starts {
            owned.run { [self] in
                let outcome = await run(start, from: source)
                if let metric = outcome.metric { CacheMetrics.preloaded(metric) }
                self.start(
                    machine.withLock { $0.finished(start.id, error: outcome.error, held: outcome.metric == nil) },
                    from: source)
            }
        }
    }

    private struct Outcome {
        /// `nil`: held at a boundary, to go on later.
        var metric: CacheMetrics.Preload?
        var error: String?
    }

    private func run(_ start: PreloadQueueStateMachine.Start, from source: some PreloadSource) async -> Outcome {
        let url = start.item.url
        do {
            let before = source.storedByteCount(of: url)
            let (pieces, estimate) = try await plan(start.item, from: source)
            // The plan's own reads (a file's head, its `moov`) count as this item's.
            let planned = max(0, source.storedByteCount(of: url) - before)
            machine.withLock { $0.fetched(start.id, bytes: planned, reserved: 0) }
            CacheMetrics.preloadedBytes.increment(by: planned)
            for piece in pieces {
                // A resource never fetched has no known length: it is fetched, and the budget
                // reserves the plan's estimate for it.
                let missing = source.missingBytes(of: piece)
                switch machine.withLock({ $0.boundary(start.id, missing: missing ?? estimate) }) {
                case .fetch: break
                case .stop: return Outcome(metric: .stopped)
                case .held: return Outcome(metric: nil)
                case .overBudget: return Outcome(metric: .overBudget)
                }
                let fetched = missing ?? 1 > 0 ? try await source.store(piece) : 0
                machine.withLock { $0.fetched(start.id, bytes: fetched, reserved: missing ?? estimate) }
                CacheMetrics.preloadedBytes.increment(by: fetched)
                preloaded(source.key(for: piece.url))
            }
            return Outcome(metric: .done)
        } catch {
            let message = (error as? CacheError)?.message ?? (error as? MediaParseError)?.message ?? "\(error)"
            if !source.hasShutDown, !(error is CancellationError) {
                logger.warning(
                    "A preload failed; the queue goes on",
                    metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(message)"])
            }
            return Outcome(metric: .failed, error: message)
        }
    }

    /// What a preload of `item` stores, in the order a player reads it, and the bytes to
    /// assume for a piece of unknown length.
    func plan(_ item: PreloadItem, from source: some PreloadSource) async throws -> (
        pieces: [PrefetchItem], estimate: Int64
    ) {
        let metadata = try await source.metadata(of: item.url)
        // The variant a player last played of this asset (by its bandwidth), else the first listed.
        let played = playedVariants.lastPlayed(source.key(for: item.url))
        let options = HLSPrefetchOptions(
            variant: played.map { .atMost(bitsPerSecond: $0) } ?? .first, seconds: item.seconds)
        if let kind = try await source.manifestKind(of: item.url, metadata) {
            let plan = try await source.assetPlan(item.url, kind: kind, options: options)
            let unknown = plan.items.filter { $0.range == nil }.count
            return (plan.items, unknown == 0 ? 0 : (plan.estimatedBytes ?? 0) / Int64(unknown))
        }
        guard let length = metadata.length else {
            throw CacheError(
                .originRejected,
                "\(item.url.absoluteString.prefix(200)) has no length: a stream without an end cannot be preloaded.")
        }
        let plan = try await MediaTimePlanner.plan(seconds: item.seconds, length: length) { range in
            try await source.bytes(of: item.url, in: range)
        }
        logger.debug(
            "Planned a preload",
            metadata: [
                "url": "\(item.url.absoluteString.prefix(200))", "shape": "\(plan.shape)", "bytes": "\(plan.byteCount)",
            ])
        let pieces = plan.ranges.flatMap { range in
            stride(from: range.lowerBound, to: range.upperBound, by: Int(Self.piece)).map {
                PrefetchItem(url: item.url, range: ByteRange($0, min(range.upperBound, $0 + Self.piece)))
            }
        }
        return (pieces, 0)
    }
}
