import Crypto
import Foundation
@testable import MediaCache
import Testing

/// The encrypted-block layer: a block opens only where, for whom and in the state it was
/// sealed for; the layout and the write plans are exact; key files are read strictly.
@Suite struct BlockCipherTests {
    static var master: SymmetricKey { SymmetricKey(data: (0..<32).map { UInt8($0) }) }
    static let entry = EntryCipher(masterKey: master, cacheKey: CacheKey("entry-a"))
    static let plaintext: [UInt8] = (0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    static let whole = [ByteRange(0, 64 << 10)]

    @Test func aSealedBlockOpensToItsPlaintextAndHidesIt() throws {
        let sealed = try Self.entry.seal(Self.plaintext, index: 3, version: 9, coverage: Self.whole)
        #expect(sealed.count == Self.plaintext.count + BlockLayout.overhead)
        #expect(try Self.entry.open(sealed, index: 3, version: 9, coverage: Self.whole) == Self.plaintext)
        // No 16-byte run of the plaintext appears in the sealed block.
        let sample = Array(Self.plaintext[1000..<1016])
        #expect(!(0...(sealed.count - 16)).contains { sealed[$0..<($0 + 16)].elementsEqual(sample) })
        // A fresh nonce each time: sealing the same block twice gives different bytes.
        #expect(try Self.entry.seal(Self.plaintext, index: 3, version: 9, coverage: Self.whole) != sealed)
    }

    /// Each way a block can be wrong on disk is refused: a flipped byte (anywhere: nonce,
    /// ciphertext, tag), a torn write, a block moved to another index, a block of another
    /// entry, a block of an older version, an older sealing with less coverage, a wrong key.
    @Test func everyTamperIsRefused() throws {
        let sealed = try Self.entry.seal(Self.plaintext, index: 3, version: 9, coverage: Self.whole)
        for position in [0, 11, 12, 5000, sealed.count - 1] {
            var flipped = sealed
            flipped[position] ^= 0x01
            #expect(throws: BlockAuthenticationError(index: 3)) { try Self.entry.open(flipped, index: 3, version: 9, coverage: Self.whole) }
        }
        #expect(throws: BlockAuthenticationError.self) { try Self.entry.open(sealed.prefix(40_000), index: 3, version: 9, coverage: Self.whole) }
        #expect(throws: BlockAuthenticationError.self) { try Self.entry.open(sealed, index: 4, version: 9, coverage: Self.whole) }
        let other = EntryCipher(masterKey: Self.master, cacheKey: CacheKey("entry-b"))
        #expect(throws: BlockAuthenticationError.self) { try other.open(sealed, index: 3, version: 9, coverage: Self.whole) }
        #expect(throws: BlockAuthenticationError.self) { try Self.entry.open(sealed, index: 3, version: 10, coverage: Self.whole) }
        let wrongKey = EntryCipher(masterKey: SymmetricKey(size: .bits256), cacheKey: CacheKey("entry-a"))
        #expect(throws: BlockAuthenticationError.self) { try wrongKey.open(sealed, index: 3, version: 9, coverage: Self.whole) }
        // The block was first sealed with half its bytes stored, then again whole: restoring
        // the first sealing, while the index says whole, is refused.
        let half = [ByteRange(0, 32 << 10)]
        var partial = Self.plaintext
        for index in (32 << 10)..<(64 << 10) { partial[index] = 0 }
        let older = try Self.entry.seal(partial, index: 3, version: 9, coverage: half)
        #expect(try Self.entry.open(older, index: 3, version: 9, coverage: half) == partial)
        #expect(throws: BlockAuthenticationError.self) { try Self.entry.open(older, index: 3, version: 9, coverage: Self.whole) }
    }

    @Test func keysDifferPerEntryAndRepeatForTheSameOne() throws {
        let again = EntryCipher(masterKey: Self.master, cacheKey: CacheKey("entry-a"))
        let sealed = try Self.entry.seal(Self.plaintext, index: 0, version: 1, coverage: Self.whole)
        #expect(try again.open(sealed, index: 0, version: 1, coverage: Self.whole) == Self.plaintext)
    }

    @Test func theLayoutPutsEachBlockInItsOwnSlot() {
        let layout = BlockLayout(blockSize: 1000)
        #expect(layout.slotSize == 1028 && layout.slotOffset(3) == 3084)
        #expect(layout.blocks(covering: ByteRange(999, 1001)) == 0...1 && layout.blocks(covering: ByteRange(1000, 2000)) == 1...1)
        #expect(layout.blocks(covering: ByteRange(5, 5)) == nil)
        #expect(layout.range(ofBlock: 2, length: 2500) == ByteRange(2000, 2500) && layout.range(ofBlock: 1, length: nil) == ByteRange(1000, 2000))
    }

    /// Writes that start or end inside a block merge with the block's stored bytes (read,
    /// open, merge, seal again); writes that cover all of a block's stored bytes do not.
    @Test func writePlansMergeOnlyWhereStoredBytesLieOutsideTheWrite() {
        let layout = BlockLayout(blockSize: 1000)
        let stored = SpanSet([ByteRange(0, 1500)])
        let plans = layout.plan(ByteRange(1500, 3200), stored: stored)
        #expect(plans.map(\.index) == [1, 2, 3])
        #expect(plans[0] == BlockWrite(index: 1, source: ByteRange(0, 500), destination: ByteRange(500, 1000), coverage: [ByteRange(0, 1000)], mergesStoredBytes: true))
        #expect(plans[1] == BlockWrite(index: 2, source: ByteRange(500, 1500), destination: ByteRange(0, 1000), coverage: [ByteRange(0, 1000)], mergesStoredBytes: false))
        #expect(plans[2] == BlockWrite(index: 3, source: ByteRange(1500, 1700), destination: ByteRange(0, 200), coverage: [ByteRange(0, 200)], mergesStoredBytes: false))
        // A hole in the middle of a block: the write between two stored runs joins them.
        let gap = layout.plan(ByteRange(4200, 4300), stored: SpanSet([ByteRange(4000, 4200), ByteRange(4300, 4400)]))
        #expect(gap == [BlockWrite(index: 4, source: ByteRange(0, 100), destination: ByteRange(200, 300), coverage: [ByteRange(0, 400)], mergesStoredBytes: true)])
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
            let covered = SpanSet(plans.flatMap { plan in plan.coverage.map { ByteRange($0.lowerBound + plan.index * 1000, $0.upperBound + plan.index * 1000) } })
            #expect(covered == SpanSet(after.spans.flatMap { span in plans.compactMap { plan in
                let block = layout.range(ofBlock: plan.index, length: nil)
                let (lower, upper) = (max(block.lowerBound, span.lowerBound), min(block.upperBound, span.upperBound))
                return lower < upper ? ByteRange(lower, upper) : nil
            } }))
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
            #expect { try EncryptionKey.parse(contents) } throws: { ($0 as? EncryptionKeyError)?.message.contains(reason) == true }
        }
        try withTemporaryFile(hex) { path in
            chmod(path, 0o644)
            let readable = try EncryptionKey.load(path: path).warning
            #expect(readable?.contains("chmod 600") == true)
            chmod(path, 0o600)
            let closed = try EncryptionKey.load(path: path).warning
            #expect(closed == nil)
        }
        #expect { try EncryptionKey.load(path: "/nonexistent/key") } throws: { ($0 as? EncryptionKeyError)?.message.contains("Cannot read the key file") == true }
    }

    /// Property: any key file is a 32-byte key or a clear refusal; 64 hex characters always
    /// give the key they spell.
    @Test func anyKeyFileIsAKeyOrARefusal() throws {
        var random = SystemRandomNumberGenerator()
        let hexDigits = Array("0123456789abcdefABCDEF".utf8)
        for round in 0..<5000 {
            if round % 2 == 0 {
                let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
                let text = key.map { String(format: round % 4 == 0 ? "%02x" : "%02X", $0) }.joined() + (round % 3 == 0 ? "\n" : "")
                #expect(try EncryptionKey.parse(Array(text.utf8)).withUnsafeBytes { Array($0) } == key)
            } else {
                let length = Int.random(in: 0...70, using: &random)
                let bytes = (0..<length).map { _ in Bool.random(using: &random) ? hexDigits.randomElement(using: &random)! : UInt8.random(in: 0...255, using: &random) }
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
