import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport
import NIOCore
import Testing

@Suite struct ReadPathTests {
    /// Reads `offset ..< offset + length` (to the end when `length` is nil) and checks every byte.
    @discardableResult
    static func readAndCheck(_ h: Harness, _ path: String, offset: Int64 = 0, length: Int64? = nil,
                             sourceLocation: SourceLocation = #_sourceLocation) async throws -> ReadStatistics {
        let resource = try #require(h.origin.resource(at: path))
        let stream = try await h.reader.read(h.origin.url(path), offset: offset, length: length)
        let bytes = try await collect(stream)
        let expectedLength = min(resource.length, offset + (length ?? resource.length)) - offset
        #expect(Int64(bytes.readableBytes) == expectedLength, sourceLocation: sourceLocation)
        #expect(resource.firstMismatch(in: bytes, at: offset) == nil, sourceLocation: sourceLocation)
        return stream.statistics
    }

    /// Reads up to `limit` bytes then stops (the player cancels); checks the bytes it got.
    @discardableResult
    static func readThenCancel(_ h: Harness, _ path: String, offset: Int64, limit: Int64,
                               sourceLocation: SourceLocation = #_sourceLocation) async throws -> Int64 {
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

    @Test func sequentialReadThenReplayMakesNoOriginRequest() async throws {
        try await Harness.with { h in
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

    /// DESIGN.md's AVPlayer session: 0-1, 0-to-end cancelled after 700 KiB, resume,
    /// seek forward, seek back, replay; then the whole session again from cache.
    @Test func avPlayerPatternFetchesEachByteOnceAndReplaysFromCache() async throws {
        try await Harness.with { h in
            let size: Int64 = 6_000_000
            h.origin.serve(.generated(length: size, seed: 2, mimeType: "audio/mpeg"), at: "/a.mp3")
            var consumed = SpanSet()
            func session() async throws {
                try await Self.readAndCheck(h, "/a.mp3", offset: 0, length: 2)
                for (offset, limit) in [(0, 700 << 10), (700 << 10, 600 << 10), (4_000_000, 500 << 10), (1_000_000, 800 << 10)] as [(Int64, Int64)] {
                    let got = try await Self.readThenCancel(h, "/a.mp3", offset: offset, limit: limit)
                    consumed.insert(ByteRange(offset: offset, length: got))
                }
                try await Self.readAndCheck(h, "/a.mp3", offset: 0, length: 1_500_000)  // replay the start
                consumed.insert(ByteRange(0, 1_500_000))
            }
            try await session()
            let sent = h.origin.bodyBytesSent("/a.mp3")
            let key = h.store.key(for: h.origin.url("/a.mp3"))
            // Everything given to the player is cached.
            #expect(h.store.spans(for: key).holes(in: ByteRange(0, size)).allSatisfy { consumed.holes(in: $0) == [$0] })
            // The origin sent what was consumed, plus at most what was in flight when each of
            // the four cancelled requests went away (each request is at most 1 MiB this early).
            #expect(sent <= consumed.byteCount + 4 << 20, "origin sent \(sent) for \(consumed.byteCount) consumed")
            // No range request asked for a byte before the one it needed: each starts in a hole.
            for request in h.origin.requests("/a.mp3") where request.method == "GET" {
                #expect(request.range != nil, "\(request)")
            }
            h.origin.resetCounters()
            try await session()
            #expect(h.origin.requests("/a.mp3").isEmpty, "second session: \(h.origin.requests("/a.mp3"))")
        }
    }
}
