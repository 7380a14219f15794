public import Hummingbird
import HummingbirdCore
public import Logging
public import MediaCache

/// The local caching proxy: answers `GET` and `HEAD` on `/?url=ENC` through the read path.
///
/// ```swift
/// let app = ProxyServer.application(reader: reader, configuration: ProxyConfiguration())
/// try await app.runService()   // stops gracefully on SIGINT/SIGTERM
/// ```
public enum ProxyServer {
    /// The port `mediacache serve` listens on unless told otherwise.
    public static let defaultPort = 8089

    /// Builds the proxy's Hummingbird application.
    /// - Parameters:
    ///   - reader: the read path that serves the bytes.
    ///   - configuration: address, allow-list, token and limits.
    ///   - onServerRunning: called with the bound port once the server listens (useful with port 0).
    public static func application(
        reader: CachingReader,
        configuration: ProxyConfiguration,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router()
        let handler = ProxyHandler(reader: reader, configuration: configuration)
        router.get("/") { request, _ in await handler.respond(to: request, sendsBody: true) }
        router.head("/") { request, _ in await handler.respond(to: request, sendsBody: false) }
        var http1 = HTTP1Channel.Configuration(idleTimeout: .seconds(120))
        http1.httpDecoder = .init(
            maxHeaderFieldSize: configuration.maxHeaderBytes,
            maxHeaderListSize: configuration.maxHeaderBytes,
            maxHeaderFieldCount: 100)
        return Application(
            router: router,
            server: .http1(configuration: http1),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "MediaCache"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
            logger: configuration.logger
        )
    }
}

/// Options for the proxy.
public struct ProxyConfiguration: Sendable {
    /// The address to listen on; anything but loopback also needs ``allowsRemoteClients``.
    public var host = "127.0.0.1"
    /// The port to listen on (0: any free port).
    public var port = ProxyServer.defaultPort
    /// Must be set to listen on a non-loopback address, so the proxy is never an open
    /// proxy for the network by accident.
    public var allowsRemoteClients = false
    /// If not empty, only these origin hosts may be fetched (compared case-insensitively).
    public var allowedHosts: Set<String> = []
    /// If set, every request must carry it as the `token` query item or the
    /// `X-MediaCache-Token` header.
    public var token: String?
    /// The most bytes a request's header section may hold.
    public var maxHeaderBytes = 16 << 10
    /// Where the proxy logs (one line per request at info level).
    public var logger = Logger(label: "mediacache.proxy")

    /// Creates the default configuration.
    public init() {}

    /// Checks that the address is loopback unless remote clients are allowed.
    /// - Throws: ``ProxyError`` when the combination is unsafe.
    public func validate() throws {
        let loopback = ["127.0.0.1", "localhost", "::1"].contains(host.lowercased()) || host.hasPrefix("127.")
        if !loopback && !allowsRemoteClients {
            throw ProxyError("Listening on \(host) would let other machines use this proxy to fetch any URL. Pass --allow-remote to do it on purpose (and consider --allow-host and --token).")
        }
        guard (0...65535).contains(port) else { throw ProxyError("The port must be between 0 and 65535, not \(port).") }
    }
}

/// An error in the proxy's setup.
public struct ProxyError: Error, CustomStringConvertible {
    /// What went wrong and what to do.
    public var message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
