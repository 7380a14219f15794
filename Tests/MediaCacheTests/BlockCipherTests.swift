// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The encrypted-block layer: a block opens only where, for whom and in the state it was
/// sealed for; the layout and the write plans are exact; key files are read strictly.
@Suite(.stallLimit, .cpuBound) struct BlockCipherTests {
    static var master: SymmetricKey { SymmetricKey(data: (0..<32).map { UInt8($0) }) }
    static let entry = EntryCipher(masterKey: master, cacheKey: CacheKey("entry-a"))
    static let plaintext: [UInt8] = (0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    static let whole = [ByteRange(0, 64 << 10)]

    @Test func aSealedBlockOpensToItsPlaintextAndHidesIt() throws {
        let sealed = try Self.entry.seal(Self.plaintext, index: 3, version: 9, coverage: Self.whole)
        #expect(sealed.count == Self.plaintext.count + BlockLayout.overhead)
        let opened = try Self.entry.open(sealed[...], index: 3, version: 9)
        #expect(Array(opened.plaintext) == Self.plaintext && opened.coverage == Self.whole)
        // Trailing bytes (the rest of a slot) do not matter.
        #expect(
            Array(try Self.entry.open((sealed + [1, 2, 3])[...], index: 3, version: 9).plaintext) == Self.plaintext)
        // No 16-byte run of the plaintext appears in the sealed block.
        let sample = Array(Self.plaintext[1000..<1016])
        #expect(!(0...(sealed.count - 16)).contains { sealed[$0..<($0 + 16)].elementsEqual(sample) })
        // A fresh nonce each time: sealing the same block twice gives different bytes.
        #expect(try Self.entry.seal(Self.plaintext, index: 3, version: 9, coverage: Self.whole) != sealed)
        // A block stored in part: its header names the runs, its plaintext ends with the last.
        let runs = [ByteRange(10, 20), ByteRange(100, 4000)]
        let part = try Self.entry.seal(Array(Self.plaintext[0..<4000]), index: 0, version: 1, coverage: runs)
        #expect(part.count == 4000 + BlockLayout.overhead)
        #expect(try Self.entry.open(part[...], index: 0, version: 1).coverage == runs)
    }

    /// Each way a block can be wrong on disk is refused: a flipped byte (anywhere: header,
    /// nonce, ciphertext, tag), a torn write, a block moved to another index, a block of
    /// another entry, a block of an older version, a wrong key. An older sealing of the same
    /// block opens, but names only the coverage it holds.
    @Test func everyTamperIsRefused() throws {
        let sealed = try Self.entry.seal(Self.plaintext, index: 3, version: 9, coverage: Self.whole)
        for position in [0, 1, 5, 127, 128, 139, 140, 5000, sealed.count - 1] {
            var flipped = sealed
            flipped[position] ^= 0x01
            #expect(throws: BlockAuthenticationError(index: 3)) {
                try Self.entry.open(flipped[...], index: 3, version: 9)
            }
        }
        #expect(throws: BlockAuthenticationError.self) {
            try Self.entry.open(sealed.prefix(40_000), index: 3, version: 9)
        }
        #expect(throws: BlockAuthenticationError.self) { try Self.entry.open(sealed[...], index: 4, version: 9) }
        let other = EntryCipher(masterKey: Self.master, cacheKey: CacheKey("entry-b"))
        #expect(throws: BlockAuthenticationError.self) { try other.open(sealed[...], index: 3, version: 9) }
        #expect(throws: BlockAuthenticationError.self) { try Self.entry.open(sealed[...], index: 3, version: 10) }
        let wrongKey = EntryCipher(masterKey: SymmetricKey(size: .bits256), cacheKey: CacheKey("entry-a"))
        #expect(throws: BlockAuthenticationError.self) { try wrongKey.open(sealed[...], index: 3, version: 9) }
        // The block was first sealed with half its bytes stored, then again whole: the first
        // sealing, restored, says it holds only the first half.
        let half = [ByteRange(0, 32 << 10)]
        let older = try Self.entry.seal(Array(Self.plaintext[0..<(32 << 10)]), index: 3, version: 9, coverage: half)
        #expect(try Self.entry.open(older[...], index: 3, version: 9).coverage == half)
        // A header that claims more than its sealing holds does not open.
        var widened = older
        widened.replaceSubrange(0..<BlockLayout.headerSize, with: BlockLayout().header(naming: Self.whole))
        #expect(throws: BlockAuthenticationError.self) {
            try Self.entry.open((widened + sealed)[...], index: 3, version: 9)
        }
    }

    /// Property: a header from outside (random bytes, or a real one with random changes)
    /// gives a coverage within the block's bounds, sorted and apart, or none.
    @Test func anyHeaderIsAValidCoverageOrNone() {
        let layout = BlockLayout(blockSize: 1000)
        var random = SystemRandomNumberGenerator()
        for round in 0..<20_000 {
            var header: [UInt8]
            if round % 2 == 0 {
                header = (0..<Int.random(in: 0...140, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
                if round % 4 == 0, header.count > 2 {
                    header[0] = 0
                    header[1] = UInt8.random(in: 0...16, using: &random)
                }
            } else {
                var runs: [ByteRange] = []
                var at: Int64 = 0
                while runs.count < Int.random(in: 1...BlockLayout.maximumRuns, using: &random), at < 990 {
                    // Below the block's end: a run that started past it once trapped here.
                    let lower = min(999, at + Int64.random(in: 1...20, using: &random))
                    let upper = min(1000, lower + Int64.random(in: 1...100, using: &random))
                    runs.append(ByteRange(lower, upper))
                    at = upper
                }
                header = layout.header(naming: runs)
                #expect(layout.coverage(inHeader: header) == runs)
                header[Int.random(in: 0..<header.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            guard let coverage = layout.coverage(inHeader: header) else { continue }
            #expect(!coverage.isEmpty && coverage.count <= BlockLayout.maximumRuns)
            #expect(zip(coverage, coverage.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound })
            #expect(
                coverage.allSatisfy { $0.lowerBound >= 0 && $0.lowerBound < $0.upperBound && $0.upperBound <= 1000 })
        }
    }

    /// Property: an index row's sealed column read back from disk opens only with the key
    /// and file it was sealed for; a change to it (a character, a cut, random text) is
    /// refused, never a crash or other metadata.
    @Test func anySealedIndexColumnOpensOrIsRefused() throws {
        let sealer = IndexSealer(masterKey: Self.master)
        var metadata = ContentMetadata(length: 1234, mimeType: "audio/mpeg", acceptsRanges: true, etag: "\"e1\"")
        metadata.sourceURL = URL(string: "https://media.example/a.mp3")
        let column = try sealer.seal(key: CacheKey("key-1"), metadata: metadata, fileName: "file-1")
        #expect(column.hasPrefix(IndexSealer.prefix) && !column.contains("media.example") && !column.contains("key-1"))
        let opened = try #require(sealer.open(column, fileName: "file-1"))
        #expect(opened.key == CacheKey("key-1") && opened.metadata == metadata)
        #expect(sealer.open(column, fileName: "file-2") == nil)
        #expect(IndexSealer(masterKey: SymmetricKey(size: .bits256)).open(column, fileName: "file-1") == nil)
        #expect(
            sealer.rowKey(for: CacheKey("key-1")) == IndexSealer(masterKey: Self.master).rowKey(for: CacheKey("key-1")))
        #expect(sealer.rowKey(for: CacheKey("key-1")) != sealer.rowKey(for: CacheKey("key-2")))
        var random = SystemRandomNumberGenerator()
        let alphabet = Array(IndexSealer.prefix + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
        for round in 0..<5000 {
            var text = Array(column)
            switch round % 3 {
            case 0:
                text[Int.random(in: IndexSealer.prefix.count..<text.count, using: &random)] = alphabet.randomElement(
                    using: &random)!
            case 1: text = Array(text.prefix(Int.random(in: 0..<text.count, using: &random)))
            default:
                text =
                    Array(IndexSealer.prefix)
                    + (0..<Int.random(in: 0...200, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            }
            let mutated = String(text)
            guard mutated != column else { continue }
            // A change base64 ignores (the unused bits of the last character) decodes to the
            // same sealed bytes; any other change is refused.
            if let result = sealer.open(mutated, fileName: "file-1") {
                #expect(
                    result.key == CacheKey("key-1") && result.metadata == metadata
                        && Data(base64Encoded: String(mutated.dropFirst(IndexSealer.prefix.count))) != nil)
            }
        }
    }

    @Test func keysDifferPerEntryAndRepeatForTheSameOne() throws {
        let again = EntryCipher(masterKey: Self.master, cacheKey: CacheKey("entry-a"))
        let sealed = try Self.entry.seal(Self.plaintext, index: 0, version: 1, coverage: Self.whole)
        #expect(Array(try again.open(sealed[...], index: 0, version: 1).plaintext) == Self.plaintext)
    }

    @Test func theLayoutPutsEachBlockInItsOwnSlot() {
        let layout = BlockLayout(blockSize: 1000)
        #expect(layout.slotSize == 1156 && layout.slotOffset(3) == 3468)
        #expect(
            layout.plaintextLength(fileSize: 2 * 1156 + 156 + 10) == 2010 && layout.plaintextLength(fileSize: 100) == 0)
        #expect(
            layout.blocks(covering: ByteRange(999, 1001)) == 0...1
                && layout.blocks(covering: ByteRange(1000, 2000)) == 1...1)
        #expect(layout.blocks(covering: ByteRange(5, 5)) == nil)
        #expect(
            layout.range(ofBlock: 2, length: 2500) == ByteRange(2000, 2500)
                && layout.range(ofBlock: 1, length: nil) == ByteRange(1000, 2000))
    }

    /// Writes that start or end inside a block merge with the block's stored bytes (read,
    /// open, merge, seal again); writes that cover all of a block's stored bytes do not.
    @Test func writePlansMergeOnlyWhereStoredBytesLieOutsideTheWrite() {
        let layout = BlockLayout(blockSize: 1000)
        let stored = SpanSet([ByteRange(0, 1500)])
        let plans = layout.plan(ByteRange(1500, 3200), stored: stored)
        #expect(plans.map(\.index) == [1, 2, 3])
        #expect(
            plans[0]
                == BlockWrite(
                    index: 1, source: ByteRange(0, 500), destination: ByteRange(500, 1000),
                    coverage: [ByteRange(0, 1000)], mergesStoredBytes: true))
        #expect(
            plans[1]
                == BlockWrite(
                    index: 2, source: ByteRange(500, 1500), destination: ByteRange(0, 1000),
                    coverage: [ByteRange(0, 1000)], mergesStoredBytes: false))
        #expect(
            plans[2]
                == BlockWrite(
                    index: 3, source: ByteRange(1500, 1700), destination: ByteRange(0, 200),
                    coverage: [ByteRange(0, 200)], mergesStoredBytes: false))
        // A hole in the middle of a block: the write between two stored runs joins them.
        let gap = layout.plan(ByteRange(4200, 4300), stored: SpanSet([ByteRange(4000, 4200), ByteRange(4300, 4400)]))
        #expect(
            gap == [
                BlockWrite(
                    index: 4, source: ByteRange(0, 100), destination: ByteRange(200, 300),
                    coverage: [ByteRange(0, 400)], mergesStoredBytes: true)
            ])
        // Property: over random writes, the plans' coverage is exactly the spans after the
        // write, and each written byte lands in one place.
        var random = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var spans = SpanSet()
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                let start = Int64.random(in: 0..<8000, using: &random)
                spans.insert(ByteRange(start, start + Int64.random(in: 1...1500, using: &random)))
            }
            let start = Int64.random(in: 0..<8000, using: &random)
            let written = ByteRange(start, start + Int64.random(in: 1...3000, using: &random))
            let plans = layout.plan(written, stored: spans)
            var after = spans
            after.insert(written)
            let covered = SpanSet(
                plans.flatMap { plan in
                    plan.coverage.map {
                        ByteRange($0.lowerBound + plan.index * 1000, $0.upperBound + plan.index * 1000)
                    }
                })
            #expect(
                covered
                    == SpanSet(
                        after.spans.flatMap { span in
                            plans.compactMap { plan in
                                let block = layout.range(ofBlock: plan.index, length: nil)
                                let (lower, upper) = (
                                    max(block.lowerBound, span.lowerBound), min(block.upperBound, span.upperBound)
                                )
                                return lower < upper ? ByteRange(lower, upper) : nil
                            }
                        }))
            #expect(plans.reduce(0) { $0 + $1.source.length } == written.length)
            #expect(zip(plans, plans.dropFirst()).allSatisfy { $0.source.upperBound == $1.source.lowerBound })
        }
    }

    @Test func keyFilesAreReadStrictly() throws {
        let raw = (0..<32).map { UInt8($0 &* 5) }
        #expect(try EncryptionKey.parse(raw).withUnsafeBytes { Array($0) } == raw)
        let hex = raw.map { String(format: "%02x", $0) }.joined()
        #expect(try EncryptionKey.parse(Array((hex + "\n").utf8)).withUnsafeBytes { Array($0) } == raw)
        #expect(try EncryptionKey.parse(Array(hex.uppercased().utf8)).withUnsafeBytes { Array($0) } == raw)
        let bad: [([UInt8], String)] = [
            (Array(raw.prefix(16)), "holds 16 bytes"), (Array((hex + "00").utf8), "holds 66 bytes"),
            (Array(("zz" + hex.dropFirst(2)).utf8), "hexadecimal"), ([], "holds 0 bytes"),
        ]
        for (contents, reason) in bad {
            #expect { try EncryptionKey.parse(contents) } throws: {
                ($0 as? EncryptionKeyError)?.message.contains(reason) == true
            }
        }
        try withTemporaryFile(hex) { path in
            chmod(path, 0o644)
            let readable = try EncryptionKey.load(path: path).warning
            #expect(readable?.contains("chmod 600") == true)
            chmod(path, 0o600)
            let closed = try EncryptionKey.load(path: path).warning
            #expect(closed == nil)
        }
        #expect { try EncryptionKey.load(path: "/nonexistent/key") } throws: {
            ($0 as? EncryptionKeyError)?.message.contains("Cannot read the key file") == true
        }
    }

    /// Property: any key file is a 32-byte key or a clear refusal; 64 hex characters always
    /// give the key they spell.
    @Test func anyKeyFileIsAKeyOrARefusal() throws {
        var random = SystemRandomNumberGenerator()
        let hexDigits = Array("0123456789abcdefABCDEF".utf8)
        for round in 0..<5000 {
            if round % 2 == 0 {
                let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
                let text =
                    key.map { String(format: round % 4 == 0 ? "%02x" : "%02X", $0) }.joined()
                    + (round % 3 == 0 ? "\n" : "")
                #expect(try EncryptionKey.parse(Array(text.utf8)).withUnsafeBytes { Array($0) } == key)
            } else {
                let length = Int.random(in: 0...70, using: &random)
                let bytes = (0..<length).map { _ in
                    Bool.random(using: &random)
                        ? hexDigits.randomElement(using: &random)! : UInt8.random(in: 0...255, using: &random)
                }
                do {
                    let key = try EncryptionKey.parse(bytes)
                    #expect(key.bitCount == 256)
                } catch {
                    #expect(!error.message.isEmpty)
                }
            }
        }
    }

    func withTemporaryFile(_ text: String, _ body: (String) throws -> Void) throws {
        let path = NSTemporaryDirectory() + "/key-\(UUID().uuidString)"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        try body(path)
    }
}
