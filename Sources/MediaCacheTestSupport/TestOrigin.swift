// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
package import MediaCache
public import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A real HTTP origin server on loopback for tests and benchmarks.
///
/// It serves deterministic bytes of any size (or given bytes, such as a real MP3), honours
/// single byte ranges, `HEAD`, `ETag`/`Last-Modified` and `If-Range`, and can switch faults
/// per path: no range support, a connection dropped after N body bytes, throttling, error
/// statuses, a resource that changes on demand, lower-case header names. It records every
/// request and counts the body bytes it sends per path.
///
/// With ``TLSOptions`` it serves HTTPS instead, over HTTP/2 or HTTP/1.1 as ALPN agrees, with
/// the same resources, faults and counters; it also counts the connections it accepts.
public final class TestOrigin: Sendable {
    /// What the origin serves at one path.
    public struct Resource: Sendable {
        /// Where the bytes come from.
        public enum Body: Sendable {
            /// Deterministic bytes of the given length.
            case generated(DeterministicContent, length: Int64)
            /// These bytes.
            case bytes([UInt8])
        }

        public var body: Body
        public var mimeType: String
        public var etag: String?
        public var lastModified: String?
        /// The `Cache-Control` header sent with every answer, if any (by default the file is
        /// fresh for a day, so a replay needs no origin request).
        public var cacheControl: String? = "max-age=86400"
        /// The `Expires` header sent with every answer, if any.
        public var expires: String?
        /// More end-to-end fields sent with every answer (`Content-Disposition`, `Vary`, …).
        public var extraHeaders: [(name: String, value: String)] = []
        public var faults: Faults
        /// Bumped by ``TestOrigin/changeContent(at:)``.
        public var version: Int

        public init(
            body: Body, mimeType: String = "video/mp4", etag: String? = "\"v1\"",
            lastModified: String? = "Mon, 02 Jan 2028 10:00:00 GMT", faults: Faults = Faults()
        ) {
            self.body = body
            self.mimeType = mimeType
            self.etag = etag
            self.lastModified = lastModified
            self.faults = faults
            self.version = 1
        }

        /// Deterministic bytes of `length`, seeded by `seed`.
        public static func generated(
            length: Int64, seed: UInt64 = 1, mimeType: String = "video/mp4", faults: Faults = Faults()
        ) -> Resource {
            Resource(
                body: .generated(DeterministicContent(seed: seed), length: length), mimeType: mimeType, faults: faults)
        }

        /// Makes the next version: other bytes of the same length, a new `ETag` and `Last-Modified`.
        mutating func changeContent() {
            version += 1
            if case .generated(let content, let length) = body {
                body = .generated(DeterministicContent(seed: content.seed &+ 1_000_003), length: length)
            } else if case .bytes(let bytes) = body {
                body = .bytes(bytes.map { $0 ^ 0x5a })
            }
            etag = "\"v\(version)\""
            lastModified = "Tue, 0\(min(version, 9)) Feb 2028 10:00:00 GMT"
        }

        /// The resource's length.
        public var length: Int64 {
            switch body {
            case .generated(_, let length): length
            case .bytes(let bytes): Int64(bytes.count)
            }
        }

        /// The bytes `range` of the resource.
        public func bytes(_ range: Range<Int64>, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
            switch body {
            case .generated(let content, _):
                return content.buffer(offset: range.lowerBound, length: Int(range.count), allocator: allocator)
            case .bytes(let bytes):
                var buffer = allocator.buffer(capacity: range.count)
                buffer.writeBytes(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
                return buffer
            }
        }
    }

    /// Faults the origin can play at one path.
    public struct Faults: Sendable {
        /// Ignore `Range` (always answer 200 with the whole body) and send no `Accept-Ranges`.
        public var ignoresRanges = false
        /// Close the connection after sending this many body bytes of a response.
        public var dropAfterBytes: Int64?
        /// How many responses are dropped by ``dropAfterBytes`` before the fault stops.
        public var dropCount = Int.max
        /// With ``dropAfterBytes``: a response that will be dropped is the last of its version
        /// (the file changes while a download of it is broken: its resume finds another).
        public var changesAfterDrop = false
        /// With ``dropAfterBytes``: called (outside the origin's lock) when a response that will
        /// be dropped is about to be sent, so a test can change what the origin serves by the time
        /// the resume comes (a connection that is down for a while).
        public var onDrop: (@Sendable () -> Void)?
        /// Send the body at about this many bytes per second.
        public var bytesPerSecond: Int64?
        /// Answer every request with this status and no media bytes (404, 500, …).
        public var status: Int?
        /// Send header names in lower case (`content-range`, `etag`).
        public var lowercaseHeaders = false
        /// Answer `HEAD` with 405.
        public var headFails = false
        /// Wait this long before sending the response head.
        public var headDelay: Duration?
        /// Hold every response head until the gate opens (a test decides when the origin answers).
        public var gate: Gate?
        /// Send the head at once and hold the body until the gate opens (a transfer that has
        /// begun and cannot end before the test says): the bytes from ``bodyGateOffset`` on.
        public var bodyGate: Gate?
        /// With ``bodyGate``: the first byte of the resource that waits for it; those before it
        /// are sent at once (a download that is part done, however slow the machine).
        public var bodyGateOffset: Int64 = 0
        /// With ``status``, the body of that answer (an error page), and more fields.
        public var statusBody: [UInt8] = []
        /// Answer 403 unless the request's query contains this text (a signed URL: another
        /// signature, or an expired one, is refused).
        public var requiredQuery: String?
        /// Answer 401 unless the request carries this header with this value (a media
        /// server behind a login).
        public var requiredHeader: (name: String, value: String)?
        /// Answer 403 unless the request's query carries a token this signer issued and still
        /// holds good, and cut a body whose token expires while it is sent.
        public var signer: TokenSigner?
        /// Called (on the origin's event loop, outside its lock) with the size of each chunk of
        /// a body handed to the socket: a test moves a shared clock as a play would.
        public var onBodyBytes: (@Sendable (Int64) -> Void)?
        /// Answer 403 unless the request's `Cookie` carries this cookie (a stream behind
        /// signed cookies).
        public var requiredCookie: (name: String, value: String)?
        /// Answer with a redirect: this status (301, 302, 303, 307, 308) and `Location`.
        public var redirect: (status: Int, location: String)?
        /// Answer with exactly these bytes (status line, headers, body: anything, lies
        /// included), given the request's `Range` header, then close the connection.
        public var rawResponse: (@Sendable (_ range: String?) -> [UInt8])?
        /// Send every answer without a length: `200` with the whole body, no `Content-Length`
        /// and no `Accept-Ranges`, framed as chosen (internet radio, a generated file).
        public var lengthless: LengthlessFraming?
        /// A resource still being made (a low-latency HLS segment whose parts are being
        /// encoded): until ``Growth/finish()`` only ``Growth/made`` bytes exist. A range
        /// request is then answered `206` with `Content-Range: bytes a-b/*` (b the request's
        /// last byte, or RFC 8673's "very large" 999999999999 for `bytes=a-`), a whole request
        /// `200`; both chunked, their bytes sent as they are made, the body ending with the
        /// resource (or at b). Once finished, the resource is answered as any other.
        public var growth: Growth?

        public init() {}
    }

    /// How a body without a length ends.
    public enum LengthlessFraming: Sendable {
        /// HTTP/1.1 chunked transfer coding.
        case chunked
        /// An HTTP/1.0 answer that ends when the origin closes the connection.
        case closeDelimited
    }

    /// One request the origin received.
    /// How an HTTPS origin presents itself.
    public struct TLSOptions: Sendable {
        /// The certificate chain and key it serves.
        public var identity: TestCertificateAuthority.Identity
        /// The protocols it offers in ALPN, preferred first (`h2`, `http/1.1`).
        public var applicationProtocols: [String]
        /// Whether it demands a client certificate, which the cache never sends: every
        /// handshake is refused.
        public var requiresClientCertificate = false

        public init(identity: TestCertificateAuthority.Identity, applicationProtocols: [String] = ["h2", "http/1.1"]) {
            self.identity = identity
            self.applicationProtocols = applicationProtocols
        }

        /// A certificate from the shared test CA for localhost, 127.0.0.1 and ::1.
        public static func trusted(applicationProtocols: [String] = ["h2", "http/1.1"]) throws -> TLSOptions {
            TLSOptions(
                identity: try TestCertificateAuthority.shared.issue(), applicationProtocols: applicationProtocols)
        }

        func makeContext() throws -> NIOSSLContext {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try identity.certificateChainPEM.map {
                    .certificate(try NIOSSLCertificate(bytes: Array($0.utf8), format: .pem))
                },
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)))
            configuration.applicationProtocols = applicationProtocols
            if requiresClientCertificate {
                // TLS 1.2, so that the refusal comes during the handshake (in TLS 1.3 the
                // client has finished its side before the server says no).
                configuration.maximumTLSVersion = .tlsv12
                configuration.certificateVerification = .noHostnameVerification
                configuration.trustRoots = .certificates([
                    try NIOSSLCertificate(
                        bytes: Array(TestCertificateAuthority.shared.certificatePEM.utf8), format: .pem)
                ])
            }
            return try NIOSSLContext(configuration: configuration)
        }
    }

    public struct Request: Sendable, CustomStringConvertible {
        public var method: String
        public var path: String
        /// The target's query, if it had one.
        public var query: String?
        /// The target's query as it came, percent-encoded.
        public var rawQuery: String?
        public var range: String?
        public var ifRange: String?
        public var status: Int
        /// The connection it came on: 1 for the first the origin accepted, and so on.
        public var connection = 0
        /// The HTTP version the request came in: `HTTP/1.1`, `HTTP/2.0`.
        public var version = "HTTP/1.1"
        /// Every header field of the request, in order.
        public var headers: [(name: String, value: String)] = []

        /// The first value of the header `name` (any case).
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        public var description: String {
            "\(method) \(path) range=\(range ?? "-") if-range=\(ifRange ?? "-") → \(status)"
        }
    }

    struct PathState {
        var resource: Resource
        var requests: [Request] = []
        var bodyBytesSent: Int64 = 0
        var drops = 0
        /// Responses whose body is being sent now.
        var responsesInProgress = 0
    }

    let paths = Mutex<[String: PathState]>([:])
    /// The clock of the `Date` header (tests that move time share theirs with the origin).
    let clock = Mutex<any WallClock>(SystemClock())
    /// The signing service of the `sign` control command.
    let signer = Mutex<TokenSigner?>(nil)
    private let channel: Mutex<(any Channel)?> = Mutex(nil)
    /// The port the origin listens on.
    public let port: Int
    /// The host the origin listens on.
    public let host: String
    /// Whether `/_origin/…` paths control the origin (see ``control(_:query:)``).
    public let acceptsControl: Bool
    /// `https` with ``TLSOptions``, else `http`.
    public let scheme: String
    /// The window each HTTP/2 stream opened with, in order: how many bytes of an answer the
    /// origin could send before the client's first `WINDOW_UPDATE` (the client's
    /// `SETTINGS_INITIAL_WINDOW_SIZE`, 65,535 when it announced none).
    public var streamWindows: [Int] { windows.withLock { $0 } }
    let windows = Mutex<[Int]>([])
    /// How many connections the origin has accepted (for HTTPS: TLS handshakes begun).
    public var connectionsAccepted: Int { connections.withLock { $0 } }
    let connections = Mutex(0)
    /// The paths asked for that the origin does not serve (answered `404`), in order.
    public var notFoundPaths: [String] { notFound.withLock { $0 } }
    let notFound = Mutex<[String]>([])

    private init(host: String, port: Int, acceptsControl: Bool, scheme: String) {
        self.host = host
        self.port = port
        self.acceptsControl = acceptsControl
        self.scheme = scheme
    }

    /// Starts an origin on `host` and `port` (0: any free port), serving HTTPS if `tls` is
    /// given. With `acceptsControl`, another process can add resources and read the counters
    /// over HTTP.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, acceptsControl: Bool = false, tls: TLSOptions? = nil
    ) async throws -> TestOrigin {
        let holder = OriginHolder()
        let context = try tls?.makeContext()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let origin = holder.origin!
                let connection = origin.connections.withLock { count in
                    count += 1
                    return count
                }
                guard let context else {
                    return channel.eventLoop.makeCompletedFuture {
                        try Self.configureHTTP1(channel, origin: origin, connection: connection)
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { channel in
                            // The multiplexer as a handler of its own (not inside the protocol
                            // handler), so the stream events pass the recorder before it.
                            channel.configureHTTP2Pipeline(mode: .server) { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                    try stream.pipeline.syncOperations.addHandler(
                                        OriginHandler(origin: origin, raw: nil, connection: connection))
                                }
                            }.flatMapThrowing { multiplexer in
                                try channel.pipeline.syncOperations.addHandler(
                                    StreamWindowRecorder(origin: origin), position: .before(multiplexer))
                            }
                        },
                        http1ChannelConfigurator: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try Self.configureHTTP1(channel, origin: origin, connection: connection)
                            }
                        })
                }
            }
            .bind(host: host, port: port).get()
        let origin = TestOrigin(
            host: host, port: channel.localAddress!.port!, acceptsControl: acceptsControl,
            scheme: tls == nil ? "http" : "https")
        holder.origin = origin
        origin.channel.withLock { $0 = channel }
        return origin
    }

    /// Records the window of each HTTP/2 stream the connection opens (``streamWindows``).
    private final class StreamWindowRecorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTP2Frame
        let origin: TestOrigin

        init(origin: TestOrigin) {
            self.origin = origin
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            // The stream's window for what this side sends: the client's initial window.
            if let created = event as? NIOHTTP2StreamCreatedEvent, let window = created.localInitialWindowSize {
                origin.windows.withLock { $0.append(Int(window)) }
            }
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// An HTTP/1.1 connection's handlers, after TLS if any.
    private static func configureHTTP1(_ channel: any Channel, origin: TestOrigin, connection: Int) throws {
        let raw = RawWriter()
        try channel.pipeline.syncOperations.addHandler(raw)
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
        try channel.pipeline.syncOperations.addHandler(OriginHandler(origin: origin, raw: raw, connection: connection))
    }

    /// Stops listening.
    public func shutdown() async throws {
        let channel = self.channel.withLock { channel in
            defer { channel = nil }
            return channel
        }
        try await channel?.close()
    }

    /// The URL of `path` on this origin.
    public func url(_ path: String) -> URL {
        URL(
            string:
                "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path.hasPrefix("/") ? path : "/" + path)"
        )!
    }

    /// Dates answers with `clock` from now on.
    package func useClock(_ clock: any WallClock) {
        self.clock.withLock { $0 = clock }
    }

    /// Serves `resource` at `path`. A `path` with a query (`/live.m3u8?_HLS_skip=YES`) answers
    /// requests with exactly that query; other queries get the path's own resource.
    public func serve(_ resource: Resource, at path: String) {
        paths.withLock { $0[path] = PathState(resource: resource) }
    }

    /// Changes what `path` serves (faults, headers).
    public func update(_ path: String, _ change: @Sendable (inout Resource) -> Void) {
        paths.withLock { paths in
            if paths[path] != nil { change(&paths[path]!.resource) }
        }
    }

    /// Replaces the bytes at `path` with a new version: new content, ETag and Last-Modified.
    public func changeContent(at path: String) {
        update(path) { $0.changeContent() }
    }

    /// The resource served at `path`.
    public func resource(at path: String) -> Resource? {
        paths.withLock { $0[path]?.resource }
    }

    /// The requests received for `path`, in order.
    public func requests(_ path: String) -> [Request] {
        paths.withLock { $0[path]?.requests ?? [] }
    }

    /// The body bytes sent for `path`.
    /// How many answers for `path` are sending their body now (0 once every one ended, or
    /// its connection closed).
    public func responsesInProgress(_ path: String) -> Int {
        paths.withLock { $0[path]?.responsesInProgress ?? 0 }
    }

    public func bodyBytesSent(_ path: String) -> Int64 {
        paths.withLock { $0[path]?.bodyBytesSent ?? 0 }
    }

    /// Forgets the requests and byte counts of every path.
    public func resetCounters() {
        paths.withLock { paths in
            for key in paths.keys {
                paths[key]!.requests = []
                paths[key]!.bodyBytesSent = 0
            }
        }
    }
}

/// Lets the channel initializer reach the origin created after `bind` returns.
// @unchecked Sendable: `origin` is set once, before the first connection is accepted.
private final class OriginHolder: @unchecked Sendable {
    var origin: TestOrigin?
}
