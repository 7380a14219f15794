// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

extension CachingReader {
    /// Stores a DASH presentation ahead of playing it: the manifest at `url`, then in each
    /// period the representation `options.variant` chooses in each adaptation set (by
    /// `bandwidth`, as for HLS variants), its initialization and its segments for
    /// `options.seconds` or all of them, each a cache entry as if a player had read it.
    /// Cancel the calling task to stop: what arrived stays cached.
    /// - Returns: the final progress.
    /// - Throws: ``CacheError`` for a manifest that cannot be had or read (a live one, whose
    ///   segments have no end, among them), or an origin failure.
    @discardableResult
    public func prefetchDASH(
        _ url: URL, options: HLSPrefetchOptions = HLSPrefetchOptions(),
        progress: @escaping @Sendable (PrefetchProgress) -> Void = { _ in }
    ) async throws -> PrefetchProgress {
        let plan = try await OriginPriority.$isCachesOwn.withValue(true) { try await dashPlan(url, options: options) }
        return try await prefetch(plan.items, playlists: plan.playlists, options: options, progress: progress)
    }

    /// What a prefetch of the DASH presentation at `url` stores; the estimate is each chosen
    /// representation's `bandwidth` times the seconds chosen.
    func dashPlan(_ url: URL, options: HLSPrefetchOptions) async throws -> PrefetchPlan {
        let (manifest, base) = try await dashManifest(url, headers: options.headers)
        let chosen: [(ChosenRendition, DASHPresentation.Representation)]
        do {
            chosen = try options.renditions.representations(of: manifest.presentation(base: base), url: url)
        } catch {
            throw CacheError(.outOfBounds, error.message)
        }
        var items: [PrefetchItem] = []
        var seen: Set<PrefetchItem> = []
        var estimate: Int64 = 0
        var renditions: [(rendition: ChosenRendition, items: [PrefetchItem])] = []
        for (rendition, representation) in chosen {
            var seconds = 0.0
            var own: [PrefetchItem] = []
            for resource in representation.resources {
                if let limit = options.seconds, resource.duration > 0, seconds >= limit { break }
                seconds += resource.duration
                own.append(PrefetchItem(url: resource.url, range: resource.range))
            }
            for item in own where seen.insert(item).inserted { items.append(item) }
            renditions.append((rendition, own))
            estimate = Self.saturatingSum(estimate, Int64(min(1e15, Double(representation.bandwidth) / 8 * seconds)))
        }
        guard !items.isEmpty else {
            throw CacheError(.originRejected, "The manifest at \(url.absoluteString.prefix(200)) lists no segments this cache can store.")
        }
        return PrefetchPlan(playlists: [url], items: items, estimatedBytes: estimate, renditions: renditions)
    }

    /// The static manifest at `url` (stored, or fetched and stored) and the base its references
    /// resolve against.
    /// - Throws: ``CacheError`` `.originRejected` for one that cannot be read or is live.
    func dashManifest(_ url: URL, headers: RequestHeaders = []) async throws -> (manifest: DASHManifest, base: URL) {
        let (body, metadata) = try await playlistBody(url, headers: headers)
        let manifest: DASHManifest
        do {
            manifest = try DASHManifest(parsing: body)
        } catch {
            configuration.logger.warning("Rejected an origin manifest", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw CacheError(.originRejected, "The manifest at \(url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
        guard !manifest.isDynamic else {
            throw CacheError(.originRejected, "The manifest at \(url.absoluteString.prefix(200)) is live (type=\"dynamic\"): it has no end to store.")
        }
        return (manifest, metadata.finalURL ?? url)
    }

    /// What a prefetch of the asset at `url` stores, an HLS playlist or a DASH manifest.
    func assetPlan(_ url: URL, kind: ManifestKind, options: HLSPrefetchOptions) async throws -> PrefetchPlan {
        switch kind {
        case .hls: try await prefetchPlan(url, options: options)
        case .dash: try await dashPlan(url, options: options)
        }
    }
}
