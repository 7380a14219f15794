// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// How the read path reaches origins: alternates for one that fails, renewed signed URLs.
extension CachingReader {
    /// `fetcher`, asking the alternates of an origin that fails: those the configuration names
    /// and those manifests name (``learnAlternates(fromMaster:base:)``).
    static func failover(_ fetcher: any OriginFetcher, _ configuration: Configuration, clock: any WallClock)
        -> OriginFailover
    {
        let pairs = configuration.originFallbacks.flatMap { origin, others in others.map { "\(origin)=\($0)" } }
        let alternates = OriginFailover.alternates(pairs)
        if alternates == nil {
            configuration.logger.warning(
                "Ignored origin fallbacks that are not host[:port] names",
                metadata: ["fallbacks": "\(configuration.originFallbacks)"])
        }
        return OriginFailover(
            base: fetcher, alternates: alternates ?? [:], clock: clock, logger: configuration.logger)
    }

    /// `fetcher`, renewing signed URLs that expire when the configuration has a refresh hook
    /// (the hook is asked for the player's URL, not an alternate's).
    static func renewing(_ fetcher: any OriginFetcher, _ configuration: Configuration, clock: any WallClock)
        -> any OriginFetcher
    {
        guard let hook = configuration.freshURL else { return fetcher }
        return URLRenewal(base: fetcher, hook: hook, clock: clock, logger: configuration.logger)
    }

    /// Learns the alternates an HLS master (from `base`) names: its redundant variants and
    /// renditions, and its steering pathways' (``HLSPlaylist/sameStreams(base:)``).
    package func learnAlternates(fromMaster master: HLSPlaylist, base: URL) {
        for group in master.sameStreams(base: base) { failover.learn(group) }
    }

    /// Learns the alternates a DASH manifest (from `base`) names: its sibling `BaseURL`s.
    package func learnAlternates(fromManifest manifest: DASHManifest, base: URL) {
        for group in manifest.siblingBases(base: base) { failover.learn(group) }
    }
}
