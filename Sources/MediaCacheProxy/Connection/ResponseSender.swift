// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import NIOCore
import NIOHTTP1

/// Writes every answer to a client connection, whatever its body (``ProxyResponse/Body``,
/// seen as ``ProxyResponse/Body/Parts``):
/// - a body at hand (none, a text, bytes, a stored region): the head, the body and the end in
///   one flush from the event loop (``writeAtOnce(_:_:on:after:)``), no task;
/// - a body that comes in parts (a read that waits for the origin or opens encrypted chunks, a
///   feed's lines): part by part as a ``ResponseWriter`` decides, with at most two parts in
///   the socket's queue, so a slow client holds the read back instead of filling memory.
///
/// Either way the connection stays open after the answer only when the client asked and the
/// answer says where it ends (``ResponseWriter/keepsAlive(requested:version:headers:)``), the
/// request's log line ends once every body byte is in the socket, and a failure after the
/// head cuts the connection: a player never gets wrong bytes under a success status.
enum ResponseSender {
    /// What the connection does once an answer is written.
    enum After: Equatable {
        case keepsOpen
        case closes
        /// Its output ends and what still comes in is read and dropped for a while: the
        /// answer to a request whose framing is lost reaches a client that is still sending
        /// (a close with unread input would reset it).
        case lingers
    }

    /// The largest body copied into its head's buffer, so both leave in one write.
    static let smallBody = 16 << 10

    /// How long a lingering connection reads and drops what still comes (nginx: 5 s per read).
    static let lingerTime: TimeAmount = .seconds(2)

    /// The head of `response` to a request of `version` that asked for keep-alive or not, and
    /// what the connection does after it.
    static func head(of response: ProxyResponse, version: HTTPVersion, keepAlive: Bool) -> (
        head: HTTPResponseHead, after: After
    ) {
        var headers = response.headers
        let keepAlive = ResponseWriter.keepsAlive(requested: keepAlive, version: version, headers: headers)
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        return (
            HTTPResponseHead(version: version, status: response.status, headers: headers),
            keepAlive ? .keepsOpen : .closes
        )
    }

    /// Sends `response`, from any thread; returns when it is written (or the connection cut).
    /// The stored regions it sends are held in `sent` once written (see ``SentRegions``).
    static func send(
        _ response: ProxyResponse, on channel: any Channel, version: HTTPVersion, keepAlive: Bool, sent: SentRegions
    ) async {
        let (head, after) = head(of: response, version: version, keepAlive: keepAlive)
        switch response.body.parts(channel.allocator) {
        case .atHand(let body):
            try? await channel.eventLoop.flatSubmit {
                writeAtOnce(head, body, on: ChannelOutput(channel: channel, sent: sent), after: after)
            }.get()
        case .later(var parts):
            do {
                let answeredInstead = try await write(
                    &parts, head: .head(head), on: channel, version: version, keepAlive: after == .keepsOpen,
                    sent: sent)
                if !answeredInstead, after != .keepsOpen { try await channel.close() }
            } catch {
                channel.close(promise: nil)
            }
        }
    }

    /// Writes `head`, `body` and the end in one flush, and then keeps the connection, closes
    /// it or lingers as `after` says. Call on the channel's event loop. A head framed by its
    /// `Content-Length` is written as bytes made here (``EncodedHead``), past NIO's encoder,
    /// when `output` offers the connection's edge; a small body then rides in the head's buffer.
    /// - Parameter output: the connection handler's context when it writes (the writes then
    ///   start at the handler rather than at the pipeline's tail), else the channel.
    /// - Returns: the end's write, which fails when a write before it failed.
    @discardableResult
    static func writeAtOnce(
        _ head: HTTPResponseHead, _ body: ProxyResponse.Body.AtHand, on output: some ResponseOutput, after: After
    ) -> EventLoopFuture<Void> {
        let channel = output.channel
        // A stored region's log line ends once its bytes are in the socket (the others ended
        // when the answer was made); its descriptor is let go then.
        let sent: SentRegion?
        let bodyData: IOData?
        switch body {
        case .empty:
            (sent, bodyData) = (nil, nil)
        case .buffer(let buffer):
            (sent, bodyData) = (nil, .byteBuffer(buffer))
        case .region(let region, var line):
            line.firstByte = ContinuousClock.now
            let (fileRegion, file) = fileRegion(region)
            (sent, bodyData) = (SentRegion(line: line, file: file, region: region), .fileRegion(fileRegion))
        }
        // Writes complete in order, and a failed one fails those after it: the end's promise
        // says how the body's write went too.
        let ended = channel.eventLoop.makePromise(of: Void.self)
        if let edge = output.edge, var encoded = EncodedHead.encode(head, allocator: channel.allocator) {
            // Framed by its length: nothing marks the body's end.
            switch bodyData {
            case .byteBuffer(var bytes)? where bytes.readableBytes <= smallBody:
                encoded.writeBuffer(&bytes)
                edge.writeAndFlush(NIOAny(IOData.byteBuffer(encoded)), promise: ended)
            case let data?:
                edge.write(NIOAny(IOData.byteBuffer(encoded)), promise: nil)
                edge.writeAndFlush(NIOAny(data), promise: ended)
            case nil:
                edge.writeAndFlush(NIOAny(IOData.byteBuffer(encoded)), promise: ended)
            }
        } else {
            output.write(.head(head), promise: nil)
            if let bodyData { output.write(.body(bodyData), promise: nil) }
            output.writeAndFlush(.end(nil), promise: ended)
        }
        ended.futureResult.whenComplete { result in
            var statistics = ReadStatistics()
            if let sent {
                release(sent.file, of: sent.region, into: output.sent)
                statistics.bytesFromCache = sent.region.range.length
            }
            switch result {
            case .success:
                sent?.line.end(statistics, error: nil)  // every body byte is in the socket
                switch after {
                case .keepsOpen: break
                case .closes: channel.close(promise: nil)
                case .lingers:
                    channel.close(mode: .output).whenFailure { _ in channel.close(promise: nil) }
                    channel.eventLoop.scheduleTask(in: lingerTime) { channel.close(promise: nil) }
                }
            case .failure(let error):
                sent?.line.end(statistics, error: error)
                channel.close(promise: nil)
            }
        }
        return ended.futureResult
    }

    /// A stored region being sent, and its log line. (An object, not a tuple: the optional
    /// tuple the completion captured was copied and destroyed through the runtime's generic
    /// value witnesses, about 4,000 instructions per cached range.)
    private final class SentRegion {
        let line: RequestLog
        let file: NIOFileHandle
        let region: StoredRegion

        init(line: RequestLog, file: NIOFileHandle, region: StoredRegion) {
            (self.line, self.file, self.region) = (line, file, region)
        }
    }

    /// A NIO file region of `region`, sent from the store's own descriptor. Once its write has
    /// completed, ``release(_:of:into:)`` lets the descriptor go without closing it; the region
    /// is held until then, which keeps the descriptor open, and after it until the client has
    /// read the bytes (``SentRegions``).
    private static func fileRegion(_ region: StoredRegion) -> (FileRegion, NIOFileHandle) {
        let file = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: region.descriptor)
        return (
            FileRegion(
                fileHandle: file, readerIndex: Int(region.range.lowerBound), endIndex: Int(region.range.upperBound)),
            file
        )
    }

    private static func release(_ file: NIOFileHandle, of region: StoredRegion, into sent: SentRegions) {
        _ = try? file.takeDescriptorOwnership()
        sent.hold(region)
    }

    /// Writes a body that comes in parts as a ``ResponseWriter`` decides: the head with the
    /// first part (a feed's at once), parts as they come with two at most in the socket's
    /// queue, the end marker with the last stored part; an error answer when the read fails
    /// before its first byte, a cut connection after.
    /// - Returns: whether the read failed before its first byte and was answered with its error.
    private static func write(
        _ parts: inout ProxyResponse.Body.LaterParts, head: HTTPServerResponsePart, on channel: any Channel,
        version: HTTPVersion, keepAlive: Bool, sent: SentRegions
    ) async throws -> Bool {
        var log = parts.log
        var writer = parts.writer
        var previous: EventLoopFuture<Void>?
        var ended: EventLoopFuture<Void>?
        if writer.writesHeadFirst { try await channel.writeAndFlush(head).get() }
        do {
            while ended == nil, let current = try await parts.next() {
                if log?.firstByte == nil { log?.firstByte = ContinuousClock.now }
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
                    written.futureResult.whenComplete { _ in Self.release(file, of: region, into: sent) }
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
            }
            try await previous?.get()
            let remaining = writer.allWritten(lastWriteEndedBody: ended != nil)
            if remaining.writesHead { channel.write(head, promise: nil) }  // an empty body
            // Every body byte is in the socket: the response is whole even if the client
            // hangs up before the end marker (which adds no bytes) is written.
            log?.end(parts.statistics, error: nil)
            if let ended {
                parts.cancel()  // it has given its last byte; this lets go of its entry now
                try await ended.get()
            } else {
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            }
            return false
        } catch {
            parts.cancel()
            switch writer.failed(isCancellation: error is CancellationError) {
            case .answerInstead:
                let failure = ProxyResponse.failure(error)
                log?.status = Int(failure.status.code)
                log?.end(parts.statistics, error: error)
                await send(failure, on: channel, version: version, keepAlive: keepAlive, sent: sent)
                return true
            case .cut(.alreadyEnded): break
            case .cut(.whole): log?.end(parts.statistics, error: nil)
            case .cut(.failed): log?.end(parts.statistics, error: error)
            }
            throw error
        }
    }
}

/// Where an answer's parts are written (``ResponseSender/writeAtOnce(_:_:on:after:)``).
protocol ResponseOutput {
    var channel: any Channel { get }
    /// The pipeline's first handler's context, when bytes may be written there (past NIO's
    /// encoder: see ``EncodedHead``).
    var edge: ChannelHandlerContext? { get }
    /// Where the stored regions written are held until the client has read them.
    var sent: SentRegions { get }
    func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?)
    func writeAndFlush(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?)
}

/// The connection handler's context, its writes starting at the handler, and its edge.
struct ConnectionOutput: ResponseOutput {
    let context: ChannelHandlerContext
    let edge: ChannelHandlerContext?
    let sent: SentRegions
    var channel: any Channel { context.channel }

    func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) {
        context.write(NIOAny(part), promise: promise)
    }

    func writeAndFlush(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) {
        context.writeAndFlush(NIOAny(part), promise: promise)
    }
}

/// A channel, written from its pipeline's tail.
struct ChannelOutput: ResponseOutput {
    let channel: any Channel
    let sent: SentRegions
    var edge: ChannelHandlerContext? { nil }

    func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) {
        channel.write(part, promise: promise)
    }

    func writeAndFlush(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) {
        channel.writeAndFlush(part, promise: promise)
    }
}
