// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The read path over an unencrypted store whose data file changed behind its back, against
/// the test origin: after a restart each damaged block run costs one ranged request under the
/// same version (`If-Range`) and the reader gets the origin's bytes; when the origin cannot
/// give them again, the read stops at the damaged block and no wrong byte goes out.
@Suite(.stallLimit, .endToEnd) struct CheckedReadPathTests {
    static let blockSize = BlockChecksums.blockSize
    static let length: Int64 = 1 << 20

    /// Ways to change a data file behind the store's back.
    enum Tamper: String, CaseIterable, Sendable, CustomStringConvertible {
        /// One bit of block 3.
        case flipAByte
        /// Zeros over the end of block 3 and the start of block 4 (a sector gone).
        case zeroAcrossTwoBlocks
        /// Block 3 as the resource's previous version had it (a restore from a backup).
        case restoreABlockFromAnOlderVersion

        var description: String { rawValue }
    }

    static func readerConfiguration() -> CachingReader.Configuration {
        var configuration = CachingReader.Configuration()
        configuration.holeDelay = .zero
        return configuration
    }

    /// Reads all of `path` through `reader`: the bytes that came before it ended and its error.
    static func readAll(_ reader: CachingReader, _ url: URL) async -> (ByteBuffer, (any Error)?) {
        var bytes = ByteBuffer()
        do {
            let stream = try await reader.read(url)
            for try await chunk in stream { bytes.writeImmutableBuffer(chunk) }
            return (bytes, nil)
        } catch {
            return (bytes, error)
        }
    }

    /// Closes the harness's store and opens it again with a reader over it, as a restart does.
    static func restart(_ h: Harness, logs: LogRecorder) async throws -> (CacheStore, CachingReader) {
        await h.reader.shutDown()
        try await h.store.close()
        var configuration = CacheStore.Configuration()
        configuration.logger = logs.logger()
        let store = try await CacheStore.open(
            directory: h.directory.appendingPathComponent("store"), configuration: configuration)
        return (store, CachingReader(store: store, fetcher: h.fetcher, configuration: readerConfiguration()))
    }

    /// Serves a generated file of ``length`` bytes, fresh for an hour, at `path`.
    static func serve(_ h: Harness, _ path: String, seed: UInt64) -> (TestOrigin.Resource, URL, CacheKey) {
        var resource = TestOrigin.Resource.generated(length: length, seed: seed)
        resource.cacheControl = "max-age=3600"
        h.origin.serve(resource, at: path)
        let url = h.origin.url(path)
        return (resource, url, h.store.key(for: url))
    }

    @Test(arguments: Tamper.allCases)
    func aChangedByteIsFetchedAgainAfterARestartAndNeverServed(tamper: Tamper) async throws {
        let logs = LogRecorder()
        try await Harness.with(reader: Self.readerConfiguration()) { h in
            let (resource, url, key) = Self.serve(h, "/a.mp4", seed: 3)
            let block3 = BlockChecksums.range(ofBlock: 3)
            let older: Data?
            if tamper == .restoreABlockFromAnOlderVersion {
                var first = TestOrigin.Resource.generated(length: Self.length, seed: 2)
                first.cacheControl = "no-cache"
                first.etag = "\"older\""
                h.origin.serve(first, at: "/a.mp4")
                _ = try await collect(try await h.reader.read(url))
                try await h.waitUntilQuiet("/a.mp4")
                older = try Data(contentsOf: URL(fileURLWithPath: try #require(h.store.dataFilePath(for: key))))
                h.origin.serve(resource, at: "/a.mp4")
            } else {
                older = nil
            }
            let whole = try await collect(try await h.reader.read(url))
            #expect(resource.firstMismatch(in: whole, at: 0) == nil)
            try await h.waitUntilQuiet("/a.mp4")
            try EncryptedStoreTests.modifyDataFile(h.store, key) { file in
                switch tamper {
                case .flipAByte: file[Int(block3.lowerBound) + 700] ^= 0x08
                case .zeroAcrossTwoBlocks:
                    for offset in Int(block3.upperBound) - 512..<Int(block3.upperBound) + 512 { file[offset] = 0 }
                case .restoreABlockFromAnOlderVersion:
                    file.replaceSubrange(
                        Int(block3.lowerBound)..<Int(block3.upperBound),
                        with: older![Int(block3.lowerBound)..<Int(block3.upperBound)])
                }
            }
            let (store, reader) = try await Self.restart(h, logs: logs)
            h.origin.resetCounters()

            let (bytes, error) = await Self.readAll(reader, url)
            #expect(error == nil)
            #expect(Int64(bytes.readableBytes) == Self.length)
            #expect(resource.firstMismatch(in: bytes, at: 0) == nil)
            let blocks: Int64 = tamper == .zeroAcrossTwoBlocks ? 2 : 1
            let requests = h.origin.requests("/a.mp4")
            #expect(requests.count == 1, "\(requests)")
            #expect(
                requests.first?.range == "bytes=\(block3.lowerBound)-\(block3.lowerBound + blocks * Self.blockSize - 1)"
            )
            #expect(requests.first?.ifRange == resource.etag)
            #expect(store.summary().rejectedBlocks == Int(blocks))
            // The operator sees it at warning level, with the URL and the bytes.
            let warnings = logs.all.filter { $0.level == .warning && $0.message.contains("failed their check") }
            #expect(warnings.count == 1, "\(warnings)")
            #expect(warnings.first?.metadata["url"] == url.absoluteString)
            #expect(
                warnings.first?.metadata["bytes"]
                    == "\([ByteRange(block3.lowerBound, block3.lowerBound + blocks * Self.blockSize)])")
            #expect(logs.all.contains { $0.message.contains("fetched again and stored right") })
            try await waitUntil { store.integrity(of: key)?.damaged.isEmpty == true }

            // Stored right again: a replay costs the origin nothing.
            h.origin.resetCounters()
            let (replay, replayError) = await Self.readAll(reader, url)
            #expect(replayError == nil)
            #expect(resource.firstMismatch(in: replay, at: 0) == nil && Int64(replay.readableBytes) == Self.length)
            #expect(h.origin.requests("/a.mp4").isEmpty)
            await reader.shutDown()
            try await store.close()
        }
    }

    /// With the origin failing, a damaged block is never served: the read delivers the
    /// origin's bytes up to the block and then fails; the entry shows as damaged. Pinned or not.
    @Test(arguments: [false, true])
    func withTheOriginDownTheReadStopsAtTheDamagedBlock(pinned: Bool) async throws {
        let logs = LogRecorder()
        try await Harness.with(reader: Self.readerConfiguration()) { h in
            let (resource, url, key) = Self.serve(h, "/pinned.mp3", seed: 8)
            _ = try await collect(try await h.reader.read(url))
            try await h.waitUntilQuiet("/pinned.mp3")
            if pinned { try await h.store.pin([key]) }
            let block6 = BlockChecksums.range(ofBlock: 6)
            try EncryptedStoreTests.modifyDataFile(h.store, key) { $0[Int(block6.lowerBound) + 1_000] ^= 0x40 }
            let (store, reader) = try await Self.restart(h, logs: logs)
            h.origin.update("/pinned.mp3") { $0.faults.status = 503 }

            let (bytes, error) = await Self.readAll(reader, url)
            #expect(error != nil)
            #expect(Int64(bytes.readableBytes) <= block6.lowerBound)
            #expect(resource.firstMismatch(in: bytes, at: 0) == nil)
            #expect(store.entrySummary(for: key)?.damaged == [[block6.lowerBound, block6.upperBound]])
            #expect(store.entrySummary(for: key)?.isPinned == pinned)
            // The bytes after the damaged block are still stored and right.
            let after = try await collect(
                try await reader.read(url, offset: block6.upperBound, length: Self.length - block6.upperBound))
            #expect(resource.firstMismatch(in: after, at: block6.upperBound) == nil)
            await reader.shutDown()
            try await store.close()
        }
    }
}
