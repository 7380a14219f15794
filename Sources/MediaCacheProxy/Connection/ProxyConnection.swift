// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Logging
import MediaCache
import NIOCore
import NIOHTTP1

/// One client connection: takes each request (one at a time; pipelined ones wait), answers
/// it from a task, and cancels that task when the client goes away. A connection that has
/// neither sent a request byte nor been answered for ``ProxyConfiguration/idleTimeout`` is
/// closed (one timer per connection, moved only when it fires, not at each request).
final class ProxyConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
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
    /// How long a refused connection reads and drops what still comes (nginx: 5 s per read).
    static let lingerTime: TimeAmount = .seconds(2)
    private var idleCheck: NIOScheduledCallback?

    init(handler: ProxyHandler, configuration: ProxyConfiguration, connections: ConnectionRegistry, isOverCapacity: Bool) {
        self.handler = handler
        self.configuration = configuration
        self.connections = connections
        machine = ConnectionStateMachine(now: .now(), idleTimeout: configuration.idleTimeout, isOverCapacity: isOverCapacity)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connections.add(context.channel)
        scheduleIdleCheck(context, in: configuration.idleTimeout)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if machine.channelInactive() == .cancelAnswer { task?.cancel() }
        idleCheck?.cancel()
        idleCheck = nil
        connections.remove(context.channel)
        context.fireChannelInactive()
    }

    /// Closes the connection if it is idle at `delay` from now, else looks again when it
    /// would be.
    private func scheduleIdleCheck(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        idleCheck = LoopCallback.schedule(at: .now() + delay, on: context.eventLoop) { [self] in
            guard idleCheck != nil else { return }
            switch machine.idleTimerFired(now: .now()) {
            case .close: context.close(promise: nil)
            case .lookAgain(let delay): scheduleIdleCheck(context, in: delay)
            default: break
            }
        }
    }

    /// Answers a request the HTTP parser refuses with a status and a one-line reason: `431`
    /// when the head is over the size limit,
    /// else `400` (with `Allow` when the method is one the parser does not know), and closes
    /// the connection once it is written, lingering (NIO's `HTTPServerProtocolErrorHandler`
    /// closes at once, with a bare `400`, which a client still sending can get as a reset). The
    /// `HTTPServerPipelineHandler` before this handler holds a parser error back while an
    /// answer is being written and passes it on once that answer has ended, so no answer is
    /// ever cut in two.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let parserError: HTTPParserError
        switch machine.errorCaught(error) {
        case .refuseMalformed(let refused): parserError = refused
        case .drop: return  // bytes after a refused request (the decoder's error state)
        default:
            context.fireErrorCaught(error)
            return
        }
        let response: ProxyResponse
        switch parserError {
        case .headerOverflow:
            response = ProxyResponse.error(.requestHeaderFieldsTooLarge, "The request's head is larger than \(configuration.maxURIBytes + configuration.maxHeaderBytes) bytes.")
        case .invalidMethod:
            // The parser cannot tell a made-up method from a garbled request line.
            response = ProxyResponse.error(.badRequest, "Malformed request line or unknown method: only GET and HEAD are served.")
        default:
            response = ProxyResponse.error(.badRequest, "Malformed HTTP request (\(parserError)).")
        }
        var headers = response.headers
        if parserError == .invalidMethod { headers.add(name: "Allow", value: "GET, HEAD") }
        headers.replaceOrAdd(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
        if case .text(let text) = response.body {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
        }
        // The request's framing is lost: the connection ends with the answer, as it says, in
        // a lingering close: the output ends after the answer, what still comes is dropped.
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            channel.close(mode: .output).whenFailure { _ in channel.close(promise: nil) }
            channel.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
        }
        configuration.logger.info("refused", metadata: ["status": "\(response.status.code)", "error": "\(parserError)"])
        context.fireErrorCaught(error)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let action =
            switch unwrapInboundIn(data) {
            case .head(let head): machine.requestHead(head, now: .now())
            case .body: machine.requestBody(now: .now())
            case .end: machine.requestEnd(now: .now())
            }
        switch action {
        case .refuseOverCapacity(let head):
            let (channel, number) = (context.channel, machine.answers)
            let this = NIOLoopBound(self, eventLoop: context.eventLoop)
            var refusal = ProxyResponse.error(.serviceUnavailable, "Too many open connections (the limit is \(configuration.maxConnections)); try again.")
            refusal.headers.add(name: "Retry-After", value: "1")
            let response = refusal
            configuration.logger.warning("Refused a connection over the limit", metadata: ["limit": "\(configuration.maxConnections)"])
            task = connections.run {
                await Self.send(response, on: channel, version: head.version, keepAlive: false)
                channel.eventLoop.execute { this.value.answerEnded(number) }
            }
        case .answer(let head):
            answer(head, number: machine.answers, context: context)
        default:
            break
        }
    }

    /// The answer to the `number`th request ended: the connection waits for the next one.
    private func answerEnded(_ number: Int) {
        _ = machine.answerEnded(number, now: .now())
    }

    /// Answers `head`: a stored range that fits in one file region here on the event loop,
    /// anything else on a task.
    private func answer(_ head: HTTPRequestHead, number: Int, context: ChannelHandlerContext) {
        let channel = context.channel
        let handler = handler
        let localPort = channel.localAddress?.port ?? configuration.port
        let this = NIOLoopBound(self, eventLoop: context.eventLoop)
        // A stored range that fits in one file region is answered here on the event
        // loop, in one flush: no task, no hop to another thread.
        var first: ReadPart?
        var stored: ProxyResponse?
        var checked: ProxyHandler.CheckedRequest?
        switch handler.respondFromStore(to: head, localPort: localPort, checking: &lastChecked) {
        case .answered(let response): stored = response
        case .needsGeneralPath(let found): checked = found
        }
        if let stored, case .stream(let stream, let log) = stored.body {
            first = stream.nextPartWithoutWaiting()
            if case .file(let region)? = first, region.range.upperBound == stream.range.upperBound {
                stream.cancel()  // it has given its last byte
                Self.sendAtOnce(
                    stored, region: region, log: log, statistics: stream.statistics, on: context, version: head.version,
                    keepAlive: head.isKeepAlive
                ) { this.value.answerEnded(number) }
                return
            }
        }
        let (firstPart, answered, found) = (first, stored, checked)
        task = connections.run {
            let response = if let answered { answered } else { await handler.respond(to: head, localPort: localPort, checked: found) }
            await Self.send(response, firstPart: firstPart, on: channel, version: head.version, keepAlive: head.isKeepAlive)
            channel.eventLoop.execute { this.value.answerEnded(number) }
        }
    }

    /// Writes the head, `region` (the whole body) and the end in one flush, on the event loop.
    private static func sendAtOnce(
        _ response: ProxyResponse, region: StoredRegion, log: RequestLog, statistics: ReadStatistics,
        on context: ChannelHandlerContext, version: HTTPVersion, keepAlive: Bool, done: @escaping () -> Void
    ) {
        var log = log
        let keepAlive = ResponseWriter.keepsAlive(requested: keepAlive, version: version, headers: response.headers)
        var headers = response.headers
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let (body, file) = Self.fileRegion(region)
        let channel = context.channel
        log.firstByte = ContinuousClock.now
        let line = log
        context.write(NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: version, status: response.status, headers: headers))), promise: nil)
        context.write(NIOAny(HTTPServerResponsePart.body(.fileRegion(body))), promise: nil)
        // Writes complete in order, and a failed one fails those after it: the end's promise
        // says how the region's write went too.
        let ended = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: ended)
        ended.futureResult.whenComplete { result in
            Self.release(file, of: region)
            switch result {
            case .success:
                line.end(statistics, error: nil)  // every body byte is in the socket
                if !keepAlive { channel.close(promise: nil) }
            case .failure(let error):
                line.end(statistics, error: error)
                channel.close(promise: nil)
            }
            done()
        }
    }

    /// A NIO file region of `region`, sent from the store's own descriptor. Once its write has
    /// completed, ``release(_:of:)`` lets the descriptor go without closing it; the region is
    /// held until then, which keeps the descriptor open.
    private static func fileRegion(_ region: StoredRegion) -> (FileRegion, NIOFileHandle) {
        let file = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: region.descriptor)
        return (FileRegion(fileHandle: file, readerIndex: Int(region.range.lowerBound), endIndex: Int(region.range.upperBound)), file)
    }

    private static func release(_ file: NIOFileHandle, of region: StoredRegion) {
        _ = try? file.takeDescriptorOwnership()
        withExtendedLifetime(region) {}
    }

    /// Writes `response`. A body is written part by part (cached spans as file regions sent
    /// with `sendfile`, other bytes as buffers) with at most two parts in the socket's queue,
    /// so a slow client holds the read back instead of filling memory. A failure after the
    /// head is sent cuts the connection: a player must never get wrong bytes under a success
    /// status.
    static func send(_ response: ProxyResponse, firstPart: ReadPart? = nil, on channel: any Channel, version: HTTPVersion, keepAlive: Bool) async {
        var headers = response.headers
        let keepAlive = ResponseWriter.keepsAlive(requested: keepAlive, version: version, headers: headers)
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let head = HTTPServerResponsePart.head(HTTPResponseHead(version: version, status: response.status, headers: headers))
        do {
            switch response.body {
            case .none:
                channel.write(head, promise: nil)
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            case .text(let text):
                channel.write(head, promise: nil)
                channel.write(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(string: text))), promise: nil)
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            case .bytes(let bytes):
                channel.write(head, promise: nil)
                channel.write(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(bytes: bytes))), promise: nil)
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            case .lines(let lines):
                channel.write(head, promise: nil)
                for await line in lines {
                    try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(string: line)))).get()
                }
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            case .stream(let stream, let log):
                let answeredInstead = try await writeStream(stream, log: log, head: head, firstPart: firstPart, on: channel, version: version, keepAlive: keepAlive)
                if answeredInstead { return }
            }
            if !keepAlive { try await channel.close() }
        } catch {
            channel.close(promise: nil)
        }
    }
}

extension ProxyConnectionHandler {
    /// Writes a streamed body as a ``ResponseWriter`` decides: the head with the first part,
    /// parts as they come with two at most in the socket's queue, the end marker with the
    /// last stored part; an error answer when the read fails before its first byte, a cut
    /// connection after.
    /// - Returns: whether the read failed before its first byte and was answered with its error.
    private static func writeStream(
        _ stream: ReadStream, log: RequestLog, head: HTTPServerResponsePart, firstPart: ReadPart?, on channel: any Channel, version: HTTPVersion,
        keepAlive: Bool
    ) async throws -> Bool {
        var log = log
        var writer = ResponseWriter(range: stream.range)
        var part = firstPart
        var previous: EventLoopFuture<Void>?
        var ended: EventLoopFuture<Void>?
        do {
            if part == nil { part = try await stream.nextPart() }
            while let current = part {
                if log.firstByte == nil { log.firstByte = ContinuousClock.now }
                let written = channel.eventLoop.makePromise(of: Void.self)
                let body: HTTPServerResponsePart
                let decision: ResponseWriter.PartWrite
                switch current {
                case .bytes(let chunk):
                    body = .body(.byteBuffer(chunk))
                    decision = writer.write(.bytes(count: Int64(chunk.readableBytes)))
                case .file(let region):
                    // Cached bytes go from the page cache to the socket with sendfile.
                    let (fileRegion, file) = Self.fileRegion(region)
                    written.futureResult.whenComplete { _ in Self.release(file, of: region) }
                    body = .body(.fileRegion(fileRegion))
                    decision = writer.write(.file(end: region.range.upperBound))
                }
                let end = decision.endsBody ? channel.eventLoop.makePromise(of: Void.self) : nil
                ended = end?.futureResult
                // The head, the part and the end marker reach the event loop in one hop and
                // leave in one flush.
                channel.eventLoop.execute {
                    if decision.withHead { channel.write(head, promise: nil) }
                    if let end {
                        channel.write(body, promise: written)
                        channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: end)
                    } else {
                        channel.writeAndFlush(body, promise: written)
                    }
                }
                if decision.awaitsPrevious { try await previous?.get() }
                previous = written.futureResult
                part = decision.endsBody ? nil : try await stream.nextPart()
            }
            try await previous?.get()
            let remaining = writer.allWritten(lastWriteEndedBody: ended != nil)
            if remaining.writesHead { channel.write(head, promise: nil) }  // an empty body
            // Every body byte is in the socket: the response is whole even if the client
            // hangs up before the end marker (which adds no bytes) is written.
            log.end(stream.statistics, error: nil)
            if let ended {
                stream.cancel()  // it has given its last byte; this lets go of its entry now
                try await ended.get()
            } else {
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            }
            return false
        } catch {
            stream.cancel()
            switch writer.failed(isCancellation: error is CancellationError) {
            case .answerInstead:
                let failure = ProxyResponse.failure(error)
                log.status = Int(failure.status.code)
                log.end(stream.statistics, error: error)
                await send(failure, on: channel, version: version, keepAlive: keepAlive)
                return true
            case .cut(.alreadyEnded): break
            case .cut(.whole): log.end(stream.statistics, error: nil)
            case .cut(.failed): log.end(stream.statistics, error: error)
            }
            throw error
        }
    }
}
