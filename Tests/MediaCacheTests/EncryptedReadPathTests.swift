// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import Logging
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The read path over an encrypted store, against the test origin: every way a block can be
/// wrong on disk gives the right bytes with a refetch of that block only, and a wrong key
/// refetches everything without losing what the right key stored.
@Suite(.stallLimit, .endToEnd) struct EncryptedReadPathTests {
    static let blockSize = BlockLayout().blockSize
    static let length: Int64 = 1 << 20

    /// Ways to change a data file behind the store's back.
    enum Tamper: String, CaseIterable, Sendable, CustomStringConvertible {
        /// One bit of block 3's ciphertext.
        case flipAByte
        /// Blocks 3 and 4 trade places.
        case swapTwoBlocks
        /// Block 3 of another entry (same index, same length) put in its place.
        case copyABlockFromAnotherEntry
        /// Block 3 as the resource's previous version had it.
        case restoreABlockFromAnOlderVersion
        /// Block 3 as it was sealed when only half of it was stored.
        case restoreAnOlderSealingOfTheSameBlock

        var description: String { rawValue }
    }

    static func storeConfiguration(key: SymmetricKey = EncryptedStoreTests.key, logs: LogRecorder? = nil)
        -> CacheStore.Configuration
    {
        var configuration = CacheStore.Configuration()
        configuration.encryptionKey = key
        if let logs { configuration.logger = logs.logger() }
        return configuration
    }

    static func readerConfiguration() -> CachingReader.Configuration {
        var configuration = CachingReader.Configuration()
        configuration.holeDelay = .zero
        return configuration
    }

    /// Reads all of `path` and checks every byte against the origin.
    static func readWhole(_ h: Harness, _ path: String, sourceLocation: SourceLocation = #_sourceLocation) async throws
    {
        let resource = try #require(h.origin.resource(at: path))
        let bytes = try await collect(try await h.reader.read(h.origin.url(path)))
        #expect(Int64(bytes.readableBytes) == resource.length, sourceLocation: sourceLocation)
        #expect(resource.firstMismatch(in: bytes, at: 0) == nil, sourceLocation: sourceLocation)
    }

    static func slot(_ index: Int64) -> Range<Int> {
        let layout = BlockLayout()
        return Int(layout.slotOffset(index))..<Int(layout.slotOffset(index + 1))
    }

    @Test(arguments: Tamper.allCases)
    func aTamperedBlockIsFetchedAgainAndNeverServed(tamper: Tamper) async throws {
        let logs = LogRecorder()
        try await Harness.with(store: Self.storeConfiguration(logs: logs), reader: Self.readerConfiguration()) { h in
            var resource = TestOrigin.Resource.generated(length: Self.length, seed: 3)
            resource.cacheControl = "no-cache"
            h.origin.serve(resource, at: "/a.mp4")
            h.origin.serve(.generated(length: Self.length, seed: 4), at: "/b.mp4")
            let key = h.store.key(for: h.origin.url("/a.mp4"))
            let block3 = ByteRange(3 * Self.blockSize, 4 * Self.blockSize)

            switch tamper {
            case .flipAByte:
                try await Self.readWhole(h, "/a.mp4")
                try EncryptedStoreTests.modifyDataFile(h.store, key) { $0[Self.slot(3).lowerBound + 700] ^= 0x08 }
            case .swapTwoBlocks:
                try await Self.readWhole(h, "/a.mp4")
                try EncryptedStoreTests.modifyDataFile(h.store, key) { file in
                    let three = Array(file[Self.slot(3)])
                    file.replaceSubrange(Self.slot(3), with: file[Self.slot(4)])
                    file.replaceSubrange(Self.slot(4), with: three)
                }
            case .copyABlockFromAnotherEntry:
                try await Self.readWhole(h, "/a.mp4")
                try await Self.readWhole(h, "/b.mp4")
                let other = try Data(
                    contentsOf: URL(
                        fileURLWithPath: try #require(
                            h.store.dataFilePath(for: h.store.key(for: h.origin.url("/b.mp4"))))))
                try EncryptedStoreTests.modifyDataFile(h.store, key) {
                    $0.replaceSubrange(Self.slot(3), with: other[Self.slot(3)])
                }
            case .restoreABlockFromAnOlderVersion:
                try await Self.readWhole(h, "/a.mp4")
                let older = try Data(contentsOf: URL(fileURLWithPath: try #require(h.store.dataFilePath(for: key))))
                h.origin.changeContent(at: "/a.mp4")
                try await Self.readWhole(h, "/a.mp4")
                #expect(h.store.metadata(for: key)?.etag == "\"v2\"")
                try EncryptedStoreTests.modifyDataFile(h.store, key) {
                    $0.replaceSubrange(Self.slot(3), with: older[Self.slot(3)])
                }
            case .restoreAnOlderSealingOfTheSameBlock:
                _ = try await collect(
                    try await h.reader.read(
                        h.origin.url("/a.mp4"), offset: 0, length: block3.lowerBound + Self.blockSize / 2))
                #expect(h.store.spans(for: key) == SpanSet([ByteRange(0, block3.lowerBound + Self.blockSize / 2)]))
                let half = try Data(contentsOf: URL(fileURLWithPath: try #require(h.store.dataFilePath(for: key))))[
                    Self.slot(3).lowerBound...]
                try await Self.readWhole(h, "/a.mp4")
                try EncryptedStoreTests.modifyDataFile(h.store, key) {
                    $0.replaceSubrange(Self.slot(3).lowerBound..<(Self.slot(3).lowerBound + half.count), with: half)
                }
            }
            try await h.waitUntilQuiet("/a.mp4")
            h.origin.resetCounters()
            let rejectedBefore = h.store.summary().rejectedBlocks

            try await Self.readWhole(h, "/a.mp4")
            let refetched = h.origin.requests("/a.mp4").filter { $0.status == 206 }.compactMap(\.range)
            let blocks: Int64 = tamper == .swapTwoBlocks ? 2 : 1
            #expect(h.store.summary().rejectedBlocks - rejectedBefore == Int(blocks))
            #expect(h.origin.bodyBytesSent("/a.mp4") == blocks * Self.blockSize, "refetched: \(refetched)")
            #expect(refetched.first == "bytes=\(block3.lowerBound)-\(block3.lowerBound + blocks * Self.blockSize - 1)")
            // The operator sees each rejection, with its block, at warning level.
            let warnings = logs.all.filter {
                $0.level == .warning && $0.message.contains("Stored bytes failed their check")
            }
            #expect(warnings.compactMap { $0.metadata["blocks"] } == ["\(blocks)"], "\(warnings)")
            #expect(
                warnings.first?.metadata["bytes"]
                    == "\([ByteRange(block3.lowerBound, block3.lowerBound + blocks * Self.blockSize)])", "\(warnings)")
            #expect(warnings.first?.metadata["url"] == h.origin.url("/a.mp4").absoluteString)
            // Stored again, the file replays from the cache alone.
            try await h.waitUntilQuiet("/a.mp4")
            h.origin.resetCounters()
            try await Self.readWhole(h, "/a.mp4")
            #expect(h.origin.bodyBytesSent("/a.mp4") == 0)
            #expect(h.store.summary().rejectedBlocks - rejectedBefore == Int(blocks))
        }
    }

    /// A wrong key: every entry is a miss, fetched again and stored under that key, never
    /// garbage; reopened with the right key, the store has everything it had.
    @Test func aWrongKeyRefetchesAndTheRightKeyKeepsEverything() async throws {
        try await Harness.with(reader: Self.readerConfiguration()) { h in
            h.origin.serve(.generated(length: Self.length, seed: 5), at: "/song.mp3")
            let folder = h.directory.appendingPathComponent("encrypted")
            let url = h.origin.url("/song.mp3")
            for (round, key) in [EncryptedStoreTests.key, EncryptedStoreTests.otherKey, EncryptedStoreTests.key]
                .enumerated()
            {
                let store = try await CacheStore.open(
                    directory: folder, configuration: Self.storeConfiguration(key: key))
                let reader = CachingReader(store: store, fetcher: h.fetcher, configuration: Self.readerConfiguration())
                h.origin.resetCounters()
                let bytes = try await collect(try await reader.read(url))
                #expect(h.origin.resource(at: "/song.mp3")!.firstMismatch(in: bytes, at: 0) == nil, "round \(round)")
                #expect(bytes.readableBytes == Int(Self.length))
                // First key: fetched. Other key: fetched again. First key again: all cached.
                #expect(h.origin.bodyBytesSent("/song.mp3") == (round < 2 ? Self.length : 0), "round \(round)")
                #expect(store.summary().entriesSealedWithAnotherKey == (round == 0 ? 0 : 1), "round \(round)")
                #expect(store.summary().rejectedBlocks == 0)
                try await store.close()
            }
        }
    }

    /// An HLS key in an encrypted store is an entry like any other: sealed on disk (its bytes
    /// appear in no file), kept across a restart, and stored by an HLS prefetch, so an asset
    /// prefetched for offline use plays offline. Unencrypted, the prefetch leaves it out.
    @Test(arguments: [true, false])
    func hlsKeysAreStoredSealedOnlyInAnEncryptedStore(encrypted: Bool) async throws {
        try await Harness.with(reader: Self.readerConfiguration()) { h in
            let keyBytes: [UInt8] = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 11) }
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"k/key.bin\"\n#EXTINF:2,\ns.ts\n#EXT-X-ENDLIST\n"
                                .utf8)),
                    mimeType: "application/vnd.apple.mpegurl"), at: "/hls/index.m3u8")
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(keyBytes), mimeType: "application/octet-stream"), at: "/hls/k/key.bin")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: 8), length: 5000), mimeType: "video/mp2t"),
                at: "/hls/s.ts")
            let folder = h.directory.appendingPathComponent("store-\(encrypted)")
            var configuration = CacheStore.Configuration()
            configuration.encryptionKey = encrypted ? EncryptedStoreTests.key : nil
            let keyURL = h.origin.url("/hls/k/key.bin")

            let store = try await CacheStore.open(directory: folder, configuration: configuration)
            let reader = CachingReader(store: store, fetcher: h.fetcher, configuration: Self.readerConfiguration())
            try await reader.prefetchHLS(h.origin.url("/hls/index.m3u8"))
            #expect((store.metadata(for: store.key(for: keyURL)) != nil) == encrypted)
            #expect(h.origin.requests("/hls/k/key.bin").count == (encrypted ? 1 : 0))
            for _ in 0..<3 { #expect(try await reader.bodies.memoryOnlyBody(of: keyURL, as: .player).body == keyBytes) }
            #expect(h.origin.requests("/hls/k/key.bin").count == 1)
            try await store.close()
            #expect(
                try EncryptedStoreTests.files(in: folder, containing: keyBytes).isEmpty,
                "the key is on disk in the clear")

            // After a restart: from the store when encrypted, from the origin again otherwise.
            let reopened = try await CacheStore.open(directory: folder, configuration: configuration)
            let again = CachingReader(store: reopened, fetcher: h.fetcher, configuration: Self.readerConfiguration())
            #expect(try await again.bodies.memoryOnlyBody(of: keyURL, as: .player).body == keyBytes)
            #expect(h.origin.requests("/hls/k/key.bin").count == (encrypted ? 1 : 2))
            try await reopened.close()
        }
    }
}
