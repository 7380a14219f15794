// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

@Suite(.stallLimit) struct CacheStoreTests {
    static let content = DeterministicContent(seed: 42)

    /// A store configuration; entries may fill the whole store unless `maxEntryFraction` says
    /// otherwise, so the eviction tests test eviction alone.
    static func configuration(
        maxBytes: Int64 = 1 << 30, clock: ManualClock = ManualClock(), maxAge: Duration? = nil,
        maxEntryFraction: Double = 1
    ) -> CacheStore.Configuration {
        var configuration = CacheStore.Configuration()
        configuration.maxBytes = maxBytes
        configuration.maxEntryFraction = maxEntryFraction
        configuration.clock = clock
        configuration.maxAge = maxAge
        return configuration
    }

    /// Reads `range` and checks it byte for byte against `content`.
    static func expectBytes(
        _ handle: CacheEntryHandle, _ range: ByteRange, content: DeterministicContent = content,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let bytes = try await handle.read(range)
        #expect(bytes.readableBytes == Int(range.length), sourceLocation: sourceLocation)
        #expect(content.firstMismatch(in: bytes, at: range.lowerBound) == nil, sourceLocation: sourceLocation)
    }

    static func write(_ handle: CacheEntryHandle, _ range: ByteRange, content: DeterministicContent = content)
        async throws
    {
        try await handle.write(
            content.buffer(offset: range.lowerBound, length: Int(range.length)), at: range.lowerBound)
    }

    static func dataFiles(in directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("data").path)
    }

    @Test func writesAreReadBackAndSurviveReopen() async throws {
        try await withTemporaryDirectory { directory in
            let key = CacheKey("https://cdn.example/video.mp4")
            let metadata = ContentMetadata(
                length: 1 << 20, mimeType: "video/mp4; codecs=avc1", acceptsRanges: true, etag: "\"abc\"",
                lastModified: "Tue, 01 Jan 2030 00:00:00 GMT")
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let handle = try store.openEntry(key)
            try handle.updateMetadata(metadata)
            try await Self.write(handle, ByteRange(0, 1000))
            try await Self.write(handle, ByteRange(5000, 9000))
            try await Self.write(handle, ByteRange(1000, 2000))  // touches the first span
            #expect(try handle.spans().spans == [ByteRange(0, 2000), ByteRange(5000, 9000)])
            #expect(
                try handle.spans().holes(in: ByteRange(0, 10_000)) == [ByteRange(2000, 5000), ByteRange(9000, 10_000)])
            try await Self.expectBytes(handle, ByteRange(0, 2000))
            try await Self.expectBytes(handle, ByteRange(6000, 8500))
            await #expect(throws: CacheError.self) { try await handle.read(ByteRange(1500, 5500)) }
            #expect(store.totalBytes == 6000)
            handle.close()
            try await store.close()

            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(reopened.metadata(for: key) == metadata)
            #expect(reopened.metadata(for: key)?.mimeType == "video/mp4")
            #expect(reopened.metadata(for: key)?.uniformTypeIdentifier == "public.mpeg-4")
            #expect(reopened.spans(for: key).spans == [ByteRange(0, 2000), ByteRange(5000, 9000)])
            #expect(reopened.totalBytes == 6000)
            let again = try reopened.openEntry(key)
            try await Self.expectBytes(again, ByteRange(0, 2000))
            try await Self.expectBytes(again, ByteRange(5000, 9000))
            again.close()
            try await reopened.close()
        }
    }

    @Test func keysAreNeverPaths() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let keys = [
                CacheKey("../../../etc/passwd"), CacheKey(String(repeating: "é/", count: 5_000)), CacheKey(""),
                CacheKey("a\0b"),
            ]
            for (index, key) in keys.enumerated() {
                let handle = try store.openEntry(key)
                try await Self.write(handle, ByteRange(Int64(index), Int64(index) + 100))
                handle.close()
            }
            try await store.close()
            let names = try Self.dataFiles(in: directory)
            #expect(names.count == keys.count)
            #expect(
                names.allSatisfy {
                    $0.utf8.count == 32 && $0.utf8.allSatisfy { (48...57).contains($0) || (65...70).contains($0) }
                }, "random names: \(names)")
            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(Set(reopened.keys) == Set(keys))
            for (index, key) in keys.enumerated() {
                let handle = try reopened.openEntry(key)
                try await Self.expectBytes(handle, ByteRange(Int64(index), Int64(index) + 100))
            }
            try await reopened.close()
        }
    }

    @Test func defaultKeyNormalisesTheURLAndCustomKeysDropTokens() throws {
        let a = CacheKey(url: URL(string: "HTTP://Media.Example.COM:80/a/b.mp3?x=1#t=10")!)
        let b = CacheKey(url: URL(string: "http://media.example.com/a/b.mp3?x=1")!)
        let c = CacheKey(url: URL(string: "http://media.example.com/a/b.mp3?x=2")!)
        #expect(a == b)
        #expect(a != c)
        #expect(a.rawValue.count == 64)

        var configuration = CacheStore.Configuration()
        configuration.keyFunction = { url in
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            components.queryItems = components.queryItems?.filter { $0.name != "token" }
            return CacheKey(url: components.url!)
        }
        let withToken = configuration.keyFunction(URL(string: "https://cdn.example/v.mp4?token=abc&q=1")!)
        let otherToken = configuration.keyFunction(URL(string: "https://cdn.example/v.mp4?token=xyz&q=1")!)
        #expect(withToken == otherToken)
    }

    @Test func uniformTypeIdentifiers() {
        let table: [(String, String)] = [
            ("audio/mpeg", "public.mp3"), ("audio/mp4", "com.apple.m4a-audio"), ("audio/aac", "public.aac-audio"),
            ("video/mp4", "public.mpeg-4"), ("video/quicktime", "com.apple.quicktime-movie"),
            ("audio/wav", "com.microsoft.waveform-audio"), ("audio/flac", "org.xiph.flac"),
            ("audio/ogg", "org.xiph.ogg-audio"),
            ("video/webm", "org.webmproject.webm"), ("video/MP2T", "public.mpeg-2-transport-stream"),
            ("application/vnd.apple.mpegurl", "public.m3u-playlist"),
        ]
        for (mime, uti) in table {
            #expect(ContentMetadata(mimeType: mime).uniformTypeIdentifier == uti, "\(mime)")
        }
        for (ext, uti) in [
            ("mp3", "public.mp3"), ("M4A", "com.apple.m4a-audio"), ("mov", "com.apple.quicktime-movie"),
            ("ts", "public.mpeg-2-transport-stream"), ("m3u8", "public.m3u-playlist"),
        ] {
            #expect(MediaType.uniformTypeIdentifier(forPathExtension: ext) == uti, "\(ext)")
        }
        #expect(ContentMetadata(mimeType: "application/x-unknown").uniformTypeIdentifier == nil)
    }

    /// The byte-wise form of `MediaType.normalized` gives what the reference (split on `;`,
    /// trim `Character.isWhitespace`, lower-case) gives, for random text made of the bytes a
    /// type's edge cases are made of.
    @Test func normalizedTypesMatchTheReferenceOnRandomText() {
        func reference(_ text: String) -> String {
            let base = text.split(separator: ";", maxSplits: 1).first.map(String.init) ?? text
            var slice = Substring(base)
            while let first = slice.first, first.isWhitespace { slice.removeFirst() }
            while let last = slice.last, last.isWhitespace { slice.removeLast() }
            return String(slice).lowercased()
        }
        let alphabet = Array("aZ/;  \t\r\n\u{0B}\u{0C}-+.09é\u{85}".unicodeScalars)
        var random = SplitMix(seed: 11)
        for _ in 0..<20_000 {
            let length = Int(random.next() % 12)
            let text = String(
                String.UnicodeScalarView(
                    (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }))
            #expect(MediaType.normalized(mimeType: text) == reference(text), "\(Array(text.utf8))")
        }
        #expect(MediaType.normalized(mimeType: " Video/MP4 ; codecs=x") == "video/mp4")
    }

    /// The read path's memory of validations keeps at most its limit: when full, the older
    /// half goes and the newest stay.
    @Test func theMemoryOfValidationsIsBounded() {
        let memory = RecentDates<Void>(limit: 8)
        let start = Date(timeIntervalSince1970: 1_000_000)
        for index in 0..<100 {
            memory.record(CacheKey("k\(index)"), at: start.addingTimeInterval(Double(index)))
            #expect(memory.count <= 8)
        }
        #expect(memory.date(of: CacheKey("k99")) == start.addingTimeInterval(99))
        #expect(memory.date(of: CacheKey("k0")) == nil)
        // Recording a remembered key again forgets nothing.
        let before = memory.count
        memory.record(CacheKey("k99"), at: start.addingTimeInterval(100))
        #expect(memory.count == before && memory.date(of: CacheKey("k99")) == start.addingTimeInterval(100))
    }

    /// A key's hash is computed once; keys stay equal, hashed alike and encoded as before.
    @Test func keysCompareHashAndEncodeByTheirText() throws {
        var key = CacheKey("a")
        key.rawValue = "b"
        #expect(key == CacheKey("b") && key.hashValue == CacheKey("b").hashValue && key != CacheKey("a"))
        #expect(Set([CacheKey("x"), CacheKey("x"), key]).count == 2)
        let encoded = try JSONEncoder().encode(key)
        #expect(String(decoding: encoded, as: UTF8.self) == #"{"rawValue":"b"}"#)
        #expect(try JSONDecoder().decode(CacheKey.self, from: encoded) == key)
    }

    @Test func badWritesAndReadsGetClearErrors() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let handle = try store.openEntry(CacheKey("k"))
            try handle.updateMetadata(ContentMetadata(length: 100))
            await #expect { try await Self.write(handle, ByteRange(90, 110)) } throws: {
                ($0 as? CacheError)?.code == .outOfBounds
            }
            await #expect { try await handle.write(ByteBuffer(string: "x"), at: -1) } throws: {
                ($0 as? CacheError)?.code == .outOfBounds
            }
            await #expect { try await handle.read(ByteRange(0, 1)) } throws: { ($0 as? CacheError)?.code == .notCached }
            #expect(try handle.spans().isEmpty)
            try await store.close()
            #expect { try store.openEntry(CacheKey("k")) } throws: { ($0 as? CacheError)?.code == .storeClosed }
        }
    }

    @Test func aSecondProcessCannotOpenTheSameFolder() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory)
            await #expect {
                _ = try await CacheStore.open(directory: directory)
            } throws: { ($0 as? CacheError)?.code == .storeLocked }
            try await store.close()
        }
    }

    /// The eviction policy at work in the store: an entry played again proves itself; of those
    /// played once, the oldest goes first, and after the store first filled, those stored since
    /// before its first contents; the plays and the choice hold after a reopen.
    @Test func entriesPlayedOnceGoBeforeOnesPlayedAgain() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            let store = try await CacheStore.open(
                directory: directory, configuration: Self.configuration(maxBytes: 300_000, clock: clock))
            for name in ["a", "b", "c"] {
                let handle = try store.openEntry(CacheKey(name))
                try await Self.write(handle, ByteRange(0, 100_000))
                handle.close()
                store.notePlayed(CacheKey(name), from: 0, through: 100_000)
                clock.advance(by: 10)
            }
            // A second play of "a" makes "b" the oldest of those played once.
            let a = try store.openEntry(CacheKey("a"))
            try await Self.expectBytes(a, ByteRange(0, 100_000))
            a.close()
            store.notePlayed(CacheKey("a"), from: 0, through: 100_000)
            clock.advance(by: 10)
            let d = try store.openEntry(CacheKey("d"))
            try await Self.write(d, ByteRange(0, 100_000))
            d.close()
            #expect(Set(store.keys) == [CacheKey("a"), CacheKey("c"), CacheKey("d")])
            #expect(store.totalBytes == 300_000)
            try await store.flush()
            #expect(try Self.dataFiles(in: directory).count == 3)
            try await store.close()
            let reopened = try await CacheStore.open(
                directory: directory, configuration: Self.configuration(maxBytes: 300_000, clock: clock))
            #expect(Set(reopened.keys) == [CacheKey("a"), CacheKey("c"), CacheKey("d")])
            let e = try reopened.openEntry(CacheKey("e"))
            try await Self.write(e, ByteRange(0, 100_000))
            e.close()
            #expect(Set(reopened.keys) == [CacheKey("a"), CacheKey("c"), CacheKey("e")])
            try await reopened.close()
        }
    }

    /// What players got from the cache and the origin, day by day, and what eviction let go,
    /// survive a reopen (the status page's "saved" is the store's life, not the server's).
    @Test func theUsageHistorySurvivesAReopen() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            let configuration = Self.configuration(maxBytes: 150_000, clock: clock)
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            store.noteServed(fromCache: 1_000, fromOrigin: 3_000)
            clock.advance(by: 86_400)
            store.noteServed(fromCache: 500, fromOrigin: 0)
            for name in ["a", "b"] {
                let handle = try store.openEntry(CacheKey(name))
                try await Self.write(handle, ByteRange(0, 100_000))
                handle.close()
            }
            try await store.close()
            let reopened = try await CacheStore.open(directory: directory, configuration: configuration)
            let usage = reopened.usage
            #expect(usage.days.count == 2 && usage.fromCache == 1_500 && usage.fromOrigin == 3_000)
            #expect(usage.days.last?.byteHitRatio == 1)
            #expect(usage.evicted.values.reduce(0, +) >= 50_000, "\(usage.evicted)")
            #expect(
                usage.days.map(\.day) == [UsageHistory.day(of: ManualClock().now), UsageHistory.day(of: clock.now)])
            #expect(UsageHistory.day(of: Date(timeIntervalSince1970: 1_800_000_000)) == "2027-01-15")
            #expect(UsageHistory.day(of: Date(timeIntervalSince1970: -1)) == "1969-12-31")
            try await reopened.close()
        }
    }

    /// A resource larger than its share of the store is cached up to the share; the rest is
    /// refused before anything is evicted, so the other entries stay.
    @Test func aResourcePastItsShareEvictsNothing() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            let store = try await CacheStore.open(
                directory: directory,
                configuration: Self.configuration(maxBytes: 1_000_000, clock: clock, maxEntryFraction: 0.5))
            for name in ["a", "b"] {
                let handle = try store.openEntry(CacheKey(name))
                try await Self.write(handle, ByteRange(0, 200_000))
                handle.close()
                clock.advance(by: 10)
            }
            let big = try store.openEntry(CacheKey("big"))
            var offset: Int64 = 0
            var refusedAt: Int64?
            while offset < 2_000_000 {
                do {
                    try await Self.write(big, ByteRange(offset, offset + 50_000))
                } catch let error as CacheError where error.code == .capacityExceeded {
                    refusedAt = refusedAt ?? offset
                }
                offset += 50_000
            }
            #expect(refusedAt == 500_000, "the share is half the store")
            #expect(try big.spans().byteCount == 500_000)
            try await Self.expectBytes(big, ByteRange(0, 500_000))
            big.close()
            #expect(Set(store.keys) == [CacheKey("a"), CacheKey("b"), CacheKey("big")], "nothing else was evicted")
            #expect(store.totalBytes == 900_000)
            try await store.close()
        }
    }

    @Test func openEntriesAreNotEvictedUnderTheirReaders() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            let store = try await CacheStore.open(
                directory: directory, configuration: Self.configuration(maxBytes: 200_000, clock: clock))
            let oldest = try store.openEntry(CacheKey("oldest"))
            try await Self.write(oldest, ByteRange(0, 100_000))
            clock.advance(by: 10)
            let middle = try store.openEntry(CacheKey("middle"))
            try await Self.write(middle, ByteRange(0, 100_000))
            middle.close()
            clock.advance(by: 10)
            let newest = try store.openEntry(CacheKey("newest"))
            try await Self.write(newest, ByteRange(0, 100_000))
            // "oldest" is still open: "middle" goes instead.
            #expect(Set(store.keys) == [CacheKey("oldest"), CacheKey("newest")])
            try await Self.expectBytes(oldest, ByteRange(0, 100_000))
            // With both open, nothing can make room: the write is refused, nothing is lost.
            await #expect {
                try await Self.write(newest, ByteRange(100_000, 150_000))
            } throws: { ($0 as? CacheError)?.code == .capacityExceeded }
            try await Self.expectBytes(oldest, ByteRange(0, 100_000))
            try await Self.expectBytes(newest, ByteRange(0, 100_000))
            oldest.close()
            newest.close()
            try await store.close()
        }
    }

    @Test func entriesOlderThanMaxAgeExpire() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            let configuration = Self.configuration(clock: clock, maxAge: .seconds(60))
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            for name in ["stale", "fresh"] {
                let handle = try store.openEntry(CacheKey(name))
                try await Self.write(handle, ByteRange(0, 1000))
                handle.close()
                clock.advance(by: 40)
            }
            // "stale" was last used 80 s ago, "fresh" 40 s ago.
            try await store.trim()
            #expect(store.keys == [CacheKey("fresh")])
            try await store.close()
            clock.advance(by: 30)
            let reopened = try await CacheStore.open(directory: directory, configuration: configuration)
            #expect(reopened.keys.isEmpty)
            #expect(try Self.dataFiles(in: directory).isEmpty)
            try await reopened.close()
        }
    }

    @Test func aNewVersionDropsTheOldBytes() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let key = CacheKey("song")
            let writer = try store.openEntry(key)
            let other = try store.openEntry(key)
            try writer.updateMetadata(ContentMetadata(length: 10_000, etag: "\"v1\""))
            try await Self.write(writer, ByteRange(0, 5000))
            // Same version, more facts: bytes stay.
            #expect(
                try writer.updateMetadata(ContentMetadata(length: 10_000, mimeType: "audio/mpeg", etag: "\"v1\""))
                    == false)
            #expect(try writer.spans().byteCount == 5000)
            // A different ETag: the old bytes go.
            let v2 = DeterministicContent(seed: 2)
            #expect(try writer.updateMetadata(ContentMetadata(length: 10_000, etag: "\"v2\"")) == true)
            #expect(try writer.spans().isEmpty)
            #expect(store.totalBytes == 0)
            await #expect { try await other.read(ByteRange(0, 10)) } throws: {
                ($0 as? CacheError)?.code == .entryInvalidated
            }
            try await Self.write(writer, ByteRange(0, 3000), content: v2)
            try await Self.expectBytes(writer, ByteRange(0, 3000), content: v2)
            try await store.flush()
            #expect(try Self.dataFiles(in: directory).count == 1)
            writer.close()
            other.close()
            try await store.close()
            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(reopened.metadata(for: key)?.etag == "\"v2\"")
            let handle = try reopened.openEntry(key)
            try await Self.expectBytes(handle, ByteRange(0, 3000), content: v2)
            try await reopened.close()
        }
    }

    @Test func removeAndRemoveAll() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            for name in ["a", "b", "c"] {
                let handle = try store.openEntry(CacheKey(name))
                try await Self.write(handle, ByteRange(0, 4096))
                handle.close()
            }
            let reader = try store.openEntry(CacheKey("a"))
            try await store.remove(CacheKey("a"))
            #expect(Set(store.keys) == [CacheKey("b"), CacheKey("c")])
            await #expect { try await reader.read(ByteRange(0, 10)) } throws: {
                ($0 as? CacheError)?.code == .entryInvalidated
            }
            #expect(try Self.dataFiles(in: directory).count == 2)
            try await store.removeAll()
            #expect(store.keys.isEmpty)
            #expect(store.totalBytes == 0)
            #expect(try Self.dataFiles(in: directory).isEmpty)
            try await store.close()
            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(reopened.keys.isEmpty)
            try await reopened.close()
        }
    }
}
