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
/// player as they come and to a file (`pwrite` on the loop itself, as nginx writes its cache:
/// the product must not, it writes on a thread pool), the next part read once the last is
/// written to the player. No index, no checks, no log; the file is thrown away at the end.
/// `mediacache-bench cost` measures it beside `serve` and nginx: the floor under a miss's CPU
/// time and context switches on SwiftNIO and AsyncHTTPClient.
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

    func run() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = HTTPClient(
            eventLoopGroupProvider: .shared(group), configuration: .init(decompression: .disabled))
        let origin = "http://127.0.0.1:\(originPort)"
        let proxy = FloorProxyAnswer(client: client, origin: origin, folder: folder)
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

    func answer(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let forward = Forward(context: context, request: head, file: BodyFile(in: folder))
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
    private let file: BodyFile

    init(context: ChannelHandlerContext, request: HTTPRequestHead, file: BodyFile) {
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

/// A file a body is written to as it comes, deleted from its folder as soon as it is made.
private final class BodyFile: @unchecked Sendable {
    // Used on one event loop only (the answer's).
    private var descriptor: Int32
    private var offset: Int64 = 0

    init(in folder: String) {
        var template = Array((folder + "/floor-XXXXXX").utf8CString)
        descriptor = mkstemp(&template)
        if descriptor >= 0 { unlink(template) }
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
