// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields

/// The read path's way to its origins, composed here and nowhere else. A request goes, in
/// order, through:
///
/// 1. ``PlayRoute`` (a transfer's and a revalidation's: within a play, to the URL the play was led to);
/// 2. ``MeteredFetcher``: counted, and sent once its host's ``ConnectionBudget`` gives it a
///    connection — the host it is sent to first: the asked one, or, while that one backs off after
///    a failure, the alternate ``OriginFailover`` asks first;
/// 3. ``URLRenewal`` (with a refresh hook): a signed URL that expired is renewed;
/// 4. ``PiecedFetcher`` (for hosts named in ``CachingReader/Configuration/originPieces``): a
///    long read is asked in pieces;
/// 5. ``OriginFailover``: an origin that fails is followed by its alternates;
/// 6. the HTTP fetcher (`MediaCacheHTTP`), or ``OfflineFetcher`` when the cache is offline.
enum OriginStack {
    /// The metered fetcher over `fetcher` for a reader of `configuration`, and the failover in it
    /// (the reader teaches it the alternates manifests name).
    static func compose(
        _ fetcher: any OriginFetcher, configuration: CachingReader.Configuration, budget: ConnectionBudget,
        clock: any WallClock
    ) -> (metered: MeteredFetcher, failover: OriginFailover) {
        let failover = OriginFailover(
            base: fetcher, alternates: alternates(configuration), clock: clock, logger: configuration.logger)
        var inner: any OriginFetcher = failover
        if !configuration.originPieces.isEmpty {
            let pieces = Dictionary(
                configuration.originPieces.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: min)
            inner = PiecedFetcher(base: inner, pieces: pieces, logger: configuration.logger)
        }
        if let hook = configuration.freshURL {
            // The hook is asked for the player's URL, not an alternate's.
            inner = URLRenewal(base: inner, hook: hook, clock: clock, logger: configuration.logger)
        }
        if configuration.isOffline { inner = OfflineFetcher(base: fetcher) }
        let metered = MeteredFetcher(
            base: inner, ownRequestFields: configuration.ownRequestFields, budget: budget,
            route: { failover.candidates(for: $0).first ?? $0 })
        return (metered, failover)
    }

    /// The alternates the configuration names (``CachingReader/Configuration/originFallbacks``);
    /// none, said at warning level, when one is not a `host[:port]` name.
    private static func alternates(_ configuration: CachingReader.Configuration) -> [HostAndPort: [HostAndPort]] {
        let pairs = configuration.originFallbacks.flatMap { origin, others in others.map { "\(origin)=\($0)" } }
        guard let alternates = OriginFailover.alternates(pairs) else {
            configuration.logger.warning(
                "Ignored origin fallbacks that are not host[:port] names",
                metadata: ["fallbacks": "\(configuration.originFallbacks)"])
            return [:]
        }
        return alternates
    }
}
