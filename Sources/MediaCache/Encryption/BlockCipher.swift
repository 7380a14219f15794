public import Crypto
public import Foundation

/// How an encrypted entry's bytes lie in its data file: fixed plaintext blocks, each sealed
/// on its own (AES-256-GCM) so any range can be read by opening only the blocks it
/// touches. Block `i` holds plaintext bytes `i × blockSize ..< (i + 1) × blockSize` and sits
/// at file offset `i × slotSize`: a 12-byte nonce, the ciphertext (as long as the plaintext,
/// the last block of a resource may be shorter), a 16-byte tag.
public struct BlockLayout: Sendable, Equatable {
    public static let nonceSize = 12
    public static let tagSize = 16
    /// Bytes a sealed block adds to its plaintext.
    public static let overhead = nonceSize + tagSize

    /// Plaintext bytes per block.
    public let blockSize: Int64

    public init(blockSize: Int64 = 64 << 10) {
        precondition(blockSize > 0 && blockSize <= 1 << 30, "a block holds 1 byte to 1 GiB")
        self.blockSize = blockSize
    }

    /// Bytes a block's slot takes in the file.
    public var slotSize: Int64 { blockSize + Int64(Self.overhead) }

    /// The file offset of block `index`'s slot.
    public func slotOffset(_ index: Int64) -> Int64 { index * slotSize }

    /// The plaintext range of block `index` in a resource of `length` bytes (`nil`: unknown).
    public func range(ofBlock index: Int64, length: Int64?) -> ByteRange {
        let start = index * blockSize
        let end = start + blockSize
        return ByteRange(start, length.map { min(end, max(start, $0)) } ?? end)
    }

    /// How many plaintext bytes a data file of `fileSize` bytes can hold (whole slots, and
    /// what a last partial slot holds past its nonce and tag).
    public func plaintextLength(fileSize: Int64) -> Int64 {
        let whole = fileSize / slotSize
        return whole * blockSize + max(0, fileSize % slotSize - Int64(Self.overhead))
    }

    /// The bytes a block sealed with plaintext bytes `0..<plaintextLength` takes in its slot.
    public static func sealedLength(plaintextLength: Int64) -> Int64 { plaintextLength + Int64(overhead) }

    /// The blocks that hold any byte of `range`.
    public func blocks(covering range: ByteRange) -> ClosedRange<Int64>? {
        guard !range.isEmpty else { return nil }
        return (range.lowerBound / blockSize)...((range.upperBound - 1) / blockSize)
    }
}

/// Seals and opens the blocks of one entry (AES-256-GCM: on this machine's CPU, with AES
/// instructions, 1.1–1.8× as fast as ChaCha20-Poly1305 over two runs of `mediacache-bench crypto`) with a key of its own, derived from the store's
/// master key and the entry's cache key (HKDF-SHA256), so a block copied from another entry
/// never opens. The associated data binds each block to its index, the entry's version
/// (64 random bits of the data file's name: a new version of the resource gets a new file, so
/// a block of an older version never opens) and the block's coverage: which of its bytes the
/// index says are stored. Coverage only grows within a version, and a block is sealed again (with a fresh random nonce) each time
/// it grows, so an older sealing of the same block, restored, names a smaller coverage and does
/// not open either: it could only give bytes that were never written.
public struct EntryCipher: Sendable {
    public let layout: BlockLayout
    private let box: KeyBox
    private var key: SymmetricKey { box.key }

    /// The cipher for the entry `cacheKey` under `masterKey`.
    public init(masterKey: SymmetricKey, cacheKey: CacheKey, layout: BlockLayout = BlockLayout()) {
        self.layout = layout
        let derived = HKDF<SHA256>.deriveKey(inputKeyMaterial: masterKey, info: Array("mediacache entry v1 ".utf8) + Array(cacheKey.rawValue.utf8), outputByteCount: 32)
        box = KeyBox(key: derived)
    }

    /// `plaintext` (block `index`'s bytes, whole, with zeros where nothing is stored) sealed
    /// as its slot holds it: nonce, ciphertext, tag.
    public func seal(_ plaintext: some DataProtocol, index: Int64, version: UInt64, coverage: [ByteRange]) throws -> [UInt8] {
        let sealed = try AES.GCM.seal(plaintext, using: key, nonce: AES.GCM.Nonce(),
                                      authenticating: Self.associatedData(index: index, version: version, coverage: coverage))
        guard let combined = sealed.combined else { throw BlockAuthenticationError(index: index) }  // never: the nonce is 12 bytes
        return Array(combined)
    }

    /// The plaintext of a sealed block, if it is the one sealed for `index`, `version` and
    /// `coverage` with this entry's key and nothing in it changed.
    /// - Throws: ``BlockAuthenticationError`` otherwise (a flipped bit, a torn write, a
    ///   block from elsewhere or from before).
    public func open(_ sealed: some DataProtocol, index: Int64, version: UInt64, coverage: [ByteRange]) throws(BlockAuthenticationError) -> [UInt8] {
        do {
            let box = try AES.GCM.SealedBox(combined: sealed)
            return Array(try AES.GCM.open(box, using: key, authenticating: Self.associatedData(index: index, version: version, coverage: coverage)))
        } catch {
            throw BlockAuthenticationError(index: index)
        }
    }

    /// "MCB1", the version and the index (big-endian), then each covered range relative
    /// to the block's start (two big-endian 32-bit numbers each).
    static func associatedData(index: Int64, version: UInt64, coverage: [ByteRange]) -> [UInt8] {
        var data = Array("MCB1".utf8)
        data.reserveCapacity(20 + coverage.count * 8)
        withUnsafeBytes(of: version.bigEndian) { data += $0 }
        withUnsafeBytes(of: UInt64(index).bigEndian) { data += $0 }
        for range in coverage {
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: range.lowerBound).bigEndian) { data += $0 }
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: range.upperBound).bigEndian) { data += $0 }
        }
        return data
    }

    /// The stored bytes of block `index` that `spans` name, relative to the block's start:
    /// what its associated data binds.
    public func coverage(ofBlock index: Int64, in spans: SpanSet) -> [ByteRange] {
        let block = layout.range(ofBlock: index, length: nil)
        return spans.spans(in: block).map { ByteRange($0.lowerBound - block.lowerBound, $0.upperBound - block.lowerBound) }
    }
}

/// A block whose tag does not verify: it is treated as not stored, and fetched again.
public struct BlockAuthenticationError: Error, Sendable, Equatable {
    public var index: Int64
}

/// What writing bytes into an encrypted entry does to one block.
public struct BlockWrite: Sendable, Equatable {
    public var index: Int64
    /// The bytes of the write that land in this block, relative to the write's start.
    public var source: ByteRange
    /// Where they land, relative to the block's start.
    public var destination: ByteRange
    /// The block's coverage after the write (relative), which its new sealing binds.
    public var coverage: [ByteRange]
    /// Whether stored bytes of the block lie outside the write, so the block must be opened
    /// and its plaintext merged before it is sealed again (read-modify-write). Costs CPU and
    /// a read of the slot, never origin bytes.
    public var mergesStoredBytes: Bool
}

extension BlockLayout {
    /// The block writes that store `written` (absolute) in an entry whose stored bytes are `stored`.
    public func plan(_ written: ByteRange, stored: SpanSet) -> [BlockWrite] {
        guard let blocks = blocks(covering: written) else { return [] }
        var after = stored
        after.insert(written)
        return blocks.map { index in
            let block = range(ofBlock: index, length: nil)
            let part = ByteRange(max(block.lowerBound, written.lowerBound), min(block.upperBound, written.upperBound))
            let storedHere = stored.spans(in: block)
            let outside = storedHere.contains { $0.lowerBound < part.lowerBound || $0.upperBound > part.upperBound }
            return BlockWrite(index: index, source: ByteRange(part.lowerBound - written.lowerBound, part.upperBound - written.lowerBound),
                              destination: ByteRange(part.lowerBound - block.lowerBound, part.upperBound - block.lowerBound),
                              coverage: after.spans(in: block).map { ByteRange($0.lowerBound - block.lowerBound, $0.upperBound - block.lowerBound) },
                              mergesStoredBytes: outside)
        }
    }
}

/// A key, immutable once made (swift-crypto's `SymmetricKey` is not marked `Sendable`
/// on this platform; it holds only the key's bytes).
final class KeyBox: @unchecked Sendable {
    let key: SymmetricKey
    init(key: SymmetricKey) { self.key = key }
}
