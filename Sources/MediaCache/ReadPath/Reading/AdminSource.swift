// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// What the proxy's admin endpoints need of the engine, and nothing more: its store, what it is
/// doing now, the work it does on its own when asked (a prefetch, the preload queue, an export,
/// a verify) and its metrics. The answers to players go through ``PlayerSource``; together the
/// two are all the proxy reaches of the engine. ``CachingReader`` conforms.
package protocol AdminSource: Sendable {
    /// The store: its entries, its summary and usage, removals.
    var store: CacheStore { get }
    /// What the engine is doing now.
    var activity: EngineActivity { get }
    /// Stores `url` ahead of a play as the cache's own work: an HLS asset when it is a
    /// playlist, a DASH presentation when it is a manifest (`options` apply), else the file
    /// (`range` applies).
    func prefetchAsset(
        _ url: URL, range: ByteRange?, options: HLSPrefetchOptions,
        progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws -> PrefetchProgress
    /// Makes `items` the preload queue (none: stops it); the queue as it is then.
    func replacePreloads(with items: [PreloadItem]) -> [PreloadItem.Status]
    /// Writes what the cache holds of `url` to `destination`: one file (`oneFile`), or the
    /// asset's folder of renditions (`seconds` of it, if given).
    func exportAsset(_ url: URL, to destination: URL, renditions: RenditionChoice, seconds: Double?, oneFile: Bool)
        async throws -> ExportSummary
    /// Checks the entries of `keys` (all: `nil`) against their block checksums, fetching damaged
    /// bytes again when `repair` says so.
    func verify(_ keys: [CacheKey]?, repair: Bool) async -> [VerifyReport]
    /// Records the gauges of the metrics as they are now (before an export of them).
    func recordMetrics()
}

/// What the engine is doing at one moment: its origin downloads, the fills under way and the
/// preload queue.
package struct EngineActivity: Sendable {
    /// What each running origin download fetches.
    package var downloads: [DownloadSummary]
    /// The fills on play under way.
    package var fills: [FillOnPlay.Progress]
    /// The preload queue.
    package var preloads: [PreloadItem.Status]
}

extension CachingReader: AdminSource {
    package var activity: EngineActivity {
        EngineActivity(downloads: activeDownloadSummaries, fills: fills.progress, preloads: preloadStatus)
    }

    package func prefetchAsset(
        _ url: URL, range: ByteRange?, options: HLSPrefetchOptions,
        progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws -> PrefetchProgress {
        let metadata = try await contentInfo(for: url, as: .own(.prefetch))
        switch try await manifestKind(url, metadata, as: .own(.prefetch)) {
        case .hls: return try await prefetchHLS(url, options: options, progress: progress)
        case .dash: return try await prefetchDASH(url, options: options, progress: progress)
        case nil: return try await prefetch(url, range: range, progress: progress)
        }
    }

    package func replacePreloads(with items: [PreloadItem]) -> [PreloadItem.Status] {
        preload(items)
        return preloadStatus
    }

    package func exportAsset(
        _ url: URL, to destination: URL, renditions: RenditionChoice, seconds: Double?, oneFile: Bool
    ) async throws -> ExportSummary {
        if oneFile { return try await exportFile(url, to: destination, renditions: renditions) }
        return try await export(url, to: destination, renditions: renditions, seconds: seconds)
    }

    package func verify(_ keys: [CacheKey]?, repair: Bool) async -> [VerifyReport] {
        await StoreVerifier(store: store, repairingWith: repair ? self : nil, as: .player).verify(keys)
    }
}
