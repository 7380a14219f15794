// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
public import MediaCache
import NIOCore
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
    /// The handler of the LAN listener (``ProxyConfiguration/lanAddress``), sharing the
    /// statistics.
    private let lanHandler: ProxyHandler?
    private let configuration: ProxyConfiguration
    private let onServerRunning: @Sendable (Int) async -> Void
    let connections = ConnectionRegistry()
    /// The listener while ``run()`` runs.
    private let listening = Mutex<Listener?>(nil)
    /// A LAN listener started while the server runs (``listen(onLAN:)``), with its handler.
    private let lanListening = Mutex<LANListening?>(nil)
    /// Makes the handler of a LAN listener on an address (sharing the statistics).
    private let makeLANHandler: @Sendable (String) -> ProxyHandler?

    /// Builds the proxy.
    /// - Parameters:
    ///   - reader: the read path that serves the bytes.
    ///   - downloads: the pinned downloads the admin endpoints (and so the `mediacache`
    ///     commands) control, if any.
    ///   - configuration: address, allow-list, token and limits.
    ///   - onServerRunning: called with the bound port once the server listens (useful with port 0).
    public static func application(
        reader: CachingReader,
        downloads: DownloadQueue? = nil,
        configuration: ProxyConfiguration,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> ProxyServer {
        var configuration = configuration
        // The LAN listener's URLs are minted with a key: the store folder's (`serve`), else one
        // for this run (an app's AirPlay URLs live as long as its server).
        if configuration.lanCapabilities == nil { configuration.lanCapabilities = .made() }
        let handler = ProxyHandler(reader: reader, downloads: downloads, configuration: configuration)
        let makeLANHandler: @Sendable (String) -> ProxyHandler? = { [configuration] address in
            var lan = configuration
            lan.lanAddress = address
            return lan.lanListener.map {
                ProxyHandler(reader: reader, downloads: downloads, configuration: $0, statistics: handler.statistics)
            }
        }
        return ProxyServer(
            handler: handler, lanHandler: configuration.lanAddress.flatMap(makeLANHandler),
            makeLANHandler: makeLANHandler, configuration: configuration, onServerRunning: onServerRunning)
    }

    private init(
        handler: ProxyHandler, lanHandler: ProxyHandler?, makeLANHandler: @escaping @Sendable (String) -> ProxyHandler?,
        configuration: ProxyConfiguration, onServerRunning: @escaping @Sendable (Int) async -> Void
    ) {
        self.handler = handler
        self.lanHandler = lanHandler
        self.makeLANHandler = makeLANHandler
        self.configuration = configuration
        self.onServerRunning = onServerRunning
    }

    /// Listens until a graceful shutdown, then closes every connection and waits for their
    /// requests to end (so a store closed afterwards has no writer left). A listening socket
    /// that closes under it (iOS closes an app's server sockets while the device is locked or
    /// the app suspended) is noticed, logged at warning level, counted, and replaced on the
    /// same port as soon as the port can be had again, so the URLs given to players stay good.
    public func run() async throws {
        let configuration = configuration
        let server: any Channel
        do {
            server = try await bind(port: configuration.port, handler: handler)
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw ProxyError(
                "Port \(configuration.port) on \(configuration.host) is already in use (another server?).",
                setting: .port)
        } catch let error as IOError where error.errnoCode == EADDRNOTAVAIL {
            throw ProxyError("\(configuration.host) is not an address of this machine.", setting: .host)
        }
        let port = server.localAddress?.port ?? configuration.port
        let lanListener: Listener?
        if let lanHandler {
            do {
                lanListener = Listener(try await bind(port: port, handler: lanHandler), port: port)
            } catch {
                try? await server.close()
                throw ProxyError(
                    "Cannot listen on the LAN address \(lanHandler.configuration.host) at port \(port): \(error).",
                    setting: .host)
            }
        } else {
            lanListener = nil
        }
        if let file = configuration.serverInfoFile {
            var info = ServerInfo(host: configuration.host, port: port, token: configuration.token, pid: getpid())
            info.lanHost = configuration.lanAddress
            if configuration.lanAddress != nil { info.lanKey = configuration.lanCapabilities?.keyText }
            do {
                try JSONEncoder().encode(info).write(to: file, options: .atomic)
                // The token and the LAN key are in it: readable by this user only.
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            } catch {
                configuration.logger.warning(
                    "Cannot write the server file; commands will not find this server",
                    metadata: ["file": "\(file.path)", "error": "\(error)"])
            }
        }
        defer { if let file = configuration.serverInfoFile { try? FileManager.default.removeItem(at: file) } }
        // Known as listening before anyone hears it runs: an app that asks for the LAN address
        // at once (AirPlay starting) found "does not run" (ExternalPlaybackTests, once in ~30 runs).
        let listener = Listener(server, port: port)
        listening.withLock { $0 = listener }
        await onServerRunning(port)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.keepListening(listener, port: port, handler: self.handler) }
                if let lanListener, let lanHandler = self.lanHandler {
                    group.addTask { await self.keepListening(lanListener, port: port, handler: lanHandler) }
                }
            }
        } onGracefulShutdown: {
            listener.stop()
            lanListener?.stop()
        }
        // Every task the server started ends before it returns: nothing listens after a stop.
        await stopListeningOnLAN()?.value
        await connections.closeAll()
        // The last requests' bytes, into the store's history before it is closed.
        handler.statistics.reportLifetime()
    }

    /// Waits while `listener` listens; when its socket closes without a shutdown, binds
    /// `port` again (waiting longer between tries, up to 2 s, while the port cannot be had).
    private func keepListening(_ listener: Listener, port: Int, handler: ProxyHandler) async {
        while let channel = listener.current {
            try? await channel.closeFuture.get()
            guard !listener.isStopped else { return }
            ProxyMetrics.listenerClosed()
            configuration.logger.warning(
                "The listening socket closed under the proxy; listening again", metadata: ["port": "\(port)"])
            var delay = Duration.milliseconds(50)
            while !listener.isStopped {
                do {
                    let channel = try await bind(port: port, handler: handler)
                    if listener.replace(with: channel) {
                        // Stopped while binding: closed before the stop returns.
                        try? await channel.closeFuture.get()
                        return
                    }
                    configuration.logger.notice("Listening again", metadata: ["port": "\(port)"])
                    break
                } catch {
                    configuration.logger.warning(
                        "Cannot listen again yet", metadata: ["port": "\(port)", "error": "\(error)"])
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(2))
                }
            }
        }
    }

    /// What its LAN listener's URLs are minted with.
    var lanCapabilities: LANCapabilities? { configuration.lanCapabilities }

    /// Listens on the LAN address `address` too, at the server's port, for as long as the
    /// devices of the network need it (an AirPlay receiver playing this app's item), with the
    /// rules of ``ProxyConfiguration/lanAddress``. Listening there already does nothing; another
    /// address replaces the one before.
    /// - Throws: ``ProxyError`` when the server does not run, or the address cannot be had.
    func listen(onLAN address: String) async throws {
        guard let port = listening.withLock({ $0?.port }) else {
            throw ProxyError("The proxy does not run, so it cannot listen on \(address).")
        }
        if lanListening.withLock({ $0?.address == address }) { return }
        guard let handler = makeLANHandler(address) else {
            throw ProxyError("Cannot make the LAN listener of \(address).", setting: .host)
        }
        let channel: any Channel
        do {
            channel = try await bind(port: port, handler: handler)
        } catch {
            throw ProxyError("Cannot listen on \(address) at port \(port): \(error).", setting: .host)
        }
        let listener = Listener(channel, port: port)
        // A socket the system closes under it (iOS, while the app is suspended) is bound again
        // for as long as the receiver may need it; the task ends when the listener stops, and
        // the server's run waits for it (``stopListeningOnLAN()``).
        let keeping = Task { await keepListening(listener, port: port, handler: handler) }
        let replaced = lanListening.withLock { lan in
            defer { lan = LANListening(address: address, listener: listener, keeping: keeping) }
            return lan?.listener
        }
        replaced?.stop()
        configuration.logger.notice(
            "Listening on a LAN address", metadata: ["address": "\(address)", "port": "\(port)"])
    }

    /// A LAN listener ``listen(onLAN:)`` opened: its address, its listener, and the task that
    /// binds it again when its socket closes.
    private struct LANListening {
        var address: String
        var listener: Listener
        var keeping: Task<Void, Never>
    }

    /// Stops listening on the LAN address ``listen(onLAN:)`` opened, if any, and closes the
    /// connections made to it. Returns the task that kept it listening, which ends soon after.
    @discardableResult
    func stopListeningOnLAN() -> Task<Void, Never>? {
        guard
            let lan = lanListening.withLock({ lan in
                defer { lan = nil }
                return lan
            })
        else { return nil }
        lan.listener.stop()
        connections.close { $0.localAddress?.ipAddress == lan.address }
        return lan.keeping
    }

    /// Makes sure the proxy listens, for an app that comes back to the foreground: connects
    /// to its own port and, when that fails (a listening socket the system closed or left
    /// unusable while the app was suspended), closes the socket so that it is replaced, and
    /// returns once the proxy listens again on the same port.
    func ensureListening() async {
        guard let listener = listening.withLock({ $0 }), let (channel, generation) = listener.currentWithGeneration
        else { return }
        let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : configuration.host
        let connected = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(1))
            .connect(host: host, port: listener.port).get()
        if let connected {
            try? await connected.close()
            return
        }
        configuration.logger.warning(
            "The proxy's own port refused a connection; listening again", metadata: ["port": "\(listener.port)"])
        try? await channel.close()
        await listener.waitUntilReplaced(after: generation)
    }

    /// The listening channel now, how many times it was replaced, whether the server was told
    /// to stop, and who waits for a replacement.
    final class Listener: Sendable {
        private struct State {
            var channel: any Channel
            var generation = 0
            var isStopped = false
            var waiters: [(after: Int, continuation: CheckedContinuation<Void, Never>)] = []
        }
        private let state: Mutex<State>
        /// The port it listens on, kept across replacements.
        let port: Int

        init(_ channel: any Channel, port: Int) {
            state = Mutex(State(channel: channel))
            self.port = port
        }

        /// The channel, or `nil` once stopped.
        var current: (any Channel)? { state.withLock { $0.isStopped ? nil : $0.channel } }
        /// The channel and its generation, or `nil` once stopped.
        var currentWithGeneration: (any Channel, Int)? {
            state.withLock { $0.isStopped ? nil : ($0.channel, $0.generation) }
        }
        var isStopped: Bool { state.withLock { $0.isStopped } }

        /// Stops listening for good: closes the channel, and any that replaces it later.
        func stop() {
            let (channel, waiters) = state.withLock { state in
                state.isStopped = true
                defer { state.waiters = [] }
                return (state.channel, state.waiters)
            }
            channel.close(promise: nil)
            for waiter in waiters { waiter.continuation.resume() }
        }

        /// Listens on `channel` from now on; closed at once when the server stopped meanwhile
        /// (then `true`: the caller waits for it to close, so nothing listens once it returns).
        @discardableResult
        func replace(with channel: any Channel) -> Bool {
            let (stopped, ready) = state.withLock { state in
                state.channel = channel
                state.generation += 1
                let ready = state.waiters.filter { $0.after < state.generation }
                state.waiters.removeAll { $0.after < state.generation }
                return (state.isStopped, ready)
            }
            if stopped { channel.close(promise: nil) }
            for waiter in ready { waiter.continuation.resume() }
            return stopped
        }

        /// Returns once a channel newer than `generation` listens, or the server stopped.
        func waitUntilReplaced(after generation: Int) async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.isStopped || state.generation > generation { return true }
                    state.waiters.append((generation, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }
}

/// How to reach a running server (``ProxyConfiguration/serverInfoFile``).
public struct ServerInfo: Sendable, Codable, Equatable {
    public var host: String
    public var port: Int
    public var token: String?
    public var pid: Int32
    /// The LAN address it also listens on (``ProxyConfiguration/lanAddress``), if any.
    public var lanHost: String?
    /// The key its LAN URLs are minted with (`mediacache url --lan` mints one), when it has a LAN
    /// address.
    public var lanKey: String?

    public init(host: String, port: Int, token: String?, pid: Int32) {
        self.host = host
        self.port = port
        self.token = token
        self.pid = pid
    }

    /// The base URL of the server (`http://127.0.0.1:8089`); a wildcard address is reached on loopback.
    public var baseURL: String {
        let reachable = ["0.0.0.0", "::", ""].contains(host) ? "127.0.0.1" : host
        return "http://" + (reachable.contains(":") ? "[\(reachable)]" : reachable) + ":\(port)"
    }
}

/// The open connections and their running responses, so a shutdown can end them all.
final class ConnectionRegistry: Sendable {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])
    private let tasks = OwnedTasks()
    /// The sent regions of connections the proxy closed first, held a while after the close.
    let closedHolds = ClosedConnectionHolds()

    /// How many connections are open.
    var count: Int {
        channels.withLock { $0.count }
    }

    func add(_ channel: any Channel) {
        channels.withLock { $0[ObjectIdentifier(channel)] = channel }
    }

    func remove(_ channel: any Channel) {
        _ = channels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Runs `body` as a tracked task on `loop`, the event loop of the connection it answers
    /// (``LoopExecutor``), with the tasks the read path starts for it.
    func run(on loop: any EventLoop, _ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        tasks.run(on: LoopExecutor.of(loop), body)
    }

    /// Closes the open connections `matching` picks (without waiting).
    func close(matching: (any Channel) -> Bool) {
        for channel in channels.withLock({ Array($0.values) }) where matching(channel) { channel.close(promise: nil) }
    }

    func closeAll() async {
        let open = channels.withLock { Array($0.values) }
        // Waits for each close, so that no request is answered once the server has stopped.
        await withTaskGroup(of: Void.self) { group in
            for channel in open { group.addTask { try? await channel.close() } }
        }
        await tasks.cancelAndWait()
    }
}

extension ProxyHandler {
    /// A handler over `reader`: its answers through the reader's ``PlayerSource`` face, its admin
    /// endpoints through its ``AdminSource`` face and over `downloads`.
    init(
        reader: CachingReader, downloads: DownloadQueue? = nil, configuration: ProxyConfiguration,
        statistics: ProxyStatistics = ProxyStatistics()
    ) {
        statistics.countsLifetime(in: reader.store)
        self.init(
            engine: reader, admin: AdminSide(engine: reader, downloads: downloads),
            securityWarning: reader.securityWarning, checkOrigin: reader.checkOrigin, configuration: configuration,
            statistics: statistics)
    }
}
