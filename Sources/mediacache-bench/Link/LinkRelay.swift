// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import NIOPosix

/// A simulated network link in front of a server on loopback: a TCP relay that delays each
/// byte by half a round trip in each direction, paces each direction at a bandwidth, and adds
/// one round trip before a new connection reaches the server (the TCP handshake a far origin
/// costs; loopback's is free). What a player 20-150 ms from its origin sees, on one machine.
final class LinkRelay: Sendable {
    struct Shape: Sendable {
        /// The round trip.
        var roundTrip: TimeAmount
        /// Bytes per second in each direction.
        var bytesPerSecond: Int64
    }

    let port: Int
    private let channel: any Channel

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    /// Starts a relay on 127.0.0.1 (a free port) to `target` on 127.0.0.1.
    static func start(to target: Int, shape: Shape) async throws -> LinkRelay {
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)  // until the far side is connected
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture {
                    let near = Pipe(shape: shape)
                    try inbound.pipeline.syncOperations.addHandler(near)
                    // The handshake: one round trip before the server sees the connection.
                    inbound.eventLoop.scheduleTask(in: shape.roundTrip) {
                        ClientBootstrap(group: inbound.eventLoop)
                            .channelInitializer { outbound in
                                outbound.eventLoop.makeCompletedFuture {
                                    let far = Pipe(shape: shape)
                                    try outbound.pipeline.syncOperations.addHandler(far)
                                    far.peer = inbound
                                    near.peer = outbound
                                }
                            }
                            .connect(host: "127.0.0.1", port: target)
                            .whenComplete { result in
                                switch result {
                                case .success: inbound.setOption(.autoRead, value: true).whenComplete { _ in inbound.read() }
                                case .failure: inbound.close(promise: nil)
                                }
                            }
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return LinkRelay(port: channel.localAddress?.port ?? 0, channel: channel)
    }

    func stop() async {
        try? await channel.close()
    }

    /// One direction of the link: what arrives on its channel leaves on the peer half a round
    /// trip after the link has carried it at the bandwidth, in order.
    private final class Pipe: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let shape: Shape
        /// The other side; set on its event loop before any byte is read.
        var peer: (any Channel)?
        /// When the link is free again in this direction.
        private var free = NIODeadline.now()
        /// When the last byte sent in this direction arrives.
        private var lastArrival = NIODeadline.now()

        init(shape: Shape) {
            self.shape = shape
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard let peer else { return }
            let buffer = unwrapInboundIn(data)
            let now = NIODeadline.now()
            let carried = TimeAmount.nanoseconds(Int64(buffer.readableBytes) * 1_000_000_000 / max(1, shape.bytesPerSecond))
            free = max(free, now) + carried
            lastArrival = free + .nanoseconds(shape.roundTrip.nanoseconds / 2)
            peer.eventLoop.scheduleTask(deadline: lastArrival) { peer.writeAndFlush(buffer, promise: nil) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            guard let peer else { return }
            peer.eventLoop.scheduleTask(deadline: lastArrival) { peer.close(promise: nil) }
        }
    }
}
