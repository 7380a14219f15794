// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Synchronization
import Testing

@testable import MediaCacheProxy

/// The writer of a body that comes in parts (``ResponseSender``), on the proxy's whole pipeline
/// over an in-memory channel whose socket completes a write only when the test says so.
@Suite(.stallLimit) struct ResponseSenderTests {
    /// A miss's body goes out with two parts at most in the socket's queue: a part is written
    /// only once the part two before it is, so a slow player holds back the read (and its
    /// memory) instead of queueing the whole body. The bytes are the origin's.
    @Test func aBodyInPartsKeepsTwoPartsInFlight() async throws {
        try await ScriptedHarness.with { h in
            typealias Tests = ProxyConnectionTests
            h.origin.serve(Tests.url, length: Tests.size, seed: 7)
            let socket = HeldWrites()
            let channel = NIOAsyncTestingChannel()
            try await channel.testingEventLoop.executeInContext {
                try channel.pipeline.syncOperations.addHandler(socket)
                try Tests.configure(channel, Tests.handler(h))
            }
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_000)).get()
            try await channel.writeInbound(Tests.request("bytes=0-299999"))
            try await waitUntil { h.origin.exchanges.count == 1 }
            // Two parts the size of the chunks that make them; then the rest of the body, all of
            // it delivered and stored before the socket writes anything: a writer that took the
            // next part before the one two before it was written would have written it by then.
            let exchange = h.origin.exchanges[0]
            for part in 1...2 {
                exchange.send(65_536)
                try await waitUntil { socket.bodyBytes == part * 65_536 }
            }
            exchange.send(Tests.size)
            try await waitUntil { h.store.spans(for: h.store.key(for: Tests.url)).contains(ByteRange(0, Tests.size)) }
            // The socket then writes the oldest part whenever two wait, until every byte is written.
            while socket.bodyBytes < Int(Tests.size) {
                try await waitUntil { socket.outstanding == 2 || socket.bodyBytes == Int(Tests.size) }
                if socket.outstanding == 2 {
                    try await channel.testingEventLoop.executeInContext { socket.completeOldest() }
                }
            }
            try await channel.testingEventLoop.executeInContext { socket.completeAll() }
            #expect(socket.parts > 2, "the body came in \(socket.parts) parts")
            #expect(socket.early.isEmpty, "parts written before the part two before them: \(socket.early)")
            #expect(socket.mostOutstanding == 2)
            var received: [UInt8] = []
            while let data = try await channel.readOutbound(as: IOData.self) {
                received += try await Tests.bytes(of: data)
            }
            let answer = try #require(RawHTTPClient.parse(received).first)
            #expect(answer.status == 206 && answer.body.count == Int(Tests.size))
            #expect(Tests.content.firstMismatch(in: ByteBuffer(bytes: answer.body), at: 0) == nil)
        }
    }
}

/// A socket that takes every write at once but reports it written only when told
/// (``completeOldest()``), counting the body writes still waiting to be written.
private final class HeldWrites: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private struct State {
        var waiting: [EventLoopPromise<Void>] = []
        var mostOutstanding = 0
        var bodyBytes = 0
        var parts = 0
        var completed = 0
        /// Parts written before the part two before them was written: `k` written when fewer
        /// than `k - 2` were.
        var early: [Int] = []
    }
    private let state = Mutex(State())

    var outstanding: Int { state.withLock { $0.waiting.count } }
    var mostOutstanding: Int { state.withLock { $0.mostOutstanding } }
    /// The bytes written after the head.
    var bodyBytes: Int { state.withLock { $0.bodyBytes } }
    var parts: Int { state.withLock { $0.parts } }
    var early: [Int] { state.withLock { $0.early } }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(let buffer) = unwrapOutboundIn(data), buffer.readableBytes > 0, let promise else {
            context.write(data, promise: promise)
            return
        }
        let held = context.eventLoop.makePromise(of: Void.self)
        held.futureResult.cascade(to: promise)
        state.withLock { state in
            // The head (written with no promise of its own, before the first part) is not a part.
            state.parts += 1
            if state.completed < state.parts - 2 { state.early.append(state.parts) }
            state.bodyBytes += buffer.readableBytes
            state.waiting.append(held)
            state.mostOutstanding = max(state.mostOutstanding, state.waiting.count)
        }
        context.write(data, promise: nil)
    }

    func completeOldest() {
        let oldest = state.withLock { state -> EventLoopPromise<Void>? in
            guard !state.waiting.isEmpty else { return nil }
            state.completed += 1
            return state.waiting.removeFirst()
        }
        oldest?.succeed()
    }

    func completeAll() {
        let all = state.withLock { state in
            defer { state.waiting = [] }
            state.completed += state.waiting.count
            return state.waiting
        }
        for promise in all { promise.succeed() }
    }
}
