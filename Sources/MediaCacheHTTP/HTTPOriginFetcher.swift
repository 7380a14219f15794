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
import Tracing

/// Fetches content information and byte ranges from HTTP(S) origins with AsyncHTTPClient.
///
/// Redirects are followed here, not by the client, so that every hop is checked like the
/// first URL (http or https, a host, the allow-list), with a hop limit and loop detection.
/// Connect, response-head and idle-read timeouts are set. Every answer is checked before a
/// byte of it is used: numbers are parsed with bounds, a `206` must carry the range asked
/// for, `Content-Length` values must agree with each other and with the range, and a
/// malformed response is rejected (`CacheError/Code/originRejected`), never retried.
/// Bodies stream as they arrive, and dropping a body's iterator closes the origin request.
public final class HTTPOriginFetcher: OriginFetcher {
    /// Options for origin requests.
    public typealias Configuration = OriginFetcherConfiguration

    /// The client for direct requests, and one per proxy (``Configuration/proxies``).
    let client: HTTPClient
    let proxied: [OriginProxies.Server: HTTPClient]
    let configuration: Configuration
    /// How origins' certificates are checked (system roots plus ``Configuration/trustRoots``).
    let tlsConfiguration: TLSConfiguration
    private let exchange: OriginExchange<Transport>

    /// Creates a fetcher with its own HTTP client; call ``shutdown()`` when done.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        var clientConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,  // followed by the exchange, which checks every hop
            timeout: .init(connect: .init(configuration.connectTimeout), read: .init(configuration.readTimeout)),
            decompression: .disabled
        )
        clientConfiguration.httpVersion = configuration.usesHTTP2 ? .automatic : .http1Only
        clientConfiguration.http2ConnectionDebugInitializer = Self.widenStreamWindows
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12  // TLS 1.0 and 1.1 are retired (RFC 8996)
        if configuration.trustRoots.count > 0 {
            tls.additionalTrustRoots = [.certificates(configuration.trustRoots.certificates)]
        }
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
        clientConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(
            1, configuration.connectionsPerHost)
        // AsyncHTTPClient starts a span for every request and sets a dozen attributes on it,
        // even on the no-op tracer it is given when the app bootstrapped none: about 27,000
        // instructions a miss, 3 % of it. A tracer the app bootstrapped is kept.
        if clientConfiguration.tracing.tracer is NoOpTracer { clientConfiguration.tracing.tracer = nil }
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        var proxied: [OriginProxies.Server: HTTPClient] = [:]
        for server in configuration.proxies.servers {
            var through = clientConfiguration
            through.proxy = Self.clientProxy(server)
            proxied[server] = HTTPClient(eventLoopGroupProvider: .singleton, configuration: through)
        }
        self.proxied = proxied
        exchange = OriginExchange(
            transport: Transport(direct: client, proxied: proxied, configuration: configuration),
            policy: configuration.policy)
    }

    /// AsyncHTTPClient's proxy for `server`: plain HTTP as absolute-form requests, HTTPS
    /// through `CONNECT`, Basic credentials from the URL's user-info; or SOCKS5.
    static func clientProxy(_ server: OriginProxies.Server) -> HTTPClient.Configuration.Proxy {
        switch server.kind {
        case .http:
            let authorization = server.username.map {
                HTTPClient.Authorization.basic(username: $0, password: server.password ?? "")
            }
            return .server(host: server.host, port: server.port, authorization: authorization)
        case .socks5:
            return .socksServer(host: server.host, port: server.port)
        }
    }

    /// Each HTTP/2 stream's first window, announced once a connection is up.
    static let initialStreamWindow = 1 << 20

    /// Announces ``initialStreamWindow`` on a new HTTP/2 connection. AsyncHTTPClient's
    /// connections announce no `SETTINGS_INITIAL_WINDOW_SIZE`, so each new stream may carry
    /// 65,535 bytes (RFC 9113 §6.9.2) until the client's `WINDOW_UPDATE` comes back a round
    /// trip later: over a far origin every answer larger than that cost a round trip more than
    /// over HTTP/1.1 (a seek session over a far link: docs/benchmarks.md).
    /// The origin reads this `SETTINGS` before any request that follows it on the connection,
    /// and acknowledges it before it sends their data; the client's stream channels then
    /// widen their windows by the difference (NIOHTTP2's bulk window change).
    @Sendable static func widenStreamWindows(_ channel: any Channel) -> EventLoopFuture<Void> {
        let settings = HTTP2Frame(
            streamID: .rootStream,
            payload: .settings(.settings([HTTP2Setting(parameter: .initialWindowSize, value: initialStreamWindow)])))
        return channel.writeAndFlush(settings)
    }

    /// Closes the HTTP client's connections.
    public func shutdown() async throws {
        try await client.shutdown()
        for other in proxied.values { try await other.shutdown() }
    }

    // MARK: OriginFetcher

    public func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        try await exchange.contentInfo(for: url, headers: headers)
    }

    public func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws
        -> OriginResponse
    {
        try await exchange.fetch(url, range: range, ifRange: ifRange, headers: headers)
    }

    public var cookieJar: CookieJar? { configuration.cookieJar }

    /// ``OriginFetcherConfiguration/connectionsPerHost``.
    public var connectionsPerHost: Int? { max(1, configuration.connectionsPerHost) }

    public var securityWarning: String? {
        configuration.skipsCertificateVerification
            ? "origin certificates are NOT verified (skipsCertificateVerification)" : nil
    }

    /// Whether `url` may be fetched: http or https, a host, a valid port, not too long, and
    /// on the allow-list if there is one. The same check applies to every redirect target.
    /// - Throws: `CacheError/Code/originNotAllowed` with the reason.
    public func checkOrigin(_ url: URL) throws {
        try exchange.checkOrigin(url)
    }

    /// Sends one request with AsyncHTTPClient, its failures told apart by cause.
    struct Transport: OriginTransport {
        let direct: HTTPClient
        let proxied: [OriginProxies.Server: HTTPClient]
        let configuration: Configuration

        func send(_ request: OriginRequest) async throws -> OriginReply {
            let url = request.url
            // Each hop's own way out: a redirect may lead to a host `no_proxy` names.
            let proxy = configuration.proxies.server(for: url)
            if let proxy, proxy.kind == .http, url.scheme?.lowercased() == "http" {
                // In the absolute form, which a parent cache can store: not through CONNECT.
                return try await AbsoluteFormTransport(server: proxy, configuration: configuration).send(request)
            }
            let client = proxy.flatMap { proxied[$0] } ?? direct
            let answer: StreamedAnswer
            let head: HTTPResponseHead
            do {
                (answer, head) = try await Self.execute(request, on: client, timeout: configuration.responseTimeout)
            } catch let error as HTTPClientError
                where [.connectTimeout, .readTimeout, .deadlineExceeded].contains(error)
            {
                throw CacheError(
                    .originTimedOut, "\(url.host ?? url.absoluteString) did not answer in time.", underlyingError: error
                )
            } catch let error as HTTPParserError {
                // A malformed status line, header or framing: the answer cannot be trusted.
                throw OriginExchange<Self>.rejected(
                    "sent a malformed response (\(error))", url: url, logger: configuration.logger)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if let kind = OriginTLSFailure.kind(of: error) {
                    // Never retried: the same handshake fails the same way. The explanation takes
                    // one more handshake, given the connect timeout: capped shorter, a busy machine
                    // gave the vaguer reason instead of the certificate's own fault.
                    let reason = await OriginTLSFailure.explain(
                        kind, url: url, trustRoots: configuration.trustRoots,
                        timeout: configuration.connectTimeout)
                    configuration.logger.warning(
                        "TLS with the origin failed",
                        metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
                    throw CacheError(.originRejected, reason, underlyingError: error)
                }
                let unreachable = HTTPOriginFetcher.unreachable(url, error, through: proxy)
                if HTTPOriginFetcher.isStaleConnection(error) { throw StaleConnection(error: unreachable) }
                throw unreachable
            }
            return OriginReply(
                status: Int(head.status.code), reason: head.status.reasonPhrase, headers: head.headers,
                body: answer.makeBody())
        }

        /// Sends `request` with `client` and waits for the answer's head, at most `timeout`
        /// (``StreamedAnswer``: on the event loop the caller runs on when it runs on one of the
        /// client's, with no task of its own).
        static func execute(_ request: OriginRequest, on client: HTTPClient, timeout: Duration) async throws
            -> (StreamedAnswer, HTTPResponseHead)
        {
            let outgoing = try HTTPClient.Request(
                url: request.url.absoluteString, method: request.method, headers: request.headers)
            let loop = client.eventLoopGroup.any()
            let answer = StreamedAnswer(on: loop)
            let task = client.execute(request: outgoing, delegate: answer, eventLoop: .delegate(on: loop))
            answer.started(task)
            // Only the head is timed: a long body is the read timeout's, between its parts.
            let deadline = loop.scheduleTask(in: .init(timeout)) {
                answer.failBeforeHead(HTTPClientError.deadlineExceeded, task: task)
            }
            defer { deadline.cancel() }
            let head = try await withTaskCancellationHandler {
                try await answer.head.futureResult.get()
            } onCancel: {
                task.cancel()
            }
            return (answer, head)
        }
    }

    /// Whether `error` says the connection closed under a request before its answer: a
    /// connection from the pool that the origin had closed (its keep-alive ended) as the
    /// request went out, or reset (a request that reached a closing socket).
    static func isStaleConnection(_ error: any Error) -> Bool {
        if let error = error as? ChannelError, error == .ioOnClosedChannel || error == .outputClosed { return true }
        if let error = error as? IOError, error.errnoCode == ECONNRESET { return true }
        return (error as? HTTPClientError) == .remoteConnectionClosed
    }

    /// The error for an origin that cannot be reached, naming it and the cause.
    static func unreachable(_ url: URL, _ error: any Error, through proxy: OriginProxies.Server? = nil) -> CacheError {
        let authority =
            HostAndPort(authorityOf: url).map { "\($0.name):\($0.port ?? (url.scheme == "https" ? 443 : 80))" }
            ?? url.absoluteString
        let via = proxy.map { " through the proxy \($0)" } ?? ""
        return CacheError(
            .originUnavailable, "Cannot reach \(authority.prefix(200))\(via): \(cause(of: error)).",
            underlyingError: error)
    }

    /// Why a connection failed, in a few words (`Connection refused`).
    static func cause(of error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return String("\(error)".prefix(200))
    }

    /// Until when an answer may be reused without asking the origin (RFC 9111 §4.2): its
    /// freshness lifetime from `s-maxage` (a shared cache only), else `max-age`, else `Expires`
    /// less `Date`, else — for a status that is heuristically cacheable (§4.2.2) — a fraction of
    /// the time since `Last-Modified`; less its age when received (§4.2.3: `Age`, the apparent
    /// age from `Date`, and the request's delay). `no-cache` makes it stale at once. Also when
    /// the origin generated it: received less that age; and whether the lifetime was explicit
    /// (the origin's own word, not a heuristic).
    /// - Parameter parsed: `headers`' `Cache-Control`, when the caller has parsed it already.
    static func freshness(
        _ headers: HTTPHeaders, status: Int = 200, shared: Bool = false, requested: Date, received: Date,
        heuristicFraction: Double,
        heuristicCap: Duration, directives parsed: CacheControl? = nil
    ) -> (freshUntil: Date, generatedAt: Date, isExplicit: Bool) {
        let directives = parsed ?? CacheControl(headers["cache-control"])
        let now = Int64(received.timeIntervalSince1970)
        let date = headers.first(name: "date").flatMap(HTTPDate.parse)
        let lifetime: Int64
        var isExplicit = true
        if directives.contains("no-cache") {
            lifetime = 0
        } else if shared, let sharedMaxAge = directives.seconds("s-maxage") {
            lifetime = sharedMaxAge
        } else if let maxAge = directives.maxAge {
            lifetime = maxAge
        } else if headers.contains(name: "expires") {
            // An Expires that is not one date ("0", "-1", two fields) means already expired (§5.3).
            let values = headers["expires"]
            lifetime = values.count == 1 ? HTTPDate.parse(values[0]).map { max(0, $0 - (date ?? now)) } ?? 0 : 0
        } else if heuristicallyCacheable.contains(status) || directives.contains("public"),
            let modified = headers.first(name: "last-modified").flatMap(HTTPDate.parse)
        {
            let since = max(0, (date ?? now) - modified)
            lifetime = min(heuristicCap.components.seconds, Int64(Double(since) * heuristicFraction))
            isExplicit = false
        } else {
            lifetime = 0
            isExplicit = false
        }
        let ageValue = min(ageSeconds(headers["age"]) ?? 0, CacheControl.maximumSeconds)
        let apparentAge = date.map { max(0, now - $0) } ?? 0
        let delay = max(0, received.timeIntervalSince(requested))
        let initialAge = max(Double(apparentAge), Double(ageValue) + delay)
        let generatedAt = received.addingTimeInterval(-initialAge)
        if directives.contains("no-cache") { return (received, generatedAt, isExplicit) }
        return (
            generatedAt.addingTimeInterval(Double(min(lifetime, CacheControl.maximumSeconds))), generatedAt, isExplicit
        )
    }

    /// The statuses a cache may give a heuristic lifetime (RFC 9110 §15.1, RFC 9111 §4.2.2);
    /// also those whose caching rules this cache follows, for `must-understand` (§5.2.2.3).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Whether a cache may store an answer with `status` and `headers` given to a request
    /// with the fields `request` (RFC 9111 §3): not with `no-store` (unless `must-understand`
    /// comes with a status whose rules this cache follows, §5.2.2.3; with another status, never),
    /// not with `Vary: *`; in a shared cache also not with `private` (§5.2.2.7), nor for a
    /// request with `Authorization` unless the answer says `public`, `s-maxage` or
    /// `must-revalidate` (§3.5).
    /// - Parameter parsed: `headers`' `Cache-Control`, when the caller has parsed it already.
    static func mayStore(
        status: Int, headers: HTTPHeaders, request: RequestHeaders, shared: Bool, directives parsed: CacheControl? = nil
    ) -> Bool {
        let directives = parsed ?? CacheControl(headers["cache-control"])
        if directives.contains("must-understand") {
            guard heuristicallyCacheable.contains(status) else { return false }
        } else if directives.noStore {
            return false
        }
        if headers["vary"].contains(where: { $0.split(separator: ",").contains { FieldValue.trimmed($0) == "*" } }) {
            return false
        }
        guard shared else { return true }
        if directives.contains("private") { return false }
        if request.contains(where: { $0.name.lowercased() == "authorization" }) {
            return directives.contains("public") || directives.contains("s-maxage")
                || directives.contains("must-revalidate")
        }
        return true
    }

    /// The `Age` of an answer (RFC 9111 §5.1): the first member of its field lines, a
    /// non-negative integer; `nil` when absent or invalid (then it is ignored).
    static func ageSeconds(_ lines: [String]) -> Int64? {
        guard let first = lines.first?.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first
        else { return nil }
        return HTTPNumber.saturating(String(first).trimmingHTTPWhitespace())
    }

    /// Response fields not kept with an entry (``ContentMetadata.HeaderField/notStored``).
    static let fieldsNotStored = ContentMetadata.HeaderField.notStored

    /// Fields of an origin's answer that are not passed on with it (``ContentMetadata.HeaderField/notPassedOn``).
    static let fieldsNotPassedOn = ContentMetadata.HeaderField.notPassedOn

    /// The end-to-end fields of an answer passed on as it is (see ``fieldsNotPassedOn``), in
    /// order, within ``maximumStoredFields`` and ``maximumStoredFieldBytes``.
    static func passedFields(_ headers: HTTPHeaders) -> [ContentMetadata.HeaderField] {
        endToEndFields(headers, dropping: fieldsNotPassedOn)
    }

    /// At most this many response fields are kept with an entry ...
    static let maximumStoredFields = 64
    /// ... taking at most this many bytes together; the rest are dropped.
    static let maximumStoredFieldBytes = 16 << 10

    /// The end-to-end fields of an answer to keep with its entry (see ``fieldsNotStored``),
    /// in order, within ``maximumStoredFields`` and ``maximumStoredFieldBytes``.
    static func storedFields(_ headers: HTTPHeaders) -> [ContentMetadata.HeaderField] {
        endToEndFields(headers, dropping: fieldsNotStored)
    }

    private static func endToEndFields(_ headers: HTTPHeaders, dropping names: Set<String>) -> [ContentMetadata
        .HeaderField]
    {
        var dropped = names
        for value in headers["connection"] {
            for token in value.split(separator: ",") { dropped.insert(FieldValue.trimmed(token).lowercased()) }
        }
        var fields: [ContentMetadata.HeaderField] = []
        var bytes = 0
        for (name, value) in headers {
            let lowered = name.lowercased()
            guard !dropped.contains(lowered), !lowered.hasPrefix("access-control-") else { continue }
            bytes += name.utf8.count + value.utf8.count + 4
            guard fields.count < maximumStoredFields, bytes <= maximumStoredFieldBytes else { break }
            fields.append(ContentMetadata.HeaderField(name: name, value: value))
        }
        return fields
    }

    /// Type, range support, validators, cache directives and the fields to keep, from
    /// response headers (names in any case), as a private cache reads them; `shared` reads
    /// them as a shared cache does (`proxy-revalidate` and `s-maxage` require revalidation
    /// once stale, RFC 9111 §5.2.2.8 and §5.2.2.10). `parsed`: its `Cache-Control`, if parsed already.
    static func metadata(
        from headers: HTTPHeaders, shared: Bool = false, directives parsed: CacheControl? = nil
    ) -> ContentMetadata {
        let acceptsRanges = headers[canonicalForm: "accept-ranges"].contains { $0.lowercased() == "bytes" }
        var metadata = ContentMetadata(
            length: nil,
            mimeType: headers.first(name: "content-type"),
            acceptsRanges: acceptsRanges,
            etag: headers.first(name: "etag"),
            lastModified: headers.first(name: "last-modified")
        )
        let directives = parsed ?? CacheControl(headers["cache-control"])
        metadata.isStorable = !directives.noStore
        // `Vary: *`: no later request can be shown to match (RFC 9111 §4.1), so keeping it is useless.
        if metadata.varyingFieldNames.contains("*") { metadata.isStorable = false }
        metadata.requiresRevalidation =
            directives.contains("must-revalidate") || directives.contains("no-cache")
            || (shared && (directives.contains("proxy-revalidate") || directives.contains("s-maxage")))
        metadata.staleWhileRevalidate = directives.seconds("stale-while-revalidate")
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
