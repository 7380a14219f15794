// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Logging

/// How much of a rendition the store holds.
package enum HeldState: String, Sendable, Codable, Equatable {
    /// Every resource, every byte.
    case held
    /// Some bytes.
    case partial
    /// None.
    case missing
}

/// What ``HeldAssets`` looks at: what the store holds of a resource, whether the origin may be
/// asked, the plans of playlists from what is held. (``CachingReader`` conforms.)
protocol HeldAssetsSource: Sendable {
    /// The stored length of `url` (stale or not), if known.
    func storedLength(of url: URL) -> Int64?
    /// What is stored of `url`.
    func storedSpans(of url: URL) -> SpanSet
    /// Whether `url` is pinned.
    func isPinned(_ url: URL) -> Bool
    /// Whether the read path is offline, or the origin of `url` failed when last asked.
    func originIsAway(for url: URL) -> Bool
    /// A planner that reads only what is held (it never asks the origin).
    var heldPlanner: AssetPlanner { get }
    /// Asks the origin whether the stored version of `url` is current.
    func confirm(_ url: URL) async
    var logger: Logger { get }
}

/// What the store holds of assets, stale or not (what matters offline), and the playlists and
/// manifests an offline player, or one whose origin fails, may be shown: only what is held.
package struct HeldAssets: Sendable {
    let source: any HeldAssetsSource

    /// Whether every byte of `item` is stored (stale or not: what matters offline).
    func isHeld(_ item: PrefetchItem) -> Bool {
        guard let length = source.storedLength(of: item.url) else { return false }
        let range =
            item.range.map { ByteRange(min($0.lowerBound, length), min($0.upperBound, length)) } ?? ByteRange(0, length)
        return range.isEmpty || source.storedSpans(of: item.url).contains(range)
    }

    /// How much of `items` the store holds.
    func state(of items: [PrefetchItem]) -> HeldState {
        if items.allSatisfy(isHeld) { return .held }
        return items.contains { source.storedSpans(of: $0.url).byteCount > 0 }
            ? .partial : .missing
    }

    /// Whether the media playlist at `url` and every segment and init section it names are
    /// stored, as `planner` (one that reads only what is held) plans it.
    private func isPlaylistHeld(_ url: URL, imports: [String: String], planner: AssetPlanner) async -> Bool {
        guard let plan = try? await planner.hlsPlan(url, options: HLSPrefetchOptions(), imports: imports) else {
            return false
        }
        return plan.items.allSatisfy(isHeld)
    }

    /// Whether a player of the asset at `url` must be shown only what is held: the read path is
    /// offline, or the origin failed when last asked (unreachable, too slow, or a `5xx`).
    package func servesHeldOnly(_ url: URL) -> Bool {
        source.originIsAway(for: url)
    }

    /// The master playlist `master` (from `url`, its URIs relative to `base`, its variables
    /// resolved) as a player may be shown it now: when ``servesHeldOnly(_:)``, with only the renditions held
    /// (``HLSPlaylist/filteredMaster(base:isHeld:)``); `nil` when it is to be served as it is
    /// (online, not a master, everything held, or nothing held). A master that is pinned but
    /// not all held is first validated with the origin, so that an origin gone while the master
    /// was still fresh is found out before a player is told of renditions it cannot have.
    package func master(_ master: HLSPlaylist, url: URL, base: URL) async -> HLSPlaylist? {
        guard master.isMaster, mayServeHeldOnly(url) else { return nil }
        let candidates = Set(
            (master.variants.map(\.uri) + master.renditions.map(\.uri) + master.trickPlayPlaylists.map(\.uri))
                .compactMap { HLSPlaylist.resolve($0, base: base) })
        let planner = source.heldPlanner
        var held: Set<URL> = []
        for candidate in candidates
        where await isPlaylistHeld(candidate, imports: master.definitions, planner: planner) {
            held.insert(candidate)
        }
        guard held.count < candidates.count, await mustServeHeldOnly(url) else { return nil }
        guard let text = master.filteredMaster(base: base, isHeld: held.contains),
            var filtered = try? HLSPlaylist(parsing: Array(text.utf8))
        else { return nil }
        // Its variables were resolved already; its media playlists may still import them.
        filtered.definitions = master.definitions
        source.logger.info(
            "Served a master playlist with only the renditions held",
            metadata: ["url": "\(url.absoluteString.prefix(200))", "held": "\(held.count) of \(candidates.count)"])
        return filtered
    }

    /// The master playlist `master` (from `url`, its URIs relative to `base`) with the variants
    /// whose start is stored (their media playlist and its first two resources: a variant played
    /// before, or preloaded) listed first, for a player online that starts on the first listed
    /// (``HLSPlaylist/withVariantsFirst(base:leads:)``); `nil` when it is to be served as it is.
    package func masterLeadingHeld(_ master: HLSPlaylist, base: URL) async -> HLSPlaylist? {
        guard master.isMaster, master.variants.count > 1 else { return nil }
        let planner = source.heldPlanner
        var started: Set<URL> = []
        for variant in master.variants {
            guard let url = HLSPlaylist.resolve(variant.uri, base: base),
                let plan = try? await planner.hlsPlan(
                    url, options: HLSPrefetchOptions(), imports: master.definitions),
                !plan.items.isEmpty, plan.items.prefix(2).allSatisfy(isHeld)
            else { continue }
            started.insert(url)
        }
        guard !started.isEmpty, let text = master.withVariantsFirst(base: base, leads: started.contains),
            var reordered = try? HLSPlaylist(parsing: Array(text.utf8))
        else { return nil }
        reordered.definitions = master.definitions
        return reordered
    }

    /// The elements to leave out of the DASH manifest at `url` (read as `manifest`, its URLs
    /// relative to `base`) for a player to be shown only what is held, as ``master(_:url:base:)``
    /// decides: each representation not wholly held, and each adaptation set left with none.
    /// `nil` when it is to be served as it is.
    package func manifestRemovals(_ manifest: DASHManifest, url: URL, base: URL) async -> Set<Int>? {
        guard mayServeHeldOnly(url), !manifest.isDynamic else { return nil }
        let sets = manifest.presentation(base: base).periods.flatMap(\.adaptationSets)
        var removed: Set<Int> = []
        var anyHeld = false
        for set in sets {
            let gone = set.representations.filter {
                !$0.resources.map { PrefetchItem(url: $0.url, range: $0.range) }.allSatisfy(isHeld)
            }
            removed.formUnion(gone.map(\.element))
            if gone.count == set.representations.count { removed.insert(set.element) } else { anyHeld = true }
        }
        guard !removed.isEmpty, anyHeld, await mustServeHeldOnly(url) else { return nil }
        source.logger.info(
            "Served a manifest with only the representations held",
            metadata: ["url": "\(url.absoluteString.prefix(200))"])
        return removed
    }

    /// Whether what is held is worth looking at: a player must be shown only that, or may
    /// (a pinned asset, whose origin is asked before it is served).
    private func mayServeHeldOnly(_ url: URL) -> Bool {
        servesHeldOnly(url) || source.isPinned(url)
    }

    /// ``servesHeldOnly(_:)``, after asking the origin about `url` when it is pinned and the
    /// origin is not known to fail.
    private func mustServeHeldOnly(_ url: URL) async -> Bool {
        if !servesHeldOnly(url), source.isPinned(url) { await source.confirm(url) }
        return servesHeldOnly(url)
    }
}
