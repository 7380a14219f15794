// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import Testing

@Suite(.stallLimit, .endToEnd) struct ReadPathTests {
    /// Reads `offset ..< offset + length` (to the end when `length` is nil) and checks every
    /// byte (``Harness/readAndCheck(_:offset:length:sourceLocation:)``).
    @discardableResult
    static func readAndCheck(
        _ h: Harness, _ path: String, offset: Int64 = 0, length: Int64? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ReadStatistics {
        try await h.readAndCheck(path, offset: offset, length: length, sourceLocation: sourceLocation)
    }

    /// The bytes a file region part points at, read back with `pread`.
    static func bytes(of descriptor: CInt, at range: ByteRange) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Int(range.length)) { bytes in
            max(0, pread(descriptor, bytes.baseAddress!, Int(range.length), off_t(range.lowerBound)))
        }
        return buffer
    }

    /// Reads up to `limit` bytes then stops (the player cancels); checks the bytes it got.
    @discardableResult
    static func readThenCancel(
        _ h: Harness, _ path: String, offset: Int64, limit: Int64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Int64 {
        let resource = try #require(h.origin.resource(at: path))
        let stream = try await h.reader.read(h.origin.url(path), offset: offset, length: nil)
        var received: Int64 = 0
        for try await chunk in stream {
            #expect(resource.firstMismatch(in: chunk, at: offset + received) == nil, sourceLocation: sourceLocation)
            received += Int64(chunk.readableBytes)
            if received >= limit { break }
        }
        return received
    }

    @Test(arguments: FetcherSetup.all)
    func sequentialReadThenReplayMakesNoOriginRequest(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            h.origin.serve(.generated(length: 3_000_000, seed: 1), at: "/song.mp3")
            let first = try await Self.readAndCheck(h, "/song.mp3")
            #expect(first.bytesFromOrigin == 3_000_000)
            #expect(h.origin.bodyBytesSent("/song.mp3") == 3_000_000)
            let requests = h.origin.requests("/song.mp3").count
            let second = try await Self.readAndCheck(h, "/song.mp3")
            #expect(second.bytesFromCache == 3_000_000)
            #expect(h.origin.requests("/song.mp3").count == requests, "replay: \(h.origin.requests("/song.mp3"))")
            let info = try await h.reader.contentInfo(for: h.origin.url("/song.mp3"))
            #expect(info.length == 3_000_000)
            #expect(info.acceptsRanges)
            #expect(info.uniformTypeIdentifier == "public.mpeg-4")
            #expect(h.origin.requests("/song.mp3").count == requests)
        }
    }

    /// How AVPlayer reads a file through a resource loader: 0-1, 0-to-end cancelled after 700 KiB, resume,
    /// seek forward, seek back, replay; then the whole session again from cache.
    @Test(arguments: FetcherSetup.all)
    func avPlayerPatternFetchesEachByteOnceAndReplaysFromCache(setup: FetcherSetup) async throws {
        // A stream reads ahead of its player; at a hole it waits `holeDelay` before asking the
        // origin, so a player that hangs up meanwhile costs nothing. 20 ms (the default) was
        // once shorter than a hang-up took to arrive while every suite ran over three schemes
        // (the replay then asked for 256 KiB past what the first session's player took).
        var configuration = CachingReader.Configuration()
        configuration.holeDelay = .milliseconds(200)
        // What a hang-up costs is the read path's own pacing: no fill on play, which would
        // fetch this audio file to its end on purpose (`FillOnPlayTests`).
        configuration.fillOnPlay = .none
        try await Harness.with(setup: setup, reader: configuration) { h in
            let size: Int64 = 6_000_000
            h.origin.serve(.generated(length: size, seed: 2, mimeType: "audio/mpeg"), at: "/a.mp3")
            var consumed = SpanSet()
            func session() async throws {
                try await Self.readAndCheck(h, "/a.mp3", offset: 0, length: 2)
                for (offset, limit) in [
                    (0, 700 << 10), (700 << 10, 600 << 10), (4_000_000, 500 << 10), (1_000_000, 800 << 10),
                ] as [(Int64, Int64)] {
                    let got = try await Self.readThenCancel(h, "/a.mp3", offset: offset, limit: limit)
                    consumed.insert(ByteRange(offset: offset, length: got))
                }
                try await Self.readAndCheck(h, "/a.mp3", offset: 0, length: 1_500_000)  // replay the start
                consumed.insert(ByteRange(0, 1_500_000))
            }
            try await session()
            let sent = h.origin.bodyBytesSent("/a.mp3")
            let key = h.store.key(for: h.origin.url("/a.mp3"))
            // A download the first session left running ahead of a reader that hung up is
            // cancelled with it, but its last request may still be on its way to the origin,
            // and the bytes a player took from a download's memory just before hanging up may
            // still be being written: let both land.
            try await h.waitUntilQuiet("/a.mp3")
            // Everything given to the player is cached.
            #expect(h.store.spans(for: key).holes(in: ByteRange(0, size)).allSatisfy { consumed.holes(in: $0) == [$0] })
            // Each player request that found a hole cost one origin request, asked as the
            // player asked it: six at most (the first two bytes, four reads, the replay's tail).
            // A hang-up then costs what the connection held in flight, as it would going direct
            // (on loopback, megabytes of socket buffers); what the cache read ahead of the
            // player and stored is paced: at most as far as the request had delivered, and the
            // chunk that arrived after the transfer last found room (a download waits while it is
            // a lead ahead, then takes the next chunk whole: a chunk is at most 64 KiB from
            // NIO's reads or curl's). A starved player leaves its download waiting at the lead,
            // so that chunk lands: once in four runs of the suite, 57 kB over a bound without it.
            let gets = h.origin.requests("/a.mp3").filter { $0.method == "GET" }
            #expect(gets.count <= 6, "\(gets)")
            let stored = h.store.spans(for: key).byteCount
            let paced: Int64 = (700 + 600 + 500 + 800) << 10 + 4 * (64 << 10)
            #expect(
                stored <= consumed.byteCount + paced,
                "stored \(stored) (\(h.store.spans(for: key))) for \(consumed.byteCount) consumed (\(consumed)); origin sent \(sent) for \(gets.map { $0.range ?? "-" })"
            )
            // No range request asked for a byte before the one it needed: each starts in a hole.
            for request in h.origin.requests("/a.mp3") where request.method == "GET" {
                #expect(request.range != nil, "\(request)")
            }
            h.origin.resetCounters()
            let cached = h.store.spans(for: key)
            try await session()
            #expect(
                h.origin.requests("/a.mp3").isEmpty,
                "second session: \(h.origin.requests("/a.mp3")); cached after the first: \(cached); consumed \(consumed)"
            )
        }
    }
}

@Suite(.stallLimit, .endToEnd) struct ReadPathPatternTests {
    @Test(arguments: FetcherSetup.all)
    func randomWindowsFetchOnlyWhatIsAskedThenReplayFromCache(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            let size: Int64 = 40 << 20
            h.origin.serve(.generated(length: size, seed: 3), at: "/v.mp4")
            var random = SplitMix(seed: 77)
            let windows = (0..<200).map { _ in
                ByteRange(offset: Int64(random.next() % UInt64(size - (64 << 10))), length: 64 << 10)
            }
            let unique = SpanSet(windows).byteCount
            for window in windows {
                try await ReadPathTests.readAndCheck(h, "/v.mp4", offset: window.lowerBound, length: window.length)
            }
            let pass1 = h.origin.bodyBytesSent("/v.mp4")
            #expect(
                pass1 <= unique,
                "pass 1: origin sent \(pass1) bytes for \(unique) unique bytes requested; requests: \(h.origin.requests("/v.mp4").filter { $0.method == "GET" }.map { $0.range ?? "-" })"
            )
            h.origin.resetCounters()
            for window in windows {
                let statistics = try await ReadPathTests.readAndCheck(
                    h, "/v.mp4", offset: window.lowerBound, length: window.length)
                #expect(statistics.bytesFromOrigin == 0)
            }
            #expect(h.origin.requests("/v.mp4").isEmpty)
            #expect(h.origin.bodyBytesSent("/v.mp4") == 0)
        }
    }

    @Test(arguments: FetcherSetup.all)
    func sixteenConcurrentReadersShareOneDownload(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            let size: Int64 = 24 << 20
            h.origin.serve(.generated(length: size, seed: 4), at: "/cold.mp4")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<16 {
                    group.addTask { try await ReadPathTests.readAndCheck(h, "/cold.mp4") }
                }
                try await group.waitForAll()
            }
            let sent = h.origin.bodyBytesSent("/cold.mp4")
            // At most the file plus one first request's worth (256 KiB) of bytes in flight.
            #expect(
                sent <= size + CachingReader.Configuration().minimumRequest,
                "origin sent \(sent) bytes for a \(size)-byte file: \(h.origin.requests("/cold.mp4"))")
        }
    }

    @Test(arguments: FetcherSetup.all)
    func aDroppedConnectionIsResumedWithIfRange(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            var faults = TestOrigin.Faults()
            // Below the first request's 256 KiB, so the first two responses really drop
            // (the fault counts every response, dropped or not).
            faults.dropAfterBytes = 100_000
            faults.dropCount = 2
            h.origin.serve(.generated(length: 2_000_000, seed: 5, faults: faults), at: "/drop.mp4")
            let statistics = try await ReadPathTests.readAndCheck(h, "/drop.mp4")
            #expect(
                statistics.originRetries == 2,
                "the two resumes are counted in the read's statistics: \(h.origin.requests("/drop.mp4"))")
            let gets = h.origin.requests("/drop.mp4").filter { $0.method == "GET" }
            // Two drops, each resumed from where it left off, carrying the stored validator.
            #expect(gets.count >= 3)
            #expect(gets.dropFirst().allSatisfy { $0.ifRange == "\"v1\"" }, "\(gets)")
            let starts = gets.compactMap {
                $0.range.flatMap { Int64($0.dropFirst("bytes=".count).prefix { $0 != "-" }) }
            }
            #expect(
                starts.count == gets.count && starts == starts.sorted() && Set(starts).count == starts.count, "\(gets)")
            #expect(
                starts.count >= 3 && starts[1] > 0 && starts[2] > starts[1],
                "each drop resumed after the bytes it delivered: \(gets)")
            // A drop loses the body parts AsyncHTTPClient received in the read cycle that saw
            // the connection close (it fails the request before handing them over), so a
            // resume may start before the 100,000th byte; never more than a dropped response
            // carried is fetched again.
            let sent = h.origin.bodyBytesSent("/drop.mp4")
            #expect(sent <= 2_000_000 + 2 * 100_000, "origin sent \(sent)")
        }
    }

    @Test(arguments: FetcherSetup.all)
    func aConnectionThatKeepsDroppingEndsInAnErrorAfterTheRightBytes(setup: FetcherSetup) async throws {
        var configuration = CachingReader.Configuration()
        configuration.retryDelay = .milliseconds(1)
        try await Harness.with(setup: setup, reader: configuration) { h in
            var faults = TestOrigin.Faults()
            faults.dropAfterBytes = 0
            h.origin.serve(.generated(length: 1_000_000, seed: 6, faults: faults), at: "/broken.mp4")
            let resource = try #require(h.origin.resource(at: "/broken.mp4"))
            // The first 100 000 bytes come from an earlier, healthy session.
            h.origin.update("/broken.mp4") { $0.faults.dropAfterBytes = nil }
            try await ReadPathTests.readAndCheck(h, "/broken.mp4", offset: 0, length: 100_000)
            h.origin.update("/broken.mp4") { $0.faults.dropAfterBytes = 0 }
            let stream = try await h.reader.read(h.origin.url("/broken.mp4"))
            var received = ByteBuffer()
            await #expect {
                for try await var chunk in stream { received.writeBuffer(&chunk) }
            } throws: { ($0 as? CacheError)?.code == .originUnavailable }
            #expect(received.readableBytes == 100_000)
            #expect(resource.firstMismatch(in: received, at: 0) == nil)
        }
    }

    @Test(arguments: FetcherSetup.all)
    func anOriginWithoutRangesIsReadFromTheStartAndCached(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            var faults = TestOrigin.Faults()
            faults.ignoresRanges = true
            h.origin.serve(.generated(length: 3_000_000, seed: 7, faults: faults), at: "/norange.mp3")
            let info = try await h.reader.contentInfo(for: h.origin.url("/norange.mp3"))
            #expect(info.acceptsRanges == false)
            try await ReadPathTests.readAndCheck(h, "/norange.mp3", offset: 1_000_000, length: 500_000)
            let gets = h.origin.requests("/norange.mp3").filter { $0.method == "GET" }
            #expect(gets.count == 1)
            #expect(gets.allSatisfy { $0.range == nil })
            // The whole prefix was read and stored on the way.
            let key = h.store.key(for: h.origin.url("/norange.mp3"))
            #expect(h.store.spans(for: key).contains(ByteRange(0, 1_500_000)))
            h.origin.resetCounters()
            try await ReadPathTests.readAndCheck(h, "/norange.mp3", offset: 0, length: 1_500_000)
            #expect(h.origin.requests("/norange.mp3").isEmpty)
        }
    }

    @Test(arguments: FetcherSetup.all)
    func aChangedFileIsNeverMixedWithTheOldOne(setup: FetcherSetup) async throws {
        var configuration = CachingReader.Configuration()
        configuration.revalidationInterval = .zero
        try await Harness.with(setup: setup, reader: configuration) { h in
            h.origin.serve(.generated(length: 2_000_000, seed: 8), at: "/changing.mp4")
            // Play 1 caches the first 500 000 bytes of version 1.
            try await ReadPathTests.readAndCheck(h, "/changing.mp4", offset: 0, length: 500_000)
            h.origin.changeContent(at: "/changing.mp4")
            // Play 2 wants bytes that are not cached: the origin is asked with If-Range,
            // answers with the new version, and play 2 gets version 2 only.
            let v2 = try #require(h.origin.resource(at: "/changing.mp4"))
            let stream = try await h.reader.read(h.origin.url("/changing.mp4"))
            #expect(stream.metadata.etag == "\"v2\"")
            let bytes = try await collect(stream)
            #expect(bytes.readableBytes == 2_000_000)
            #expect(v2.firstMismatch(in: bytes, at: 0) == nil)
            let key = h.store.key(for: h.origin.url("/changing.mp4"))
            #expect(h.store.metadata(for: key)?.etag == "\"v2\"")
        }
    }

    @Test(arguments: FetcherSetup.all)
    func aFileThatChangesDuringAReadEndsItWithAnErrorAfterOldBytesOnly(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            var faults = TestOrigin.Faults()
            faults.dropAfterBytes = 400_000
            faults.dropCount = 1
            // The connection drops at 400 000; before it is resumed the file changes.
            faults.changesAfterDrop = true
            h.origin.serve(.generated(length: 2_000_000, seed: 9, faults: faults), at: "/live.mp4")
            let v1 = try #require(h.origin.resource(at: "/live.mp4"))
            let stream = try await h.reader.read(h.origin.url("/live.mp4"))
            var received = ByteBuffer()
            await #expect {
                for try await var chunk in stream { received.writeBuffer(&chunk) }
            } throws: { ($0 as? CacheError)?.code == .resourceChanged }
            #expect(received.readableBytes <= 400_000, "\(received.readableBytes)")
            #expect(v1.firstMismatch(in: received, at: 0) == nil)
            // The next read gets version 2 whole.
            let v2 = try #require(h.origin.resource(at: "/live.mp4"))
            try await ReadPathTests.readAndCheck(h, "/live.mp4")
            #expect(v2.etag == "\"v2\"")
        }
    }

    /// Playing a file larger than its share of the cache streams all of it, caches the share,
    /// and leaves the files cached before it where they are.
    @Test func aFileLargerThanItsShareLeavesTheOthersCached() async throws {
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.maxBytes = 4 << 20  // a share of 2 MiB per file
        try await Harness.with(store: storeConfiguration) { h in
            for name in ["/one.mp3", "/two.mp3"] {
                h.origin.serve(.generated(length: 1 << 20, seed: 11, mimeType: "audio/mpeg"), at: name)
                try await ReadPathTests.readAndCheck(h, name)
            }
            h.origin.serve(.generated(length: 6 << 20, seed: 12), at: "/film.mp4")
            try await ReadPathTests.readAndCheck(h, "/film.mp4")
            let film = h.store.spans(for: h.store.key(for: h.origin.url("/film.mp4"))).byteCount
            #expect(film <= 2 << 20 && film > 0, "the film is cached up to its share: \(film)")
            h.origin.resetCounters()
            for name in ["/one.mp3", "/two.mp3"] {
                let statistics = try await ReadPathTests.readAndCheck(h, name)
                #expect(statistics.bytesFromOrigin == 0 && h.origin.requests(name).isEmpty, "\(name) was evicted")
            }
        }
    }

    @Test func aStoreThatCannotWriteStillStreamsEveryByte() async throws {
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.maxBytes = 300_000  // smaller than the file: writes fail once it is full
        try await Harness.with(store: storeConfiguration) { h in
            h.origin.serve(.generated(length: 3_000_000, seed: 10), at: "/big.mp4")
            try await ReadPathTests.readAndCheck(h, "/big.mp4")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<3 {
                    group.addTask { try await ReadPathTests.readAndCheck(h, "/big.mp4", offset: 1_000_000) }
                }
                try await group.waitForAll()
            }
            #expect(h.store.totalBytes <= 300_000)
            // A closed store: the read path streams from the origin alone.
            try await h.store.close()
            try await ReadPathTests.readAndCheck(h, "/big.mp4", offset: 2_500_000)
        }
    }
}

enum ContentRangeCheck {
    /// The bytes a `Range` header asked for in a resource of `size` bytes.
    static func range(of header: String, size: Int64) -> ByteRange? {
        guard case .single(let specifier) = RangeSpecifier.parse(header) else { return nil }
        return specifier.resolve(length: size)
    }
}
