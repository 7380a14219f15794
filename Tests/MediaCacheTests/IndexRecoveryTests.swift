// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// A damaged, missing or partly unreadable index never stops the store: it is moved aside
/// and rebuilt from the entry records kept beside the data, with every entry's validators,
/// stored bytes and pin and every download job; the store says so once at warning level.
@Suite(.stallLimit) struct IndexRecoveryTests {
    enum Damage: String, CaseIterable, Sendable {
        /// 200 bytes of garbage over the file's header: not a database any more.
        case header
        /// Its second page overwritten with garbage: SQLite opens it, its check fails.
        case pages
        /// The index deleted (with its journal).
        case deleted
    }

    static let film = CacheKey("https://cdn.example/film.mp4")
    static let song = CacheKey("https://cdn.example/song.mp3")

    static func configuration(encrypted: Bool, log: LogRecorder? = nil) -> CacheStore.Configuration {
        var configuration = CacheStore.Configuration()
        if encrypted { configuration.encryptionKey = SymmetricKey(data: Data(repeating: 7, count: 32)) }
        if let log { configuration.logger = log.logger() }
        return configuration
    }

    /// Two entries (one pinned, one partly stored) and a job, then the store closed.
    static func fill(_ folder: URL, encrypted: Bool) async throws {
        let store = try await CacheStore.open(directory: folder, configuration: configuration(encrypted: encrypted))
        try await write(into: store)
        try await store.close()
    }

    /// Two entries (one pinned, one partly stored) and a job, committed.
    static func write(into store: CacheStore) async throws {
        var metadata = ContentMetadata(length: 300_000, mimeType: "video/mp4", acceptsRanges: true, etag: "\"f1\"")
        metadata.responseHeaders = [ContentMetadata.HeaderField(name: "Cache-Control", value: "max-age=60")]
        let film = try store.openEntry(Self.film)
        try film.updateMetadata(metadata)
        try await film.write(DeterministicContent(seed: 5).buffer(offset: 0, length: 300_000), at: 0)
        film.close()
        let song = try store.openEntry(Self.song)
        try song.updateMetadata(
            ContentMetadata(
                length: 100_000, mimeType: "audio/mpeg", acceptsRanges: true,
                lastModified: "Mon, 02 Jan 2028 10:00:00 GMT"))
        try await song.write(DeterministicContent(seed: 6).buffer(offset: 10_000, length: 20_000), at: 10_000)
        song.close()
        try await store.pin([Self.film])
        try await store.saveJob("job1") { Data("{\"id\":\"job1\"}".utf8) }
        try await store.flush()
    }

    static func damage(_ folder: URL, _ damage: Damage) throws {
        let path = folder.appendingPathComponent("index.sqlite").path
        switch damage {
        case .deleted:
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        case .header, .pages:
            let handle = try #require(FileHandle(forUpdatingAtPath: path))
            let size = try handle.seekToEnd()
            #expect(size >= 8192, "an index of \(size) bytes")
            try handle.seek(toOffset: damage == .header ? 0 : 4096)
            // Garbage, the same every run: the first byte (a page's type) is 11, which no page has.
            try handle.write(
                contentsOf: Data(
                    (0..<(damage == .header ? 200 : 4096)).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }))
            try handle.close()
        }
    }

    /// What a user meets after each way a folder gets damaged: the store opens, every byte it
    /// claims is right, and the entries, the pin and the job whose records survived are there.
    enum Harm: String, CaseIterable, Sendable {
        /// 64 bytes of garbage at 20 places spread over the index.
        case scattered
        /// The index's journal lost with its last commits (a copy made while the store ran,
        /// without its `-wal`).
        case journalLost
        /// The pinned entry's data file cut to a third.
        case dataTruncated
    }

    @Test(arguments: Harm.allCases, [false, true])
    func afterEachHarmEveryClaimedByteIsRight(harm: Harm, encrypted: Bool) async throws {
        try await withTemporaryDirectory { directory in
            var folder = directory.appendingPathComponent("cache")
            switch harm {
            case .journalLost:
                // Written and committed, not closed: the commits are in the journal only.
                let store = try await CacheStore.open(
                    directory: folder, configuration: Self.configuration(encrypted: encrypted))
                try await Self.write(into: store)
                let copy = directory.appendingPathComponent("copy")
                try FileManager.default.copyItem(at: folder, to: copy)
                for suffix in ["-wal", "-shm"] { unlink(copy.appendingPathComponent("index.sqlite" + suffix).path) }
                unlink(copy.appendingPathComponent("lock").path)
                try await store.close()
                folder = copy
            case .scattered:
                try await Self.fill(folder, encrypted: encrypted)
                let handle = try #require(
                    FileHandle(forUpdatingAtPath: folder.appendingPathComponent("index.sqlite").path))
                let size = try handle.seekToEnd()
                for place in 0..<20 {
                    try handle.seek(toOffset: UInt64(place) * size / 20 + 37)
                    try handle.write(
                        contentsOf: Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ place &* 7 &+ 3) }))
                }
                try handle.close()
            case .dataTruncated:
                try await Self.fill(folder, encrypted: encrypted)
                let files = try FileManager.default.contentsOfDirectory(
                    atPath: folder.appendingPathComponent("data").path)
                let film = try #require(files.max { Self.size(folder, $0) < Self.size(folder, $1) })
                #expect(
                    truncate(folder.appendingPathComponent("data/" + film).path, off_t(Self.size(folder, film) / 3))
                        == 0)
            }
            let store = try await CacheStore.open(
                directory: folder, configuration: Self.configuration(encrypted: encrypted))
            for (key, seed) in [(Self.film, UInt64(5)), (Self.song, UInt64(6))] {
                let spans = store.spans(for: key)
                let handle = try store.openEntry(key)
                for span in spans.spans {
                    do {
                        let bytes = try await handle.read(span)
                        #expect(
                            DeterministicContent(seed: seed).firstMismatch(in: bytes, at: span.lowerBound) == nil,
                            "\(key) \(span)")
                    } catch let error as CacheError {
                        // A sealed block cut in two fails its check: refused (and fetched again
                        // by the read path), never served.
                        #expect(encrypted && harm == .dataTruncated, "\(error)")
                    }
                }
                handle.close()
            }
            #expect(store.metadata(for: Self.film)?.etag == "\"f1\"" && store.isPinned(Self.film), "the pin survives")
            #expect(store.metadata(for: Self.song)?.lastModified == "Mon, 02 Jan 2028 10:00:00 GMT")
            #expect(try store.loadJobs().map(\.id) == ["job1"])
            switch harm {
            case .dataTruncated:
                #expect(store.spans(for: Self.film).byteCount < 300_000 && store.spans(for: Self.film).byteCount > 0)
            case .journalLost, .scattered: #expect(store.spans(for: Self.film) == SpanSet([ByteRange(0, 300_000)]))
            }
            try await store.close()
        }
    }

    static func size(_ folder: URL, _ name: String) -> Int64 {
        var info = stat()
        return stat(folder.appendingPathComponent("data/" + name).path, &info) == 0 ? Int64(info.st_size) : 0
    }

    @Test(arguments: Damage.allCases, [false, true])
    func aDamagedIndexIsRebuiltWithEveryEntryPinAndJob(damage: Damage, encrypted: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache")
            try await Self.fill(folder, encrypted: encrypted)
            try Self.damage(folder, damage)
            let log = LogRecorder()
            let store = try await CacheStore.open(
                directory: folder, configuration: Self.configuration(encrypted: encrypted, log: log))
            let warnings = log.all.filter {
                $0.level == .warning && $0.message.contains("rebuilt it from the entry records")
            }
            #expect(warnings.count == 1, "\(log.all.map(\.message))")
            #expect(
                warnings.first?.metadata["entries"] == "2" && warnings.first?.metadata["pinned"] == "1"
                    && warnings.first?.metadata["jobs"] == "1")
            if damage != .deleted {
                let aside = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter {
                    $0.hasPrefix("index.sqlite.damaged-")
                }
                #expect(!aside.isEmpty, "the damaged index is kept aside")
            }
            #expect(
                store.metadata(for: Self.film)?.etag == "\"f1\""
                    && store.metadata(for: Self.film)?.responseHeader("cache-control") == "max-age=60")
            #expect(store.metadata(for: Self.song)?.lastModified == "Mon, 02 Jan 2028 10:00:00 GMT")
            #expect(store.isPinned(Self.film) && !store.isPinned(Self.song))
            #expect(
                store.spans(for: Self.film) == SpanSet([ByteRange(0, 300_000)])
                    && store.spans(for: Self.song) == SpanSet([ByteRange(10_000, 30_000)]))
            #expect(try store.loadJobs().map(\.id) == ["job1"])
            let handle = try store.openEntry(Self.film)
            let bytes = try await handle.read(ByteRange(0, 300_000))
            handle.close()
            #expect(
                DeterministicContent(seed: 5).firstMismatch(in: bytes, at: 0) == nil && bytes.readableBytes == 300_000)
            try await store.close()
            // Opened again: the rebuilt index is sound, nothing more to say.
            let again = LogRecorder()
            let reopened = try await CacheStore.open(
                directory: folder, configuration: Self.configuration(encrypted: encrypted, log: again))
            #expect(
                !again.all.contains { $0.level == .warning } && reopened.summary().entries == 2,
                "\(again.all.map(\.message))")
            try await reopened.close()
        }
    }

    /// A first start (no index, no records) says nothing; records nobody names are removed.
    @Test func aNewFolderIsNotARebuildAndStrayRecordsGo() async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache")
            let log = LogRecorder()
            var configuration = CacheStore.Configuration()
            configuration.logger = log.logger()
            let store = try await CacheStore.open(directory: folder, configuration: configuration)
            #expect(!log.all.contains { $0.level == .warning })
            let handle = try store.openEntry(Self.film)
            try await handle.write(DeterministicContent(seed: 5).buffer(offset: 0, length: 1000), at: 0)
            handle.close()
            try await store.flush()
            // Read on the I/O pool, as the store reads them, never on the cooperative pool.
            let records = EntryRecords(folder: folder, sealer: nil)
            #expect(try await BlockingIO.run { records.load().rows.map(\.key) } == [Self.film])
            try await store.remove(Self.film)
            try await store.flush()
            #expect(try await BlockingIO.run { records.load().rows.isEmpty }, "a removed entry's record goes")
            try await store.close()
        }
    }
}
