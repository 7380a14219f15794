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
/// (workloads 8 and 10), `soak --floor` (every file of a folder, each by its path) and
/// `scripts/callgrind-requests.sh`.
struct FloorServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "floor-server",
        abstract: "Serve one file's ranges with a bare SwiftNIO server (the floor of compare's workloads 8 and 10).",
        shouldDisplay: false
    )

    @Option(help: "The file whose bytes every path answers with.")
    var file: String?

    @Option(help: "A folder whose files are served each by its path under it (opened before serving).")
    var root: String?

    @Option(help: "The port to listen on (0: any free port).")
    var port = 0

    func validate() throws {
        guard (file == nil) != (root == nil) else { throw ValidationError("Give --file or --root.") }
    }

    func run() throws {
        let floor: FloorAnswer
        if let file {
            floor = FloorAnswer(only: try FloorAnswer.File(path: file))
        } else {
            let folder = URL(fileURLWithPath: root!).standardizedFileURL
            guard let found = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
                throw ValidationError("--root \(folder.path) cannot be read.")
            }
            var files: [String: FloorAnswer.File] = [:]
            for case let url as URL in found
            where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                let path = url.standardizedFileURL.path
                files[String(path.dropFirst(folder.path.count))] = try FloorAnswer.File(path: path)
            }
            floor = FloorAnswer(files: files)
        }
        try Self.serve(on: MultiThreadedEventLoopGroup(numberOfThreads: 1), port: port, name: "floor") {
            floor.answer(context: $0, head: $1)
        }
    }

    /// Serves HTTP/1.1 on 127.0.0.1:`port` with NIO's own pipeline (no validation of the
    /// fields written), each request's head handed to `answer` once the request has ended;
    /// prints "`name`: listening on URL" once it listens, and runs until the listener closes.
    static func serve(
        on group: any EventLoopGroup, port: Int, name: String,
        answer: @escaping @Sendable (ChannelHandlerContext, HTTPRequestHead) -> Void
    ) throws {
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withErrorHandling: false, withOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(WholeRequests(answer))
                }
            }
            .bind(host: "127.0.0.1", port: port).wait()
        print("\(name): listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)")
        fflush(nil)
        try channel.closeFuture.wait()
    }
}

/// Hands each request's head to `answer` once the request has ended (its body unread).
private final class WholeRequests: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart

    private let answer: @Sendable (ChannelHandlerContext, HTTPRequestHead) -> Void
    private var head: HTTPRequestHead?

    init(_ answer: @escaping @Sendable (ChannelHandlerContext, HTTPRequestHead) -> Void) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            answer(context, head)
        }
    }
}

/// Answers each request with the range it asks for (`bytes=a-b`, else the whole file) of one
/// file, or of the file its path names (404 for any other path).
private struct FloorAnswer: Sendable {
    /// A file opened once, and its length.
    struct File: Sendable {
        let handle: NIOFileHandle
        let length: Int64

        init(path: String) throws {
            handle = try NIOFileHandle(_deprecatedPath: path)
            length = Int64(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0)
        }
    }

    var only: File?
    var files: [String: File] = [:]

    func answer(context: ChannelHandlerContext, head: HTTPRequestHead) {
        guard let found = only ?? files[String(head.uri.prefix { $0 != "?" })] else {
            let headers = HTTPHeaders([("Content-Length", "0")] + (head.isKeepAlive ? [] : [("Connection", "close")]))
            context.write(
                NIOAny(
                    HTTPServerResponsePart.head(
                        HTTPResponseHead(version: head.version, status: .notFound, headers: headers))),
                promise: nil)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        }
        let (file, length) = (found.handle, found.length)
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
        let response = HTTPResponseHead(version: head.version, status: status, headers: headers)
        context.write(NIOAny(HTTPServerResponsePart.head(response)), promise: nil)
        let region = FileRegion(fileHandle: file, readerIndex: Int(range.lowerBound), endIndex: Int(range.upperBound))
        context.write(NIOAny(HTTPServerResponsePart.body(.fileRegion(region))), promise: nil)
        let keepAlive = head.isKeepAlive
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { _ in
            if !keepAlive { bound.value.close(promise: nil) }
        }
    }
}
