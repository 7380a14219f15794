// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache
import MediaCacheHTTPFields
import NIOHTTP1

/// The proxy's gate: which requests are served at all (the method, the request's size, a
/// `Host` that names the proxy, the site that sent it, the token, an origin on the
/// allow-list), what a checked request asks for, where it goes, and the CORS fields of its
/// answer. Everything it decides, it decides from the request alone, before anything of the
/// cache is looked at.
struct ProxyRouter: Sendable {
    let configuration: ProxyConfiguration
    /// Asked whether an origin URL may be fetched at all (the allow-list): the reader's
    /// ``CachingReader/checkOrigin(_:)``.
    let checkOrigin: @Sendable (URL) throws -> Void
    private let recentTargets = RecentTargets()
    /// The last requests that passed the checks, for a new connection that repeats one.
    let recentChecks = RepeatedRequestCheck.Shared()

    init(configuration: ProxyConfiguration, checkOrigin: @escaping @Sendable (URL) throws -> Void) {
        self.configuration = configuration
        self.checkOrigin = checkOrigin
    }

    /// A request that passed the checks every proxy request passes, with what they found.
    struct CheckedRequest: Sendable {
        let url: URL
        /// What its target names.
        let proxy: ProxyTarget
        var asked: Asked
        /// What its credential lets it reach: the origin it names wherever it is, or only on the
        /// internet (a URL another origin's playlist named, asked for on the LAN listener).
        var grant: LANCapabilities.Grant = .namedOrigin
        /// When its credential stops working (seconds since 1970), if it was minted to expire.
        var until: Int64?
        /// Its LAN credential, checked against revocations again when the request repeats.
        var credential: String?
    }

    /// Where a checked request goes.
    enum Route: Equatable, Sendable {
        /// A resource kept in memory only (an HLS key: ``ProxyTarget/memoryOnly``).
        case memoryOnly
        /// A blocking playlist reload or delta update: the origin's every time.
        case blockingReload
        /// A content steering server's answer: the origin's every time, rewritten.
        case steering
        /// An HLS interstitial's asset list: the origin's every time (made for one viewer), rewritten.
        case assetList
        /// A side-loaded subtitle file's media playlist or WebVTT, made from what the cache
        /// holds (``ProxyTarget/subtitleRole``).
        case subtitles(ProxyTarget.SubtitleRole)
        /// Media, a playlist or a manifest, through the cache.
        case cache
    }

    /// Where `request` goes (pure).
    static func route(_ request: CheckedRequest) -> Route {
        if request.proxy.memoryOnly { return .memoryOnly }
        if HLSPlaylist.isBlockingReload(request.url) { return .blockingReload }
        if SteeringManifest.isSteeringRequest(request.url) { return .steering }
        if request.proxy.assetList { return .assetList }
        if let role = request.proxy.subtitleRole { return .subtitles(role) }
        return .cache
    }

    /// What a request is once checked: a CORS preflight, answered at once, or a request for
    /// an origin URL.
    enum Checked {
        case preflight(ProxyResponse)
        case request(CheckedRequest)
        /// An admin request (a path under `/_mediacache/`, or `/metrics`, `/status`,
        /// `/status.json`, without `url=`): `AdminEndpoints` checks and answers it.
        case admin(path: String, target: RequestTarget)
    }

    /// The admin pages outside `/_mediacache/`.
    static let adminPages: Set<String> = ["/metrics", "/status", "/status.json"]
    static let adminPrefix = "/_mediacache/"

    /// Routes an admin request to the admin endpoints (which check it), and runs every check on
    /// any other.
    /// - Throws: ``ProxyRequestError`` with the status and reason of the refusal.
    func check(_ head: HTTPRequestHead, localPort: Int) throws -> Checked {
        if let admin = adminRoute(head) {
            guard !configuration.isLANListener else {
                throw ProxyRequestError(
                    status: .forbidden, "The admin paths, metrics and status page answer on loopback only.",
                    refusal: .admin)
            }
            return admin
        }
        try checkRequest(head, localPort: localPort)
        if head.method == .OPTIONS { return .preflight(try preflight(head)) }
        let (proxy, grant, until) = try checkedTarget(head, localPort: localPort)
        let credential = configuration.isLANListener ? proxy.token : nil
        var asked = try Self.parse(head, url: proxy.origin)
        // RFC 9110 §7.6.3: each proxy a request passes names itself in `Via`; this one also knows
        // its own name there again (``checkSender(_:localPort:)``), so it never fetches from itself.
        asked.forwarded.append((name: "Via", value: "1.1 " + configuration.pseudonym))
        return .request(
            CheckedRequest(
                url: proxy.origin, proxy: proxy, asked: asked, grant: grant, until: until, credential: credential))
    }

    /// The admin route of `head`; `nil` for a request that is not an admin one. (Its checks are
    /// the admin endpoints' own: `AdminEndpoints.respond`.)
    private func adminRoute(_ head: HTTPRequestHead) -> Checked? {
        // Most requests are for media: a look at the URI's start settles it without parsing.
        guard
            head.uri.utf8.starts(with: Self.adminPrefix.utf8) || head.uri.utf8.starts(with: "/metrics".utf8)
                || head.uri.utf8.starts(with: "/status".utf8)
        else { return nil }
        let target = RequestTarget(head.uri)
        guard let path = target.path, path.utf8.starts(with: Self.adminPrefix.utf8) || Self.adminPages.contains(path),
            target.query("url") == nil
        else { return nil }
        return .admin(path: path, target: target)
    }

    /// What a checked `GET` or `HEAD` asks for.
    struct Asked: Sendable {
        var url: URL
        /// The first range of the `Range` header, if any.
        var specifier: RangeSpecifier?
        /// Where the body will start, when known before the length: an uncached resource is
        /// then asked for with one ranged GET rather than a HEAD and a GET.
        var firstByte: Int64?
        /// How many bytes from ``firstByte`` are asked for, when the range says (`bytes=a-b`).
        var length: Int64?
        /// The player's fields for the origin.
        var forwarded: RequestHeaders
        /// The player's own conditions (`If-None-Match`, …).
        var conditions: PlayerConditions
    }

    /// The range and fields of a `GET` or `HEAD` for `url` (from ``checkedTarget(_:localPort:)``).

    static func parse(_ head: HTTPRequestHead, url: URL) throws -> Asked {
        let (specifier, firstByte, length) = try rangeParts(of: head)
        return Asked(
            url: url, specifier: specifier, firstByte: firstByte, length: length,
            forwarded: Self.endToEndHeaders(head.headers),
            conditions: PlayerConditions(head.headers))
    }

    /// What a request's `Range` asks for: the range, where the body starts (when known
    /// before the length) and how many bytes from there (when the range says).
    static func rangeParts(of head: HTTPRequestHead) throws -> (
        specifier: RangeSpecifier?, firstByte: Int64?, length: Int64?
    ) {
        // RFC 9110: a Range that is not a valid bytes range is ignored; we say so instead.
        var specifier: RangeSpecifier?
        if let rangeHeader = head.headers.first(name: "range") {
            switch RangeSpecifier.parse(rangeHeader) {
            case .invalid:
                throw ProxyRequestError(
                    status: .badRequest,
                    "Malformed Range header \"\(rangeHeader.prefix(100))\": use bytes=a-b, bytes=a- or bytes=-n.")
            case .single(let one): specifier = one
            case .multiple(let first): specifier = first  // answered with the first range only
            }
        }
        var firstByte: Int64?
        var length: Int64?
        if head.method != .HEAD {
            switch specifier {
            case nil: firstByte = 0
            case .from(let first, let last)?:
                firstByte = first
                length = last.map { $0 - first + 1 }  // the parser guarantees first <= last <= 2^60
            case .suffix?: firstByte = nil
            }
        }
        return (specifier, firstByte, length)
    }

    /// Fields of a player's request that the proxy does not send on: hop-by-hop ones (RFC
    /// 9110 §7.6.1, plus those the request's `Connection` names), the target's `Host`, the
    /// range, validator and caching fields the cache manages itself, its encoding (bodies are
    /// cached as sent), and the proxy's own token.
    static let fieldsNotForwarded: [StaticString] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authorization", "proxy-authenticate", "host", "content-length", "expect",
        "range", "if-range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
        "cache-control", "pragma", "accept-encoding", "x-mediacache-token",
    ]

    /// The player's end-to-end request fields, for the origin: credentials, cookies,
    /// referer, user agent, languages (one cache serves one user).
    static func endToEndHeaders(_ headers: HTTPHeaders) -> RequestHeaders {
        // Asked for every request, cached or not: names are compared where they are, not
        // lower-cased and hashed, and only with the names of their length.
        let named = headers["connection"].flatMap {
            $0.split(separator: ",").map { String($0).trimmingHTTPWhitespace().lowercased() }
        }
        var forwarded: RequestHeaders = []
        forwarded.reserveCapacity(headers.count)
        for field in headers {
            let length = field.name.utf8.count
            if length < notForwardedByLength.count,
                notForwardedByLength[length].contains(where: { FieldName.matches(field.name, $0) })
            {
                continue
            }
            if !named.isEmpty, named.contains(where: { $0.utf8.count == length && $0 == field.name.lowercased() }) {
                continue
            }
            forwarded.append((name: field.name, value: field.value))
        }
        return forwarded
    }

    /// ``fieldsNotForwarded`` by their length.
    private static let notForwardedByLength: [[StaticString]] = {
        var table = [[StaticString]](repeating: [], count: (fieldsNotForwarded.map(\.utf8CodeUnitCount).max() ?? 0) + 1)
        for name in fieldsNotForwarded { table[name.utf8CodeUnitCount].append(name) }
        return table
    }()

    /// The checks every request passes before its URL is looked at: the method, then
    /// ``checkSender(_:localPort:)``.
    func checkRequest(_ head: HTTPRequestHead, localPort: Int) throws {
        let allowsPreflight = head.method == .OPTIONS && !configuration.corsOrigins.isEmpty
        guard head.method == .GET || head.method == .HEAD || allowsPreflight else {
            throw ProxyRequestError(
                status: .methodNotAllowed, "Only GET and HEAD are served.", headers: [("Allow", "GET, HEAD")])
        }
        try checkSender(head, localPort: localPort)
    }

    /// The checks every request passes first, admin ones included, before anything of the
    /// cache is looked at (so a refusal's timing says nothing of what is cached): the
    /// request's size, a `Host` that names this proxy (so a web page that rebinds its own name
    /// to 127.0.0.1 cannot reach it), and the site that sent it (``checkSite(_:)``).
    func checkSender(_ head: HTTPRequestHead, localPort: Int) throws {
        guard head.uri.utf8.count <= configuration.maxURIBytes else {
            throw ProxyRequestError(
                status: .uriTooLong, "The request target is longer than \(configuration.maxURIBytes) bytes.")
        }
        // One pass over the fields for their size and the Host (every request gets here).
        var headerBytes = 0
        var hostField: String?
        var hostCount = 0
        var cameThroughHere = false
        for field in head.headers {
            headerBytes += field.name.utf8.count + field.value.utf8.count + 4
            if FieldName.matches(field.name, "host") {
                hostField = field.value
                hostCount += 1
            } else if FieldName.matches(field.name, "via"), Self.names(field.value, configuration.pseudonym) {
                cameThroughHere = true
            }
        }
        guard !cameThroughHere else {
            throw ProxyRequestError(
                status: .forbidden,
                "This request came from this proxy (its Via names it): the proxy never fetches from itself.",
                refusal: .loop)
        }
        guard headerBytes <= configuration.maxHeaderBytes else {
            throw ProxyRequestError(
                status: .requestHeaderFieldsTooLarge,
                "The request's header fields are larger than \(configuration.maxHeaderBytes) bytes.")
        }
        guard let hostField else {
            // RFC 9112 §3.2: an HTTP/1.1 request without Host is malformed; HTTP/1.0 has none.
            guard head.version == .http1_0 else {
                throw ProxyRequestError(status: .badRequest, "The request has no Host header.")
            }
            return
        }
        guard hostCount == 1, let host = HostAndPort(parsing: hostField) else {
            throw ProxyRequestError(status: .badRequest, "The request's Host header is malformed.")
        }
        guard configuration.accepts(host, localPort: localPort) else {
            throw ProxyRequestError(
                status: .misdirectedRequest,
                "This proxy answers requests for 127.0.0.1:\(localPort), localhost:\(localPort) or [::1]:\(localPort), not \(hostField.prefix(100)) (a name it answers is one of its configuration's server names).",
                refusal: .host)
        }
        // On the LAN address every request carries the token in its URL (checked later): the
        // capability URL is the credential, whoever's page asks.
        if !configuration.isLANListener { try checkSite(head) }
    }

    /// Whether a `Via` field value lists `pseudonym` as a received-by (RFC 9110 §7.6.3).
    static func names(_ via: String, _ pseudonym: String) -> Bool {
        via.split(separator: ",").contains { member in
            let parts = member.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return parts.count >= 2 && parts[1] == pseudonym
        }
    }

    /// The `Sec-Fetch-Site` values a request may carry: the proxy's own pages, pages of the
    /// same site (another port of the same host), and what the user typed or bookmarked.
    static let sitesServed: Set<String> = ["same-origin", "same-site", "none"]

    /// Fetch Metadata resource isolation: a request a browser sent for a page of another site
    /// (`Sec-Fetch-Site: cross-site`, or a value the proxy does not know) is refused, unless it
    /// is a CORS request from a web origin listed in ``ProxyConfiguration/corsOrigins``. Any page
    /// could otherwise make the proxy fetch addresses on the user's network, fill and evict the
    /// cache, and time a request to learn what the user played. Players and tools send no
    /// `Sec-Fetch-*` field and are not concerned.
    private func checkSite(_ head: HTTPRequestHead) throws {
        let sites = head.headers["sec-fetch-site"]
        if sites.isEmpty { return }
        if sites.count == 1, Self.sitesServed.contains(sites[0].lowercased()) { return }
        if allowedWebOrigin(head) != nil { return }
        throw ProxyRequestError(
            status: .forbidden,
            "A page of another site asked for this (Sec-Fetch-Site: \(sites.joined(separator: ", ").prefix(40))): the proxy serves players, the user, and pages its configuration lists asking in CORS mode.",
            refusal: .crossSite)
    }

    /// Whether the request carries the access token (as `token=` or `X-MediaCache-Token`),
    /// compared in time that does not depend on where a guess first differs; never on the LAN
    /// listener, whose URLs carry capabilities.
    func hasToken(_ target: RequestTarget, _ head: HTTPRequestHead) -> Bool {
        guard !configuration.isLANListener else { return false }
        guard let token = configuration.token else { return true }
        let header = head.headers.first(name: "X-MediaCache-Token")
        guard let given = target.token ?? header else { return false }
        let (expected, offered) = (Array(token.utf8), Array(given.utf8))
        var difference = expected.count ^ offered.count
        for index in expected.indices {
            difference |= Int(expected[index] ^ (index < offered.count ? offered[index] : 0))
        }
        return difference == 0
    }

    /// Logs a request a guard refused (a page of another site, a wrong `Host`, a missing token,
    /// an altered LAN URL, the proxy itself as origin, an origin not allowed) at warning level
    /// with its cause and the `client`'s address, and counts it by cause. The request's target is
    /// not logged: it may carry a credential.
    func noteRefusal(_ error: any Error, _ head: HTTPRequestHead, client: String? = nil) {
        guard let refused = error as? ProxyRequestError, let refusal = refused.refusal else { return }
        ProxyMetrics.refused(refusal)
        var metadata: Logger.Metadata = ["cause": "\(refusal.rawValue)", "status": "\(refused.status.code)"]
        if let client { metadata["client"] = "\(client)" }
        for name in ["sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "origin", "host"] {
            if let value = head.headers.first(name: name) { metadata[name] = "\(value.prefix(100))" }
        }
        // The referring page's origin only: its path and query may hold what is not ours to log.
        if let referer = head.headers.first(name: "referer").flatMap(URL.init(string:)), let scheme = referer.scheme,
            let host = referer.host
        {
            metadata["referer"] = "\(scheme)://\(host.prefix(100))\(referer.port.map { ":\($0)" } ?? "")"
        }
        configuration.logger.warning("Refused a request: \(refused.message)", metadata: metadata)
    }

    // MARK: CORS (opt-in)

    /// The request's `Origin`, if it is one of ``ProxyConfiguration/corsOrigins``.
    private func allowedWebOrigin(_ head: HTTPRequestHead) -> String? {
        guard !configuration.corsOrigins.isEmpty, let origin = head.headers.first(name: "origin") else { return nil }
        return configuration.corsOrigins.contains(origin) ? origin : nil
    }

    /// Lets a listed web origin's page read the answer, and its player see the range fields.
    func addCORSHeaders(to response: inout ProxyResponse, for head: HTTPRequestHead) {
        guard !configuration.corsOrigins.isEmpty else { return }
        response.headers.add(name: "Vary", value: "Origin")
        guard let origin = allowedWebOrigin(head) else { return }
        response.headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: origin)
        if head.method != .OPTIONS {
            response.headers.add(
                name: "Access-Control-Expose-Headers",
                value: "Content-Range, Content-Length, Accept-Ranges, ETag, Last-Modified, Cache-Status")
        }
    }

    /// The answer to a CORS preflight (`OPTIONS`): `204` for a listed web origin, with the
    /// methods, the request fields it asked for and, if asked, Private Network Access.
    func preflight(_ head: HTTPRequestHead) throws -> ProxyResponse {
        guard allowedWebOrigin(head) != nil else {
            throw ProxyRequestError(
                status: .forbidden,
                "Pages from this origin may not read through the proxy (its configuration does not list it).")
        }
        var headers = HTTPHeaders()
        headers.add(name: "Access-Control-Allow-Methods", value: "GET, HEAD")
        let asked = head.headers["access-control-request-headers"].joined(separator: ",").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && $0.utf8.allSatisfy(CacheControl.isTokenByte) }
        if !asked.isEmpty { headers.add(name: "Access-Control-Allow-Headers", value: asked.joined(separator: ", ")) }
        if head.headers.first(name: "access-control-request-private-network")?.lowercased() == "true" {
            headers.add(name: "Access-Control-Allow-Private-Network", value: "true")
        }
        headers.add(name: "Access-Control-Max-Age", value: "600")
        headers.add(name: "Content-Length", value: "0")
        return ProxyResponse(status: .noContent, headers: headers, body: .none)
    }

    /// What the request's target names and what it may reach, after the token, scheme and origin
    /// checks, and ``checkReach(_:grant:localPort:)``.
    func checkedTarget(_ head: HTTPRequestHead, localPort: Int) throws -> (
        ProxyTarget, LANCapabilities.Grant, until: Int64?
    ) {
        let parsed = recentTargets.parse(head.uri) { [checkOrigin] url throws(ProxyRequestError) in
            do {
                try checkOrigin(url)
            } catch {
                throw ProxyRequestError(
                    status: .forbidden, (error as? CacheError)?.message ?? "The origin is not allowed.",
                    refusal: .origin)
            }
        }
        let proxy = try parsed.proxy.get()
        let grant: LANCapabilities.Grant
        let until: Int64?
        switch admission(parsed.target, proxy: proxy, head) {
        case .granted(let granted, let expiry):
            if configuration.isLANListener { try checkRevoked(proxy.token) }
            (grant, until) = (granted, expiry)
        case .expired(let at): throw Self.expired(at: at)
        case .refused:
            guard configuration.isLANListener else {
                throw ProxyRequestError(status: .forbidden, "Missing or wrong access token.", refusal: .token)
            }
            throw ProxyRequestError(
                status: .forbidden, "This URL's credential was not given for what it names.", refusal: .capability)
        }
        try checkReach(proxy.origin, grant: grant, localPort: localPort)
        return (proxy, grant, until)
    }
}
