public import Logging
public import MediaCache
public import NIOCore
import NIOHTTP1
import NIOPosix
public import ServiceLifecycle
import Synchronization

/// The local caching proxy: answers `GET` and `HEAD` on `/?url=ENC` through the read path.
///
/// ```swift
/// let proxy = ProxyServer.application(reader: reader, configuration: ProxyConfiguration())
/// try await ServiceGroup(services: [proxy], gracefulShutdownSignals: [.sigterm], logger: logger).run()
/// ```
/// It is a SwiftNIO HTTP/1.1 server: each response body is written with backpressure (the
/// next chunk is read only once the one before it is in the socket), so memory stays flat
/// however many clients read at once.
public final class ProxyServer: Service {
    /// The port `mediacache serve` listens on unless told otherwise.
    public static let defaultPort = 8089

    private let handler: ProxyHandler
    private let configuration: ProxyConfiguration
    private let onServerRunning: @Sendable (Int) async -> Void
    let connections = ConnectionRegistry()

    /// Builds the proxy.
    /// - Parameters:
    ///   - reader: the read path that serves the bytes.
    ///   - configuration: address, allow-list, token and limits.
    ///   - onServerRunning: called with the bound port once the server listens (useful with port 0).
    public static func application(
        reader: CachingReader,
        configuration: ProxyConfiguration,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> ProxyServer {
        ProxyServer(handler: ProxyHandler(reader: reader, configuration: configuration), configuration: configuration, onServerRunning: onServerRunning)
    }

    private init(handler: ProxyHandler, configuration: ProxyConfiguration, onServerRunning: @escaping @Sendable (Int) async -> Void) {
        self.handler = handler
        self.configuration = configuration
        self.onServerRunning = onServerRunning
    }

    /// Listens until a graceful shutdown, then closes every connection and waits for their
    /// requests to end (so a store closed afterwards has no writer left).
    public func run() async throws {
        let handler = handler
        let configuration = configuration
        let connections = connections
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
                    try sync.addHandler(IdleStateHandler(allTimeout: configuration.idleTimeout))
                    try sync.addHandler(ProxyConnectionHandler(handler: handler, configuration: configuration, connections: connections))
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        await onServerRunning(server.localAddress?.port ?? configuration.port)
        try await withGracefulShutdownHandler {
            try await server.closeFuture.get()
        } onGracefulShutdown: {
            server.close(promise: nil)
        }
        await connections.closeAll()
    }
}

/// The open connections and their running responses, so a shutdown can end them all.
final class ConnectionRegistry: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var nextTask: UInt64 = 0
    }

    private let state = Mutex(State())

    func add(_ channel: any Channel) {
        state.withLock { $0.channels[ObjectIdentifier(channel)] = channel }
    }

    func remove(_ channel: any Channel) {
        _ = state.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Runs `body` as a tracked task.
    func run(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        state.withLock { state in
            let id = state.nextTask
            state.nextTask += 1
            let task = Task { [weak self] in
                await body()
                _ = self?.state.withLock { $0.tasks.removeValue(forKey: id) }
            }
            state.tasks[id] = task
            return task
        }
    }

    func closeAll() async {
        let (channels, tasks) = state.withLock { (Array($0.channels.values), Array($0.tasks.values)) }
        for channel in channels { channel.close(promise: nil) }
        for task in tasks {
            task.cancel()
            await task.value
        }
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
    /// The most bytes a request's header section may hold (larger ones get 431).
    public var maxHeaderBytes = 16 << 10
    /// A connection with no traffic for this long is closed.
    public var idleTimeout = TimeAmount.seconds(120)
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
