// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// How much of a rendition the store holds.
package enum HeldState: String, Sendable, Codable, Equatable {
    /// Every resource, every byte.
    case held
    /// Some bytes.
    case partial
    /// None.
    case missing
}

/// What the store holds of assets, stale or not (what matters offline), and the playlists and
/// manifests an offline player, or one whose origin fails, may be shown: only what is held.
package struct HeldAssets: Sendable {
    let reader: CachingReader

    /// Whether every byte of `item` is stored (stale or not: what matters offline).
    func isHeld(_ item: PrefetchItem) -> Bool {
        let key = reader.store.key(for: item.url)
        guard let length = reader.store.metadata(for: key)?.length else { return false }
        let range =
            item.range.map { ByteRange(min($0.lowerBound, length), min($0.upperBound, length)) } ?? ByteRange(0, length)
        return range.isEmpty || reader.store.spans(for: key).contains(range)
    }

    /// How much of `items` the store holds.
    func state(of items: [PrefetchItem]) -> HeldState {
        if items.allSatisfy(isHeld) { return .held }
        return items.contains { reader.store.spans(for: reader.store.key(for: $0.url)).byteCount > 0 }
            ? .partial : .missing
    }

    /// Whether the media playlist at `url` and every segment and init section it names are stored.
    func isPlaylistHeld(_ url: URL, imports: [String: String] = [:]) async -> Bool {
        guard
            let plan = try? await reader.planner(for: .player).hlsPlan(
                url, options: HLSPrefetchOptions(), imports: imports)
        else {
            return false
        }
        return plan.items.allSatisfy(isHeld)
    }

    /// Whether a player of the asset at `url` must be shown only what is held: the read path is
    /// offline, or the origin failed when last asked (unreachable, too slow, or a `5xx`).
    package func servesHeldOnly(_ url: URL) -> Bool {
        reader.configuration.isOffline || reader.fetcher.reachability.isFailing(url)
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
        let offline = HeldAssets(reader: reader.offlineTwin)
        var held: Set<URL> = []
        for candidate in candidates where await offline.isPlaylistHeld(candidate, imports: master.definitions) {
            held.insert(candidate)
        }
        guard held.count < candidates.count, await mustServeHeldOnly(url) else { return nil }
        guard let text = master.filteredMaster(base: base, isHeld: held.contains),
            var filtered = try? HLSPlaylist(parsing: Array(text.utf8))
        else { return nil }
        // Its variables were resolved already; its media playlists may still import them.
        filtered.definitions = master.definitions
        reader.configuration.logger.info(
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
        let offline = HeldAssets(reader: reader.offlineTwin)
        var started: Set<URL> = []
        for variant in master.variants {
            guard let url = HLSPlaylist.resolve(variant.uri, base: base),
                let plan = try? await offline.reader.planner(for: .player).hlsPlan(
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
        reader.configuration.logger.info(
            "Served a manifest with only the representations held",
            metadata: ["url": "\(url.absoluteString.prefix(200))"])
        return removed
    }

    /// Whether what is held is worth looking at: a player must be shown only that, or may
    /// (a pinned asset, whose origin is asked before it is served).
    private func mayServeHeldOnly(_ url: URL) -> Bool {
        servesHeldOnly(url) || reader.store.isPinned(reader.store.key(for: url))
    }

    /// ``servesHeldOnly(_:)``, after asking the origin about `url` when it is pinned and the
    /// origin is not known to fail.
    private func mustServeHeldOnly(_ url: URL) async -> Bool {
        if !servesHeldOnly(url), reader.store.isPinned(reader.store.key(for: url)) {
            _ = try? await reader.contentInfo(for: url, maximumAge: .zero)
        }
        return servesHeldOnly(url)
    }
}
