// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// A head the proxy encodes itself (``EncodedHead``) is byte for byte the one NIO's
/// `HTTPResponseEncoder` writes; a head whose framing NIO's encoder would change is left to it.
@Suite(.stallLimit) struct EncodedHeadTests {
    /// What NIO's encoder writes for `head`.
    private func nioBytes(_ head: HTTPResponseHead) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: HTTPResponseEncoder())
        defer { _ = try? channel.finish() }
        try channel.writeOutbound(HTTPServerResponsePart.head(head))
        var bytes: [UInt8] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
        }
        return bytes
    }

    private func encoded(_ head: HTTPResponseHead) -> [UInt8]? {
        EncodedHead.encode(head, allocator: ByteBufferAllocator()).map { Array($0.readableBytesView) }
    }

    @Test func randomHeadsFramedByTheirLengthAreNIOs() throws {
        var random = SystemRandomNumberGenerator()
        let names = ["ETag", "Content-Type", "Cache-Status", "X-Odd_Name~1", "a", "Last-Modified", "Vary", "Age"]
        let statuses: [HTTPResponseStatus] = [
            .ok, .partialContent, .notFound, .rangeNotSatisfiable, .custom(code: 299, reasonPhrase: "Odd Réason"),
        ]
        for round in 0..<2_000 {
            var headers = HTTPHeaders()
            let lengthAt = Int.random(in: 0...6, using: &random)
            for index in 0..<Int.random(in: 0...12, using: &random) {
                if index == lengthAt {
                    headers.add(
                        name: ["Content-Length", "content-length", "CONTENT-LENGTH"].randomElement(using: &random)!,
                        value: "\(UInt32.random(in: 0...UInt32.max, using: &random))")
                }
                let value =
                    String(
                        (0..<Int.random(in: 0...80, using: &random)).map { _ in
                            Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &random)))
                        }) + (Bool.random(using: &random) ? "é" : "")
                headers.add(name: names.randomElement(using: &random)!, value: value)
            }
            let version: HTTPVersion = Bool.random(using: &random) ? .http1_1 : .http1_0
            let head = HTTPResponseHead(
                version: version, status: statuses.randomElement(using: &random)!, headers: headers)
            let mine = encoded(head)
            if headers.contains(name: "content-length") {
                let expected = try nioBytes(head)
                #expect(mine == expected, "round \(round): \(String(decoding: mine ?? [], as: UTF8.self))")
            } else {
                #expect(mine == nil, "round \(round): no length, so NIO frames it")
            }
        }
    }

    @Test func framingNIOWouldChangeIsLeftToIt() {
        let length: HTTPHeaders = ["Content-Length": "10"]
        #expect(encoded(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Type": "a/b"])) == nil)
        #expect(
            encoded(
                HTTPResponseHead(
                    version: .http1_1, status: .ok, headers: ["Content-Length": "10", "Transfer-Encoding": "chunked"]))
                == nil)
        #expect(encoded(HTTPResponseHead(version: .http1_1, status: .notModified, headers: length)) == nil)
        #expect(encoded(HTTPResponseHead(version: .http1_1, status: .noContent, headers: length)) == nil)
        #expect(encoded(HTTPResponseHead(version: .http2, status: .ok, headers: length)) == nil)
        #expect(
            encoded(HTTPResponseHead(version: .http1_1, status: .ok, headers: length))
                == Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n".utf8))
    }
}
