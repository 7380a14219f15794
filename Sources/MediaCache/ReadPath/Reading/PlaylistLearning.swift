// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// What the playlists and manifests a player reads teach the cache: the segments to store ahead
/// of it (``SegmentReadAhead``) and the variant it plays (``PlayedVariants``), the alternates an
/// origin names (``OriginFailover``), where a live presentation's segments appear. Reaches its
/// ``CachingReader``'s parts (``CachingReader/learning``); keeps nothing of its own.
package struct PlaylistLearning: Sendable {
    let reader: CachingReader

    /// Remembers the segments of the media playlist at `url` (parsed from its body, its
    /// relative URIs resolved against `base`), so players playing through it are read ahead of.
    /// Also notes the variant a player plays (``PlayedVariants``), for preloads of the asset.
    package func learnSegments(of playlist: HLSPlaylist, at url: URL, base: URL) {
        reader.preloader.playedVariants.served(playlist, key: reader.store.key(for: url)) { uri in
            HLSPlaylist.resolve(uri, base: base).map(reader.store.key(for:))
        }
        guard reader.segmentReadAhead.depth > 0, !playlist.isMaster else { return }
        reader.segmentReadAhead.learn(
            playlist: url,
            segments: playlist.segments.map { $0.byteRange == nil ? HLSPlaylist.resolve($0.uri, base: base) : nil })
    }

    /// Remembers the media segments of each representation of the static DASH manifest at
    /// `url` (its references resolved against `base`) as a media playlist of its own, so a
    /// player playing through a representation is read ahead of as through an HLS playlist.
    /// Initializations and byte-range segments are not read ahead; a live manifest is not
    /// learned (its segments are not listed ahead).
    package func learnSegments(of manifest: DASHManifest, at url: URL, base: URL) {
        guard reader.segmentReadAhead.depth > 0, !manifest.isDynamic else { return }
        for (p, period) in manifest.presentation(base: base).periods.enumerated() {
            for (a, set) in period.adaptationSets.enumerated() {
                for (r, representation) in set.representations.enumerated() {
                    // Its own key: the manifest's URL with the representation's place as fragment.
                    guard
                        let key = URL(
                            string: url.absoluteString.prefix { $0 != "#" } + "#representation-\(p)-\(a)-\(r)")
                    else { continue }
                    reader.segmentReadAhead.learn(
                        playlist: key,
                        segments: representation.resources.map { $0.range == nil && $0.duration > 0 ? $0.url : nil })
                }
            }
        }
    }

    /// A player asked for `url`: when it is playing on through a media playlist, the next
    /// segments are stored ahead of it (``SegmentReadAhead``), each on a task the read path
    /// owns (``CachingReader/shutDown()`` ends it), with the player's forwarded `headers`. A segment already
    /// stored costs a look at the store; one being downloaded is joined, not fetched again.
    package func readAhead(of url: URL, headers: RequestHeaders) {
        for next in reader.segmentReadAhead.segmentsAfter(url) {
            CacheMetrics.segmentsReadAhead.increment()
            reader.owned.run { [reader] in
                do {
                    try await reader.prefetch(next, headers: headers, as: .own(.readAhead))
                } catch {
                    reader.configuration.logger.debug(
                        "A segment read ahead of a player did not finish",
                        metadata: ["url": "\(next.absoluteString.prefix(200))", "reason": "\(error)"])
                }
                reader.segmentReadAhead.finished(next)
            }
        }
    }

    /// Learns the alternates an HLS master (from `base`) names: its redundant variants and
    /// renditions, and its steering pathways' (``HLSPlaylist/sameStreams(base:)``).
    package func learnAlternates(fromMaster master: HLSPlaylist, base: URL) {
        for group in master.sameStreams(base: base) { reader.failover.learn(group) }
    }

    /// Learns the alternates a DASH manifest (from `base`) names: its sibling `BaseURL`s.
    package func learnAlternates(fromManifest manifest: DASHManifest, base: URL) {
        for group in manifest.siblingBases(base: base) { reader.failover.learn(group) }
    }

    /// Notes `folder` as where a live presentation's segments are (a live playlist's or a
    /// dynamic manifest's base): a segment there that does not exist yet gets a `404` that is
    /// not remembered, so the player's next try, once it is made, reaches the origin.
    package func noteLive(_ folder: URL) {
        reader.validator.noteLive(folder)
    }
}

extension CachingReader {
    /// What playlists and manifests teach the cache (``PlaylistLearning``).
    package var learning: PlaylistLearning { PlaylistLearning(reader: self) }
}
