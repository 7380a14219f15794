// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import NIOHTTP1

/// The handlers of one client connection, in pipeline order:
///
/// 1. ``RequestTimer/RawSide``: starts the request timer when bytes of a request arrive;
/// 2. `HTTPResponseEncoder` and `HTTPRequestDecoder`, the decoder stopping at
///    `maxURIBytes + maxHeaderBytes` of head (so a client cannot make it buffer more);
/// 3. ``RequestTimer/ParsedSide``: stops the timer when a request has arrived whole;
/// 4. `HTTPServerPipelineHandler`: pipelined requests wait for the response before them;
/// 5. ``ProxyConnectionHandler``, which answers requests, answers a request the parser
///    refuses, and closes an idle connection.
///
/// Every write passes each outbound handler, and every read each inbound one, so there are no
/// more of them than this: a cached range's answer is three writes and a flush.
enum ProxyPipeline {
    static func configure(_ channel: any Channel, handler: ProxyHandler, configuration: ProxyConfiguration, connections: ConnectionRegistry) throws {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = configuration.maxURIBytes + configuration.maxHeaderBytes
        limits.maxHeaderFieldSize = limits.maxHeaderListSize
        let timer = RequestTimer(timeout: configuration.requestTimeout)
        let isOverCapacity = connections.count >= configuration.maxConnections
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(RequestTimer.RawSide(timer))
        try sync.addHandler(HTTPResponseEncoder())
        try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: limits)))
        try sync.addHandler(RequestTimer.ParsedSide(timer))
        try sync.addHandler(HTTPServerPipelineHandler())
        try sync.addHandler(ProxyConnectionHandler(handler: handler, configuration: configuration, connections: connections, isOverCapacity: isOverCapacity))
    }
}

/// Closes a connection whose request does not arrive whole within the timeout of its first
/// bytes: a client that sends its head a byte at a time (slowloris) holds a connection for
/// seconds, not for as long as it likes. An idle keep-alive connection is not timed by it
/// (the idle timeout is).
///
/// Two handlers share it, one before the HTTP decoder (it sees bytes arrive) and one after
/// it (it sees a request end); both run on the channel's event loop.
final class RequestTimer {
    private let timeout: TimeAmount
    /// When the request under way began to arrive; `nil` between requests.
    private var startedAt: NIODeadline?
    /// The one check scheduled on the event loop, if any: a request does not schedule and
    /// cancel a task of its own (most end long before the timeout), the check looks at
    /// whichever request is under way when it runs and schedules itself again for it.
    private var check: NIOScheduledCallback?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    fileprivate func start(_ context: ChannelHandlerContext) {
        guard startedAt == nil else { return }
        let now = NIODeadline.now()
        startedAt = now
        if check == nil { schedule(at: now + timeout, context.channel) }
    }

    fileprivate func stop() {
        startedAt = nil
    }

    /// Stops checking (the connection is gone).
    fileprivate func cancel() {
        startedAt = nil
        check?.cancel()
        check = nil
    }

    private func schedule(at deadline: NIODeadline, _ channel: any Channel) {
        check = LoopCallback.schedule(at: deadline, on: channel.eventLoop) { [self] in
            check = nil
            guard let startedAt else { return }  // no request under way
            if NIODeadline.now() >= startedAt + timeout {
                channel.close(promise: nil)
            } else {
                schedule(at: startedAt + timeout, channel)
            }
        }
    }

    final class RawSide: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        private let timer: RequestTimer
        init(_ timer: RequestTimer) { self.timer = timer }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            timer.start(context)
            context.fireChannelRead(data)
        }

        func channelInactive(context: ChannelHandlerContext) {
            timer.cancel()
            context.fireChannelInactive()
        }
    }

    final class ParsedSide: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        private let timer: RequestTimer
        init(_ timer: RequestTimer) { self.timer = timer }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head: timer.start(context)  // the next request's bytes may have come with the last one's end
            case .body: break
            case .end: timer.stop()
            }
            context.fireChannelRead(data)
        }
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
    static func schedule(at deadline: NIODeadline, on loop: any EventLoop, _ action: @escaping () -> Void) -> NIOScheduledCallback? {
        try? loop.scheduleCallback(at: deadline, handler: LoopCallback(action: NIOLoopBound(action, eventLoop: loop)))
    }
}
