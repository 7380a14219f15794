// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import AsyncHTTPClient
public import Foundation
public import Logging
public import MediaCache
import NIOCore
import NIOHTTP1
import NIOSSL

/// Fetches content information and byte ranges from HTTP(S) origins with AsyncHTTPClient.
///
/// Redirects are followed here, not by the client, so that every hop is checked like the
/// first URL (http or https, a host, the allow-list), with a hop limit and loop detection.
/// Connect, response-head and idle-read timeouts are set. Every answer is checked before a
/// byte of it is used: numbers are parsed with bounds, a `206` must carry the range asked
/// for, `Content-Length` values must agree with each other and with the range, and a
/// malformed response is rejected (``CacheError/Code/originRejected``), never retried.
/// Bodies stream as they arrive, and dropping a body's iterator closes the origin request.
public final class HTTPOriginFetcher: OriginFetcher {
    /// Options for origin requests.
    public struct Configuration: Sendable {
        /// How long to wait for a connection.
        public var connectTimeout: Duration = .seconds(10)
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
        public var clock: any WallClock = SystemClock()
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
        /// Where refused redirects and rejected answers are logged (at warning level).
        public var logger = Logger(label: "mediacache.origin", factory: { _ in SwiftLogNoOpLogHandler() })

        /// Creates the default configuration.
        public init() {}
    }

    let client: HTTPClient
    let configuration: Configuration
    /// How origins' certificates are checked (system roots plus ``Configuration/trustRoots``).
    let tlsConfiguration: TLSConfiguration

    /// Creates a fetcher with its own HTTP client; call ``shutdown()`` when done.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        var clientConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,  // followed by `execute`, which checks every hop
            timeout: .init(connect: .init(configuration.connectTimeout), read: .init(configuration.readTimeout)),
            decompression: .disabled
        )
        clientConfiguration.httpVersion = configuration.usesHTTP2 ? .automatic : .http1Only
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12  // TLS 1.0 and 1.1 are retired (RFC 8996)
        if configuration.trustRoots.count > 0 { tls.additionalTrustRoots = [.certificates(configuration.trustRoots.certificates)] }
        if configuration.skipsCertificateVerification { tls.certificateVerification = .none }
        // A client need not wait for the server's close_notify (RFC 8446 §6.1). Waiting (5 s
        // by default) kept a cancelled HTTP/1.1 request's connection reading, and the origin
        // sending, after the player had gone.
        tls.shutdownTimeout = .milliseconds(100)
        clientConfiguration.tlsConfiguration = tls
        tlsConfiguration = tls
        // A connection that cannot be made fails its requests at once with the cause (the read
        // path retries what can be retried), instead of being retried by the client until the
        // connect timeout: a certificate that is not trusted will not become trusted.
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    }

    /// Closes the HTTP client's connections.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    // MARK: OriginFetcher

    public func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        var head = try makeRequest(url, headers: headers)
        head.method = .HEAD
        let requested = configuration.clock.now
        let (response, finalURL) = try await execute(head, url: url)
        let status = Int(response.status.code)
        if status == 200, let length = try contentLength(response.headers, url: url) {
            var metadata = metadata(from: response.headers, requested: requested, request: headers)
            metadata.length = length
            metadata.finalURL = finalURL
            metadata.sourceURL = url
            return metadata
        }
        if status != 200, status != 405, status != 501 {
            // The origin's own answer (a 404, a 503, a 304 to the player's condition): the
            // same to a GET, so there is nothing more to ask.
            throw CacheError(answer: try await answer(response, url: url), url: url.absoluteString)
        }
        // HEAD refused or without a length: ask for two bytes instead.
        let probe = try await fetch(url, range: ByteRange(0, 2), ifRange: nil, headers: headers)
        return probe.metadata
    }

    public func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse {
        var request = try makeRequest(url, headers: headers)
        if let range { request.headers.replaceOrAdd(name: "Range", value: RangeSpecifier.headerValue(for: range)) }
        if let ifRange, range != nil { request.headers.replaceOrAdd(name: "If-Range", value: ifRange) }
        let requested = configuration.clock.now
        let (response, finalURL) = try await execute(request, url: url)
        var metadata = metadata(from: response.headers, requested: requested, request: headers)
        metadata.finalURL = finalURL
        metadata.sourceURL = url
        let contentLength = try contentLength(response.headers, url: url)
        switch response.status.code {
        case 304:
            // The answer to a conditional request: the cached version is current (or, when
            // the condition was the player's, the answer to pass on).
            var notModified = OriginResponse(metadata: metadata, bodyOffset: range?.lowerBound ?? 0, body: response.body)
            notModified.isNotModified = true
            notModified.answer = OriginAnswer(status: 304, reason: String(response.status.reasonPhrase), headers: Self.passedFields(response.headers), body: [])
            return notModified
        case 206:
            let header = response.headers.first(name: "content-range")
            guard let range, let contentRange = header.flatMap(ContentRange.init(parsing:)), let got = contentRange.range,
                  got.lowerBound == range.lowerBound, got.upperBound <= range.upperBound
            else {
                throw rejected("answered a range request for \(range.map { RangeSpecifier.headerValue(for: $0) } ?? "nothing") with Content-Range \(header.map { "\"\($0.prefix(100))\"" } ?? "missing")", url: url)
            }
            if let contentLength, contentLength != got.length {
                throw rejected("sent Content-Length \(contentLength) with Content-Range \(contentRange.headerValue)", url: url)
            }
            metadata.length = contentRange.totalLength
            metadata.acceptsRanges = true
            return OriginResponse(metadata: metadata, bodyOffset: got.lowerBound, body: response.body)
        case 200:
            metadata.length = contentLength
            if range != nil, ifRange == nil {
                // A range request answered in full: the origin does not do ranges.
                metadata.acceptsRanges = false
            }
            return OriginResponse(metadata: metadata, bodyOffset: 0, body: response.body)
        case 416:
            var error = CacheError(.rangeNotSatisfiable, "\(url.absoluteString) has no bytes at the requested range.")
            error.resourceLength = response.headers.first(name: "content-range").flatMap(ContentRange.init(parsing:))?.totalLength
            throw error
        default:
            // Not the resource's bytes (4xx, 5xx, a 2xx other than 200, a redirect not
            // followed): the origin's answer, passed on as it is and never stored as media.
            // A 5xx is a failure to serve now (retried, and a stale copy may stand in).
            throw CacheError(answer: try await answer(response, url: url), url: url.absoluteString)
        }
    }

    /// The origin's answer as it is, its body read whole within ``OriginAnswer/maximumBodySize``.
    /// - Throws: `.originRejected` for a longer body.
    private func answer(_ response: HTTPClientResponse, url: URL) async throws -> OriginAnswer {
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: OriginAnswer.maximumBodySize)
        } catch is NIOTooManyBytesError {
            throw rejected("answered \(response.status.code) with a body over \(OriginAnswer.maximumBodySize) bytes", url: url)
        }
        let answer = OriginAnswer(status: Int(response.status.code), reason: String(response.status.reasonPhrase),
                                  headers: Self.passedFields(response.headers), body: Array(body.readableBytesView))
        if answer.isServerError || answer.status == 404 || answer.status == 410 {
            configuration.logger.warning("The origin answered with an error", metadata: ["url": "\(url.absoluteString.prefix(200))", "status": "\(answer.status)"])
        }
        return answer
    }

    public var securityWarning: String? {
        configuration.skipsCertificateVerification ? "origin certificates are NOT verified (--insecure-skip-verify)" : nil
    }

    /// Whether `url` may be fetched: http or https, a host, a valid port, not too long, and
    /// on the allow-list if there is one. The same check applies to every redirect target.
    /// - Throws: ``CacheError/Code/originNotAllowed`` with the reason.
    public func checkOrigin(_ url: URL) throws {
        func refuse(_ reason: String) -> CacheError { CacheError(.originNotAllowed, reason) }
        let text = url.absoluteString
        guard text.utf8.count <= configuration.maxURLBytes else {
            throw refuse("The URL is longer than \(configuration.maxURLBytes) bytes.")
        }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw refuse("Only http and https URLs can be fetched, not \(url.scheme.map { "\($0.prefix(20)):" } ?? "a URL without a scheme").")
        }
        guard let host = url.host, !host.isEmpty else { throw refuse("The URL \(text.prefix(200)) has no host.") }
        guard let authority = HostAndPort(authorityOf: url), authority.port.map({ $0 > 0 }) ?? true else {
            throw refuse("The URL \(text.prefix(200)) has no valid host and port (1...65535).")
        }
        if !configuration.allowedHosts.isEmpty, !configuration.allowedHosts.contains(where: { $0.lowercased() == host.lowercased() }) {
            throw refuse("The host \(host.prefix(200)) is not on the allow-list.")
        }
    }

    // MARK: Helpers

    /// A request for `url` carrying the player's `headers`; the player's `User-Agent`, if
    /// any, replaces ours. The range and validator fields are the caller's to add.
    private func makeRequest(_ url: URL, headers: RequestHeaders) throws -> HTTPClientRequest {
        try checkOrigin(url)
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if !request.headers.contains(name: "User-Agent") { request.headers.add(name: "User-Agent", value: configuration.userAgent) }
        request.headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        return request
    }

    /// Fields that carry the player's credentials: not sent on to another origin after a
    /// redirect (as browsers and curl do).
    static let credentialFields = ["authorization", "cookie", "proxy-authorization"]

    /// Sends `request`, following redirects: each hop is checked with ``checkOrigin(_:)``,
    /// at most ``Configuration/maxRedirects`` are followed and none twice (a loop).
    /// - Returns: the last answer, and the URL it came from when redirects led elsewhere.
    private func execute(_ request: HTTPClientRequest, url: URL) async throws -> (HTTPClientResponse, finalURL: URL?) {
        var request = request
        var current = url
        var visited: Set<String> = [url.absoluteString]
        while true {
            let response = try await send(request, url: current)
            guard [301, 302, 303, 307, 308].contains(response.status.code) else { return (response, current == url ? nil : current) }
            // The redirect's own body is not wanted; read a little of it so the connection
            // can be reused, or give up on it (the client then closes that connection).
            _ = try? await response.body.collect(upTo: 16 << 10)
            guard let location = response.headers.first(name: "location") else {
                throw rejected("answered \(response.status.code) without a Location", url: current)
            }
            guard visited.count <= configuration.maxRedirects else {
                throw rejected("redirected more than \(configuration.maxRedirects) times", url: url)
            }
            guard let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                throw rejected("redirected to a malformed Location \"\(location.prefix(200))\"", url: current)
            }
            do {
                try checkOrigin(next)
            } catch let error as CacheError {
                throw rejected("redirected to \(next.absoluteString.prefix(200)), which is refused: \(error.message)", url: current)
            }
            guard visited.insert(next.absoluteString).inserted else {
                throw rejected("redirected in a loop back to \(next.absoluteString.prefix(200))", url: current)
            }
            if HostAndPort(authorityOf: next) != HostAndPort(authorityOf: current) || next.scheme?.lowercased() != current.scheme?.lowercased() {
                for name in Self.credentialFields { request.headers.remove(name: name) }
            }
            current = next
            request.url = next.absoluteString
        }
    }

    private func send(_ request: HTTPClientRequest, url: URL) async throws -> HTTPClientResponse {
        do {
            return try await client.execute(request, timeout: .init(configuration.responseTimeout))
        } catch let error as HTTPClientError where [.connectTimeout, .readTimeout, .deadlineExceeded].contains(error) {
            throw CacheError(.originTimedOut, "\(url.host ?? url.absoluteString) did not answer in time.", underlyingError: error)
        } catch let error as HTTPParserError {
            // A malformed status line, header or framing: the answer cannot be trusted.
            throw rejected("sent a malformed response (\(error))", url: url)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            if let kind = OriginTLSFailure.kind(of: error) {
                // Never retried: the same handshake fails the same way. The explanation takes
                // one more handshake, given the connect timeout: capped shorter, a busy machine
                // gave the vaguer reason instead of the certificate's own fault.
                let reason = await OriginTLSFailure.explain(kind, url: url, trustRoots: configuration.trustRoots,
                                                            timeout: configuration.connectTimeout)
                configuration.logger.warning("TLS with the origin failed", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
                throw CacheError(.originRejected, reason, underlyingError: error)
            }
            let authority = HostAndPort(authorityOf: url).map { "\($0.name):\($0.port ?? (url.scheme == "https" ? 443 : 80))" } ?? url.absoluteString
            throw CacheError(.originUnavailable, "Cannot reach \(authority.prefix(200)): \(Self.cause(of: error)).", underlyingError: error)
        }
    }

    /// Why a connection failed, in a few words (`Connection refused`).
    static func cause(of error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return String("\(error)".prefix(200))
    }

    /// A rejected answer, logged at warning level with its cause.
    private func rejected(_ reason: String, url: URL) -> CacheError {
        let error = CacheError(.originRejected, "The origin of \(url.absoluteString.prefix(200)) \(reason); nothing of the answer is used.")
        configuration.logger.warning("Rejected an origin answer", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
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

    /// What an answer received now, to a request with the player's fields `request` sent at
    /// `requested`, says of the resource.
    private func metadata(from headers: HTTPHeaders, requested: Date, request: RequestHeaders) -> ContentMetadata {
        var metadata = Self.metadata(from: headers)
        metadata.recordVaryingFields(of: request)
        let freshness = Self.freshness(headers, requested: requested, received: configuration.clock.now,
                                       heuristicFraction: configuration.heuristicFraction, heuristicCap: configuration.heuristicCap)
        metadata.freshUntil = freshness.freshUntil
        metadata.generatedAt = freshness.generatedAt
        return metadata
    }

    /// Until when an answer may be reused without asking the origin (RFC 9111 §4.2): its
    /// freshness lifetime from `max-age`, else `Expires` less `Date`, else a fraction of the
    /// time since `Last-Modified`; less its age when received (§4.2.3: `Age`, the apparent
    /// age from `Date`, and the request's delay). `no-cache` makes it stale at once.
    /// (`s-maxage` is for shared caches: a private cache ignores it.) Also when the origin
    /// generated it: received less that age.
    static func freshness(_ headers: HTTPHeaders, requested: Date, received: Date, heuristicFraction: Double, heuristicCap: Duration)
        -> (freshUntil: Date, generatedAt: Date)
    {
        let directives = CacheControl(headers["cache-control"])
        let now = Int64(received.timeIntervalSince1970)
        let date = headers.first(name: "date").flatMap(HTTPDate.parse)
        let lifetime: Int64
        if directives.contains("no-cache") {
            lifetime = 0
        } else if let maxAge = directives.maxAge {
            lifetime = maxAge
        } else if headers.contains(name: "expires") {
            // An Expires that is not one date ("0", "-1", two fields) means already expired (§5.3).
            let values = headers["expires"]
            lifetime = values.count == 1 ? HTTPDate.parse(values[0]).map { max(0, $0 - (date ?? now)) } ?? 0 : 0
        } else if let modified = headers.first(name: "last-modified").flatMap(HTTPDate.parse) {
            let since = max(0, (date ?? now) - modified)
            lifetime = min(heuristicCap.components.seconds, Int64(Double(since) * heuristicFraction))
        } else {
            lifetime = 0
        }
        let ageValue = min(ageSeconds(headers["age"]) ?? 0, CacheControl.maximumSeconds)
        let apparentAge = date.map { max(0, now - $0) } ?? 0
        let delay = max(0, received.timeIntervalSince(requested))
        let initialAge = max(Double(apparentAge), Double(ageValue) + delay)
        let generatedAt = received.addingTimeInterval(-initialAge)
        if directives.contains("no-cache") { return (received, generatedAt) }
        return (generatedAt.addingTimeInterval(Double(min(lifetime, CacheControl.maximumSeconds))), generatedAt)
    }

    /// The `Age` of an answer (RFC 9111 §5.1): the first member of its field lines, a
    /// non-negative integer; `nil` when absent or invalid (then it is ignored).
    static func ageSeconds(_ lines: [String]) -> Int64? {
        guard let first = lines.first?.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first else { return nil }
        return HTTPNumber.saturating(String(first).trimmingHTTPWhitespace())
    }

    /// Response fields not kept with an entry: hop-by-hop ones (RFC 9110 §7.6.1), those the
    /// cache writes itself from what it serves (length, range, validators, `Age`; the
    /// `Content-Type` is kept as the origin spelled it),
    /// cookies (a replayed `Set-Cookie` would set a cookie again on every hit), and CORS
    /// fields (the proxy answers for its own listed web origins).
    static let fieldsNotStored: Set<String> = fieldsNotPassedOn.union([
        "proxy-authenticate", "content-range", "accept-ranges", "etag", "last-modified", "age", "set-cookie", "set-cookie2", "location",
    ])

    /// Fields of an origin's answer that are not passed on with it: hop-by-hop ones (RFC
    /// 9110 §7.6.1) and the body's length (the proxy frames what it sends). CORS fields are
    /// dropped too (``endToEndFields(_:dropping:)``): the proxy answers for its own listed web
    /// origins.
    static let fieldsNotPassedOn: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "content-length",
    ]

    /// The end-to-end fields of an answer passed on as it is (see ``fieldsNotPassedOn``), in
    /// order, within ``maximumStoredFields`` and ``maximumStoredFieldBytes``.
    static func passedFields(_ headers: HTTPHeaders) -> [HeaderField] {
        endToEndFields(headers, dropping: fieldsNotPassedOn)
    }

    /// At most this many response fields are kept with an entry ...
    static let maximumStoredFields = 64
    /// ... taking at most this many bytes together; the rest are dropped.
    static let maximumStoredFieldBytes = 16 << 10

    /// The end-to-end fields of an answer to keep with its entry (see ``fieldsNotStored``),
    /// in order, within ``maximumStoredFields`` and ``maximumStoredFieldBytes``.
    static func storedFields(_ headers: HTTPHeaders) -> [HeaderField] {
        endToEndFields(headers, dropping: fieldsNotStored)
    }

    private static func endToEndFields(_ headers: HTTPHeaders, dropping names: Set<String>) -> [HeaderField] {
        var dropped = names
        for value in headers["connection"] {
            for token in value.split(separator: ",") { dropped.insert(token.trimmingCharacters(in: .whitespaces).lowercased()) }
        }
        var fields: [HeaderField] = []
        var bytes = 0
        for (name, value) in headers {
            let lowered = name.lowercased()
            guard !dropped.contains(lowered), !lowered.hasPrefix("access-control-") else { continue }
            bytes += name.utf8.count + value.utf8.count + 4
            guard fields.count < maximumStoredFields, bytes <= maximumStoredFieldBytes else { break }
            fields.append(HeaderField(name: name, value: value))
        }
        return fields
    }

    /// Type, range support, validators, cache directives and the fields to keep, from
    /// response headers (names in any case).
    static func metadata(from headers: HTTPHeaders) -> ContentMetadata {
        let acceptsRanges = headers[canonicalForm: "accept-ranges"].contains { $0.lowercased() == "bytes" }
        var metadata = ContentMetadata(
            length: nil,
            mimeType: headers.first(name: "content-type"),
            acceptsRanges: acceptsRanges,
            etag: headers.first(name: "etag"),
            lastModified: headers.first(name: "last-modified")
        )
        let directives = CacheControl(headers["cache-control"])
        metadata.isStorable = !directives.noStore
        // `Vary: *`: no later request can be shown to match (RFC 9111 §4.1), so keeping it is useless.
        if metadata.varyingFieldNames.contains("*") { metadata.isStorable = false }
        metadata.requiresRevalidation = directives.contains("must-revalidate") || directives.contains("no-cache")
        metadata.responseHeaders = storedFields(headers)
        return metadata
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
