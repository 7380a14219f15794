// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// An encrypted store: what is written reads back exactly and survives a reopen, nothing in
/// the folder shows what was stored, a block wrong on disk is a hole (never bytes), and keys
/// are handled as a user expects (a missing key refused, another key a miss, an unencrypted
/// folder cleaned).
@Suite(.stallLimit) struct EncryptedStoreTests {
    static let content = CacheStoreTests.content
    static var key: SymmetricKey { SymmetricKey(data: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }) }
    static var otherKey: SymmetricKey { SymmetricKey(data: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 3) }) }

    static func configuration(key: SymmetricKey? = key, maxBytes: Int64 = 1 << 30, clock: ManualClock = ManualClock())
        -> CacheStore.Configuration
    {
        var configuration = CacheStoreTests.configuration(maxBytes: maxBytes, clock: clock)
        configuration.encryptionKey = key
        return configuration
    }

    static let metadata = ContentMetadata(
        length: 2 << 20, mimeType: "audio/mpeg", acceptsRanges: true, etag: "\"secret-etag\"")

    /// Every file under `directory`, with its bytes.
    static func allFiles(in directory: URL) throws -> [(path: String, bytes: Data)] {
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        var files: [(String, Data)] = []
        while let name = enumerator?.nextObject() as? String {
            let path = directory.appendingPathComponent(name).path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            files.append((path, try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        return files
    }

    /// The files under `directory` that contain `needle`.
    static func files(in directory: URL, containing needle: [UInt8]) throws -> [String] {
        try allFiles(in: directory).filter { $0.bytes.range(of: Data(needle)) != nil }.map(\.path)
    }

    /// Property: random writes, many of them starting or ending inside a block, over stored
    /// bytes or beside them, keep exactly the spans of a reference model and read back byte
    /// for byte, before and after a reopen with the same key.
    @Test func randomWritesReadBackExactlyAndSurviveReopen() async throws {
        try await withTemporaryDirectory { directory in
            var random = SplitMix(seed: 17)
            var model = SpanSet()
            let length = Self.metadata.length!
            let entryKey = CacheKey("https://media.example/a.mp3")
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(store.isEncrypted)
            let handle = try store.openEntry(entryKey)
            try handle.updateMetadata(Self.metadata)
            for round in 0..<120 {
                let start = Int64(random.next() % UInt64(length))
                let size = min(length - start, Int64(random.next() % (round % 4 == 0 ? 300_000 : 9_000)) + 1)
                try await CacheStoreTests.write(handle, ByteRange(start, start + size))
                model.insert(ByteRange(start, start + size))
                #expect(try handle.spans() == model)
                // A random part of a random stored span reads back exactly.
                let span = model.spans[Int(random.next() % UInt64(model.spans.count))]
                let from = span.lowerBound + Int64(random.next() % UInt64(span.length))
                let to = from + 1 + Int64(random.next() % UInt64(span.upperBound - from))
                try await CacheStoreTests.expectBytes(handle, ByteRange(from, to))
            }
            #expect(store.totalBytes == model.byteCount)
            #expect(store.summary().rejectedBlocks == 0)
            handle.close()
            try await store.close()

            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(reopened.keys == [entryKey])
            #expect(reopened.metadata(for: entryKey) == Self.metadata)
            let again = try reopened.openEntry(entryKey)
            #expect(try again.spans() == model)
            for span in model.spans { try await CacheStoreTests.expectBytes(again, span) }
            #expect(reopened.summary().rejectedBlocks == 0)
            again.close()
            try await reopened.close()
        }
    }

    /// Nothing under the cache folder holds the stored bytes, the URL, the key, the type or
    /// the validators; the same check finds all of them in an unencrypted folder, so it can fail.
    @Test(arguments: [true, false])
    func theFolderHoldsNothingOfWhatWasPlayed(encrypted: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let url = URL(string: "https://secret-host.example/albums/some-song-title.mp3")!
            let store = try await CacheStore.open(
                directory: directory, configuration: Self.configuration(key: encrypted ? Self.key : nil))
            let entryKey = CacheKey("user-chosen key: some-song-title")
            let handle = try store.openEntry(entryKey)
            var metadata = Self.metadata
            metadata.sourceURL = url
            try handle.updateMetadata(metadata)
            try await CacheStoreTests.write(handle, ByteRange(0, metadata.length!))
            handle.close()
            try await store.close()

            let samples = stride(from: Int64(0), to: metadata.length!, by: 65_537).map {
                Array(Self.content.buffer(offset: $0, length: 16).readableBytesView)
            }
            // Whole words: a 4-byte one ("mpeg") turns up by chance in 2 MiB of ciphertext once
            // in about 2,000 runs (2^21 places, 2^32 values). The type is looked for as JSON
            // writes it too (`audio\/mpeg`).
            let words =
                ["secret-host", "some-song-title", "secret-etag"].map { [Array($0.utf8)] }
                + [["audio/mpeg", "audio\\/mpeg"].map { Array($0.utf8) }]
            let found = try (samples.map { [$0] } + words).map { forms in
                try forms.flatMap { try Self.files(in: directory, containing: $0) }
            }
            if encrypted {
                #expect(found.allSatisfy { $0.isEmpty }, "plaintext found in \(Set(found.joined()))")
            } else {
                // The same scan of an unencrypted folder finds every sample, so it can fail.
                #expect(
                    found.allSatisfy { !$0.isEmpty }, "\(found.indices.filter { found[$0].isEmpty }) of \(found.count)")
            }
        }
    }

    /// A flipped byte in a block makes that block a hole: the read throws `.notCached`, the
    /// spans lose the block, the other blocks still read, and the rejection is counted.
    @Test func aBlockWrongOnDiskIsDroppedNeverRead() async throws {
        try await Self.withEntry("flip") { store, handle in
            let entryKey = handle.key
            try await CacheStoreTests.write(handle, ByteRange(0, 1 << 20))
            let layout = BlockLayout()
            try Self.modifyDataFile(store, entryKey) { file in file[Int(layout.slotOffset(3)) + 5000] ^= 0x40 }
            await #expect { try await handle.read(ByteRange(100_000, 300_000)) } throws: {
                ($0 as? CacheError)?.code == .notCached
            }
            #expect(try handle.spans() == SpanSet([ByteRange(0, 3 << 16), ByteRange(4 << 16, 1 << 20)]))
            try await CacheStoreTests.expectBytes(handle, ByteRange(0, 3 << 16))
            try await CacheStoreTests.expectBytes(handle, ByteRange(4 << 16, 1 << 20))
            #expect(store.summary().rejectedBlocks == 1)
            #expect(store.totalBytes == (1 << 20) - (1 << 16))
            // Written again, the block reads back.
            try await CacheStoreTests.write(handle, ByteRange(3 << 16, 4 << 16))
            try await CacheStoreTests.expectBytes(handle, ByteRange(0, 1 << 20))
        }
    }

    /// A write that reaches into a block whose stored part is wrong on disk does not carry
    /// the wrong part over: that part becomes a hole, the new bytes are stored.
    @Test func aWriteBesideAWrongPartDropsThatPart() async throws {
        try await Self.withEntry("merge") { store, handle in
            let entryKey = handle.key
            try await CacheStoreTests.write(handle, ByteRange(0, 10_000))
            try Self.modifyDataFile(store, entryKey) { file in file[20] ^= 0x01 }
            try await CacheStoreTests.write(handle, ByteRange(10_000, 70_000))
            #expect(try handle.spans() == SpanSet([ByteRange(10_000, 70_000)]))
            try await CacheStoreTests.expectBytes(handle, ByteRange(10_000, 70_000))
            #expect(store.summary().rejectedBlocks == 1)
        }
    }

    /// Scattered writes into one block (a player asking for single bytes here and there):
    /// a block's header names at most 15 runs, so past that the block keeps the run just
    /// written and the others become holes; what stays reads back exactly.
    @Test func aBlockKeepsAtMostFifteenRunsAndDropsTheRestNeverBytes() async throws {
        try await Self.withEntry("scattered") { store, handle in
            var written = SpanSet()
            for run in 0..<20 {
                let range = ByteRange(Int64(run) * 1000, Int64(run) * 1000 + 10)
                try await CacheStoreTests.write(handle, range)
                written.insert(range)
                let spans = try handle.spans()
                #expect(spans.contains(range), "the run just written is kept")
                // 15 runs fit; the 16th write keeps itself alone, and runs gather again after it.
                #expect(
                    spans.spans.count == (run < BlockLayout.maximumRuns ? run + 1 : run - BlockLayout.maximumRuns + 1),
                    "after write \(run): \(spans)")
                #expect(spans.spans.allSatisfy { written.contains($0) })
                for span in spans.spans { try await CacheStoreTests.expectBytes(handle, span) }
            }
            #expect(store.summary().rejectedBlocks == 0)
        }
    }

    /// Writers racing on the same blocks (pieces of one block from several tasks) and readers
    /// reading meanwhile: every byte lands, no reader sees a wrong byte, no block is taken for
    /// tampered.
    @Test func concurrentWritersAndReadersOfSharedBlocksAgree() async throws {
        try await Self.withEntry("race") { store, handle in
            let piece: Int64 = 9_000
            var pieces = Array(stride(from: Int64(0), to: 1 << 20, by: Int(piece)))
            var random = SplitMix(seed: 5)
            pieces.shuffle(using: &random)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<4 {
                    let mine = pieces.enumerated().filter { $0.offset % 4 == lane }.map(\.element)
                    group.addTask {
                        for start in mine {
                            try await CacheStoreTests.write(handle, ByteRange(start, min(start + piece, 1 << 20)))
                        }
                    }
                }
                for _ in 0..<2 {
                    group.addTask {
                        for _ in 0..<200 {
                            guard let span = try handle.spans().spans.randomElement() else {
                                await Task.yield()
                                continue
                            }
                            try await CacheStoreTests.expectBytes(handle, span)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try handle.spans() == SpanSet([ByteRange(0, 1 << 20)]))
            try await CacheStoreTests.expectBytes(handle, ByteRange(0, 1 << 20))
            #expect(store.summary().rejectedBlocks == 0)
        }
    }

    /// An encrypted folder opened without its key is refused with a clear error and left
    /// as it was: opened with the key afterwards, everything is there.
    @Test func anEncryptedFolderWithoutItsKeyIsRefusedAndKept() async throws {
        try await withTemporaryDirectory { directory in
            let entryKey = CacheKey("kept")
            try await Self.fill(directory, key: Self.key, entryKey, ByteRange(0, 300_000))
            await #expect {
                try await CacheStore.open(directory: directory, configuration: Self.configuration(key: nil))
            } throws: { error in
                let error = error as? CacheError
                return error?.code == .encryptionKeyRequired && error?.message.contains("encrypted") == true
            }
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let handle = try store.openEntry(entryKey)
            #expect(try handle.spans() == SpanSet([ByteRange(0, 300_000)]))
            try await CacheStoreTests.expectBytes(handle, ByteRange(0, 300_000))
            handle.close()
            try await store.close()
        }
    }

    /// Another key: every entry is a miss, never garbage; entries sealed with the first key
    /// stay (counted) so the first key finds them again, unless space is needed.
    @Test func anotherKeyMissesEveryEntryAndTheRightKeyFindsThemAgain() async throws {
        try await withTemporaryDirectory { directory in
            let entryKey = CacheKey("two keys")
            let clock = ManualClock()
            try await Self.fill(directory, key: Self.key, entryKey, ByteRange(0, 500_000))

            clock.advance(by: 10)
            let other = try await CacheStore.open(
                directory: directory, configuration: Self.configuration(key: Self.otherKey, clock: clock))
            #expect(other.keys.isEmpty)
            #expect(other.metadata(for: entryKey) == nil)
            #expect(other.summary().entriesSealedWithAnotherKey == 1)
            #expect(other.totalBytes == 500_000)
            // Stored again under the other key, it is a second entry beside the first.
            let handle = try other.openEntry(entryKey)
            try handle.updateMetadata(Self.metadata)
            try await CacheStoreTests.write(handle, ByteRange(0, 100_000))
            try await CacheStoreTests.expectBytes(handle, ByteRange(0, 100_000))
            handle.close()
            try await other.close()

            clock.advance(by: 10)
            let right = try await CacheStore.open(directory: directory, configuration: Self.configuration(clock: clock))
            #expect(right.spans(for: entryKey) == SpanSet([ByteRange(0, 500_000)]))
            #expect(right.summary().entriesSealedWithAnotherKey == 1)
            let again = try right.openEntry(entryKey)
            try await CacheStoreTests.expectBytes(again, ByteRange(0, 500_000))
            again.close()
            try await right.close()

            // Space is needed: the least recently used entry goes, whichever key sealed it (here
            // the one sealed with the other key, last used before the first key's was read).
            let small = try await CacheStore.open(
                directory: directory, configuration: Self.configuration(maxBytes: 550_000, clock: clock))
            #expect(small.summary().entriesSealedWithAnotherKey == 0)
            #expect(small.spans(for: entryKey) == SpanSet([ByteRange(0, 500_000)]))
            try await small.close()
            #expect(try CacheStoreTests.dataFiles(in: directory).count == 1)
        }
    }

    /// An unencrypted folder opened with a key: its entries and their files go (nothing
    /// unencrypted stays), and what is stored from then on is sealed.
    @Test func anUnencryptedFolderOpenedWithAKeyLosesItsUnencryptedEntries() async throws {
        try await withTemporaryDirectory { directory in
            let entryKey = CacheKey("plain")
            try await Self.fill(directory, key: nil, entryKey, ByteRange(0, 200_000))
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(store.keys.isEmpty)
            #expect(store.totalBytes == 0)
            #expect(try CacheStoreTests.dataFiles(in: directory).isEmpty)
            try await store.close()
            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(reopened.keys.isEmpty)
            try await reopened.close()
        }
    }

    // MARK: Helpers

    /// Runs `body` with a new encrypted store in a temporary folder and its entry `name`
    /// open, holding ``metadata``; closes both afterwards.
    static func withEntry(_ name: String, _ body: (CacheStore, CacheEntryHandle) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: configuration())
            let handle = try store.openEntry(CacheKey(name))
            try handle.updateMetadata(metadata)
            try await body(store, handle)
            handle.close()
            try await store.close()
        }
    }

    static func fill(_ directory: URL, key: SymmetricKey?, _ entryKey: CacheKey, _ range: ByteRange) async throws {
        let store = try await CacheStore.open(directory: directory, configuration: configuration(key: key))
        let handle = try store.openEntry(entryKey)
        try handle.updateMetadata(metadata)
        try await CacheStoreTests.write(handle, range)
        handle.close()
        try await store.close()
    }

    /// Changes the bytes of `entryKey`'s data file in place.
    static func modifyDataFile(_ store: CacheStore, _ entryKey: CacheKey, _ change: (inout [UInt8]) -> Void) throws {
        let path = try #require(store.dataFilePath(for: entryKey))
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        let descriptor = open(path, O_WRONLY)
        defer { close(descriptor) }
        #expect(pwrite(descriptor, bytes, bytes.count, 0) == bytes.count)
    }
}

extension CacheStore {
    /// The path of `key`'s data file (for tests that change it behind the store's back).
    func dataFilePath(for key: CacheKey) -> String? {
        state.withLock { $0.records[key].map { dataDirectory + "/" + $0.fileName } }
    }
}
