// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import NIOPosix

/// Sends bytes no well-behaved client would send, over a plain TCP connection, and reads
/// back what the server answers: for the hostile-client tests.
struct RawHTTPClient {
    /// One response as it came off the wire.
    struct Response {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        /// Whether the body is as long as `Content-Length` said.
        var isComplete: Bool

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    /// What a connection produced: the responses in order, and whether the server closed it.
    struct Exchange {
        var responses: [Response]
        var closedByServer: Bool
        var first: Response? { responses.first }
    }

    let port: Int

    /// Opens a connection, sends each of `writes` (pausing `pause` between them), then reads
    /// until `expectedResponses` complete responses arrived or the server closes, at most
    /// `timeout`. `closedByServer` is true only if the server closed before that.
    func exchange(
        _ writes: [String], pause: Duration = .zero, expectedResponses: Int = 1, timeout: Duration = .seconds(15)
    ) async throws -> Exchange {
        try await exchange(
            writes.map { Array($0.utf8) }, pause: pause, expectedResponses: expectedResponses, timeout: timeout)
    }

    func exchange(
        _ writes: [[UInt8]], pause: Duration = .zero, expectedResponses: Int = 1, timeout: Duration = .seconds(15)
    ) async throws -> Exchange {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await withThrowingTaskGroup(of: Exchange?.self) { group in
                group.addTask {
                    for (index, bytes) in writes.enumerated() {
                        if index > 0, pause > .zero { try await Task.sleep(for: pause) }
                        do {
                            try await outbound.write(ByteBuffer(bytes: bytes))
                        } catch {
                            break  // the server closed the connection: nothing more to send
                        }
                    }
                    try await Task.sleep(for: timeout)
                    return nil
                }
                group.addTask {
                    var received: [UInt8] = []
                    var closed = true
                    do {
                        for try await chunk in inbound {
                            received += chunk.readableBytesView
                            if Self.parse(received).count >= expectedResponses
                                && Self.parse(received).allSatisfy(\.isComplete)
                            {
                                closed = false
                                break
                            }
                        }
                    } catch {
                        closed = true  // a reset is a close too
                    }
                    if Task.isCancelled { closed = false }  // our own time limit, not the server
                    return Exchange(responses: Self.parse(received), closedByServer: closed)
                }
                let first = try await group.next()!
                group.cancelAll()
                if let first { return first }
                let second = try await group.next()!
                return second ?? Exchange(responses: [], closedByServer: false)
            }
        }
    }

    /// Responses in `bytes`: each a status line, headers, and a `Content-Length` body (the
    /// last one possibly cut short).
    static func parse(_ bytes: [UInt8]) -> [Response] {
        var responses: [Response] = []
        var rest = bytes[...]
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while !rest.isEmpty {
            guard let end = rest.firstRange(of: separator) else { break }
            let headText = String(decoding: rest[rest.startIndex..<end.lowerBound], as: UTF8.self)
            var lines = headText.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            guard statusLine.count >= 2, let status = Int(statusLine[1]) else { break }
            let headers = lines.compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
            let bodyStart = end.upperBound
            let available = rest.endIndex - bodyStart
            let body = Array(rest[bodyStart..<(bodyStart + min(length, available))])
            responses.append(Response(status: status, headers: headers, body: body, isComplete: available >= length))
            rest = rest[(bodyStart + min(length, available))...]
        }
        return responses
    }

    /// A blocking TCP socket connected to 127.0.0.1 at `port`, set up by `prepare` before it
    /// connects (a receive buffer's size counts only then). Close it when done.
    static func connectedSocket(port: Int, prepare: (CInt) -> Void = { _ in }) throws -> CInt {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ChildProcessError(message: "no socket") }
        prepare(descriptor)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw ChildProcessError(message: "cannot connect: \(reason)")
        }
        return descriptor
    }
}
