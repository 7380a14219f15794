// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Logging
import MediaCache
import NIOCore
import NIOHTTP1

/// One client connection: takes each request (one at a time: what the decoder gives while an
/// answer is written is held, and the socket not read, until it ends), answers it (on the
/// event loop when the body is at hand, else from a task it cancels when the client goes
/// away). A connection whose
/// request does not arrive whole within ``ProxyConfiguration/requestTimeout`` of its first
/// bytes, or that has neither sent a request byte nor been answered for
/// ``ProxyConfiguration/idleTimeout``, is closed (one timer per connection for both, moved
/// when it fires, and when a request begins while it was armed for the idle timeout).
final class ProxyConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let handler: ProxyHandler
    private let configuration: ProxyConfiguration
    private let connections: ConnectionRegistry
    /// The connection's last request that passed the checks (see ``RepeatedRequestCheck``).
    private var lastChecked = RepeatedRequestCheck()
    /// What the connection is doing, and what each event makes it do.
    private var machine: ConnectionStateMachine
    /// The answer being sent, on a task.
    private var task: Task<Void, Never>?
    private var timerCheck: NIOScheduledCallback?
    /// The handler's place in the pipeline, while it is in one: an answer that ends acts on
    /// what was held (on the event loop, later than the event that began it).
    private var context: ChannelHandlerContext?
    /// A read was asked for while reads were paused: it is made once they resume.
    private var readPending = false
    /// The stored regions sent, held until the client has read them (its next request, or
    /// the connection's end): a cut of their files waits.
    private let sent = SentRegions()
    /// The proxy ended the connection (after an answer that closes it, at a deadline, on a
    /// failure): its client may still be reading what was sent.
    private var closesFirst = false
    /// The pipeline's first handler, set as the pipeline is made (and let go when this handler
    /// leaves it: each holds the other).
    var edge: ConnectionEdge?

    init(
        handler: ProxyHandler, configuration: ProxyConfiguration, connections: ConnectionRegistry, isOverCapacity: Bool
    ) {
        self.handler = handler
        self.configuration = configuration
        self.connections = connections
        machine = ConnectionStateMachine(
            now: .now(), idleTimeout: configuration.idleTimeout, requestTimeout: configuration.requestTimeout,
            isOverCapacity: isOverCapacity)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        connections.add(context.channel)
        scheduleCheck(context, in: machine.firstLook)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        edge = nil
    }

    /// The socket is read only while no answer is being written (see
    /// ``ConnectionStateMachine/readsPaused``): a client that pipelines waits in its socket.
    func read(context: ChannelHandlerContext) {
        if machine.readsPaused {
            readPending = true
        } else {
            context.read()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if machine.channelInactive() == .cancelAnswer { task?.cancel() }
        timerCheck?.cancel()
        timerCheck = nil
        let now = NIODeadline.now()
        if closesFirst {
            // What the socket took may still wait in the client's: held for as long as an idle
            // connection is kept (a client closing first has read what it wanted).
            connections.closedHolds.hold(sent, until: now + configuration.idleTimeout)
        } else {
            sent.release()
        }
        connections.closedHolds.letGo(now: now)
        connections.remove(context.channel)
        context.fireChannelInactive()
    }

    /// Bytes of a request arrived (``ConnectionEdge`` says so, on the event loop): the timer is
    /// armed anew when it would look only after the request's time is up.
    func bytesArrived() {
        guard case .lookAgain(let delay) = machine.bytesArrived(now: .now()), let context else { return }
        timerCheck?.cancel()
        scheduleCheck(context, in: delay)
    }

    /// Closes the connection if a deadline has passed at `delay` from now, else looks again
    /// when the next one would.
    private func scheduleCheck(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        timerCheck = LoopCallback.schedule(at: .now() + delay, on: context.eventLoop) { [self] in
            guard timerCheck != nil else { return }
            switch machine.timerFired(now: .now()) {
            case .close:
                closesFirst = true
                context.close(promise: nil)
            case .lookAgain(let delay): scheduleCheck(context, in: delay)
            default: break
            }
        }
    }

    /// A close the proxy asks for (after an answer, on a failure; from the channel, so through
    /// here): the connection ends before its client says it has read everything.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        closesFirst = true
        context.close(mode: mode, promise: promise)
    }

    /// An error up the pipeline: a request the HTTP parser refuses is held or answered as a
    /// request is (``refuse(_:context:)``); bytes after it are dropped; any other error goes on.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch machine.errorCaught(error, now: .now()) {
        case .forward: context.fireErrorCaught(error)
        case let action: execute(action, context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let event: ConnectionStateMachine.Inbound =
            switch unwrapInboundIn(data) {
            case .head(let head): .head(head)
            case .body: .body
            case .end: .end
            }
        // The client asks again: it has read what it was sent.
        if case .head = event { sent.release() }
        execute(machine.receive(event, now: .now()), context: context)
    }

    /// Carries out what the machine decided.
    private func execute(_ action: ConnectionStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .answer(let head):
            answer(head, number: machine.answers, context: context)
        case .refuseOverCapacity(let head):
            var refusal = ProxyResponse.error(
                .serviceUnavailable,
                "Too many open connections (the limit is \(configuration.maxConnections)); try again.")
            refusal.headers.add(name: "Retry-After", value: "1")
            configuration.logger.warning(
                "Refused a connection over the limit", metadata: ["limit": "\(configuration.maxConnections)"])
            send(refusal, to: head, number: machine.answers, context: context)
        case .refuseMalformed(let error):
            refuse(error, context: context)
        case .none, .drop, .forward, .close, .lookAgain, .cancelAnswer:
            break
        }
    }

    /// Answers a request the HTTP parser refuses with a status and a one-line reason: `431`
    /// when the head is over the size limit, else `400` (with `Allow` when the method is one
    /// the parser does not know), and ends the connection once it is written, lingering (NIO's
    /// `HTTPServerProtocolErrorHandler` closes at once, with a bare `400`, which a client still
    /// sending can get as a reset). A refusal behind an answer being written waits for it, as a
    /// request does, so no answer is ever cut in two.
    private func refuse(_ parserError: HTTPParserError, context: ChannelHandlerContext) {
        var refusal: ProxyResponse
        switch parserError {
        case .headerOverflow:
            refusal = ProxyResponse.error(
                .requestHeaderFieldsTooLarge,
                "The request's head is larger than \(configuration.maxURIBytes + configuration.maxHeaderBytes) bytes.")
        case .invalidMethod:
            // The parser cannot tell a made-up method from a garbled request line.
            refusal = ProxyResponse.error(
                .badRequest, "Malformed request line or unknown method: only GET and HEAD are served.")
            refusal.headers.add(name: "Allow", value: "GET, HEAD")
        default:
            refusal = ProxyResponse.error(.badRequest, "Malformed HTTP request (\(parserError)).")
        }
        // The request's framing is lost: the connection ends with the answer, as it says, in
        // a lingering close: the output ends after the answer, what still comes is dropped.
        refusal.headers.replaceOrAdd(name: "Connection", value: "close")
        refusal.headers.replaceOrAdd(name: "Cache-Status", value: CacheStatus.local("refused").headerValue)
        let head = HTTPResponseHead(version: .http1_1, status: refusal.status, headers: refusal.headers)
        if case .atHand(let body) = refusal.body.parts(context.channel.allocator) {
            ResponseSender.writeAtOnce(head, body, on: output(context), after: .lingers)
        }
        configuration.logger.info("refused", metadata: ["status": "\(refusal.status.code)", "error": "\(parserError)"])
        context.fireErrorCaught(parserError)
    }

    /// The answer to the `number`th request ended: what was held meanwhile is acted on, and
    /// the socket read again if a read waited.
    private func answerEnded(_ number: Int) {
        guard let context else { return }
        execute(machine.answerEnded(number, now: .now()), context: context)
        if readPending, !machine.readsPaused {
            readPending = false
            context.read()
        }
    }

    /// Answers `head`: from the store here on the event loop when it can, else on a task.
    private func answer(_ head: HTTPRequestHead, number: Int, context: ChannelHandlerContext) {
        let localPort = context.channel.localAddress?.port ?? configuration.port
        switch handler.respondFromStore(to: head, localPort: localPort, checking: &lastChecked) {
        case .answered(let response):
            send(response, to: head, number: number, context: context)
        case .needsGeneralPath(let checked):
            let (channel, handler) = (context.channel, handler)
            let this = NIOLoopBound(self, eventLoop: context.eventLoop)
            let client = context.channel.remoteAddress?.ipAddress
            task = connections.run(on: context.eventLoop) { [sent] in
                let response = await handler.respond(to: head, localPort: localPort, client: client, checked: checked)
                await ResponseSender.send(
                    response, on: channel, version: head.version, keepAlive: head.isKeepAlive, sent: sent)
                channel.eventLoop.execute { this.value.answerEnded(number) }
            }
        }
    }

    /// Sends `response` to the `number`th request, `head`: at once, in one flush, when its
    /// body is at hand (a stored range in one file region: no task, no hop to another
    /// thread), else from a task.
    private func send(_ response: ProxyResponse, to head: HTTPRequestHead, number: Int, context: ChannelHandlerContext)
    {
        let this = NIOLoopBound(self, eventLoop: context.eventLoop)
        let channel = context.channel
        if case .atHand(let body) = response.body.parts(channel.allocator) {
            let (head, after) = ResponseSender.head(of: response, version: head.version, keepAlive: head.isKeepAlive)
            ResponseSender.writeAtOnce(head, body, on: output(context), after: after).whenComplete { _ in
                this.value.answerEnded(number)
            }
            return
        }
        task = connections.run(on: channel.eventLoop) { [sent] in
            await ResponseSender.send(
                response, on: channel, version: head.version, keepAlive: head.isKeepAlive, sent: sent)
            channel.eventLoop.execute { this.value.answerEnded(number) }
        }
    }

    private func output(_ context: ChannelHandlerContext) -> ConnectionOutput {
        ConnectionOutput(context: context, edge: edge?.context, sent: sent)
    }
}
