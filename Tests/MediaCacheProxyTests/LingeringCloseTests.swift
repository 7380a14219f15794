// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

/// A refused request's answer is read whole by a client that goes on sending: the proxy ends
/// its output after the answer and reads and drops what still comes (a lingering close, as
/// nginx's), where closing with unread input made the kernel reset the connection, which
/// destroys an answer the client has not read yet.
@Suite(.stallLimit, .endToEnd) struct LingeringCloseTests {
    @Test func aMalformedRequestsAnswerSurvivesAClientThatKeepsSending() async throws {
        try await HostileHarness.with { h in
            let port = h.port
            let outcome = try await ChildProcess.onOwnThread { try Self.sendBadRequestThenJunk(port: port) }
            #expect(outcome.error == nil, "the connection was reset: \(outcome.error ?? "")")
            let text = String(decoding: outcome.received, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 400"), "\(text.prefix(300))")
            let responses = RawHTTPClient.parse(outcome.received)
            #expect(
                responses.count == 1 && responses[0].isComplete && responses[0].header("connection") == "close",
                "\(text.prefix(600))")
            try await h.expectStillServing()
        }
    }

    /// Sends a request the parser refuses and 256 KiB more, then reads everything: the bytes,
    /// and the error that ended the reading, if any.
    static func sendBadRequestThenJunk(port: Int) throws -> (received: [UInt8], error: String?) {
        let descriptor = try RawHTTPClient.connectedSocket(port: port)
        defer { close(descriptor) }
        let request = Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBroken header line\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The client goes on sending at once, as one uploading a body would: unread input the
        // proxy closes on is a reset.
        let junk = [UInt8](repeating: UInt8(ascii: "x"), count: 16 << 10)
        for _ in 0..<16 {
            let sent = junk.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 { break }
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += buffer[0..<count]
            } else if count == 0 {
                return (received, nil)
            } else {
                return (received, String(cString: strerror(errno)))
            }
        }
    }
}
