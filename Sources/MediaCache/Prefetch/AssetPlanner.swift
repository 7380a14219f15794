// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging

/// What ``AssetPlanner`` reads through. (``CachingReader`` conforms.)
protocol PlanSource: Sendable {
    /// The whole body of a playlist or manifest, read through the cache (and so stored).
    func readPlaylist(_ url: URL, headers: RequestHeaders, as requester: Requester) async throws -> (
        body: [UInt8], metadata: ContentMetadata
    )
    /// Whether an asset's HLS keys are stored with it (an encrypted store seals them).
    var storesKeys: Bool { get }
    var logger: Logger { get }
}

/// What a prefetch, pin, preload or export of an HLS asset or a DASH presentation stores: the
/// renditions its options choose and, for each, the resources for the seconds chosen. Reads
/// the playlists and manifests through the read path (so they are stored too).
struct AssetPlanner: Sendable {
    let reader: any PlanSource
    /// Whose reads of the playlists and manifests they are.
    let requester: Requester

    /// The media playlists and resources a prefetch of `url` stores.
    func hlsPlan(_ url: URL, options: HLSPrefetchOptions, imports: [String: String] = [:]) async throws -> PrefetchPlan
    {
        let (entry, base) = try await parsedPlaylist(url, headers: options.headers, imports: imports)
        var chosen = [ChosenRendition(role: .variant, url: url, bandwidth: 0)]
        if entry.isMaster {
            do {
                chosen = try options.renditions.renditions(of: entry, base: base)
            } catch {
                throw CacheError(.outOfBounds, error.message)
            }
            guard chosen.contains(where: { $0.role == .variant }) else {
                throw CacheError(
                    .originRejected,
                    "The master playlist at \(url.absoluteString.prefix(200)) names no http(s) variant.")
            }
        }
        var items: [PrefetchItem] = []
        var seen: Set<PrefetchItem> = []
        var estimate: Int64 = 0
        var renditions: [(rendition: ChosenRendition, items: [PrefetchItem])] = []
        for rendition in chosen {
            let playlistURL = rendition.url
            let (media, mediaBase) =
                playlistURL == url
                ? (entry, base)
                : try await parsedPlaylist(playlistURL, headers: options.headers, imports: entry.definitions)
            var seconds = 0.0
            var own: [PrefetchItem] = []
            for segment in media.segments {
                if let limit = options.seconds, seconds >= limit { break }
                seconds += segment.duration
                if rendition.role == .variant, segment.byteRange == nil, rendition.bandwidth > 0 {
                    // BANDWIDTH covers every rendition of the variant (RFC 8216 §4.3.4.2).
                    estimate = Self.saturatingSum(
                        estimate, Int64(min(1e15, Double(rendition.bandwidth) / 8 * max(0, segment.duration))))
                }
                if let section = segment.initSection, let sectionURL = HLSPlaylist.resolve(section.uri, base: mediaBase)
                {
                    own.append(PrefetchItem(url: sectionURL, range: section.byteRange))
                }
                if let segmentURL = HLSPlaylist.resolve(segment.uri, base: mediaBase) {
                    own.append(PrefetchItem(url: segmentURL, range: segment.byteRange))
                }
            }
            if reader.storesKeys {
                // The playlist's keys (rewriting is the one place URIs are found, with their tags).
                _ = media.rewritten(base: mediaBase) { uri, tag in
                    if let tag, HLSPlaylist.keyTags.contains(tag) { own.append(PrefetchItem(url: uri, range: nil)) }
                    return uri.absoluteString
                }
            }
            var ownSeen: Set<PrefetchItem> = []
            own = own.filter { ownSeen.insert($0).inserted }
            for item in own where seen.insert(item).inserted { items.append(item) }
            renditions.append((rendition, own))
        }
        // Side-loaded subtitle files, whole: the proxy makes their playlists from what it holds.
        for track in options.renditions.sideLoaded where entry.isMaster {
            let item = PrefetchItem(url: track.url, range: nil)
            if seen.insert(item).inserted { items.append(item) }
        }
        estimate = items.reduce(estimate) { Self.saturatingSum($0, $1.range?.length ?? 0) }
        let unknown = items.contains { $0.range == nil }
        let estimated = chosen.contains { $0.role == .variant && $0.bandwidth > 0 }
        return PrefetchPlan(
            playlists: chosen.map(\.url), items: items, estimatedBytes: unknown && !estimated ? nil : estimate,
            renditions: renditions)
    }

    /// The playlist at `url`, read through the cache (its variables resolved, `imports` those of
    /// the multivariant playlist it was reached from), and the URL its relative URIs resolve against.
    private func parsedPlaylist(_ url: URL, headers: RequestHeaders, imports: [String: String] = [:]) async throws -> (
        HLSPlaylist, base: URL
    ) {
        let (body, metadata) = try await reader.readPlaylist(url, headers: headers, as: requester)
        do {
            return (try HLSPlaylist(parsing: body, url: url, imports: imports), metadata.finalURL ?? url)
        } catch let error as HLSPlaylistError {
            reader.logger.warning(
                "Rejected an origin playlist",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw CacheError(
                .originRejected, "The playlist at \(url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
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
            throw CacheError(
                .originRejected,
                "The manifest at \(url.absoluteString.prefix(200)) lists no segments this cache can store.")
        }
        return PrefetchPlan(playlists: [url], items: items, estimatedBytes: estimate, renditions: renditions)
    }

    /// The static manifest at `url` (stored, or fetched and stored) and the base its references
    /// resolve against.
    /// - Throws: ``CacheError`` `.originRejected` for one that cannot be read or is live.
    func dashManifest(_ url: URL, headers: RequestHeaders = []) async throws -> (manifest: DASHManifest, base: URL) {
        let (body, metadata) = try await reader.readPlaylist(url, headers: headers, as: requester)
        let manifest: DASHManifest
        do {
            manifest = try DASHManifest(parsing: body)
        } catch {
            reader.logger.warning(
                "Rejected an origin manifest",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw CacheError(
                .originRejected, "The manifest at \(url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
        guard !manifest.isDynamic else {
            throw CacheError(
                .originRejected,
                "The manifest at \(url.absoluteString.prefix(200)) is live (type=\"dynamic\"): it has no end to store.")
        }
        return (manifest, metadata.finalURL ?? url)
    }

    /// What a prefetch of the asset at `url` stores, an HLS playlist or a DASH manifest.
    func plan(_ url: URL, kind: CachingReader.ManifestKind, options: HLSPrefetchOptions) async throws -> PrefetchPlan {
        switch kind {
        case .hls: try await hlsPlan(url, options: options)
        case .dash: try await dashPlan(url, options: options)
        }
    }

    /// `a + b` for non-negative counts, `Int64.max` where it would overflow (a hostile
    /// playlist may name any number of huge ranges).
    static func saturatingSum(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// The variant `choice` picks.
    static func choose(_ choice: HLSPrefetchOptions.VariantChoice, among variants: [HLSPlaylist.Variant]) -> HLSPlaylist
        .Variant?
    {
        switch choice {
        case .first: variants.first
        case .lowestBandwidth: variants.min { $0.bandwidth < $1.bandwidth }
        case .highestBandwidth: variants.max { $0.bandwidth < $1.bandwidth }
        case .atMost(let limit):
            variants.filter { $0.bandwidth <= limit }.max { $0.bandwidth < $1.bandwidth }
                ?? variants.min { $0.bandwidth < $1.bandwidth }
        case .atMostHeight(let limit):
            variants.filter { ($0.height ?? .max) <= limit }.max {
                ($0.height ?? 0, $0.bandwidth) < ($1.height ?? 0, $1.bandwidth)
            }
                ?? variants.filter { $0.height != nil }.min {
                    ($0.height ?? 0, $0.bandwidth) < ($1.height ?? 0, $1.bandwidth)
                } ?? variants.first
        }
    }
}

/// What a prefetch of an HLS asset or a DASH presentation stores.
struct PrefetchPlan {
    /// The media playlists chosen (a DASH manifest's own URL).
    var playlists: [URL]
    var items: [PrefetchItem]
    /// The chosen variant's `BANDWIDTH` times each segment's duration, for segments of
    /// unknown length (a media playlist named directly has none: `nil`).
    var estimatedBytes: Int64?
    /// Each rendition chosen and the resources it needs (an item may serve several).
    var renditions: [(rendition: ChosenRendition, items: [PrefetchItem])] = []
}
