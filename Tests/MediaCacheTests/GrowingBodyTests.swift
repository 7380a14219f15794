// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// A body without a length shared by readers, driven by a scripted body (no network).
@Suite(.stallLimit) struct GrowingBodyTests {
    /// A body the test feeds chunk by chunk; it notes when its reader stops.
    final class Script: Sendable {
        let stream: AsyncThrowingStream<ByteBuffer, any Error>
        let continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
        let flags = Flags()

        final class Flags: Sendable {
            let stopped = Mutex(false)
        }

        init() {
            (stream, continuation) = AsyncThrowingStream.makeStream(of: ByteBuffer.self)
            continuation.onTermination = { [flags] _ in flags.stopped.withLock { $0 = true } }
        }

        func send(_ bytes: [UInt8]) { continuation.yield(ByteBuffer(bytes: bytes)) }

        var response: OriginResponse {
            var metadata = ContentMetadata()
            metadata.mimeType = "video/iso.segment"
            return OriginResponse(metadata: metadata, bodyOffset: 0, body: stream)
        }
    }

    static func next(_ iterator: inout GrowingBody.Reader.Iterator) async throws -> [UInt8]? {
        try await iterator.next().map { Array(buffer: $0) }
    }

    @Test func aLateReaderGetsTheHistoryThenTheLiveChunks() async throws {
        let script = Script()
        let body = GrowingBody(script.response) {}
        let first = try #require(body.subscribe())
        var a = first.makeAsyncIterator()
        script.send([1])
        script.send([2])
        #expect(try await Self.next(&a) == [1])
        #expect(try await Self.next(&a) == [2])
        let late = try #require(body.subscribe())
        var b = late.makeAsyncIterator()
        #expect(try await Self.next(&b) == [1])
        #expect(try await Self.next(&b) == [2])
        script.send([3])
        #expect(try await Self.next(&a) == [3])
        #expect(try await Self.next(&b) == [3])
        script.continuation.finish()
        #expect(try await Self.next(&a) == nil)
        #expect(try await Self.next(&b) == nil)
        #expect(body.subscribe() == nil, "an ended body cannot be joined")
    }

    @Test func anOriginFailureReachesEveryReader() async throws {
        let script = Script()
        let body = GrowingBody(script.response) {}
        var a = try #require(body.subscribe()).makeAsyncIterator()
        var b = try #require(body.subscribe()).makeAsyncIterator()
        script.send([9])
        script.continuation.finish(throwing: CacheError(.originUnavailable, "gone"))
        #expect(try await Self.next(&a) == [9])
        await #expect(throws: CacheError.self) { _ = try await Self.next(&a) }
        #expect(try await Self.next(&b) == [9])
        await #expect(throws: CacheError.self) { _ = try await Self.next(&b) }
    }

    /// When the last reader leaves, the origin body is let go (its request cancelled) and the
    /// body says it is closed.
    @Test func theLastReaderLeavingStopsTheOriginBody() async throws {
        let script = Script()
        let closed = Script.Flags()
        let body = GrowingBody(script.response) { closed.stopped.withLock { $0 = true } }
        var reader: GrowingBody.Reader? = try #require(body.subscribe())
        var iterator: GrowingBody.Reader.Iterator? = reader?.makeAsyncIterator()
        script.send([1])
        #expect(try await Self.next(&iterator!) == [1])
        iterator = nil
        reader = nil
        try await waitUntil { script.flags.stopped.withLock { $0 } }
        #expect(closed.stopped.withLock { $0 } && !body.isJoinable)
    }

    /// Past the history limit no reader can join, and the body goes on for those reading.
    @Test func aLongBodyClosesToJoinersButGoesOn() async throws {
        let script = Script()
        let body = GrowingBody(script.response) {}
        var a = try #require(body.subscribe()).makeAsyncIterator()
        let chunk = [UInt8](repeating: 7, count: 1 << 20)
        for _ in 0...(GrowingBody.maximumHistory >> 20) {
            script.send(chunk)
            #expect(try await Self.next(&a)?.count == chunk.count)
        }
        try await waitUntil { !body.isJoinable }
        #expect(body.subscribe() == nil)
        script.send([5])
        #expect(try await Self.next(&a) == [5])
    }
}
