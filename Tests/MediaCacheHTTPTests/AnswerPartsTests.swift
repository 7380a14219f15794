// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import MediaCacheHTTP

/// An origin body between the client's delegate and its one reader (`AnswerParts`), without
/// I/O: each part reaches the reader in order, the client waits while a part is unread, the end
/// and a failure come after the parts before them, and a reader that stops (cancelled, or
/// letting the body go) ends the request once, and only a request not already over.
@Suite(.stallLimit) struct AnswerPartsTests {
    final class Ended: Sendable {
        let count = Atomic<Int>(0)
        func note() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    static func part(_ byte: UInt8) -> ByteBuffer { ByteBuffer(repeating: byte, count: 3) }

    /// Whether `future` has completed (an embedded loop runs its callbacks at once).
    final class Done: Sendable {
        let flag = Atomic<Bool>(false)
        init(_ future: EventLoopFuture<Void>) { future.whenComplete { _ in self.flag.store(true, ordering: .relaxed) } }
        var value: Bool { flag.load(ordering: .relaxed) }
    }

    @Test func partsArriveInOrderAndTheClientWaitsWhileOneIsUnread() async throws {
        let loop = EmbeddedEventLoop()
        let parts = AnswerParts()
        let ended = Ended()
        parts.onTerminate { ended.note() }
        let first = Done(parts.yield(Self.part(1), on: loop))
        #expect(!first.value, "the client waits: the part is unread")
        let body = AnswerBody(parts)
        var iterator = body.makeAsyncIterator()
        #expect(try await iterator.next() == Self.part(1))
        #expect(first.value, "taken: the client reads on")
        // The reader waits first: the part goes straight to it, the client does not wait.
        let shared = iterator
        let second = Task {
            var reading = shared
            return try await reading.next()
        }
        try await waitUntil { parts.hasReader }
        let handed = Done(parts.yield(Self.part(2), on: loop))
        #expect(handed.value)
        #expect(try await second.value == Self.part(2))
        _ = parts.yield(Self.part(3), on: loop)
        parts.finish(CancellationError())
        _ = parts.yield(Self.part(4), on: loop)  // after the end: dropped
        #expect(try await iterator.next() == Self.part(3), "the parts before a failure first")
        await #expect(throws: CancellationError.self) { _ = try await iterator.next() }
        #expect(ended.value == 0, "a body that ended has no request to end")
    }

    @Test func aReaderThatStopsEndsTheRequestOnce() async throws {
        let loop = EmbeddedEventLoop()
        // Cancelled while it waits.
        let parts = AnswerParts()
        let ended = Ended()
        parts.onTerminate { ended.note() }
        let reading = Task {
            var iterator = AnswerBody(parts).makeAsyncIterator()
            return try await iterator.next()
        }
        try await waitUntil { parts.hasReader }
        reading.cancel()
        await #expect(throws: CancellationError.self) { _ = try await reading.value }
        #expect(ended.value == 1)
        #expect(Done(parts.yield(Self.part(1), on: loop)).value, "the client is not held after")

        // Its iterator let go with a part unread (the sequence still held): the client waiting on
        // it goes on, the request ends.
        let dropped = AnswerParts()
        let droppedEnded = Ended()
        dropped.onTerminate { droppedEnded.note() }
        let body = AnswerBody(dropped)
        var waiting: Done?
        do {
            var iterator = body.makeAsyncIterator()
            waiting = Done(dropped.yield(Self.part(1), on: loop))
            #expect(waiting?.value == false)
            #expect(try await iterator.next() == Self.part(1))
            waiting = Done(dropped.yield(Self.part(2), on: loop))
            #expect(waiting?.value == false)
        }
        #expect(waiting?.value == true && droppedEnded.value == 1)
        dropped.terminate()
        #expect(droppedEnded.value == 1, "once")

        // The sequence let go before any iterator was made: the request ends.
        let unread = AnswerParts()
        let unreadEnded = Ended()
        unread.onTerminate { unreadEnded.note() }
        do { _ = AnswerBody(unread) }
        #expect(unreadEnded.value == 1)
        withExtendedLifetime(body) {}

        // Read to its end, then let go: nothing to end.
        let whole = AnswerParts()
        let wholeEnded = Ended()
        whole.onTerminate { wholeEnded.note() }
        do {
            var iterator = AnswerBody(whole).makeAsyncIterator()
            whole.finish()
            #expect(try await iterator.next() == nil)
        }
        #expect(wholeEnded.value == 0)
    }
}
