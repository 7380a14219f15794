// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1

/// One request as a transport sends it (redirects are never followed by the transport).
struct OriginRequest: Sendable {
    var method: HTTPMethod
    var url: URL
    var headers: HTTPHeaders
}

/// One answer as a transport received it: status, fields, and the body as it arrives.
/// Dropping the body's iterator ends the request.
struct OriginReply: Sendable {
    var status: Int
    var reason: String
    var headers: HTTPHeaders
    var body: any AsyncSequence<ByteBuffer, any Error> & Sendable
}

/// What sends requests to origins: AsyncHTTPClient (``HTTPOriginFetcher``) or URLSession
/// (``URLSessionOriginFetcher``). Everything else of the HTTP exchange is ``OriginExchange``'s.
protocol OriginTransport: Sendable {
    /// Sends `request` and returns once the answer's head has arrived.
    /// - Throws: `CacheError` with the cause: `.originTimedOut`, `.originUnavailable`, or
    ///   `.originRejected` for a malformed answer or a failed TLS handshake.
    func send(_ request: OriginRequest) async throws -> OriginReply
}

/// A transport's failure on a connection reused from its pool that closed before the answer
/// came: the request may never have reached the origin. ``OriginExchange`` sends it once more;
/// `error` is what the failure means if that fails too.
struct StaleConnection: Error {
    var error: CacheError
}

/// The rules of origin requests that do not depend on the transport.
struct OriginPolicy: Sendable {
    var maxRedirects: Int
    var allowedHosts: Set<String>
    var maxURLBytes: Int
    var heuristicFraction: Double
    var heuristicCap: Duration
    var clock: any WallClock
    var userAgent: String
    /// Whether answers are read as a shared cache reads them (see ``OriginFetcherConfiguration/isSharedCache``).
    var isShared: Bool
    var cookieJar: CookieJar?
    var logger: Logger
    /// Judges where a redirect leads (``OriginExchange/checkReach(from:to:)``).
    var resolver: AddressResolver = .system
}

/// The HTTP side of fetching from an origin, the same over every transport: requests with the
/// player's fields, ranges and `If-Range`; redirects followed here, every hop checked like the
/// first URL (http or https, a host, the allow-list) with a hop limit and loop detection; every
/// answer checked before a byte of it is used (numbers parsed with bounds, a `206` must carry
/// the range asked for, `Content-Length` values must agree with each other and the range).
struct OriginExchange<Transport: OriginTransport>: Sendable {
    let transport: Transport
    let policy: OriginPolicy

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        var head = try makeRequest(url, headers: headers)
        head.method = .HEAD
        let requested = policy.clock.now
        let (response, finalURL) = try await execute(head, url: url)
        if response.status == 200, let length = try contentLength(response.headers, url: url) {
            var metadata = metadata(from: response.headers, status: 200, requested: requested, request: headers)
            metadata.length = length
            metadata.finalURL = finalURL
            metadata.sourceURL = url
            return metadata
        }
        if response.status != 200, response.status != 405, response.status != 501 {
            // The origin's own answer (a 404, a 503, a 304 to the player's condition): the
            // same to a GET, so there is nothing more to ask.
            throw CacheError(answer: try await answer(response, url: url), url: url.absoluteString)
        }
        // HEAD refused or without a length: ask for two bytes instead.
        let probe = try await fetch(url, range: ByteRange(0, 2), ifRange: nil, headers: headers)
        return probe.metadata
    }

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse
    {
        var request = try makeRequest(url, headers: headers)
        if let range { request.headers.replaceOrAdd(name: "Range", value: RangeSpecifier.headerValue(for: range)) }
        if let ifRange, range != nil { request.headers.replaceOrAdd(name: "If-Range", value: ifRange) }
        let requested = policy.clock.now
        let (response, finalURL) = try await execute(request, url: url)
        var metadata = metadata(from: response.headers, status: response.status, requested: requested, request: headers)
        metadata.finalURL = finalURL
        metadata.sourceURL = url
        let contentLength = try contentLength(response.headers, url: url)
        let coded = response.headers["content-encoding"].contains { $0.lowercased() != "identity" }
        if response.status == 200, !coded, !response.headers["content-digest"].isEmpty {
            // A whole answer's content is the representation: its digest is one of it.
            metadata.wholeContentDigest = response.headers["content-digest"].joined(separator: ", ")
        }
        switch response.status {
        case 304:
            // The answer to a conditional request: the cached version is current (or, when
            // the condition was the player's, the answer to pass on).
            var notModified = OriginResponse(
                metadata: metadata, bodyOffset: range?.lowerBound ?? 0, body: response.body)
            notModified.isNotModified = true
            notModified.answer = OriginAnswer(
                status: 304, reason: response.reason, headers: HTTPOriginFetcher.passedFields(response.headers),
                body: [])
            return notModified
        case 206:
            let header = response.headers.first(name: "content-range")
            guard let range, let contentRange = header.flatMap(ContentRange.init(parsing:)),
                let got = contentRange.range,
                got.lowerBound == range.lowerBound, got.upperBound <= range.upperBound
            else {
                throw rejected(
                    "answered a range request for \(range.map { RangeSpecifier.headerValue(for: $0) } ?? "nothing") with Content-Range \(header.map { "\"\($0.prefix(100))\"" } ?? "missing")",
                    url: url)
            }
            if let contentLength, contentLength != got.length {
                throw rejected(
                    "sent Content-Length \(contentLength) with Content-Range \(contentRange.headerValue)", url: url)
            }
            metadata.length = contentRange.totalLength
            metadata.acceptsRanges = true
            var partial = OriginResponse(metadata: metadata, bodyOffset: got.lowerBound, body: response.body)
            partial.bodyEnd = got.upperBound
            return partial
        case 200:
            metadata.length = contentLength
            if range != nil, ifRange == nil {
                // A range request answered in full: the origin does not do ranges.
                metadata.acceptsRanges = false
            }
            return OriginResponse(metadata: metadata, bodyOffset: 0, body: response.body)
        case 416:
            var error = CacheError(.rangeNotSatisfiable, "\(url.absoluteString) has no bytes at the requested range.")
            error.resourceLength =
                response.headers.first(name: "content-range").flatMap(ContentRange.init(parsing:))?.totalLength
            throw error
        default:
            // Not the resource's bytes (4xx, 5xx, a 2xx other than 200, a redirect not
            // followed): the origin's answer, passed on as it is and never stored as media.
            // A 5xx is a failure to serve now (retried, and a stale copy may stand in).
            var answer = try await answer(response, url: url)
            markReusable(&answer, headers: response.headers, request: headers, requested: requested)
            throw CacheError(answer: answer, url: url.absoluteString)
        }
    }

    /// The origin's answer as it is, its body read whole within ``OriginAnswer/maximumBodySize``.
    /// - Throws: `.originRejected` for a longer body.
    private func answer(_ response: OriginReply, url: URL) async throws -> OriginAnswer {
        guard let body = try await Self.collect(response.body, upTo: OriginAnswer.maximumBodySize) else {
            throw rejected(
                "answered \(response.status) with a body over \(OriginAnswer.maximumBodySize) bytes", url: url)
        }
        let answer = OriginAnswer(
            status: response.status, reason: response.reason,
            headers: HTTPOriginFetcher.passedFields(response.headers), body: body)
        if answer.isServerError || answer.status == 404 || answer.status == 410 {
            policy.logger.warning(
                "The origin answered with an error",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "status": "\(answer.status)"])
        }
        return answer
    }

    /// A whole body, or `nil` when it is longer than `limit`.
    static func collect(_ body: any AsyncSequence<ByteBuffer, any Error>, upTo limit: Int) async throws -> [UInt8]? {
        var bytes: [UInt8] = []
        for try await chunk in body {
            guard bytes.count + chunk.readableBytes <= limit else { return nil }
            bytes += chunk.readableBytesView
        }
        return bytes
    }

    /// Whether `url` may be fetched: http or https, a host, a valid port, not too long, and
    /// on the allow-list if there is one. The same check applies to every redirect target.
    /// - Throws: `CacheError/Code/originNotAllowed` with the reason.
    func checkOrigin(_ url: URL) throws {
        func refuse(_ reason: String) -> CacheError { CacheError(.originNotAllowed, reason) }
        let text = url.absoluteString
        guard text.utf8.count <= policy.maxURLBytes else {
            throw refuse("The URL is longer than \(policy.maxURLBytes) bytes.")
        }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw refuse(
                "Only http and https URLs can be fetched, not \(url.scheme.map { "\($0.prefix(20)):" } ?? "a URL without a scheme")."
            )
        }
        guard let host = url.host, !host.isEmpty else { throw refuse("The URL \(text.prefix(200)) has no host.") }
        guard let authority = HostAndPort(authorityOf: url), authority.port.map({ $0 > 0 }) ?? true else {
            throw refuse("The URL \(text.prefix(200)) has no valid host and port (1...65535).")
        }
        if !policy.allowedHosts.isEmpty, !policy.allowedHosts.contains(where: { $0.lowercased() == host.lowercased() })
        {
            throw refuse("The host \(host.prefix(200)) is not on the allow-list.")
        }
    }

    /// A request for `url` carrying the player's `headers`; the player's `User-Agent`, if
    /// any, replaces ours. The range and validator fields are the caller's to add.
    private func makeRequest(_ url: URL, headers: RequestHeaders) throws -> OriginRequest {
        try checkOrigin(url)
        var request = OriginRequest(method: .GET, url: url, headers: HTTPHeaders())
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if !request.headers.contains(name: "User-Agent") {
            request.headers.add(name: "User-Agent", value: policy.userAgent)
        }
        request.headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        return request
    }

    /// Fields that carry the player's credentials: not sent on to another origin after a
    /// redirect (as browsers and curl do).
    static var credentialFields: [String] { ["authorization", "cookie", "proxy-authorization"] }

    /// Sends `request`, following redirects: each hop is checked with ``checkOrigin(_:)``,
    /// at most ``OriginPolicy/maxRedirects`` are followed and none twice (a loop).
    /// - Returns: the last answer, and the URL it came from when redirects led elsewhere.
    /// Sends `request`; one whose pooled connection closed before it was answered
    /// (``StaleConnection``) is sent once more, on a new connection: `GET` and `HEAD` are
    /// idempotent (RFC 9110 §9.2.2). The retry is logged at warning level and counted.
    private func send(_ request: OriginRequest) async throws -> OriginReply {
        do {
            return try await transport.send(request)
        } catch let stale as StaleConnection {
            policy.logger.warning(
                "Retrying an origin request whose connection closed before it was answered",
                metadata: ["url": "\(request.url.absoluteString.prefix(200))", "cause": "\(stale.error.message)"])
            CacheMetrics.retried(.connectionClosed)
            do {
                return try await transport.send(request)
            } catch let again as StaleConnection {
                throw again.error
            }
        }
    }

    private func execute(_ request: OriginRequest, url: URL) async throws -> (OriginReply, finalURL: URL?) {
        var request = request
        var current = url
        var visited: Set<String> = [url.absoluteString]
        if let jar = policy.cookieJar {
            // The player's cookies are kept for the host it asked for, then sent from the jar.
            for value in request.headers["cookie"] { jar.receive(cookieField: value, for: url, now: policy.clock.now) }
        }
        while true {
            if let jar = policy.cookieJar {
                request.headers.remove(name: "cookie")
                if let field = jar.field(for: current, now: policy.clock.now) {
                    request.headers.add(name: "Cookie", value: field)
                }
            }
            let response = try await send(request)
            keepCookies(of: response, from: current)
            // A redirect without a `Location` cannot be followed: it is the origin's answer,
            // passed to the player as any other status is (and stored as its freshness allows).
            guard [301, 302, 303, 307, 308].contains(response.status),
                let location = response.headers.first(name: "location")
            else {
                return (response, current == url ? nil : current)
            }
            // The redirect's own body is not wanted; read a little of it so the connection
            // can be reused, or give up on it (the transport then closes that connection).
            _ = try? await Self.collect(response.body, upTo: 16 << 10)
            guard visited.count <= policy.maxRedirects else {
                throw rejected("redirected more than \(policy.maxRedirects) times", url: url)
            }
            guard let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                throw rejected("redirected to a malformed Location \"\(location.prefix(200))\"", url: current)
            }
            do {
                try checkOrigin(next)
            } catch let error as CacheError {
                throw rejected(
                    "redirected to \(next.absoluteString.prefix(200)), which is refused: \(error.message)", url: current
                )
            }
            try await checkReach(from: current, to: next)
            try await checkLANReach(from: current, to: next)
            guard visited.insert(next.absoluteString).inserted else {
                throw rejected("redirected in a loop back to \(next.absoluteString.prefix(200))", url: current)
            }
            if HostAndPort(authorityOf: next) != HostAndPort(authorityOf: current)
                || next.scheme?.lowercased() != current.scheme?.lowercased()
            {
                for name in Self.credentialFields { request.headers.remove(name: name) }
            }
            current = next
            request.url = next
        }
    }

    /// Refuses a redirect from an origin on the internet to an address that is not (this machine,
    /// its link, a private network), whether written as an address or a name that resolves to one:
    /// a web server must not lead the cache to the host's own services or the devices of its
    /// network (and, through the LAN listener, lead a device of the network there). An origin that
    /// is itself inside (a NAS, a server on loopback) may redirect anywhere.
    private func checkReach(from current: URL, to next: URL) async throws {
        guard let nextHost = HostAndPort(authorityOf: next)?.name,
            let inside = await policy.resolver.nonPublicScope(of: nextHost),
            let currentHost = HostAndPort(authorityOf: current)?.name,
            await policy.resolver.nonPublicScope(of: currentHost) == nil
        else { return }
        throw rejected(
            "redirected to \(next.absoluteString.prefix(200)), a \(inside.rawValue) address, which an origin on the internet may not lead the cache to",
            url: current)
    }

    /// Refuses, for a request from the LAN listener (``LANReach/current``), a redirect to an
    /// address of this machine or its networks other than the origin its URL was minted for:
    /// counted, and logged at warning level with the client's address and the target.
    private func checkLANReach(from current: URL, to next: URL) async throws {
        guard let reach = LANReach.current, let host = HostAndPort(authorityOf: next)?.name else { return }
        let scope = await policy.resolver.nonPublicScope(of: host)
        guard !reach.follows(next, scope: scope) else { return }
        CacheMetrics.refusedLANRedirect()
        policy.logger.warning(
            "Refused a LAN request's redirect to an address that is not on the internet",
            metadata: [
                "client": "\(reach.client)", "from": "\(current.absoluteString.prefix(200))",
                "target": "\(next.absoluteString.prefix(200))", "scope": "\(scope?.rawValue ?? "-")",
            ])
        throw CacheError(
            .originNotAllowed,
            "The origin redirected to \(next.absoluteString.prefix(200)), a \(scope?.rawValue ?? "") address: from the LAN, redirects lead only to the origin the URL was made for or to the internet."
        )
    }

    /// Keeps the cookies `response` sets in the jar; a refused one is logged at warning level
    /// (and counted by the jar).
    private func keepCookies(of response: OriginReply, from url: URL) {
        guard let jar = policy.cookieJar else { return }
        let values = response.headers["set-cookie"]
        guard !values.isEmpty else { return }
        for (value, refusal) in jar.receive(setCookie: values, from: url, now: policy.clock.now) {
            let name = value.prefix { $0 != "=" && $0 != ";" }.prefix(100)
            policy.logger.warning(
                "Refused a cookie",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "cookie": "\(name)", "reason": "\(refusal)"])
        }
    }

    /// A rejected answer, logged at warning level with its cause.
    func rejected(_ reason: String, url: URL) -> CacheError {
        Self.rejected(reason, url: url, logger: policy.logger)
    }

    static func rejected(_ reason: String, url: URL, logger: Logger) -> CacheError {
        let error = CacheError(
            .originRejected, "The origin of \(url.absoluteString.prefix(200)) \(reason); nothing of the answer is used."
        )
        logger.warning(
            "Rejected an origin answer", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
        return error
    }

    /// The `Content-Length`, or `nil` if absent.
    /// - Throws: `.originRejected` when a value is not a bounded number or two values differ.
    private func contentLength(_ headers: HTTPHeaders, url: URL) throws -> Int64? {
        let values = headers[canonicalForm: "content-length"]
        guard let first = values.first else { return nil }
        guard let length = HTTPNumber.strict(first), values.allSatisfy({ HTTPNumber.strict($0) == length }) else {
            throw rejected("sent an invalid Content-Length (\(values.joined(separator: ", ").prefix(100)))", url: url)
        }
        return length
    }

    /// What an answer with `status` received now, to a request with the player's fields
    /// `request` sent at `requested`, says of the resource.
    private func metadata(from headers: HTTPHeaders, status: Int, requested: Date, request: RequestHeaders)
        -> ContentMetadata
    {
        // Parsed once for the three readings of it below.
        let directives = CacheControl(headers["cache-control"])
        var metadata = HTTPOriginFetcher.metadata(from: headers, shared: policy.isShared, directives: directives)
        if status == 200 {
            // An odd field on a whole answer is the origin's to send: it comes back as sent
            // (a partial answer's own `Content-Range` is the proxy's to write).
            metadata.responseHeaders += headers["content-range"].prefix(1).map {
                ContentMetadata.HeaderField(name: "Content-Range", value: $0)
            }
        }
        metadata.isStorable = HTTPOriginFetcher.mayStore(
            status: status == 304 ? 200 : status, headers: headers, request: request, shared: policy.isShared,
            directives: directives)
        metadata.recordVaryingFields(of: request)
        let freshness = freshness(of: headers, status: status, requested: requested, directives: directives)
        metadata.freshUntil = freshness.freshUntil
        metadata.generatedAt = freshness.generatedAt
        return metadata
    }

    private func freshness(
        of headers: HTTPHeaders, status: Int, requested: Date, directives: CacheControl? = nil
    ) -> (freshUntil: Date, generatedAt: Date, isExplicit: Bool) {
        // A 206 and a 304 describe the 200 they stand for.
        HTTPOriginFetcher.freshness(
            headers, status: [206, 304].contains(status) ? 200 : status, shared: policy.isShared, requested: requested,
            received: policy.clock.now,
            heuristicFraction: policy.heuristicFraction, heuristicCap: policy.heuristicCap, directives: directives)
    }

    /// Marks `answer` (to a `GET` with the player's fields `request`, sent at `requested`) as
    /// reusable until it turns stale, when a cache may store it and it is fresh for a while:
    /// by the origin's word, or heuristically for a status that allows it (RFC 9111 §3, §4.2).
    /// A `Vary` answer, a `304` or `412` to the player's own conditions, and a partial answer
    /// are not.
    private func markReusable(
        _ answer: inout OriginAnswer, headers: HTTPHeaders, request: RequestHeaders, requested: Date
    ) {
        guard ![206, 304, 412].contains(answer.status), !(100..<200).contains(answer.status), !request.hasConditions,
            !headers.contains(name: "vary"),
            HTTPOriginFetcher.mayStore(
                status: answer.status, headers: headers, request: request, shared: policy.isShared)
        else { return }
        let freshness = freshness(of: headers, status: answer.status, requested: requested)
        guard freshness.freshUntil > policy.clock.now else { return }
        answer.freshUntil = freshness.freshUntil
        answer.generatedAt = freshness.generatedAt
    }
}
