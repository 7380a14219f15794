// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache
import MediaCacheTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// The proxy's connection without a socket: its whole pipeline (timers, HTTP codec,
/// pipelining, the connection handler) on an in-memory channel, over a read path whose
/// origin is scripted. A stored range is answered on the event loop within the write that
/// brought the request (`EmbeddedChannel`); answers that need the origin run on a task, so
/// they use the thread-safe `NIOAsyncTestingChannel`.
@Suite(.stallLimit) struct ProxyConnectionTests {
    static let url = URL(string: "https://scripted.example/a.mp4")!
    static let size: Int64 = 300_000
    static let content = DeterministicContent(seed: 7)

    static func request(_ range: String? = nil, version: String = "HTTP/1.1", extra: String = "") -> ByteBuffer {
        let target = "/?url=" + (url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        var text = "GET \(target) \(version)\r\nHost: 127.0.0.1:8080\r\n"
        if let range { text += "Range: \(range)\r\n" }
        return ByteBuffer(string: text + "\r\n" + extra)
    }

    static func handler(_ h: ScriptedHarness) -> ProxyHandler {
        var configuration = ProxyConfiguration()
        configuration.port = 8080
        configuration.logger = Logger(label: "proxy-connection-test", factory: { _ in SwiftLogNoOpLogHandler() })
        return ProxyHandler(reader: h.reader, configuration: configuration)
    }

    /// Stores the whole file through the read path (the scripted origin answers at once).
    static func storeWholeFile(_ h: ScriptedHarness) async throws {
        h.origin.serve(url, length: size, seed: 7)
        var read: Int64 = 0
        for try await chunk in try await h.reader.read(url) { read += Int64(chunk.readableBytes) }
        #expect(read == size)
        try await waitUntil { h.store.spans(for: h.store.key(for: url)).contains(ByteRange(0, size)) }
    }

    static func configure(_ channel: any Channel, _ handler: ProxyHandler) throws {
        try channel.pipeline.syncOperations.addHandler(FileRegionReader())
        try ProxyPipeline.configure(
            channel, handler: handler, configuration: handler.configuration, connections: ConnectionRegistry())
    }

    /// A stored range is answered within the write of its request: head, body and end are
    /// out before the channel's loop runs anything else, with no task.
    @Test func aStoredRangeIsAnsweredOnTheEventLoopAtOnce() async throws {
        try await ScriptedHarness.with(answersWhole: true) { h in
            try await Self.storeWholeFile(h)
            let requests = h.origin.exchanges.count
            let channel = EmbeddedChannel()
            channel.localAddress = try SocketAddress(ipAddress: "127.0.0.1", port: 8080)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_000)).wait()
            try Self.configure(channel, Self.handler(h))
            try channel.writeInbound(Self.request("bytes=1000-65999"))
            let responses = RawHTTPClient.parse(try Self.outbound(of: channel))
            #expect(responses.count == 1)
            let response = try #require(responses.first)
            #expect(
                response.status == 206 && response.header("content-range") == "bytes 1000-65999/\(Self.size)"
                    && response.isComplete)
            #expect(
                Self.content.firstMismatch(in: ByteBuffer(bytes: response.body), at: 1000) == nil
                    && response.body.count == 65_000)
            // A second request on the kept connection, again at once.
            try channel.writeInbound(Self.request("bytes=-10"))
            let second = try #require(RawHTTPClient.parse(try Self.outbound(of: channel)).first)
            #expect(
                second.status == 206
                    && Self.content.firstMismatch(in: ByteBuffer(bytes: second.body), at: Self.size - 10) == nil)
            #expect(channel.isActive && h.origin.exchanges.count == requests)
            _ = try channel.finish(acceptAlreadyClosed: true)
        }
    }

    /// A kept connection's requests for one URL are checked once, then only their range is
    /// read again; any other difference (a `Host`, a site, a bad range) is checked whole.
    @Test func aRepeatedRequestSkipsOnlyChecksWhoseInputsAreTheSame() async throws {
        try await ScriptedHarness.with(answersWhole: true) { h in
            try await Self.storeWholeFile(h)
            // Refusals are answered on a task: a channel that is safe from other threads.
            let channel = try await Self.connectedChannel(h)
            func answer(_ range: String?, extra: [String] = [], host: String = "127.0.0.1:8080") async throws
                -> RawHTTPClient.Response
            {
                let target =
                    "/?url="
                    + (Self.url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
                let fields = ["Host: \(host)"] + (range.map { ["Range: \($0)"] } ?? []) + extra
                try await channel.writeInbound(
                    ByteBuffer(string: "GET \(target) HTTP/1.1\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"))
                var received: [UInt8] = []
                while RawHTTPClient.parse(received).first?.isComplete != true {
                    received += try await Self.bytes(of: try await channel.waitForOutboundWrite(as: IOData.self))
                }
                return RawHTTPClient.parse(received)[0]
            }
            for (first, last) in [(0, 9), (1000, 65_999), (299_990, 299_999)] as [(Int64, Int64)] {
                let response = try await answer("bytes=\(first)-\(last)")
                #expect(
                    response.status == 206 && response.header("content-range") == "bytes \(first)-\(last)/\(Self.size)")
                #expect(
                    Self.content.firstMismatch(in: ByteBuffer(bytes: response.body), at: first) == nil
                        && response.body.count == Int(last - first + 1))
            }
            #expect(try await answer("bytes=5-1").status == 400)  // the range is read again, and refused
            #expect(try await answer("bytes=0-9", host: "rebound.example:8080").status == 421)
            #expect(try await answer("bytes=0-9", extra: ["Sec-Fetch-Site: cross-site"]).status == 403)
            let whole = try await answer(nil)
            #expect(whole.status == 200 && whole.body.count == Int(Self.size))
            #expect(Self.content.firstMismatch(in: ByteBuffer(bytes: whole.body), at: 0) == nil)
            _ = try await channel.finish(acceptAlreadyClosed: true)
        }
    }

    /// A new connection repeating a request another connection had checked reuses those
    /// checks (a player that opens a connection per seek); one that differs is checked whole.
    @Test func aNewConnectionRepeatingARequestReusesOnlyIdenticalChecks() async throws {
        try await ScriptedHarness.with(answersWhole: true) { h in
            try await Self.storeWholeFile(h)
            let handler = Self.handler(h)
            func answer(_ range: String, extra: [String] = [], host: String = "127.0.0.1:8080") async throws
                -> RawHTTPClient.Response
            {
                let channel = NIOAsyncTestingChannel()  // a new connection each time
                try await channel.testingEventLoop.executeInContext { try Self.configure(channel, handler) }
                try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_000)).get()
                let target =
                    "/?url="
                    + (Self.url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
                let fields = ["Host: \(host)", "Range: \(range)"] + extra
                try await channel.writeInbound(
                    ByteBuffer(string: "GET \(target) HTTP/1.1\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"))
                var received: [UInt8] = []
                while RawHTTPClient.parse(received).first?.isComplete != true {
                    received += try await Self.bytes(of: try await channel.waitForOutboundWrite(as: IOData.self))
                }
                _ = try await channel.finish(acceptAlreadyClosed: true)
                return RawHTTPClient.parse(received)[0]
            }
            for (first, last) in [(0, 9), (5000, 69_999), (299_000, 299_999)] as [(Int64, Int64)] {
                let response = try await answer("bytes=\(first)-\(last)")
                #expect(
                    response.status == 206 && response.header("content-range") == "bytes \(first)-\(last)/\(Self.size)")
                #expect(
                    Self.content.firstMismatch(in: ByteBuffer(bytes: response.body), at: first) == nil
                        && response.body.count == Int(last - first + 1))
            }
            #expect(try await answer("bytes=0-9", host: "rebound.example:8080").status == 421)
            #expect(try await answer("bytes=0-9", extra: ["Sec-Fetch-Site: cross-site"]).status == 403)
            #expect(try await answer("bytes=9-0").status == 400)
            #expect(try await answer("bytes=10-19").status == 206)
        }
    }

    /// The checks shared across connections keep the last 16 that passed.
    @Test func theSharedChecksKeepTheLastSixteen() throws {
        let shared = RepeatedRequestCheck.Shared()
        let url = try #require(URL(string: "https://example.com/a.mp4"))
        let checked = ProxyRouter.CheckedRequest(
            url: url, proxy: ProxyTarget(url),
            asked: ProxyRouter.Asked(
                url: url, specifier: nil, firstByte: 0, length: nil, forwarded: [],
                conditions: PlayerConditions(HTTPHeaders())))
        func head(_ index: Int) -> HTTPRequestHead {
            HTTPRequestHead(
                version: .http1_1, method: .GET, uri: "/?url=\(index)",
                headers: ["Host": "127.0.0.1:8080", "Range": "bytes=\(index)-"])
        }
        for index in 0..<20 { shared.add(RepeatedRequestCheck.Remembered(head(index), 8080, checked)) }
        #expect((0..<4).allSatisfy { shared.find(head($0), 8080) == nil })
        #expect((4..<20).allSatisfy { shared.find(head($0), 8080) != nil })
        #expect(shared.find(head(10), 8081) == nil)  // another port
        var other = head(10)
        other.headers.add(name: "Cookie", value: "a=b")
        #expect(shared.find(other, 8080) == nil)
    }

    @Test func fieldsAreTheSameApartFromRangeExactlyWhenTheModelSaysSo() {
        var random = SplitMix(seed: 11)
        let names = ["Host", "Range", "range", "RANGE", "User-Agent", "Cookie", "Sec-Fetch-Site", "Rang", "X-Range"]
        let values = ["a", "b", "bytes=0-1", ""]
        func fields() -> [(String, String)] {
            (0..<Int(random.next() % 5)).map { _ in
                (names[Int(random.next() % UInt64(names.count))], values[Int(random.next() % UInt64(values.count))])
            }
        }
        var same = 0
        for _ in 0..<5_000 {
            let a = fields()
            // Often b is a with its Range fields changed, moved or dropped; else another list.
            var b = random.next() % 2 == 0 ? a : fields()
            if random.next() % 2 == 0 { b = b.filter { $0.0.lowercased() != "range" } + [("Range", "bytes=9-")] }
            let model =
                a.filter { $0.0.lowercased() != "range" }.map { "\($0.0):\($0.1)" }
                == b.filter { $0.0.lowercased() != "range" }.map { "\($0.0):\($0.1)" }
            #expect(
                RepeatedRequestCheck.sameFieldsApartFromRange(HTTPHeaders(a), HTTPHeaders(b)) == model, "\(a) vs \(b)")
            if model { same += 1 }
        }
        #expect(same > 1_000 && same < 4_000)
    }

    /// A request the parser refuses gets `400` with a reason, and the connection closes.
    @Test func aMalformedRequestGets400AndTheConnectionCloses() async throws {
        try await ScriptedHarness.with(answersWhole: true) { h in
            let channel = EmbeddedChannel()
            channel.localAddress = try SocketAddress(ipAddress: "127.0.0.1", port: 8080)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_000)).wait()
            try Self.configure(channel, Self.handler(h))
            #expect(throws: (any Error).self) {
                try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n"))
            }
            let response = try #require(RawHTTPClient.parse(try Self.outbound(of: channel)).first)
            #expect(response.status == 400 && response.header("connection") == "close" && response.isComplete)
            #expect(!channel.isActive)
        }
    }

    /// A miss goes to the origin on a task: one origin request for the range, the bytes the
    /// origin holds, and a parser error that arrived meanwhile is answered only after the
    /// answer is whole, then the connection closes.
    @Test func aMissIsAnsweredWholeBeforeAParserErrorThatArrivedDuringIt() async throws {
        try await ScriptedHarness.with { h in
            h.origin.serve(Self.url, length: Self.size, seed: 7)
            let channel = try await Self.connectedChannel(h)
            var bytes = Self.request("bytes=5000-104999")
            bytes.writeString("NOT HTTP\r\n\r\n")
            _ = try? await channel.writeInbound(bytes)  // the decoder's error, held until the answer ends
            try await waitUntil { !h.origin.exchanges.isEmpty }
            #expect(h.origin.exchanges.map(\.range) == [ByteRange(5000, 105_000)])
            h.origin.exchanges[0].finish()
            var received: [UInt8] = []
            while RawHTTPClient.parse(received).count < 2 || RawHTTPClient.parse(received)[1].isComplete == false {
                received += try await Self.bytes(of: try await channel.waitForOutboundWrite(as: IOData.self))
            }
            let responses = RawHTTPClient.parse(received)
            #expect(responses[0].status == 206 && responses[0].isComplete)
            #expect(
                Self.content.firstMismatch(in: ByteBuffer(bytes: responses[0].body), at: 5000) == nil
                    && responses[0].body.count == 100_000)
            #expect(responses[1].status == 400)
            try await channel.closeFuture.get()
        }
    }

    /// A read that fails before its first byte gets its own status (`502`), not a cut; one
    /// that fails after the head cuts the connection, and the player never gets a short body
    /// under a success status that looks whole.
    @Test func aFailureIsAnsweredBeforeTheFirstByteAndCutAfter() async throws {
        var configuration = CachingReader.Configuration()
        configuration.maxRetries = 0  // a failed origin request fails the read
        try await ScriptedHarness.with(reader: configuration) { h in
            h.origin.serve(Self.url, length: Self.size, seed: 7)
            let channel = try await Self.connectedChannel(h)
            try await channel.writeInbound(Self.request("bytes=0-99999"))
            try await waitUntil { h.origin.exchanges.count == 1 }
            h.origin.exchanges[0].fail()
            var received: [UInt8] = []
            while RawHTTPClient.parse(received).first?.isComplete != true {
                received += try await Self.bytes(of: try await channel.waitForOutboundWrite(as: IOData.self))
            }
            #expect(RawHTTPClient.parse(received).first?.status == 502)
            #expect(channel.isActive)

            try await channel.writeInbound(Self.request("bytes=0-99999"))
            try await waitUntil { h.origin.exchanges.count == 2 }
            h.origin.exchanges[1].send(30_000)
            received = []
            while RawHTTPClient.parse(received).first.map({ $0.body.count < 30_000 }) ?? true {
                received += try await Self.bytes(of: try await channel.waitForOutboundWrite(as: IOData.self))
            }
            h.origin.exchanges[1].fail()
            try await channel.closeFuture.get()
            while let more = try await channel.readOutbound(as: IOData.self) {
                received += try await Self.bytes(of: more)
            }
            let cut = try #require(RawHTTPClient.parse(received).first)
            #expect(
                cut.status == 206 && !cut.isComplete
                    && Self.content.firstMismatch(in: ByteBuffer(bytes: cut.body), at: 0) == nil)
        }
    }

    /// A player that hangs up in the middle of a miss's body: the origin request nobody else
    /// reads is let go (its body cancelled), nothing more is asked, and what arrived before is
    /// stored as the origin sent it.
    @Test func aHangUpMidBodyLetsTheOriginRequestGoAndKeepsWhatArrived() async throws {
        try await ScriptedHarness.with { h in
            h.origin.serve(Self.url, length: Self.size, seed: 7)
            let channel = try await Self.connectedChannel(h)
            try await channel.writeInbound(Self.request("bytes=0-299999"))
            try await waitUntil { h.origin.exchanges.count == 1 }
            let exchange = h.origin.exchanges[0]
            exchange.send(100_000)
            var received: [UInt8] = []
            while RawHTTPClient.parse(received).first.map({ $0.body.count < 100_000 }) ?? true {
                received += try await Self.bytes(of: try await channel.waitForOutboundWrite(as: IOData.self))
            }
            let partial = try #require(RawHTTPClient.parse(received).first)
            #expect(
                partial.status == 206 && Self.content.firstMismatch(in: ByteBuffer(bytes: partial.body), at: 0) == nil)
            // The player goes away.
            try await channel.testingEventLoop.executeInContext { channel.pipeline.fireChannelInactive() }
            try await waitUntil { exchange.isCancelled }
            try await waitUntil { h.reader.activeDownloads == 0 }
            #expect(h.origin.exchanges.count == 1)
            let key = h.store.key(for: Self.url)
            let stored = h.store.spans(for: key)
            #expect(stored.contains(ByteRange(0, 100_000)) && !stored.contains(ByteRange(0, Self.size)), "\(stored)")
            let held = try #require(h.reader.cachedRead(Self.url, range: ByteRange(0, 100_000)))
            var bytes = ByteBuffer()
            for try await chunk in held { bytes.writeImmutableBuffer(chunk) }
            #expect(bytes.readableBytes == 100_000 && Self.content.firstMismatch(in: bytes, at: 0) == nil)
        }
    }

    /// The proxy's pipeline on a thread-safe in-memory channel, connected from a player's port.
    static func connectedChannel(_ h: ScriptedHarness) async throws -> NIOAsyncTestingChannel {
        let channel = NIOAsyncTestingChannel()
        try await channel.testingEventLoop.executeInContext {
            try Self.configure(channel, Self.handler(h))
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_000)).get()
        return channel
    }

    /// Every byte the channel wrote so far.
    static func outbound(of channel: EmbeddedChannel) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else {
                Issue.record("a file region reached the channel")
                continue
            }
            bytes += buffer.readableBytesView
        }
        return bytes
    }

    static func bytes(of data: IOData) async throws -> [UInt8] {
        guard case .byteBuffer(let buffer) = data else {
            throw CacheError(.ioFailure, "a file region reached the channel")
        }
        return Array(buffer.readableBytesView)
    }
}

/// Turns the file regions the proxy writes into the bytes they name, at the moment they are
/// written (the proxy closes a region's file once it is written).
private final class FileRegionReader: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .fileRegion(let region) = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: region.readableBytes)
        let read = try? region.fileHandle.withUnsafeFileDescriptor { descriptor in
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: region.readableBytes) { pointer in
                max(0, pread(descriptor, pointer.baseAddress, region.readableBytes, off_t(region.readerIndex)))
            }
        }
        guard read == region.readableBytes else {
            promise?.fail(CacheError(.ioFailure, "could not read a file region"))
            return
        }
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }
}
