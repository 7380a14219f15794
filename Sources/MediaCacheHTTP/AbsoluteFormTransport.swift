// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncAlgorithms
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1
import NIOPosix

/// Plain-HTTP origin requests through an HTTP proxy as absolute-form requests (RFC 9112
/// §3.2.2: `GET http://origin/path HTTP/1.1`), which a parent cache reads, stores and answers
/// from its store. AsyncHTTPClient tunnels every request through `CONNECT`, which a cache
/// cannot see into; it still carries HTTPS. SwiftNIO's HTTP/1.1 codec frames the exchange; one
/// connection per request (a parent is near), closed when the body ends or its reader goes.
struct AbsoluteFormTransport: Sendable {
    let server: OriginProxies.Server
    let configuration: OriginFetcherConfiguration

    func send(_ request: OriginRequest) async throws -> OriginReply {
        var head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.url.absoluteString)
        head.headers = request.headers
        if !head.headers.contains(name: "Host"), let host = request.url.host {
            let bracketed = host.contains(":") ? "[\(host)]" : host
            head.headers.add(name: "Host", value: request.url.port.map { "\(bracketed):\($0)" } ?? bracketed)
        }
        if let username = server.username {
            let credentials = Data("\(username):\(server.password ?? "")".utf8).base64EncodedString()
            head.headers.replaceOrAdd(name: "Proxy-Authorization", value: "Basic " + credentials)
        }
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        let (heads, headArrived) = AsyncThrowingStream<HTTPResponseHead, any Error>.makeStream()
        // Handed over a chunk at a time: the socket is read no faster than the body is.
        let body = AsyncThrowingChannel<ByteBuffer, any Error>()
        let url = request.url
        let producer = Task {
            do {
                let channel = try await connect()
                try await channel.executeThenClose { inbound, outbound in
                    try await outbound.write(.head(head))
                    try await outbound.write(.end(nil))
                    for try await part in inbound {
                        switch part {
                        case .head(let answer) where answer.status.code / 100 == 1:
                            continue  // an interim answer (100 Continue): the real one follows
                        case .head(let answer):
                            headArrived.yield(answer)
                            headArrived.finish()
                        case .body(let chunk):
                            await body.send(chunk)
                            try Task.checkCancellation()
                        case .end:
                            body.finish()
                            return
                        }
                    }
                    throw CacheError(
                        .originTimedOut,
                        "\(url.host ?? "The origin") went silent through the proxy \(server) before its answer ended.")
                }
            } catch {
                let failure = Self.failure(error, url: url, server: server)
                headArrived.finish(throwing: failure)
                body.fail(failure)
            }
        }
        let answer: HTTPResponseHead
        do {
            answer = try await withThrowingTaskGroup(of: HTTPResponseHead?.self) { group in
                group.addTask {
                    var iterator = heads.makeAsyncIterator()
                    return try await iterator.next()
                }
                group.addTask {
                    try await Task.sleep(for: configuration.responseTimeout)
                    throw CacheError(
                        .originTimedOut,
                        "\(url.host ?? url.absoluteString) did not answer in time through the proxy \(server).")
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let head = first else {
                    throw CacheError(.originUnavailable, "The proxy \(server) closed the connection before an answer.")
                }
                return head
            }
        } catch {
            producer.cancel()
            throw error
        }
        return OriginReply(
            status: Int(answer.status.code), reason: answer.status.reasonPhrase, headers: answer.headers,
            body: Body(channel: body, owner: Owner(producer)))
    }

    /// A connection to the proxy, HTTP/1.1 framed, closed when nothing arrives for the read timeout.
    private func connect() async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart> {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.init(configuration.connectTimeout))
            .connect(host: server.host, port: server.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(
                        IdleStateHandler(readTimeout: .init(configuration.readTimeout)))
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel)
                }
            }
    }

    /// `error` as the fetcher says it: a `CacheError` as it is; a connection that failed naming
    /// the proxy; a malformed answer rejected.
    static func failure(_ error: any Error, url: URL, server: OriginProxies.Server) -> any Error {
        if error is CacheError || error is CancellationError { return error }
        if error is HTTPParserError {
            return CacheError(
                .originRejected, "The answer through the proxy \(server) is malformed (\(error)).",
                underlyingError: error)
        }
        return HTTPOriginFetcher.unreachable(url, error, through: server)
    }

    /// Cancels the request when the last copy of its body goes (read to the end or not).
    final class Owner: Sendable {
        let task: Task<Void, Never>
        init(_ task: Task<Void, Never>) { self.task = task }
        deinit { task.cancel() }
    }

    /// The body as it arrives; dropping it closes the connection.
    struct Body: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let channel: AsyncThrowingChannel<ByteBuffer, any Error>
        let owner: Owner

        func makeAsyncIterator() -> Iterator { Iterator(base: channel.makeAsyncIterator(), owner: owner) }

        struct Iterator: AsyncIteratorProtocol {
            var base: AsyncThrowingChannel<ByteBuffer, any Error>.Iterator
            let owner: Owner
            mutating func next() async throws -> ByteBuffer? { try await base.next() }
        }
    }
}

/// Closes a connection on which nothing arrived for its read timeout: the body then ends
/// early, which the transport reports as a timeout.
private final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
