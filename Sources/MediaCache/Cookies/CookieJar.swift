// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
package import MediaCacheHTTPFields
import Synchronization

/// The cookies origins set, kept for the requests that follow, as a browser keeps them
/// (RFC 6265): a stream protected by signed cookies (a manifest whose answer sets them,
/// segments that need them) plays through the cache.
///
/// A fetcher with a jar (``OriginFetcher/cookieJar``) sends each origin request the cookies
/// that match its URL (domain, path, `Secure`, expiry) and keeps those the answer sets, and
/// those a player sends, for the host it sent them to. A cookie goes only to the sites it was
/// set for, and never to the player: the cache gives players no `Set-Cookie`. Cookies live
/// in memory, and with the download jobs that need them, so a pinned stream resumes after a
/// restart. Without a jar, a player's `Cookie` field is sent on as it is.
public final class CookieJar: Sendable {
    private let cookies = Mutex(Cookies())

    /// An empty jar.
    public init() {}

    /// Keeps the cookies the `Set-Cookie` fields of an answer from `url` set.
    /// - Returns: the fields refused, each with the reason (to log).
    package func receive(setCookie values: [String], from url: URL, now: Date) -> [(
        value: String, refusal: OriginCookie.Refusal
    )] {
        var refused: [(String, OriginCookie.Refusal)] = []
        var taken: [OriginCookie] = []
        for value in values.prefix(Cookies.maximumPerDomain) {
            do {
                taken.append(try OriginCookie.parse(setCookie: value, from: url, now: now))
            } catch {
                refused.append((value, error))
            }
        }
        cookies.withLock { for cookie in taken { $0.store(cookie, now: now) } }
        if !refused.isEmpty { CacheMetrics.refusedCookies.increment(by: refused.count) }
        return refused
    }

    /// Keeps the cookies a player sent in its `Cookie` field for `url`, for that host.
    package func receive(cookieField value: String, for url: URL, now: Date) {
        let taken = OriginCookie.parse(cookieField: value, for: url, now: now)
        cookies.withLock { for cookie in taken { $0.store(cookie, now: now) } }
    }

    /// The `Cookie` field for a request for `url`, or `nil` when no cookie matches.
    package func field(for url: URL, now: Date) -> String? {
        cookies.withLock { $0.field(for: url, now: now) }
    }

    /// The cookies in force for `host` and its parent domains, whatever their paths: those a
    /// download job of a stream on `host` needs again after a restart.
    package func cookies(for host: String, now: Date) -> [OriginCookie] {
        cookies.withLock { $0.cookies(for: host.lowercased(), now: now) }
    }

    /// Takes back cookies kept with a job; one the jar has newer (set again since) wins.
    package func restore(_ kept: [OriginCookie], now: Date) {
        cookies.withLock { jar in
            for cookie in kept where !jar.holds(cookie) { jar.store(cookie, now: now) }
        }
    }

    /// How many cookies the jar holds.
    package var count: Int { cookies.withLock { $0.all.count } }
}

/// The jar's contents and rules, a pure value (RFC 6265 §5.3, §5.4).
package struct Cookies: Sendable {
    /// At most this many cookies per domain; the oldest goes first (RFC 6265 §6.1 asks for
    /// at least 50).
    package static let maximumPerDomain = 50
    /// At most this many in all.
    package static let maximumCount = 1000

    package private(set) var all: [OriginCookie] = []

    package init() {}

    /// Stores `cookie`, replacing the one of the same name, domain and path (whose creation
    /// time it keeps); an expired one only removes that one.
    package mutating func store(_ cookie: OriginCookie, now: Date) {
        var cookie = cookie
        if let old = all.firstIndex(where: {
            $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path
        }) {
            cookie.created = all[old].created
            all.remove(at: old)
        }
        if let expires = cookie.expires, expires <= now { return }
        all.removeAll { $0.expires.map { $0 <= now } ?? false }
        all.append(cookie)
        let sameDomain = all.indices.filter { all[$0].domain == cookie.domain }
        if sameDomain.count > Self.maximumPerDomain,
            let oldest = sameDomain.min(by: { all[$0].created < all[$1].created })
        {
            all.remove(at: oldest)
        }
        if all.count > Self.maximumCount, let oldest = all.indices.min(by: { all[$0].created < all[$1].created }) {
            all.remove(at: oldest)
        }
    }

    package func holds(_ cookie: OriginCookie) -> Bool {
        all.contains { $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path }
    }

    /// RFC 6265 §5.4: the matching cookies, longer paths first, then the earlier created.
    package func field(for url: URL, now: Date) -> String? {
        let sent = all.filter { $0.isSent(to: url, now: now) }
            .sorted { $0.path.count != $1.path.count ? $0.path.count > $1.path.count : $0.created < $1.created }
        return sent.isEmpty ? nil : sent.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    package func cookies(for host: String, now: Date) -> [OriginCookie] {
        all.filter { cookie in
            (cookie.expires.map { $0 > now } ?? true)
                && (cookie.hostOnly ? cookie.domain == host : OriginCookie.domainMatches(host, domain: cookie.domain))
        }
    }
}
