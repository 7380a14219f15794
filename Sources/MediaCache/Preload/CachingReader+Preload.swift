// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

extension CachingReader {
    /// Replaces the preload queue with `items`: the first seconds of each, in order, stored
    /// ahead of the user (the next items of a feed, a playlist, an episode list). Returns at
    /// once; the work goes on in the background.
    ///
    /// Items of the previous queue that had not started are dropped; a started one goes on if
    /// `items` names it, else it stops at its next boundary (a segment, or a piece of at most
    /// 1 MiB of a file). ``Configuration/preloadConcurrency`` items are fetched at once,
    /// and each queue fetches at most ``Configuration/preloadBudget`` bytes from origins;
    /// nothing stored is fetched again. A preload never makes a player wait: its origin
    /// transfers pause while a player waits on an origin. An item that cannot be preloaded is
    /// logged and the queue goes on. Call with `[]` to empty the queue.
    ///
    /// - Parameter items: media files (MP4 with `moov` first or last, fragmented MP4, MP3, AAC,
    ///   WAV; others by an estimate), HLS playlists and DASH manifests, with their seconds; the
    ///   first ``maximumPreloadItems`` with a positive number of seconds and an http(s) URL count.
    public func preload(_ items: [PreloadItem]) {
        let valid = items.filter { $0.seconds.isFinite && $0.seconds > 0 && ["http", "https"].contains($0.url.scheme?.lowercased() ?? "") }
            .prefix(Self.maximumPreloadItems)
        startPreloads(preloads.withMachine { $0.replace(with: Array(valid)) })
    }

    /// The preload queue's items and where each is.
    public var preloadStatus: [PreloadItemStatus] {
        preloads.withMachine { $0.status }
    }

    /// The most items a preload queue holds: it is what plays next, not a library.
    public static let maximumPreloadItems = 100

    /// The most bytes of a file fetched between two of a preload's boundaries.
    static let preloadPiece: Int64 = 1 << 20

    private func startPreloads(_ starts: [PreloadQueueStateMachine.Start]) {
        for start in starts {
            owned.run { [self] in
                let outcome = await OriginPriority.$isCachesOwn.withValue(true) { await runPreload(start) }
                CacheMetrics.preloaded(outcome.metric)
                startPreloads(preloads.withMachine { $0.finished(start.id, error: outcome.error) })
            }
        }
    }

    private struct PreloadOutcome {
        var metric: CacheMetrics.Preload
        var error: String?
    }

    private func runPreload(_ start: PreloadQueueStateMachine.Start) async -> PreloadOutcome {
        let url = start.item.url
        do {
            let before = store.spans(for: store.key(for: url)).byteCount
            let (pieces, estimate) = try await preloadPlan(start.item)
            // The plan's own reads (a file's head, its `moov`) count as this item's.
            let planned = max(0, store.spans(for: store.key(for: url)).byteCount - before)
            preloads.withMachine { $0.fetched(start.id, bytes: planned, reserved: 0) }
            CacheMetrics.preloadedBytes.increment(by: planned)
            for piece in pieces {
                let key = store.key(for: piece.url)
                let stored = store.spans(for: key)
                let total = store.metadata(for: key)?.length
                // A resource never fetched has no known length: it is fetched, and the budget
                // reserves the plan's estimate for it.
                let known = piece.range ?? total.map { ByteRange(0, $0) }
                let missing = known.map { stored.holes(in: $0).reduce(0) { $0 + $1.length } }
                switch preloads.withMachine({ $0.boundary(start.id, missing: missing ?? estimate) }) {
                case .fetch: break
                case .stop: return PreloadOutcome(metric: .stopped)
                case .overBudget: return PreloadOutcome(metric: .overBudget)
                }
                if missing ?? 1 > 0 { try await prefetch(piece.url, range: piece.range) }
                let fetched = max(0, store.spans(for: key).byteCount - stored.byteCount)
                preloads.withMachine { $0.fetched(start.id, bytes: fetched, reserved: missing ?? estimate) }
                CacheMetrics.preloadedBytes.increment(by: fetched)
                preloads.preloaded(key)
            }
            return PreloadOutcome(metric: .done)
        } catch {
            let message = (error as? CacheError)?.message ?? (error as? MediaParseError)?.message ?? "\(error)"
            if !scheduler.hasShutDown, !(error is CancellationError) {
                configuration.logger.warning("A preload failed; the queue goes on", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(message)"])
            }
            return PreloadOutcome(metric: .failed, error: message)
        }
    }

    /// What a preload of `item` stores, in the order a player reads it, and the bytes to
    /// assume for a piece of unknown length.
    func preloadPlan(_ item: PreloadItem) async throws -> (pieces: [PrefetchItem], estimate: Int64) {
        let metadata = try await contentInfo(for: item.url)
        // The variant a player last played of this asset (by its bandwidth), else the first listed.
        let played = playedVariants.lastPlayed(store.key(for: item.url))
        let options = HLSPrefetchOptions(variant: played.map { .atMost(bitsPerSecond: $0) } ?? .first, seconds: item.seconds)
        if let kind = try await manifestKind(item.url, metadata) {
            let plan = try await assetPlan(item.url, kind: kind, options: options)
            let unknown = plan.items.filter { $0.range == nil }.count
            return (plan.items, unknown == 0 ? 0 : (plan.estimatedBytes ?? 0) / Int64(unknown))
        }
        guard let length = metadata.length else {
            throw CacheError(.originRejected, "\(item.url.absoluteString.prefix(200)) has no length: a stream without an end cannot be preloaded.")
        }
        let plan = try await MediaTimePlanner.plan(seconds: item.seconds, length: length) { [self] range in
            try await bytes(of: item.url, in: range)
        }
        configuration.logger.debug(
            "Planned a preload", metadata: ["url": "\(item.url.absoluteString.prefix(200))", "shape": "\(plan.shape)", "bytes": "\(plan.byteCount)"])
        let pieces = plan.ranges.flatMap { range in
            stride(from: range.lowerBound, to: range.upperBound, by: Int(Self.preloadPiece)).map {
                PrefetchItem(url: item.url, range: ByteRange($0, min(range.upperBound, $0 + Self.preloadPiece)))
            }
        }
        return (pieces, 0)
    }

    /// The bytes of `range` of `url`, read through the cache (and so stored).
    func bytes(of url: URL, in range: ByteRange) async throws -> [UInt8] {
        let stream = try await read(url, offset: range.lowerBound, length: range.length)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(range.length))
        for try await chunk in stream { bytes += chunk.readableBytesView }
        return bytes
    }
}
