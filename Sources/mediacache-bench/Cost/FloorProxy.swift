// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The least a caching proxy on this project's stack does for a miss: NIO's HTTP/1.1 server
/// pipeline, and for each request one AsyncHTTPClient request to the origin on the same event
/// loop (its delegate interface, no task), the origin's head and body parts written to the
/// player as they come and to a file, the next part read once the last is written to the
/// player. No index, no checks, no log; the file is thrown away at the end. The file is written
/// with `pwrite` on the loop itself, as nginx writes its cache; with `--writes-on-pool` it is
/// made, written and closed on NIO's thread pool, one job at a time, each taking every part
/// that came while the one before it ran, as the product must (its event loops and Swift's
/// cooperative pool never block on a file). `mediacache-bench cost` measures both beside
/// `serve` and nginx: the floor under a miss's CPU time and context switches on SwiftNIO and
/// AsyncHTTPClient, and the floor of a proxy that keeps this project's rule on blocking calls.
struct FloorProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "floor-proxy",
        abstract:
            "Forward each request's path to an origin with a bare SwiftNIO and AsyncHTTPClient proxy (cost's floor).",
        shouldDisplay: false
    )

    @Option(help: "The origin's port on 127.0.0.1; a request for /PATH is forwarded to it as /PATH.")
    var originPort: Int

    @Option(help: "The port to listen on (0: any free port).")
    var port = 0

    @Option(help: "The folder the body's files are written in (deleted as they are made).")
    var folder = NSTemporaryDirectory()

    @Flag(help: "Make, write and close each body's file on NIO's thread pool, not on the event loop.")
    var writesOnPool = false

    func run() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = HTTPClient.Configuration(decompression: .disabled)
        configuration.tracing.tracer = nil  // as the product's, when the app bootstrapped no tracer
        let client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
        let origin = "http://127.0.0.1:\(originPort)"
        let proxy = FloorProxyAnswer(client: client, origin: origin, folder: folder, onPool: writesOnPool)
        try FloorServerCommand.serve(on: group, port: port, name: "floor-proxy") {
            proxy.answer(context: $0, head: $1)
        }
    }
}

/// Sends each request on to the origin, with its `Range` field, and the answer back.
private struct FloorProxyAnswer: Sendable {
    let client: HTTPClient
    let origin: String
    let folder: String
    let onPool: Bool

    func answer(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let file: any BodySink =
            onPool ? PooledBodyFile(in: folder, eventLoop: context.eventLoop) : BodyFile(in: folder)
        let forward = Forward(context: context, request: head, file: file)
        do {
            var request = try HTTPClient.Request(url: origin + head.uri)
            if let range = head.headers.first(name: "range") { request.headers.add(name: "Range", value: range) }
            _ = client.execute(
                request: request, delegate: forward, eventLoop: .delegateAndChannel(on: context.eventLoop))
        } catch {
            forward.didReceiveError(task: nil, error)
        }
    }
}

/// One origin answer written to the player's channel as it comes (every call on its loop).
private final class Forward: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    private let context: NIOLoopBound<ChannelHandlerContext>
    private let version: HTTPVersion
    private let keepAlive: Bool
    private let answered: NIOLoopBoundBox<Bool>
    private let file: any BodySink

    init(context: ChannelHandlerContext, request: HTTPRequestHead, file: any BodySink) {
        self.context = NIOLoopBound(context, eventLoop: context.eventLoop)
        version = request.version
        keepAlive = request.isKeepAlive
        answered = NIOLoopBoundBox(false, eventLoop: context.eventLoop)
        self.file = file
    }

    private func write(_ part: HTTPServerResponsePart) -> EventLoopFuture<Void> {
        context.value.writeAndFlush(NIOAny(part))
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ received: HTTPResponseHead) -> EventLoopFuture<Void> {
        answered.value = true
        var headers = HTTPHeaders()
        for (name, value) in received.headers
        where !["connection", "keep-alive", "transfer-encoding"].contains(name.lowercased()) {
            headers.add(name: name, value: value)
        }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.value.write(
            NIOAny(
                HTTPServerResponsePart.head(
                    HTTPResponseHead(version: version, status: received.status, headers: headers))),
            promise: nil)
        return context.value.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        file.append(buffer)
        return write(.body(.byteBuffer(buffer)))
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        file.close()
        let (context, keepAlive) = (context, keepAlive)
        write(.end(nil)).whenComplete { _ in
            if !keepAlive { context.value.close(promise: nil) }
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>?, _ error: any Error) {
        file.close()
        guard !answered.value else {
            context.value.close(promise: nil)
            return
        }
        answered.value = true
        let headers = HTTPHeaders([("Content-Length", "0"), ("Connection", "close")])
        context.value.write(
            NIOAny(
                HTTPServerResponsePart.head(HTTPResponseHead(version: version, status: .badGateway, headers: headers))),
            promise: nil)
        let context = context
        write(.end(nil)).whenComplete { _ in context.value.close(promise: nil) }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        didReceiveError(task: Optional(task), error)
    }
}

/// Where a body's parts are kept as they come (every call on the answer's loop).
private protocol BodySink: Sendable {
    func append(_ buffer: ByteBuffer)
    func close()
}

/// Makes a file in `folder` and unlinks it at once: its descriptor, or -1.
private func makeUnlinkedFile(in folder: String) -> Int32 {
    var template = Array((folder + "/floor-XXXXXX").utf8CString)
    let descriptor = mkstemp(&template)
    if descriptor >= 0 { unlink(template) }
    return descriptor
}

/// A file a body is written to as it comes, on the loop, deleted from its folder as soon as it is made.
private final class BodyFile: BodySink, @unchecked Sendable {
    // Used on one event loop only (the answer's).
    private var descriptor: Int32
    private var offset: Int64 = 0

    init(in folder: String) {
        descriptor = makeUnlinkedFile(in: folder)
    }

    func append(_ buffer: ByteBuffer) {
        guard descriptor >= 0 else { return }
        buffer.withUnsafeReadableBytes { bytes in
            if pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(offset)) == bytes.count {
                offset += Int64(bytes.count)
            }
        }
    }

    func close() {
        guard descriptor >= 0 else { return }
        _ = Foundation.close(descriptor)
        descriptor = -1
    }
}

/// A file a body is written to on NIO's thread pool, with as few trips there as the parts'
/// pace allows: one job at a time, each making the file if it is not made yet, writing every
/// part that came while the one before ran, and closing the file once the body has ended.
private final class PooledBodyFile: BodySink {
    private struct State {
        var descriptor: Int32?
        var offset: Int64 = 0
        var pending: [ByteBuffer] = []
        var running = false
        var ended = false
    }
    private let eventLoop: any EventLoop
    private let folder: String
    private let state: NIOLoopBoundBox<State>

    init(in folder: String, eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.folder = folder
        state = NIOLoopBoundBox(State(), eventLoop: eventLoop)
    }

    func append(_ buffer: ByteBuffer) {
        state.value.pending.append(buffer)
        runNext()
    }

    func close() {
        state.value.ended = true
        runNext()
    }

    /// Submits the next job, unless one runs or there is nothing to do (on the loop).
    private func runNext() {
        var current = state.value
        guard !current.running, !current.pending.isEmpty || (current.ended && current.descriptor != -1) else { return }
        let (parts, offset, ends, folder) = (current.pending, current.offset, current.ended, folder)
        current.offset += Int64(parts.reduce(0) { $0 + $1.readableBytes })
        current.pending = []
        current.running = true
        let known = current.descriptor
        state.value = current
        NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { () -> Int32 in
            let descriptor = known ?? makeUnlinkedFile(in: folder)
            var at = offset
            for part in parts where descriptor >= 0 {
                _ = part.withUnsafeReadableBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(at)) }
                at += Int64(part.readableBytes)
            }
            guard ends else { return descriptor }
            if descriptor >= 0 { _ = Foundation.close(descriptor) }
            return -1
        }.whenComplete { result in
            self.state.value.descriptor = (try? result.get()) ?? -1
            self.state.value.running = false
            self.runNext()
        }
    }
}
