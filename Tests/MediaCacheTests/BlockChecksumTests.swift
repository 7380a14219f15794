// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import GRDB
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The checksums of an unencrypted store: CRC-32C as the standard defines it, the index's
/// form of them read back whatever it holds, and a store's checksums right for its bytes
/// whichever way writes land in a block.
@Suite(.stallLimit) struct BlockChecksumTests {
    /// The check value of CRC-32C (RFC 3720 §B.4 and the catalogue of CRCs): "123456789".
    @Test func crc32cHasTheStandardsCheckValue() {
        let check = Array("123456789".utf8)
        #expect(check.withUnsafeBytes { CRC32C.checksum($0) } == 0xE306_9283)
        #expect(check.withUnsafeBytes { CRC32C.tableChecksum($0) } == 0xE306_9283)
        // RFC 3720 §B.4: 32 bytes of zeros, and of 0xFF.
        #expect([UInt8](repeating: 0, count: 32).withUnsafeBytes { CRC32C.checksum($0) } == 0x8A91_36AA)
        #expect([UInt8](repeating: 0xFF, count: 32).withUnsafeBytes { CRC32C.checksum($0) } == 0x62A8_AB43)
    }

    /// The processor's instruction and the table agree on random bytes of every length and
    /// alignment, and a checksum extended piece by piece is the checksum of the whole.
    @Test func theInstructionAndTheTableAgreeAndExtendingIsConcatenating() {
        var random = SplitMix(seed: 78)
        for _ in 0..<2_000 {
            let count = Int(random.next() % 300)
            let bytes = (0..<count + 7).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let start = Int(random.next() % 8)
            bytes.withUnsafeBytes { all in
                let part = UnsafeRawBufferPointer(rebasing: all[start..<start + count])
                #expect(CRC32C.checksum(part) == CRC32C.tableChecksum(part))
                let cut = count == 0 ? 0 : Int(random.next() % UInt64(count))
                var crc = CRC32C()
                crc.update(UnsafeRawBufferPointer(rebasing: part[..<cut]))
                var resumed = CRC32C(continuing: crc.value)
                resumed.update(UnsafeRawBufferPointer(rebasing: part[cut...]))
                #expect(resumed.value == CRC32C.checksum(part))
            }
        }
    }

    /// Fuzz: any bytes as the index's checksum column read without a crash, keep only
    /// checksums of blocks that hold stored bytes, and the form written reads back the same.
    @Test func anyChecksumColumnReadsSafelyAndTheWrittenFormRoundTrips() {
        var random = SplitMix(seed: 9530)
        var kept = 0
        for round in 0..<20_000 {
            var spans = SpanSet()
            for _ in 0..<Int(random.next() % 4) {
                let start = Int64(random.next() % (4 << 20))
                spans.insert(ByteRange(start, start + 1 + Int64(random.next() % (300 << 10))))
            }
            var checksums = BlockChecksums()
            for span in spans.spans {
                for block in BlockChecksums.blocks(overlapping: span) where random.next() % 3 != 0 {
                    checksums[block] = UInt32(truncatingIfNeeded: random.next())
                }
            }
            #expect(BlockChecksums(encoded: checksums.encoded, for: spans) == checksums, "round \(round)")
            var data = [UInt8](checksums.encoded)
            switch round % 4 {
            case 0: data = (0..<Int(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            case 1 where !data.isEmpty: data[Int(random.next() % UInt64(data.count))] ^= 1 << (random.next() % 8)
            case 2: data += (0..<Int(random.next() % 12)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            default: data = [0xFF, 0xFF, 0xFF, 0x7F, 1, 2, 3, 4] + data
            }
            let read = BlockChecksums(encoded: Data(data), for: spans)
            for block in 0..<((4 << 20) + (300 << 10)) / BlockChecksums.blockSize + 1 where read[block] != nil {
                #expect(!spans.spans(in: BlockChecksums.range(ofBlock: block)).isEmpty, "round \(round)")
                kept += 1
            }
        }
        print("fuzz checksum column: 20000 inputs, \(kept) checksums kept from altered columns")
    }

    /// Property: random writes, many starting or ending inside a block, over stored bytes or
    /// beside them: after each, every block that holds stored bytes has a checksum; after a
    /// reopen, every stored byte reads back right and no block fails its check. `gathered`:
    /// each write's bytes cut into random buffers (as an origin body's chunks come), written
    /// without joining them (one `pwritev`; some cut into more buffers than it takes at once).
    @Test(arguments: [false, true]) func randomWritesKeepAChecksumForEveryBlockThatHoldsBytes(gathered: Bool)
        async throws
    {
        try await withTemporaryDirectory { directory in
            var random = SplitMix(seed: 3720)
            var model = SpanSet()
            var mostParts = 0
            let metadata = EncryptedStoreTests.metadata
            let length = metadata.length!
            let entryKey = CacheKey("https://media.example/checked.mp3")
            let store = try await CacheStore.open(directory: directory, configuration: CacheStoreTests.configuration())
            let handle = try store.openEntry(entryKey)
            try handle.updateMetadata(metadata)
            for round in 0..<150 {
                let start = Int64(random.next() % UInt64(length))
                let size = min(length - start, Int64(random.next() % (round % 4 == 0 ? 300_000 : 9_000)) + 1)
                if gathered {
                    let buffer = CacheStoreTests.content.buffer(offset: start, length: Int(size))
                    let bytes = Array(buffer.readableBytesView)
                    let parts = GatheredWriteTests.cut(bytes, &random, tiny: round % 10 == 3)
                    try await handle.write(parts, at: start, ownBytes: false)
                    mostParts = max(mostParts, parts.count)
                } else {
                    try await CacheStoreTests.write(handle, ByteRange(start, start + size))
                }
                model.insert(ByteRange(start, start + size))
                let integrity = try #require(store.integrity(of: entryKey))
                #expect(integrity.checksummedBlocks == integrity.storedBlocks, "round \(round)")
            }
            #expect(try handle.spans() == model)
            #expect(!gathered || mostParts > 1_024, "a write of more buffers than one pwritev takes: \(mostParts)")
            handle.close()
            try await store.close()

            let reopened = try await CacheStore.open(
                directory: directory, configuration: CacheStoreTests.configuration())
            let again = try reopened.openEntry(entryKey)
            #expect(try again.spans() == model)
            #expect(reopened.integrity(of: entryKey)?.verified.isEmpty == true)
            for span in model.spans { try await CacheStoreTests.expectBytes(again, span) }
            #expect(reopened.summary().rejectedBlocks == 0)
            #expect(reopened.integrity(of: entryKey)?.verified == model)
            again.close()
            try await reopened.close()
        }
    }

    /// Stores all of ``EncryptedStoreTests/metadata``'s bytes under `entryKey` in a store in
    /// `directory`, closed again; returns the whole range.
    static func storeWhole(_ entryKey: CacheKey, in directory: URL) async throws -> ByteRange {
        let metadata = EncryptedStoreTests.metadata
        let whole = ByteRange(0, metadata.length!)
        let store = try await CacheStore.open(directory: directory, configuration: CacheStoreTests.configuration())
        let handle = try store.openEntry(entryKey)
        try handle.updateMetadata(metadata)
        try await CacheStoreTests.write(handle, whole)
        handle.close()
        try await store.close()
        return whole
    }

    /// A byte changed in the data file while the store was closed: the read of its block
    /// throws `.notCached`, the block's bytes leave the spans and show as damaged, no other
    /// block is touched; written again, the entry is whole and not damaged.
    @Test func aChangedByteDropsItsBlockAndWritingItAgainHealsIt() async throws {
        try await withTemporaryDirectory { directory in
            let entryKey = CacheKey("https://media.example/flipped.mp3")
            let whole = try await Self.storeWhole(entryKey, in: directory)

            let block5 = BlockChecksums.range(ofBlock: 5)
            let probe = try await CacheStore.open(directory: directory, configuration: CacheStoreTests.configuration())
            try EncryptedStoreTests.modifyDataFile(probe, entryKey) { $0[Int(block5.lowerBound) + 4_321] ^= 0x10 }
            let again = try probe.openEntry(entryKey)
            // The blocks before read right; the read that reaches block 5 fails, and only it goes.
            try await CacheStoreTests.expectBytes(again, ByteRange(0, block5.lowerBound))
            await #expect(throws: CacheError.self) { _ = try await again.read(ByteRange(0, block5.lowerBound + 10)) }
            var expected = SpanSet([whole])
            expected.remove(block5)
            #expect(try again.spans() == expected)
            #expect(probe.integrity(of: entryKey)?.damaged == SpanSet([block5]))
            #expect(probe.entrySummary(for: entryKey)?.damaged == [[block5.lowerBound, block5.upperBound]])
            #expect(probe.summary().rejectedBlocks == 1)
            try await CacheStoreTests.write(again, block5)
            #expect(probe.integrity(of: entryKey)?.damaged.isEmpty == true)
            #expect(probe.entrySummary(for: entryKey)?.damaged == nil)
            try await CacheStoreTests.expectBytes(again, whole)
            again.close()
            try await probe.close()
        }
    }

    /// A store of the layout before checksums (no checksum columns, records without them)
    /// opens with every byte, serves them, and gains a checksum for each block it reads; a
    /// byte changed after that is caught.
    @Test func aStoreFromBeforeChecksumsGainsThemAsItIsRead() async throws {
        try await withTemporaryDirectory { directory in
            let entryKey = CacheKey("https://media.example/older.mp3")
            let whole = try await Self.storeWhole(entryKey, in: directory)
            // Back to the layout of the store before checksums.
            let index = try DatabaseQueue(path: directory.appendingPathComponent("index.sqlite").path)
            try await index.write { db in
                try db.execute(sql: "ALTER TABLE entry DROP COLUMN checksums")
                try db.execute(sql: "ALTER TABLE entry DROP COLUMN damaged")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v3 checksums'")
            }
            try index.close()
            // That layout kept a file per entry's record: the journal's records become such files.
            let records = directory.appendingPathComponent("entries")
            let journal = EntryJournal(path: records.appendingPathComponent(".journal").path, markCreated: nil)
            let frames = try await BlockingIO.run { journal.load() }
            #expect(!frames.isEmpty)
            try FileManager.default.removeItem(at: records.appendingPathComponent(".journal"))
            for frame in frames {
                let file = records.appendingPathComponent(frame.name)
                let payload = try #require(frame.payload)
                var json = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
                #expect(json.removeValue(forKey: "checksums") != nil)
                json.removeValue(forKey: "damaged")
                try JSONSerialization.data(withJSONObject: json).write(to: file)
            }

            let older = try await CacheStore.open(directory: directory, configuration: CacheStoreTests.configuration())
            #expect(older.integrity(of: entryKey)?.checksummedBlocks == 0)
            let again = try older.openEntry(entryKey)
            #expect(try again.spans() == SpanSet([whole]))
            try await CacheStoreTests.expectBytes(again, whole)
            let integrity = try #require(older.integrity(of: entryKey))
            #expect(integrity.checksummedBlocks == integrity.storedBlocks && integrity.storedBlocks == 32)
            again.close()
            try await older.close()

            let reopened = try await CacheStore.open(
                directory: directory, configuration: CacheStoreTests.configuration())
            #expect(reopened.integrity(of: entryKey)?.checksummedBlocks == 32)
            try EncryptedStoreTests.modifyDataFile(reopened, entryKey) { $0[70_000] ^= 1 }
            let last = try reopened.openEntry(entryKey)
            await #expect(throws: CacheError.self) { _ = try await last.read(whole) }
            #expect(reopened.integrity(of: entryKey)?.damaged == SpanSet([BlockChecksums.range(ofBlock: 1)]))
            last.close()
            try await reopened.close()
        }
    }
}
