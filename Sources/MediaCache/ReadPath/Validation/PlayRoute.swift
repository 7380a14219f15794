// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCacheHTTPFields

/// Where the requests of a play go. Within a play (``Plays``) a request for the stored version goes to the URL the
/// redirects led to then, not through them again: a chain of trackers that picks another CDN,
/// or a host that stitches other ads into each visit, would answer another version in the
/// middle of the play. The player's credentials go only to its own origin, as a redirect takes
/// them; when the URL a play was led to refuses (a signed URL that expired), the player's URL
/// is asked once more, logged and counted. docs/http.md says why this departs from following a
/// temporary redirect each time.
struct PlayRoute: Sendable {
    let fetcher: MeteredFetcher
    let plays: Plays
    let logger: Logger

    /// Where a request for the stored version of `key`, the player's `url`, goes.
    func target(_ url: URL, key: CacheKey, stored: ContentMetadata?) -> URL {
        guard let final = stored?.finalURL, final != url, plays.isUnderWay(key) else { return url }
        return final
    }

    /// Asks for `range` of the player's `url` where the play goes (see ``target(_:key:stored:)``),
    /// for `requester` (see ``MeteredFetcher/fetch(_:range:ifRange:headers:as:promotion:)``).
    func fetch(
        _ url: URL, key: CacheKey, stored: ContentMetadata?, range: ByteRange?, ifRange: String?,
        headers: RequestHeaders, as requester: Requester, promotion: ConnectionBudget.Promotion? = nil
    ) async throws -> OriginResponse {
        let target = target(url, key: key, stored: stored)
        let sent =
            Self.sameOrigin(target, url)
            ? headers : headers.filter { !Self.credentialFields.contains($0.name.lowercased()) }
        do {
            var response = try await fetcher.fetch(
                target, range: range, ifRange: ifRange, headers: sent, as: requester, promotion: promotion)
            // Asked of the URL the play was led to: that URL is still where the player's leads
            // (the next request of the play goes there too).
            if target != url, response.metadata.finalURL == nil { response.metadata.finalURL = target }
            return response
        } catch let error as CacheError where target != url && error.code == .originAnswered {
            logger.warning(
                "The URL a play was led to refused; asking the player's URL again",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            CacheMetrics.retried(.playURLRefused)
            return try await fetcher.fetch(
                url, range: range, ifRange: ifRange, headers: headers, as: requester, promotion: promotion)
        }
    }

    /// Fields that carry the player's credentials, which a redirect to another origin drops.
    static let credentialFields: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// Whether `a` and `b` have one scheme and authority.
    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        a.scheme?.lowercased() == b.scheme?.lowercased() && HostAndPort(authorityOf: a) == HostAndPort(authorityOf: b)
    }
}
