// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import NIOPosix

/// Binding the proxy's listening sockets: one per event loop (``ProxyConfiguration/eventLoops``).
extension ProxyServer {
    func bind(port: Int, handler: ProxyHandler) async throws -> any Channel {
        let configuration = handler.configuration
        // Connections are served on the event loop that accepts them: handing each to another
        // loop cost a thread wake-up before its first request was read (the first byte of a
        // new connection's answer: docs/benchmarks.md). One loop is the default: on 2 cores
        // shared with the clients, two lowered many clients' throughput (docs/operating.md).
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator().prefix(configuration.eventLoops))
        guard loops.count > 1 else {
            return try await bootstrap(loops[0], handler: handler, loop: 0, reusesPort: false)
                .bind(host: configuration.host, port: port).get()
        }
        // Several loops: each listens on its own socket at the same port (`SO_REUSEPORT`), the
        // kernel spreads new connections among them, and each connection is served by the loop
        // that accepted it. A first socket without the option finds a port another server holds
        // (refused as with one loop) and picks the port for `0`; while ours listen, a server
        // that does the same cannot join them (joining needs every socket to set the option).
        // The port `0` picked is free only until the probe closes: another process may take it
        // before the loops bind it, so a port picked is picked again (a few times) when it is.
        var channels: [any Channel] = []
        for attempt in 1...(port == 0 ? 5 : 1) {
            let probe = try await bootstrap(loops[0], handler: handler, loop: 0, reusesPort: false)
                .bind(host: configuration.host, port: port).get()
            let chosen = probe.localAddress?.port ?? port
            try await probe.close()
            do {
                for (index, loop) in loops.enumerated() {
                    channels.append(
                        try await bootstrap(loop, handler: handler, loop: index, reusesPort: true)
                            .bind(host: configuration.host, port: chosen).get())
                }
                break
            } catch {
                for channel in channels { try? await channel.close() }
                channels = []
                if attempt == (port == 0 ? 5 : 1) { throw error }
            }
        }
        // One listener as far as the rest of the server goes: the first stands for all, and
        // when any closes, all do (so ``keepListening(_:port:handler:)`` binds them again).
        let first = channels[0]
        for other in channels.dropFirst() {
            first.closeFuture.whenComplete { _ in other.close(promise: nil) }
            other.closeFuture.whenComplete { _ in first.close(promise: nil) }
        }
        return first
    }

    /// The bootstrap of a listening socket on `eventLoop` (the `loop`-th), its connections
    /// served there.
    private func bootstrap(_ eventLoop: any EventLoop, handler: ProxyHandler, loop: Int, reusesPort: Bool)
        -> ServerBootstrap
    {
        let configuration = handler.configuration
        let connections = connections
        return ServerBootstrap(group: eventLoop, childGroup: eventLoop)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(
                ChannelOptions.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: reusesPort ? 1 : 0
            )
            // TCP_NODELAY is a TCP-level option: at the socket level its number is SO_DEBUG,
            // which needs CAP_NET_ADMIN (every accepted connection then failed for anyone but
            // root: ServeSecurityTests.anUnprivilegedUserIsServed).
            .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                ProxyMetrics.accepted(onLoop: loop)
                return channel.eventLoop.makeCompletedFuture {
                    try ProxyPipeline.configure(
                        channel, handler: handler, configuration: configuration, connections: connections)
                }
            }
    }
}
