// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The checksums of an unencrypted entry's stored bytes: one CRC-32C (``CRC32C``) per 64 KiB
/// block, over the block's stored bytes in order (the runs of the entry's spans within it,
/// one after the other). A block with no checksum was stored before checksums were kept: it
/// gains one when it is next read or written. Pure: the store computes the values and keeps
/// them beside the spans, under the same lock and in the same index row, so the index never
/// claims a checksum for bytes it does not claim, nor bytes without their checksum.
struct BlockChecksums: Sendable, Equatable {
    /// The bytes one checksum covers (as the encrypted store's sealed blocks).
    static let blockSize: Int64 = 64 << 10
    /// The most blocks an entry has checksums for: 2^31 blocks of 64 KiB (128 TiB).
    static let maximumBlocks: Int64 = 1 << 31

    /// Checksums by block index; `nil` where none is known.
    private var values: [UInt32] = []
    private var known: [UInt64] = []

    init() {}

    /// Block `index`'s checksum, or `nil`.
    subscript(index: Int64) -> UInt32? {
        get {
            guard index >= 0, index < Int64(values.count), known[Int(index) >> 6] & (1 << (UInt64(index) & 63)) != 0
            else { return nil }
            return values[Int(index)]
        }
        set {
            guard index >= 0, index < Self.maximumBlocks else { return }
            let position = Int(index)
            guard let newValue else {
                if position < values.count { known[position >> 6] &= ~(1 << (UInt64(position) & 63)) }
                return
            }
            if position >= values.count {
                values += repeatElement(0, count: position + 1 - values.count)
                known += repeatElement(0, count: (values.count + 63) / 64 - known.count)
            }
            values[position] = newValue
            known[position >> 6] |= 1 << (UInt64(position) & 63)
        }
    }

    /// How many blocks have a checksum.
    var count: Int { known.reduce(0) { $0 + $1.nonzeroBitCount } }

    /// The blocks that hold bytes of `range`.
    static func blocks(overlapping range: ByteRange) -> Range<Int64> {
        guard !range.isEmpty else { return 0..<0 }
        return (range.lowerBound / blockSize)..<((range.upperBound - 1) / blockSize + 1)
    }

    /// Block `index`'s bytes.
    static func range(ofBlock index: Int64) -> ByteRange {
        ByteRange(index * blockSize, (index + 1) * blockSize)
    }

    /// The stored runs of block `index`, given the entry's spans.
    static func runs(ofBlock index: Int64, in spans: SpanSet) -> [ByteRange] {
        spans.spans(in: range(ofBlock: index))
    }

    /// The byte ranges of the blocks that hold bytes of `range`, whole.
    static func blockAligned(_ range: ByteRange) -> ByteRange {
        let blocks = blocks(overlapping: range)
        return ByteRange(blocks.lowerBound * blockSize, blocks.upperBound * blockSize)
    }

    // MARK: Encoding

    /// A compact form for the index: for each block with a checksum, its index and its
    /// checksum, 4 bytes each, little-endian, in increasing order.
    var encoded: Data {
        var bytes = [UInt8](repeating: 0, count: count * 8)
        var at = 0
        bytes.withUnsafeMutableBytes { target in
            for (word, bits) in known.enumerated() where bits != 0 {
                var rest = bits
                while rest != 0 {
                    let index = word * 64 + rest.trailingZeroBitCount
                    rest &= rest - 1
                    target.storeBytes(of: UInt32(index).littleEndian, toByteOffset: at, as: UInt32.self)
                    target.storeBytes(of: values[index].littleEndian, toByteOffset: at + 4, as: UInt32.self)
                    at += 8
                }
            }
        }
        return Data(bytes)
    }

    /// Reads `data` written by ``encoded`` for an entry whose stored bytes are `spans`:
    /// checksums of blocks that hold none of them are left out, and so is everything from
    /// where `data` stops being that form (a length not a multiple of 8, indexes not
    /// increasing): those blocks gain a checksum when next read.
    init(encoded data: Data, for spans: SpanSet) {
        self.init()
        guard let last = spans.spans.last else { return }
        let limit = min((last.upperBound - 1) / Self.blockSize + 1, Self.maximumBlocks)
        let bytes = [UInt8](data.prefix(data.count - data.count % 8))
        func word(at offset: Int) -> UInt32 {
            UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
                | UInt32(bytes[offset + 3]) << 24
        }
        var previous: Int64 = -1
        for offset in stride(from: 0, to: bytes.count, by: 8) {
            let index = Int64(word(at: offset))
            guard index > previous, index < limit else { return }
            previous = index
            if !spans.spans(in: Self.range(ofBlock: index)).isEmpty { self[index] = word(at: offset + 4) }
        }
    }
}
