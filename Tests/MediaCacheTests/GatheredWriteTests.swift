// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// Consecutive buffers seen as one run (``GatheredBytes``: the chunks an origin body came in,
/// not joined): read, checksummed and copied as the joined bytes would be. A store writing them
/// stores what one buffer would have given (`BlockChecksumTests`).
@Suite(.stallLimit) struct GatheredWriteTests {
    /// `bytes` cut at random places into buffers, some of them empty; with `tiny`, into buffers
    /// of at most 3 bytes (more than `pwritev` takes at once, the rest written piece by piece).
    static func cut(_ bytes: [UInt8], _ random: inout SplitMix, tiny: Bool = false) -> [ByteBuffer] {
        var parts: [ByteBuffer] = []
        var start = 0
        while start < bytes.count {
            let most = tiny ? min(3, bytes.count - start) : bytes.count - start
            let length = random.next() % 4 == 0 ? 0 : Int(random.next() % UInt64(most)) + 1
            parts.append(ByteBuffer(bytes: bytes[start..<start + length]))
            start += length
        }
        return parts
    }

    /// Property: for random bytes cut at random places, every range's pieces, checksum and copy
    /// are those of the joined bytes, and so is the joined buffer.
    @Test func piecesChecksumsAndCopiesAreThoseOfTheJoinedBytes() {
        var random = SplitMix(seed: 1117)
        for _ in 0..<1_000 {
            let bytes = (0..<Int(random.next() % 400) + 1).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let gathered = GatheredBytes(Self.cut(bytes, &random))
            #expect(gathered.count == bytes.count)
            #expect(Array(gathered.joined.readableBytesView) == bytes)
            let lower = Int(random.next() % UInt64(bytes.count + 1))
            let range = lower..<lower + Int(random.next() % UInt64(bytes.count - lower + 1))
            var pieces: [UInt8] = []
            gathered.forEachPiece(in: range) { pieces += $0 }
            #expect(pieces == Array(bytes[range]))
            let expected = bytes[range].withUnsafeBytes { CRC32C.checksum($0) }
            #expect(gathered.checksum(of: range) == expected)
            var copied = [UInt8](repeating: 0, count: range.count + 1)
            copied.withUnsafeMutableBytes { gathered.copy(range, to: $0.baseAddress!) }
            #expect(copied == Array(bytes[range]) + [0], "nothing written past the range")
        }
    }
}
