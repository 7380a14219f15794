// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import NIOCore

/// Deterministic pseudo-random bytes of any length: the byte at an offset depends only on
/// the seed and the offset, so any range can be produced, and checked, without the rest.
public struct DeterministicContent: Sendable, Hashable {
    /// The seed that selects the content.
    public var seed: UInt64

    /// Creates content for `seed`.
    public init(seed: UInt64) {
        self.seed = seed
    }

    /// Creates content whose seed is derived from `name` (FNV-1a), so a path or a key picks it.
    public init(name: String) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        self.init(seed: hash)
    }

    /// The 8 bytes of the word at `wordIndex` (offsets `8 * wordIndex ..< 8 * wordIndex + 8`).
    @inline(__always)
    func word(_ wordIndex: UInt64) -> UInt64 {
        // splitmix64
        var z = seed &+ wordIndex &* 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// The byte at `offset`.
    public func byte(at offset: Int64) -> UInt8 {
        UInt8(truncatingIfNeeded: word(UInt64(offset) >> 3) >> ((UInt64(offset) & 7) * 8))
    }

    /// Fills `buffer` with the bytes starting at `offset`.
    public func fill(_ buffer: UnsafeMutableRawBufferPointer, from offset: Int64) {
        var index = 0
        var position = UInt64(offset)
        // Unaligned head, then whole words, then the tail.
        while index < buffer.count, position & 7 != 0 {
            buffer[index] = byte(at: Int64(position))
            index += 1
            position += 1
        }
        while buffer.count - index >= 8 {
            buffer.storeBytes(of: word(position >> 3).littleEndian, toByteOffset: index, as: UInt64.self)
            index += 8
            position += 8
        }
        while index < buffer.count {
            buffer[index] = byte(at: Int64(position))
            index += 1
            position += 1
        }
    }

    /// The bytes `offset ..< offset + length` in a new buffer.
    public func buffer(offset: Int64, length: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer
    {
        var buffer = allocator.buffer(capacity: length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { bytes in
            fill(UnsafeMutableRawBufferPointer(rebasing: bytes[0..<length]), from: offset)
            return length
        }
        return buffer
    }

    /// The offset of the first byte of `buffer` that differs from the content at `offset`,
    /// or `nil` when all match.
    public func firstMismatch(in buffer: ByteBuffer, at offset: Int64) -> Int64? {
        guard buffer.readableBytes > 0 else { return nil }
        return buffer.withUnsafeReadableBytes { bytes in
            let expected = self.buffer(offset: offset, length: bytes.count)
            return expected.withUnsafeReadableBytes { wanted in
                if memcmp(bytes.baseAddress!, wanted.baseAddress!, bytes.count) == 0 { return nil }
                for index in 0..<bytes.count where bytes[index] != wanted[index] {
                    return offset + Int64(index)
                }
                return nil
            }
        }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
