// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// Bytes sent with `sendfile` and not yet read by the client are still the data file's pages:
/// a trim's cut of that file must wait until the client has read them.
@Suite(.stallLimit, .endToEnd) struct SentRegionsTests {
    /// A client asks for the end of a stored file and leaves the answer in its socket, as a
    /// paused player does; meanwhile eviction trims the entry to its start and commits, after
    /// which the store cuts the file. The client then reads the origin's bytes, not the zeros a
    /// cut writes in place over the page it straddles (on 0c7f3af the nginx load test got an
    /// open range with 64 KiB of zeros, once in CI and at every round of a longer run here).
    /// Once the client asks again, the file is cut at the next flush.
    @Test func aCutWaitsUntilTheClientHasReadWhatWasSent() async throws {
        try await ProxyHarness.with { h in
            let size = 1 << 20
            let content = DeterministicContent(seed: 41)
            h.origin.serve(.generated(length: Int64(size), seed: 41), at: "/sent.bin")
            h.origin.serve(.generated(length: 10_000, seed: 42), at: "/other.bin")
            // One connection, as a player's: the file stored whole, then the end of it asked for.
            let client = try await ChildProcess.onOwnThread { try PausedClient(port: h.port) }
            let target = String(h.url("/sent.bin").dropFirst("http://127.0.0.1:\(h.port)".count))
            let whole = try await ChildProcess.onOwnThread {
                try client.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\n\r\n")
                return try client.read(client.waitForAnswer())
            }
            #expect(whole.body == Array(content.buffer(offset: 0, length: size).readableBytesView), "stored whole")
            let key = try #require(h.base.store.keys.first)
            let start = 300_000
            let first = try await ChildProcess.onOwnThread {
                try client.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\nRange: bytes=\(start)-\r\n\r\n")
                return try client.waitForAnswer()
            }
            // The whole answer waits, unread, in the client's socket. The entry is trimmed to
            // its first five blocks (a cut inside any page larger than a block) and committed.
            let keeping = Int64(5 * BlockChecksums.blockSize)
            let freed = h.base.store.state.withLock { $0.trim(key, keeping: keeping) }
            #expect(freed > 0, "the trim let bytes go")
            try await h.base.store.flush()

            let answer = try await ChildProcess.onOwnThread { try client.read(first) }
            #expect(answer.head.hasPrefix("HTTP/1.1 206"), "\(answer.head)")
            let expected = Array(content.buffer(offset: Int64(start), length: size - start).readableBytesView)
            let wrong = zip(answer.body, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            #expect(
                answer.body.count == expected.count && wrong == nil,
                "\(answer.body.count) bytes, the first wrong at \(wrong.map { start + $0 } ?? -1)")

            // Asking again says the first answer was read: the next flush cuts the file.
            let other = String(h.url("/other.bin").dropFirst("http://127.0.0.1:\(h.port)".count))
            let second = try await ChildProcess.onOwnThread {
                try client.send("GET \(other) HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\n\r\n")
                return try client.read(client.waitForAnswer())
            }
            #expect(second.body.count == 10_000)
            try await h.base.store.flush()
            let path = try #require(
                h.base.store.state.withLock { state in state.records[key].map { h.base.store.dataPath(of: $0) } })
            var info = stat()
            #expect(stat(path, &info) == 0 && Int64(info.st_size) == keeping, "the data file is cut at the trim")
        }
    }
}

/// A client on a plain socket that sends a request and reads the answer only when told, its
/// receive buffer large enough to hold a whole answer meanwhile. Its calls block: run them on
/// a thread of their own.
final class PausedClient: Sendable {
    private let descriptor: CInt

    struct Answer: Sendable {
        var head: String
        var body: [UInt8]
    }

    init(port: Int) throws {
        descriptor = try RawHTTPClient.connectedSocket(port: port) { descriptor in
            var buffer: CInt = 8 << 20
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<CInt>.size))
            var timeout = timeval(tv_sec: 60, tv_usec: 0)  // a failure ends the test, not hangs it
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    deinit {
        close(descriptor)
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw ChildProcessError(message: "cannot send the request") }
    }

    /// Waits until a whole answer is in the socket, without reading it; returns its head's
    /// length and its body's (from `Content-Length`).
    func waitForAnswer() throws -> (head: Int, body: Int) {
        var wanted = 1
        while true {
            _ = try receive(wanted, flags: Int32(MSG_PEEK) | Int32(MSG_WAITALL))  // waits for them
            let queued = try receive(64 << 10, flags: Int32(MSG_PEEK), exactly: false)
            let separator = Array("\r\n\r\n".utf8)
            if let end = queued.indices.dropLast(3).first(where: { Array(queued[$0..<$0 + 4]) == separator }) {
                let head = String(decoding: queued[..<end], as: UTF8.self).lowercased()
                guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                else { throw ChildProcessError(message: "no Content-Length in \(head)") }
                _ = try receive(end + 4 + length, flags: Int32(MSG_PEEK) | Int32(MSG_WAITALL))
                return (end + 4, length)
            }
            wanted = queued.count + 1  // more than is queued: waits for the rest of the head
        }
    }

    /// Reads the answer `waitForAnswer()` measured.
    func read(_ sizes: (head: Int, body: Int)) throws -> Answer {
        let bytes = try receive(sizes.head + sizes.body, flags: Int32(MSG_WAITALL))
        return Answer(
            head: String(decoding: bytes[..<sizes.head], as: UTF8.self), body: Array(bytes[sizes.head...]))
    }

    /// `count` bytes from the socket (with `exactly` false: what is there, at most `count`).
    private func receive(_ count: Int, flags: Int32, exactly: Bool = true) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, count, flags) }
        guard received > 0, !exactly || received == count else {
            throw ChildProcessError(
                message: "received \(received) of \(count) bytes: \(String(cString: strerror(errno)))")
        }
        return Array(buffer[..<received])
    }
}
