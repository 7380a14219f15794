// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache
@testable import MediaCacheProxy

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
            // One connection, as a player's: the file stored whole, then the end of it asked
            // for; the whole answer waits, unread, in the client's socket.
            let file = try await StoredFile(h, seed: 41)
            let first = try await ChildProcess.onOwnThread {
                try file.player.ask(file.target, port: h.port, fields: "Range: bytes=\(file.start)-\r\n")
                return try file.player.waitForAnswer()
            }
            try await Self.trimThenRead(first, from: file.player, of: file, in: h)

            // Asking again says the first answer was read: the next flush cuts the file.
            let second = try await ChildProcess.onOwnThread {
                try file.player.ask(file.other, port: h.port)
                return try file.player.read(file.player.waitForAnswer())
            }
            #expect(second.body.count == 10_000)
            try await h.base.store.flush()
            let path = try #require(
                h.base.store.state.withLock { state in state.records[file.key].map { h.base.store.dataPath(of: $0) } })
            var info = stat()
            #expect(stat(path, &info) == 0 && Int64(info.st_size) == Self.keeping, "the data file is cut at the trim")
        }
    }

    /// The same answer with `Connection: close`: the proxy closes first, and the client reads
    /// from its socket after that. The file stays whole meanwhile (an idle connection's time).
    @Test func aCutWaitsForAClientTheProxyClosedOn() async throws {
        try await ProxyHarness.with { h in
            // The player that stored it asks for another file, so it no longer holds this one.
            let file = try await StoredFile(h, seed: 43)
            let other = try await ChildProcess.onOwnThread {
                try file.player.ask(file.other, port: h.port)
                return try file.player.read(file.player.waitForAnswer())
            }
            #expect(other.body.count == 10_000)
            let client = try await ChildProcess.onOwnThread { try PausedClient(port: h.port) }
            let first = try await ChildProcess.onOwnThread {
                try client.ask(
                    file.target, port: h.port, fields: "Range: bytes=\(file.start)-\r\nConnection: close\r\n")
                let sizes = try client.waitForAnswer()
                try client.waitForEnd(after: sizes)
                return sizes
            }
            try await Self.trimThenRead(first, from: client, of: file, in: h)
        }
    }

    /// A file of 1 MiB stored whole through the proxy by a player's connection, and another of
    /// 10,000 bytes it may ask for.
    struct StoredFile {
        let content: DeterministicContent
        let size = 1 << 20
        /// Where the ranges asked for start.
        let start = 300_000
        let key: CacheKey
        let player: PausedClient
        /// The request targets of the file and of the other one.
        let target: String
        let other: String

        init(_ h: ProxyHarness, seed: UInt64) async throws {
            content = DeterministicContent(seed: seed)
            h.origin.serve(.generated(length: Int64(size), seed: seed), at: "/stored.bin")
            h.origin.serve(.generated(length: 10_000, seed: seed + 1), at: "/other.bin")
            let prefix = "http://127.0.0.1:\(h.port)".count
            (target, other) = (
                String(h.url("/stored.bin").dropFirst(prefix)), String(h.url("/other.bin").dropFirst(prefix))
            )
            let port = h.port
            let player = try await ChildProcess.onOwnThread { try PausedClient(port: port) }
            let target = target
            let whole = try await ChildProcess.onOwnThread {
                try player.ask(target, port: port)
                return try player.read(player.waitForAnswer())
            }
            #expect(whole.body == Array(content.buffer(offset: 0, length: size).readableBytesView), "stored whole")
            self.player = player
            key = try #require(h.base.store.keys.first)
        }
    }

    /// The regions of connections the proxy closed first are let go once their deadline has
    /// passed, in order, and not before: the data file stays held until the last of them.
    @Test func closedConnectionsHoldTheirRegionsUntilTheirDeadlines() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory)
            let key = CacheKey("held")
            let handle = try store.openEntry(key)
            try await handle.write(ByteBuffer(repeating: 7, count: 65_536), at: 0)
            let holds = ClosedConnectionHolds()
            for deadline: UInt64 in [100, 200, 300] {
                let sent = SentRegions()
                sent.hold(try await handle.storedRegion(ByteRange(0, 65_536)))
                holds.hold(sent, until: .uptimeNanoseconds(deadline))
            }
            handle.close()
            func isHeld() -> Bool {
                store.state.withLock { state in
                    state.withRecord(key) { !isKnownUniquelyReferenced(&$0.file) } ?? false
                }
            }
            holds.letGo(now: .uptimeNanoseconds(299))
            #expect(isHeld(), "the last region is held until its deadline")
            holds.letGo(now: .uptimeNanoseconds(300))
            #expect(!isHeld(), "every region let go once its deadline passed")
            try await store.close()
        }
    }

    /// How far a trim keeps: five blocks, a cut inside any page larger than a block.
    static let keeping = Int64(5 * BlockChecksums.blockSize)

    /// Trims `file`'s entry to ``keeping`` and commits it, as eviction does (its data file is
    /// cut after the commit unless a region holds it), then reads the answer `sizes` measured
    /// from `client`: a `206` with the origin's bytes from the file's `start`.
    static func trimThenRead(
        _ sizes: (head: Int, body: Int), from client: PausedClient, of file: StoredFile, in h: ProxyHarness
    ) async throws {
        #expect(h.base.store.state.withLock { $0.trim(file.key, keeping: keeping) } > 0, "the trim let bytes go")
        try await h.base.store.flush()
        let answer = try await ChildProcess.onOwnThread { try client.read(sizes) }
        #expect(answer.head.hasPrefix("HTTP/1.1 206"), "\(answer.head)")
        let expected = Array(
            file.content.buffer(offset: Int64(file.start), length: file.size - file.start).readableBytesView)
        let wrong = zip(answer.body, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(
            answer.body.count == expected.count && wrong == nil,
            "\(answer.body.count) bytes, the first wrong at \(wrong.map { file.start + $0 } ?? -1)")
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

    /// Sends a `GET` of `target` with more header `fields` (each ending in CRLF).
    func ask(_ target: String, port: Int, fields: String = "") throws {
        try send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(fields)\r\n")
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

    /// Waits until the connection's end follows the answer `waitForAnswer()` measured, without
    /// reading it.
    func waitForEnd(after sizes: (head: Int, body: Int)) throws {
        let total = sizes.head + sizes.body
        let queued = try receive(total + 1, flags: Int32(MSG_PEEK) | Int32(MSG_WAITALL), exactly: false)
        guard queued.count == total else { throw ChildProcessError(message: "more than the answer arrived") }
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
