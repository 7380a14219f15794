// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
public import Foundation
public import Logging
public import MediaCache
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL

/// Options for origin requests, of ``HTTPOriginFetcher`` and ``URLSessionOriginFetcher``
/// alike; the TLS and connection options (``connectTimeout``, ``trustRoots``,
/// ``skipsCertificateVerification``, ``usesHTTP2``) are AsyncHTTPClient's: with URLSession,
/// the session's own configuration and delegate decide those.
public struct OriginFetcherConfiguration: Sendable {
    /// How long to wait for a connection.
    public var connectTimeout: Duration = .seconds(10)
    /// How many connections to one origin host the client keeps at most (HTTP/1.1); the
    /// reader admits no more requests to a host than this at once (the fetcher's
    /// `connectionsPerHost`), so none waits in the client's pool, where it would fail after
    /// ``connectTimeout``. A household's players and the cache's own
    /// downloads often share one CDN host.
    public var connectionsPerHost = 16
    /// How long to wait for a response head.
    public var responseTimeout: Duration = .seconds(30)
    /// How long a body may go without a byte.
    public var readTimeout: Duration = .seconds(30)
    /// How many redirects to follow; one more is refused.
    public var maxRedirects = 5
    /// If not empty, only these hosts may be fetched (compared case-insensitively), both
    /// as the URL asked for and as the target of every redirect.
    public var allowedHosts: Set<String> = []
    /// The longest origin URL accepted, asked for or redirected to.
    public var maxURLBytes = 8 << 10
    /// Without `max-age` or `Expires`, an answer with `Last-Modified` stays fresh for this
    /// fraction of its age at the time (RFC 9111 §4.2.2) ...
    public var heuristicFraction = 0.1
    /// ... but at most this long.
    public var heuristicCap: Duration = .seconds(24 * 3600)
    /// The clock that times answers for their freshness (tests share one with the store).
    package var clock: any WallClock = SystemClock()
    /// Certificates trusted as roots for HTTPS origins besides the system's (a private CA;
    /// `serve --ca-file`).
    public var trustRoots = TrustRoots()
    /// Accepts any certificate from any HTTPS origin: an expired one, a self-signed one,
    /// one for another host. Anyone on the path can then read and change what is cached.
    /// Never the default; the proxy warns at start and on every request's log line.
    public var skipsCertificateVerification = false
    /// Speaks HTTP/2 with HTTPS origins that offer it (ALPN): a player's range requests
    /// then share one connection. Off: HTTP/1.1 only.
    public var usesHTTP2 = true
    /// The `User-Agent` sent to origins.
    public var userAgent = "MediaCache/1.0"
    /// The proxies origin requests go through (AsyncHTTPClient only; URLSession follows the
    /// system's settings). None by default: `OriginProxies(environment:)` reads
    /// `http_proxy` and the rest as curl does, as `mediacache serve` does.
    public var proxies = OriginProxies.none
    /// Reads answers as a shared cache does (RFC 9111: `private` never stored, `s-maxage`
    /// and `proxy-revalidate` honoured, answers to requests with `Authorization` stored only
    /// when the origin allows it): for a proxy that serves several people (`serve
    /// --shared-cache`, implied by `--allow-remote`).
    package var isSharedCache = false
    /// The cookies kept for origins (RFC 6265): sent with each request they match, taken
    /// from each answer's `Set-Cookie` and from the player's `Cookie`; never given to the
    /// player. `nil` keeps none and sends a player's `Cookie` on as it is (`serve
    /// --no-cookies`, and a shared cache, where one person's cookies must not open a stream
    /// for another).
    public var cookieJar: CookieJar? = CookieJar()
    /// Where refused redirects and rejected answers are logged (at warning level).
    public var logger = Logger(label: "mediacache.origin", factory: { _ in SwiftLogNoOpLogHandler() })

    /// How a redirect's target is judged (the system's resolver; a test gives its own answers).
    package var addressResolver = AddressResolver.system

    /// Creates the default configuration.
    public init() {}

    var policy: OriginPolicy {
        OriginPolicy(
            maxRedirects: maxRedirects, allowedHosts: allowedHosts, maxURLBytes: maxURLBytes,
            heuristicFraction: heuristicFraction,
            heuristicCap: heuristicCap, clock: clock, userAgent: userAgent, isShared: isSharedCache,
            cookieJar: cookieJar, logger: logger, resolver: addressResolver)
    }
}
