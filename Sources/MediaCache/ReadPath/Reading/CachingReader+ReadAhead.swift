// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Logging

extension CachingReader {
    /// Remembers the segments of the media playlist at `url` (parsed from its body, its
    /// relative URIs resolved against `base`), so players playing through it are read ahead of.
    /// Also notes the variant a player plays (``PlayedVariants``), for preloads of the asset.
    package func learnSegments(of playlist: HLSPlaylist, at url: URL, base: URL) {
        preloader.playedVariants.served(playlist, key: store.key(for: url)) { uri in HLSPlaylist.resolve(uri, base: base).map(store.key(for:)) }
        guard segmentReadAhead.depth > 0, !playlist.isMaster else { return }
        segmentReadAhead.learn(
            playlist: url, segments: playlist.segments.map { $0.byteRange == nil ? HLSPlaylist.resolve($0.uri, base: base) : nil })
    }

    /// Remembers the media segments of each representation of the static DASH manifest at
    /// `url` (its references resolved against `base`) as a media playlist of its own, so a
    /// player playing through a representation is read ahead of as through an HLS playlist.
    /// Initializations and byte-range segments are not read ahead; a live manifest is not
    /// learned (its segments are not listed ahead).
    package func learnSegments(of manifest: DASHManifest, at url: URL, base: URL) {
        guard segmentReadAhead.depth > 0, !manifest.isDynamic else { return }
        for (p, period) in manifest.presentation(base: base).periods.enumerated() {
            for (a, set) in period.adaptationSets.enumerated() {
                for (r, representation) in set.representations.enumerated() {
                    // Its own key: the manifest's URL with the representation's place as fragment.
                    guard let key = URL(string: url.absoluteString.prefix { $0 != "#" } + "#representation-\(p)-\(a)-\(r)") else { continue }
                    segmentReadAhead.learn(
                        playlist: key, segments: representation.resources.map { $0.range == nil && $0.duration > 0 ? $0.url : nil })
                }
            }
        }
    }

    /// A player asked for `url`: when it is playing on through a media playlist, the next
    /// segments are stored ahead of it (``SegmentReadAhead``), each on a task the read path
    /// owns (``shutDown()`` ends it), with the player's forwarded `headers`. A segment already
    /// stored costs a look at the store; one being downloaded is joined, not fetched again.
    package func readAhead(of url: URL, headers: RequestHeaders) {
        for next in segmentReadAhead.segmentsAfter(url) {
            CacheMetrics.segmentsReadAhead.increment()
            owned.run { [self] in
                do {
                    try await prefetch(next, headers: headers)
                } catch {
                    configuration.logger.debug(
                        "A segment read ahead of a player did not finish", metadata: ["url": "\(next.absoluteString.prefix(200))", "reason": "\(error)"])
                }
                segmentReadAhead.finished(next)
            }
        }
    }
}
