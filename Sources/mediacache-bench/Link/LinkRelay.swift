// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import NIOCore
import NIOPosix
import Synchronization

/// A simulated network link in front of a server on loopback: a TCP relay that delays each
/// byte by half a round trip in each direction, paces each direction at a bandwidth that all
/// its connections share (as they share a real link: a second connection does not widen it),
/// and adds one round trip before a new connection reaches the server (the TCP handshake a far
/// origin costs; loopback's is free). What a player 20-150 ms from its origin sees, on one
/// machine.
final class LinkRelay: Sendable {
    struct Shape: Sendable {
        /// The round trip.
        var roundTrip: TimeAmount
        /// Bytes per second in each direction.
        var bytesPerSecond: Int64
    }

    let port: Int
    private let channel: any Channel
    private let toClient: Direction

    private let toServer: Direction

    /// The bytes the link has delivered from the server to clients still connected, so far.
    var bytesToClients: Int64 { toClient.bytes }

    /// Returns once every byte put on the link so far has arrived: a player that hung up
    /// leaves up to a window of bytes on the link, which the next play would otherwise queue
    /// behind (a user's next play starts on a link that is idle).
    func drain() async throws {
        let idle = max(toClient.freeAt, toServer.freeAt) + .nanoseconds(toClient.shape.roundTrip.nanoseconds / 2)
        let wait = idle - NIODeadline.now()
        if wait > .zero { try await Task.sleep(for: .nanoseconds(wait.nanoseconds)) }
    }

    private init(port: Int, channel: any Channel, toClient: Direction, toServer: Direction) {
        self.port = port
        self.channel = channel
        self.toClient = toClient
        self.toServer = toServer
    }

    /// Starts a relay on 127.0.0.1 (a free port) to `target` on 127.0.0.1.
    static func start(to target: Int, shape: Shape) async throws -> LinkRelay {
        let group = MultiThreadedEventLoopGroup.singleton
        let toServer = Direction(shape: shape)
        let toClient = Direction(shape: shape)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)  // until the far side is connected
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture {
                    let near = Pipe(direction: toServer)
                    try inbound.pipeline.syncOperations.addHandler(near)
                    // The handshake: one round trip before the server sees the connection.
                    inbound.eventLoop.scheduleTask(in: shape.roundTrip) {
                        ClientBootstrap(group: inbound.eventLoop)
                            .channelInitializer { outbound in
                                outbound.eventLoop.makeCompletedFuture {
                                    let far = Pipe(direction: toClient)
                                    try outbound.pipeline.syncOperations.addHandler(far)
                                    far.peer = inbound
                                    near.peer = outbound
                                }
                            }
                            .connect(host: "127.0.0.1", port: target)
                            .whenComplete { result in
                                switch result {
                                case .success:
                                    inbound.setOption(.autoRead, value: true).whenComplete { _ in inbound.read() }
                                case .failure: inbound.close(promise: nil)
                                }
                            }
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return LinkRelay(
            port: channel.localAddress?.port ?? 0, channel: channel, toClient: toClient, toServer: toServer)
    }

    func stop() async {
        try? await channel.close()
    }

    /// One direction of the link, shared by every connection: when it is free again.
    final class Direction: Sendable {
        let shape: Shape
        /// When the link is free again, and the bytes it has delivered to open connections.
        private let state = Mutex((free: NIODeadline.now(), bytes: Int64(0)))

        init(shape: Shape) {
            self.shape = shape
        }

        var bytes: Int64 { state.withLock { $0.bytes } }
        /// When the bytes put on the link so far have all left it.
        var freeAt: NIODeadline { state.withLock { $0.free } }

        /// Carries `count` bytes after those already on the link; returns when the last of
        /// them has left it.
        func carry(_ count: Int) -> NIODeadline {
            let carried = TimeAmount.nanoseconds(Int64(count) * 1_000_000_000 / max(1, shape.bytesPerSecond))
            return state.withLock { state in
                state.free = max(state.free, NIODeadline.now()) + carried
                return state.free
            }
        }

        /// Counts `count` bytes delivered to a connection still open.
        func delivered(_ count: Int) {
            state.withLock { $0.bytes += Int64(count) }
        }
    }

    /// One direction of one connection: what arrives on its channel leaves on the peer half a
    /// round trip after the link has carried it at the bandwidth, in order. At most a window
    /// of bytes (the link's bandwidth times its round trip, and 64 KiB) is on the link or
    /// waiting for the receiver's socket at once, as TCP's flow control allows: beyond it the
    /// pipe stops reading until the receiver takes bytes, so a sender cannot queue a whole file
    /// on the link ahead of another connection, a receiver that stops reading stops its
    /// sender, and one that hangs up leaves at most a window behind it.
    private final class Pipe: ChannelDuplexHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        let direction: Direction
        let window: Int
        /// The other side; set on its event loop before any byte is read.
        var peer: (any Channel)?
        /// When the last byte sent in this direction arrives.
        private var lastArrival = NIODeadline.now()
        /// Bytes read and not yet arrived; on this channel's event loop, as all the state.
        private var onTheLink = 0
        /// Whether a read was held back because the window was full.
        private var readHeld = false

        private var shape: Shape { direction.shape }

        init(direction: Direction) {
            self.direction = direction
            self.window =
                Int(direction.shape.bytesPerSecond * direction.shape.roundTrip.nanoseconds / 1_000_000_000) + 65_536
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard let peer else { return }
            let buffer = unwrapInboundIn(data)
            let count = buffer.readableBytes
            onTheLink += count
            lastArrival = max(lastArrival, direction.carry(count) + .nanoseconds(shape.roundTrip.nanoseconds / 2))
            let loop = context.eventLoop
            let here = NIOLoopBound(context, eventLoop: loop)
            let direction = direction
            peer.eventLoop.scheduleTask(deadline: lastArrival) {
                if peer.isActive { direction.delivered(count) }
                // The bytes leave the window when the receiver's socket takes them: a receiver
                // that stops reading closes the window, and the sender stops, as TCP's flow
                // control has it (counting them out when written let a paused receiver's
                // sender go on filling the link).
                peer.writeAndFlush(buffer).whenComplete { _ in
                    loop.execute { self.arrived(count, context: here.value) }
                }
            }
        }

        func read(context: ChannelHandlerContext) {
            if onTheLink >= window {
                readHeld = true
            } else {
                context.read()
            }
        }

        private func arrived(_ count: Int, context: ChannelHandlerContext) {
            onTheLink -= count
            guard readHeld, onTheLink < window else { return }
            readHeld = false
            context.read()
        }

        func channelInactive(context: ChannelHandlerContext) {
            guard let peer else { return }
            peer.eventLoop.scheduleTask(deadline: lastArrival) { peer.close(promise: nil) }
        }
    }
}

/// The simulated link's options, for the benchmarks that run over it.
struct LinkOptions: ParsableArguments {
    @Option(name: .customLong("rtt-ms"), help: "The link's round trip, in milliseconds.")
    var roundTrip = 60

    @Option(help: "The link's bandwidth each way, in megabits per second.")
    var mbps = 40

    func validate() throws {
        guard (0...2000).contains(roundTrip), (1...10_000).contains(mbps) else {
            throw ValidationError("--rtt-ms must be 0...2000 and --mbps 1...10000.")
        }
    }

    /// The link's bandwidth each way, in bytes per second.
    var bytesPerSecond: Int64 { Int64(mbps) * 125_000 }

    var shape: LinkRelay.Shape {
        LinkRelay.Shape(roundTrip: .milliseconds(Int64(roundTrip)), bytesPerSecond: bytesPerSecond)
    }

    /// "a link of 60 ms round trip and 40 Mbit/s"
    var description: String { "a link of \(roundTrip) ms round trip and \(mbps) Mbit/s" }
}
