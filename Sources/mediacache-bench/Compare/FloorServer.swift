// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1
import NIOPosix

/// The least a SwiftNIO server does to answer a range of a file: NIO's own HTTP/1.1 server
/// pipeline and one handler that sends the range from a descriptor opened once, with
/// `sendfile`. No cache, no checks, no log, and (as the proxy) no validation of the fields it
/// writes, which NIO's pipeline does by default at about a fifth of a range's cost: the floor
/// under the proxy's per-request cost on the same framework, measured beside it by `compare`
/// (workloads 8 and 10) and `scripts/callgrind-requests.sh`.
struct FloorServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "floor-server",
        abstract: "Serve one file's ranges with a bare SwiftNIO server (the floor of compare's workloads 8 and 10).",
        shouldDisplay: false
    )

    @Option(help: "The file whose bytes every path answers with.")
    var file: String

    @Option(help: "The port to listen on (0: any free port).")
    var port = 0

    func run() throws {
        let handle = try NIOFileHandle(_deprecatedPath: file)
        let length = try Int64(FileManager.default.attributesOfItem(atPath: file)[.size] as? Int ?? 0)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withErrorHandling: false, withOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(FloorHandler(file: handle, length: length))
                }
            }
            .bind(host: "127.0.0.1", port: port).wait()
        print("floor: listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)")
        fflush(nil)
        try channel.closeFuture.wait()
    }
}

/// Answers each request with the range it asks for (`bytes=a-b`, else the whole file).
private final class FloorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let file: NIOFileHandle
    private let length: Int64
    private var head: HTTPRequestHead?

    init(file: NIOFileHandle, length: Int64) {
        self.file = file
        self.length = length
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            var range = 0..<length
            var status = HTTPResponseStatus.ok
            if let field = head.headers.first(name: "range"),
                case .single(.from(let first, let last)) = RangeSpecifier.parse(field), first < length
            {
                range = first..<min(length, (last ?? length - 1) + 1)
                status = .partialContent
            }
            var headers = HTTPHeaders([
                ("Content-Length", "\(range.count)"), ("Content-Type", "application/octet-stream"),
            ])
            if status == .partialContent {
                headers.add(name: "Content-Range", value: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(length)")
            }
            if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
                promise: nil)
            let region = FileRegion(
                fileHandle: file, readerIndex: Int(range.lowerBound), endIndex: Int(range.upperBound))
            context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: nil)
            let keepAlive = head.isKeepAlive
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { bound.value.close(promise: nil) }
            }
        }
    }
}
