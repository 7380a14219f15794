// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import NIOHTTP1

/// The handlers of one client connection, in pipeline order:
///
/// 1. ``ConnectionEdge``: tells the connection when bytes of a request arrive (before they are
///    parsed: a head sent a byte at a time is timed from its first), and is where an answer's
///    head encoded by the proxy (``EncodedHead``) is written, past NIO's encoder;
/// 2. `HTTPResponseEncoder` and `HTTPRequestDecoder`, the decoder stopping at
///    `maxURIBytes + maxHeaderBytes` of head (so a client cannot make it buffer more);
/// 3. ``ProxyConnectionHandler``, which answers requests one at a time (a pipelined request
///    is held, and the socket not read, while the answer before it is written: the work of
///    NIO's `HTTPServerPipelineHandler`, which cost a new connection a handler and every
///    request a pass through it), answers a request the parser refuses, and closes a
///    connection whose request is too slow to arrive or that is idle
///    (``ConnectionStateMachine``, one timer).
///
/// Every write passes each outbound handler, and every read each inbound one, and each costs
/// its setting up and tearing down on every new connection, so there are no more of them than
/// this: a cached range's answer is three writes and a flush.
enum ProxyPipeline {
    static func configure(
        _ channel: any Channel, handler: ProxyHandler, configuration: ProxyConfiguration,
        connections: ConnectionRegistry
    ) throws {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = configuration.maxURIBytes + configuration.maxHeaderBytes
        limits.maxHeaderFieldSize = limits.maxHeaderListSize
        let isOverCapacity = connections.count >= configuration.maxConnections
        let connection = ProxyConnectionHandler(
            handler: handler, configuration: configuration, connections: connections, isOverCapacity: isOverCapacity)
        let sync = channel.pipeline.syncOperations
        let edge = ConnectionEdge(connection)
        connection.edge = edge
        try sync.addHandler(edge)
        try sync.addHandler(HTTPResponseEncoder())
        try sync.addHandler(
            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: limits)))
        try sync.addHandler(connection)
    }
}

/// The pipeline's first handler: tells the connection's handler when bytes of a request
/// arrive, before the HTTP decoder (which says nothing until a head is whole); and keeps its
/// context, where bytes are written past NIO's encoder. Both run on the channel's event loop.
final class ConnectionEdge: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let connection: ProxyConnectionHandler
    /// Its place in the pipeline, while it is in one.
    private(set) var context: ChannelHandlerContext?

    init(_ connection: ProxyConnectionHandler) {
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.bytesArrived()
        context.fireChannelRead(data)
    }
}

/// A callback on a channel's event loop, scheduled without the promise a scheduled task
/// carries: a connection's timers are scheduled and cancelled once per connection, and
/// NIO's scheduled callbacks cost a fraction of a task's.
struct LoopCallback: NIOScheduledCallbackHandler, Sendable {
    let action: NIOLoopBound<() -> Void>

    func handleScheduledCallback(eventLoop: some EventLoop) {
        action.value()
    }

    /// Runs `action` on `loop` at `deadline`; `nil` when the loop is shutting down.
    static func schedule(at deadline: NIODeadline, on loop: any EventLoop, _ action: @escaping () -> Void)
        -> NIOScheduledCallback?
    {
        try? loop.scheduleCallback(at: deadline, handler: LoopCallback(action: NIOLoopBound(action, eventLoop: loop)))
    }
}
