// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

/// The read path against a scripted origin (``ScriptedOrigin``): each body byte arrives when
/// the test sends it and a pause at a hole ends when the test fires it, so these tests wait on
/// events only and pass the same on an idle machine and a loaded one.
@Suite(.stallLimit) struct ScriptedReadPathTests {
    static let url = URL(string: "https://scripted.example/film.mp4")!

    /// How many bytes a reading task has taken so far.
    final class Taken: Sendable {
        private let count = Mutex<Int64>(0)
        var value: Int64 { count.withLock { $0 } }
        func set(_ value: Int64) { count.withLock { $0 = value } }
    }

    /// Reads `stream` in a task, checking every byte against `content` from `offset`; `taken`
    /// counts what it got.
    static func consume(_ stream: ReadStream, content: DeterministicContent, from offset: Int64, taken: Taken) -> Task<
        Int64, any Error
    > {
        Task {
            var cursor = offset
            for try await chunk in stream {
                #expect(content.firstMismatch(in: chunk, at: cursor) == nil, "bytes at \(cursor)")
                cursor += Int64(chunk.readableBytes)
                taken.set(cursor - offset)
            }
            return cursor - offset
        }
    }

    /// Answers every request whole and ends every pause, until `done` holds.
    static func answerEverything(_ h: ScriptedHarness, timer: ManualPauseTimer? = nil, until done: () -> Bool)
        async throws
    {
        try await waitUntil {
            for exchange in h.origin.exchanges { exchange.finish() }
            timer?.fire()
            return done()
        }
    }

    /// A reader that goes away cancels the origin request nobody else shares: the body is let
    /// go at once, no other request is made, and what it took is stored.
    @Test func aReaderThatGoesAwayCancelsTheOriginRequest() async throws {
        try await ScriptedHarness.with { h in
            let content = DeterministicContent(seed: 11)
            h.origin.serve(Self.url, length: 40_000_000, seed: 11)
            let stream = try await h.reader.read(Self.url)
            let taken = Taken()
            let reading = Self.consume(stream, content: content, from: 0, taken: taken)
            try await waitUntil { !h.origin.exchanges.isEmpty }
            let exchange = h.origin.exchanges[0]
            exchange.send(200_000)
            try await waitUntil { taken.value == 200_000 }
            stream.cancel()
            reading.cancel()
            _ = try? await reading.value
            try await waitUntil { exchange.isCancelled }
            try await waitUntil { h.reader.activeDownloads == 0 }
            #expect(h.origin.exchanges.count == 1, "\(h.origin.exchanges.map(\.range))")
            #expect(exchange.sentUpTo == 200_000)
            try await waitUntil { h.store.spans(for: h.store.key(for: Self.url)).contains(ByteRange(0, 200_000)) }
        }
    }

    /// One of two readers of a download leaves: the download goes on for the other, which
    /// gets every byte, and the origin sends each byte once.
    @Test func aReaderLeavingDoesNotStopTheDownloadAnotherReaderShares() async throws {
        try await ScriptedHarness.with { h in
            let content = DeterministicContent(seed: 12)
            let size: Int64 = 2_000_000
            h.origin.serve(Self.url, length: size, seed: 12)
            let full = try await h.reader.read(Self.url)
            let fullTaken = Taken()
            let reading = Self.consume(full, content: content, from: 0, taken: fullTaken)
            try await waitUntil { !h.origin.exchanges.isEmpty }
            h.origin.exchanges[0].send(50_000)
            try await waitUntil { fullTaken.value == 50_000 }
            let leaving = try await h.reader.read(Self.url)
            let leavingTaken = Taken()
            let short = Self.consume(leaving, content: content, from: 0, taken: leavingTaken)
            h.origin.exchanges[0].send(100_000)
            try await waitUntil { leavingTaken.value >= 100_000 }
            leaving.cancel()
            short.cancel()
            _ = try? await short.value
            #expect(!h.origin.exchanges[0].isCancelled, "the other reader still reads it")
            // Answer every request whole from here on, until the full read ends.
            try await Self.answerEverything(h) { fullTaken.value == size }
            #expect(try await reading.value == size)
            let sent = h.origin.exchanges.map { $0.sentUpTo - $0.bodyRange.lowerBound }.reduce(0, +)
            #expect(sent == size, "each byte once: \(h.origin.exchanges.map(\.bodyRange))")
            #expect(h.origin.exchanges.allSatisfy { !$0.isCancelled })
        }
    }

    /// A read that reaches missing bytes right after cached ones pauses (`holeDelay`) before
    /// asking the origin; a reader that leaves during the pause costs no request. Without the
    /// delay the same read asks at once.
    @Test(arguments: [true, false])
    func aReaderLeavingAtAHoleDuringThePauseCostsNoOriginRequest(pauses: Bool) async throws {
        let timer = ManualPauseTimer()
        var configuration = CachingReader.Configuration()
        configuration.holeDelay = pauses ? .seconds(2) : .zero
        configuration.pauseTimer = timer
        try await ScriptedHarness.with(answersWhole: true, reader: configuration) { h in
            let content = DeterministicContent(seed: 15)
            h.origin.serve(Self.url, length: 2_000_000, seed: 15)
            #expect(
                content.firstMismatch(
                    in: try await collect(try await h.reader.read(Self.url, offset: 0, length: 500_000)), at: 0) == nil)
            try await waitUntil { h.reader.activeDownloads == 0 }
            let before = h.origin.exchanges.count
            let stream = try await h.reader.read(Self.url)
            let taken = Taken()
            let reading = Self.consume(stream, content: content, from: 0, taken: taken)
            if pauses {
                try await waitUntil { timer.sleeping == 1 }
                #expect(taken.value == 500_000 && stream.statistics.bytesFromCache == 500_000)
            } else {
                try await waitUntil { h.origin.exchanges.count > before }
            }
            stream.cancel()
            reading.cancel()
            _ = try? await reading.value
            if pauses {
                #expect(h.origin.exchanges.count == before, "\(h.origin.exchanges.map(\.range))")
                #expect(timer.sleeping == 0 && timer.pausesBegun == 1)
            } else {
                #expect(timer.pausesBegun == 0)
            }
        }
    }

    /// Found by `soak --slowest` with closed ranges: every one of the slowest answers (55-62 ms)
    /// was a range of about 300 kB that began in stored bytes, and paused at its hole as long as
    /// a 40 Mbit/s client would take them, though its client had asked for exactly those bytes.
    /// A closed range that ends before the file's end now asks for its hole at once; a read to
    /// the end (open, or closed to the last byte) still pauses, so a player that stops after a
    /// preloaded start costs no request.
    @Test(arguments: [false, true])
    func onlyAReadToTheEndPausesAtAHoleAfterStoredBytes(toTheEnd: Bool) async throws {
        let timer = ManualPauseTimer()
        var configuration = CachingReader.Configuration()
        configuration.holeDelay = .seconds(2)
        configuration.pauseTimer = timer
        try await ScriptedHarness.with(answersWhole: true, reader: configuration) { h in
            let content = DeterministicContent(seed: 16)
            let length: Int64 = 1_000_000
            h.origin.serve(Self.url, length: length, seed: 16)
            #expect(
                content.firstMismatch(
                    in: try await collect(try await h.reader.read(Self.url, offset: 0, length: 300_000)), at: 0) == nil)
            try await waitUntil { h.reader.activeDownloads == 0 }
            let before = h.origin.exchanges.count
            let end = toTheEnd ? length : 600_000
            let stream = try await h.reader.read(Self.url, offset: 100_000, length: end - 100_000)
            let taken = Taken()
            let reading = Self.consume(stream, content: content, from: 100_000, taken: taken)
            try await waitUntil { timer.sleeping == 1 || taken.value == end - 100_000 }
            #expect(timer.sleeping == (toTheEnd ? 1 : 0), "a pause at the hole")
            if timer.sleeping == 1 {
                #expect(h.origin.exchanges.count == before, "no request during the pause")
                timer.fire()
            }
            #expect(try await reading.value == end - 100_000)
            #expect(timer.pausesBegun == (toTheEnd ? 1 : 0))
            #expect(h.origin.exchanges.count == before + 1)
            #expect(h.origin.exchanges.last?.bodyRange == ByteRange(300_000, end))
        }
    }

    /// Bytes stored by another download while a read pauses at a hole are read from the
    /// store after the pause, never fetched again (seen once as `bytes=0-262143` then
    /// `bytes=1711-263854`).
    @Test func bytesStoredDuringAHolePauseAreNotFetchedAgain() async throws {
        let timer = ManualPauseTimer()
        var configuration = CachingReader.Configuration()
        configuration.pauseTimer = timer
        try await ScriptedHarness.with(reader: configuration) { h in
            let content = DeterministicContent(seed: 5)
            let size: Int64 = 1 << 20
            h.origin.serve(Self.url, length: size, seed: 5)
            let key = h.store.key(for: Self.url)
            // The probe's download runs with no reader, as when a proxy asks for the head first.
            // It asks for the first 256 KiB, as a player's bounded request would.
            let probing = Task { try await h.reader.contentInfo(for: Self.url, readingFrom: 0, length: 262_144) }
            try await waitUntil { !h.origin.exchanges.isEmpty }
            let probe = h.origin.exchanges[0]
            probe.send(1711)
            _ = try await probing.value
            try await waitUntil { h.store.spans(for: key).contains(ByteRange(0, 1711)) }
            let stream = try await h.reader.read(Self.url)
            let taken = Taken()
            let reading = Self.consume(stream, content: content, from: 0, taken: taken)
            try await waitUntil { timer.sleeping == 1 }
            #expect(taken.value == 1711)
            // During the pause the probe's download stores the rest of what it asked for.
            probe.finish()
            try await waitUntil { h.store.spans(for: key).contains(probe.bodyRange) }
            timer.fire()
            try await Self.answerEverything(h, timer: timer) { taken.value == size }
            #expect(try await reading.value == size)
            let asked = h.origin.exchanges.map(\.bodyRange)
            #expect(SpanSet(asked).byteCount == asked.reduce(0) { $0 + $1.length }, "overlapping requests: \(asked)")
            #expect(
                asked.count > 1 && asked[1].lowerBound == probe.bodyRange.upperBound
                    && SpanSet(asked).byteCount == size, "\(asked)")
        }
    }

    /// A caller of `contentInfo` whose task is cancelled stops waiting at once, while the
    /// origin has not answered; another caller sharing the same request still gets the answer.
    @Test func aCancelledCallerStopsWaitingForContentInformation() async throws {
        try await ScriptedHarness.with(holdsHeads: true) { h in
            h.origin.serve(Self.url, length: 3_000_000, seed: 17)
            let ended = Taken()
            let first = Task {
                defer { ended.set(1) }
                return try await h.reader.contentInfo(for: Self.url, readingFrom: 0)
            }
            let second = Task { try await h.reader.contentInfo(for: Self.url, readingFrom: 0) }
            try await waitUntil { h.origin.exchanges.count == 1 }
            try await waitUntil { h.reader.contentInfoWaiters == 2 }
            first.cancel()
            try await waitUntil { ended.value == 1 }
            await #expect(throws: CancellationError.self) { try await first.value }
            let exchange = h.origin.exchanges[0]
            #expect(!exchange.isCancelled, "the shared request goes on for the other caller")
            exchange.sendHead()
            exchange.finish()
            #expect(try await second.value.length == 3_000_000)
            #expect(h.origin.exchanges.count == 1)
        }
    }

    /// Shutting the read path down stops every download and every probe on its own tasks and
    /// returns once they have ended: the origin requests are let go, what arrived is stored,
    /// and afterwards stored bytes are still served while missing ones are refused, not fetched.
    @Test func shuttingDownStopsEveryDownloadAndProbe() async throws {
        try await ScriptedHarness.with(holdsHeads: true) { h in
            let content = DeterministicContent(seed: 18)
            h.origin.serve(Self.url, length: 4_000_000, seed: 18)
            let other = URL(string: "https://scripted.example/other.mp4")!
            h.origin.serve(other, length: 1_000_000, seed: 19)
            // A probe for the first 256 KiB (a player's bounded request), then a whole read.
            let probing = Task { try await h.reader.contentInfo(for: Self.url, readingFrom: 0, length: 262_144) }
            try await waitUntil { h.origin.exchanges.count == 1 }
            h.origin.exchanges[0].sendHead()
            _ = try await probing.value
            let stream = try await h.reader.read(Self.url)
            let taken = Taken()
            let reading = Self.consume(stream, content: content, from: 0, taken: taken)
            h.origin.exchanges[0].finish()  // the probe's range, read on by the stream
            try await waitUntil { h.origin.exchanges.count == 2 }  // then the rest
            h.origin.exchanges[1].sendHead()
            h.origin.exchanges[1].send(100_000)  // of its range, which starts where the probe's ended
            let firstRange = h.origin.exchanges[0].bodyRange.upperBound
            try await waitUntil { taken.value == firstRange + 100_000 }
            // A probe of another resource, its answer held.
            let probe = Task { try await h.reader.contentInfo(for: other, readingFrom: 0) }
            try await waitUntil { h.origin.exchanges.count == 3 && h.reader.contentInfoWaiters == 1 }

            await h.reader.shutDown()
            #expect(h.reader.activeDownloads == 0)
            #expect(h.origin.exchanges[1].isCancelled && h.origin.exchanges[2].isCancelled)
            await #expect(throws: (any Error).self) { try await probe.value }
            await #expect(throws: (any Error).self) { try await reading.value }
            let key = h.store.key(for: Self.url)
            try await waitUntil { h.store.spans(for: key).contains(ByteRange(0, 300_000)) }
            // Stored bytes are served; missing ones are not fetched.
            let stored = try await collect(try await h.reader.read(Self.url, offset: 0, length: 300_000))
            #expect(content.firstMismatch(in: stored, at: 0) == nil && stored.readableBytes == 300_000)
            let before = h.origin.exchanges.count
            await #expect {
                _ = try await collect(try await h.reader.read(Self.url, offset: 3_000_000, length: 1000))
            } throws: {
                ($0 as? CacheError)?.code == .storeClosed
            }
            await #expect {
                _ = try await h.reader.contentInfo(
                    for: URL(string: "https://scripted.example/new.mp4")!, readingFrom: 0)
            } throws: {
                ($0 as? CacheError)?.code == .storeClosed
            }
            #expect(h.origin.exchanges.count == before)
        }
    }

    /// A download its last reader lets go while it waits for room (it is a read-ahead window
    /// in front of that reader) stores the chunk it holds: bytes the origin sent are not
    /// thrown away, and a read close behind asks the origin only for what comes after them.
    @Test func bytesTheOriginSentAreKeptWhenTheLastReaderLeaves() async throws {
        var configuration = CachingReader.Configuration()
        configuration.downloadLead = 100_000
        try await ScriptedHarness.with(reader: configuration) { h in
            let content = DeterministicContent(seed: 20)
            h.origin.serve(Self.url, length: 4_000_000, seed: 20)
            let stream = try await h.reader.read(Self.url)
            // The player takes 20,000 bytes, then holds the stream open without taking more.
            let taken = Taken()
            let (hold, release) = AsyncStream<Void>.makeStream()
            let reading = Task {
                var iterator = stream.makeAsyncIterator()
                var cursor: Int64 = 0
                while cursor < 20_000, let chunk = try await iterator.next() {
                    #expect(content.firstMismatch(in: chunk, at: cursor) == nil)
                    cursor += Int64(chunk.readableBytes)
                }
                taken.set(cursor)
                for await _ in hold {}
            }
            try await waitUntil { !h.origin.exchanges.isEmpty }
            let exchange = h.origin.exchanges[0]
            exchange.send(20_000)
            try await waitUntil { taken.value == 20_000 }
            // Three 64 KiB chunks: the download delivers what fits in the 100,000 bytes ahead of
            // the player, then waits for room holding the next chunk.
            exchange.send(65_536 * 3)
            let sent = ByteRange(0, 20_000 + 65_536 * 3)
            #expect(exchange.sentUpTo == sent.upperBound)
            try await waitUntil { exchange.takenUpTo == sent.upperBound }
            stream.cancel()  // the player goes away
            release.finish()
            try await reading.value
            try await waitUntil { exchange.isCancelled && h.reader.activeDownloads == 0 }
            let key = h.store.key(for: Self.url)
            try await waitUntil { h.store.spans(for: key).contains(sent) }
            #expect(h.store.spans(for: key).byteCount == sent.length)
            // A read close behind asks the origin only for what comes after them.
            let again = try await h.reader.read(Self.url, offset: 0, length: 300_000)
            let replay = Task { try await collect(again) }
            try await waitUntil { h.origin.exchanges.count == 2 }
            #expect(h.origin.exchanges[1].bodyRange.lowerBound == sent.upperBound, "\(h.origin.exchanges[1].bodyRange)")
            h.origin.exchanges[1].finish()
            let bytes = try await replay.value
            #expect(bytes.readableBytes == 300_000 && content.firstMismatch(in: bytes, at: 0) == nil)
        }
    }

    /// A stale entry from an origin that sends no validator is replaced by the origin's next
    /// answer even when that answer has the old length: the old bytes are dropped before the
    /// read plans from them, so every byte read is the new version's. (A live playlist whose
    /// versions kept one length was served old: the old bytes were taken for the new ones.)
    @Test func aStaleEntryWithoutValidatorsIsReplacedByAnAnswerOfTheSameLength() async throws {
        let clock = ManualClock()
        try await ScriptedHarness.with(clock: clock) { h in
            let size: Int64 = 3_000
            h.origin.serve(Self.url, length: size, seed: 31, etag: nil, lifetime: 1)
            let first = Task { try await collect(try await h.reader.read(Self.url)) }
            try await waitUntil { !h.origin.exchanges.isEmpty }
            h.origin.exchanges[0].finish()
            let old = try await first.value
            #expect(
                old.readableBytes == Int(size) && DeterministicContent(seed: 31).firstMismatch(in: old, at: 0) == nil)
            let key = h.store.key(for: Self.url)
            try await waitUntil { h.store.spans(for: key).contains(ByteRange(0, size)) }

            // Past the play the first read began (a play keeps to its version while it lasts).
            clock.advance(by: 604.5)
            h.origin.serve(Self.url, length: size, seed: 32, etag: nil, lifetime: 1)
            let stream = try await h.reader.read(Self.url)
            // The revalidation's answer is in, its body not yet sent: the old version's bytes
            // are no longer claimed, so nothing can be read from them.
            #expect(h.origin.exchanges.count == 2)
            #expect(h.store.spans(for: key).byteCount == 0, "old bytes still claimed: \(h.store.spans(for: key))")
            let reading = Task { try await collect(stream) }
            h.origin.exchanges[1].finish()
            let new = try await reading.value
            #expect(
                new.readableBytes == Int(size) && DeterministicContent(seed: 32).firstMismatch(in: new, at: 0) == nil,
                "the new version's bytes")
            #expect(h.origin.exchanges.count == 2, "\(h.origin.exchanges.map(\.range))")
        }
    }

    /// However many resources are read, the read path remembers the last validation of at
    /// most `validationMemoryLimit` of them, and every byte read is still right.
    @Test func readingManyResourcesKeepsTheRememberedValidationsBounded() async throws {
        var configuration = CachingReader.Configuration()
        configuration.validationMemoryLimit = 4
        try await ScriptedHarness.with(answersWhole: true, reader: configuration) { h in
            for index in 0..<20 {
                let url = URL(string: "https://scripted.example/\(index).mp4")!
                h.origin.serve(url, length: 10_000, seed: UInt64(100 + index))
                let bytes = try await collect(try await h.reader.read(url, offset: 0, length: 1000))
                #expect(
                    DeterministicContent(seed: UInt64(100 + index)).firstMismatch(in: bytes, at: 0) == nil
                        && bytes.readableBytes == 1000)
                #expect(h.reader.rememberedValidations <= 4)
            }
            #expect(h.reader.rememberedValidations >= 1)
        }
    }
}
