// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import NIOCore
import Synchronization

/// The I/O of an encrypted entry: its data file holds sealed blocks in fixed slots
/// (``BlockLayout``), each naming in its authenticated header which of its bytes it holds
/// (``EntryCipher``).
///
/// A block serves a read only where its sealing holds every byte the read wants; within a
/// version the bytes never change, so any sealing that opens is right where it covers.
/// Writers of one entry take its seal lock for the whole read-modify-write of a block and
/// the claim of the new span. Readers do not take it: a sealing newer than the spans they
/// looked at covers more, never less. Only a slot caught half-written fails for a reader
/// without being wrong on disk, so a failure is looked at again under the lock; a block that
/// still fails there (a flipped bit, a torn write after a crash, a block swapped, copied or
/// restored from before) is dropped from the spans, logged and counted, and fetched again.
extension CacheEntryHandle {
    /// Seals the blocks `bytes` (the resource's `range`) lands in, merging the bytes already
    /// stored in its edge blocks, writes them, and claims `range`.
    /// - Returns: whether a flush is due.
    func writeSealed(
        _ bytes: ByteBuffer, range: ByteRange, file: EntryFile, fileName: String, incoming: Int64, cipher: EntryCipher
    ) throws -> Bool {
        try store.entryLock(for: key).withLock {
            guard let stored = storedSpans(ifFile: fileName) else {
                return claim(range, fileName: fileName, incoming: incoming)  // replaced meanwhile: not claimed
            }
            let layout = cipher.layout
            let version = EntryCipher.version(ofFileName: fileName)
            var lost: [ByteRange] = []
            // Consecutive sealed slots go to the file in one write.
            var run: [UInt8] = []
            var runOffset: Int64 = 0
            for block in layout.plan(range, stored: stored) {
                let blockStart = block.index * layout.blockSize
                // Nothing new for this block: its sealing stays as it is.
                if stored.contains(
                    ByteRange(blockStart + block.destination.lowerBound, blockStart + block.destination.upperBound))
                {
                    continue
                }
                var coverage = block.coverage
                if coverage.count > BlockLayout.maximumRuns {
                    // More separate runs than a header names (a player asking for scattered
                    // bytes): the block keeps the run of this write, the others become holes.
                    let kept = coverage.first {
                        $0.lowerBound <= block.destination.lowerBound && $0.upperBound >= block.destination.upperBound
                    }!
                    lost += coverage.filter { $0 != kept }.map {
                        ByteRange($0.lowerBound + blockStart, $0.upperBound + blockStart)
                    }
                    coverage = [kept]
                }
                let slot = layout.slotOffset(block.index)
                if !run.isEmpty, runOffset + Int64(run.count) != slot {
                    try run.withUnsafeBytes { try file.write($0, at: runOffset) }
                    run.removeAll(keepingCapacity: true)
                }
                if run.isEmpty {
                    runOffset = slot
                    run.reserveCapacity(
                        min(Int(range.length), 1 << 20) + (Int(range.length) / Int(layout.blockSize) + 2)
                            * BlockLayout.overhead)
                }
                if coverage == [block.destination], block.destination.lowerBound == 0 {
                    // The write is all the block holds: sealed straight from its buffer.
                    try bytes.withUnsafeReadableBytes { source in
                        let part = UnsafeRawBufferPointer(
                            rebasing: source[Int(block.source.lowerBound)..<Int(block.source.upperBound)])
                        try cipher.seal(
                            part, index: block.index, version: version, coverage: coverage, appendingTo: &run)
                    }
                    continue
                }
                var plaintext = [UInt8](repeating: 0, count: Int(coverage.last!.upperBound))
                if block.mergesStoredBytes {
                    let old = cipher.coverage(ofBlock: block.index, in: stored)
                    if let opened = try openBlock(
                        block.index, holding: old, file: file, cipher: cipher, version: version)
                    {
                        let common = min(opened.count, plaintext.count)
                        plaintext.replaceSubrange(0..<common, with: opened.prefix(common))
                    } else {
                        // The stored part of the block is wrong on disk: it is a hole now.
                        lost += old.map { ByteRange($0.lowerBound + blockStart, $0.upperBound + blockStart) }
                        store.damaged(
                            [block.index], of: key, ranges: [layout.range(ofBlock: block.index, length: nil)],
                            during: "a write")
                        coverage = [block.destination]
                        plaintext = [UInt8](repeating: 0, count: Int(block.destination.upperBound))
                    }
                }
                bytes.withUnsafeReadableBytes { source in
                    plaintext.withUnsafeMutableBytes { target in
                        target.baseAddress!.advanced(by: Int(block.destination.lowerBound))
                            .copyMemory(
                                from: source.baseAddress!.advanced(by: Int(block.source.lowerBound)),
                                byteCount: Int(block.source.length))
                    }
                }
                try cipher.seal(plaintext, index: block.index, version: version, coverage: coverage, appendingTo: &run)
            }
            if !run.isEmpty { try run.withUnsafeBytes { try file.write($0, at: runOffset) } }
            return claim(range, fileName: fileName, incoming: incoming, lost: lost)
        }
    }

    /// The bytes of `range` (which the spans claimed when the read began), opened from their blocks.
    /// - Throws: `.notCached` after dropping a block that fails its check; `.entryInvalidated`.
    func readSealed(_ range: ByteRange, file: EntryFile, fileName: String, cipher: EntryCipher) throws -> ByteBuffer {
        let version = EntryCipher.version(ofFileName: fileName)
        if case .opened(let bytes) = try openBlocks(range, file: file, cipher: cipher, version: version) {
            return bytes
        }
        // A slot caught while a writer rewrote it, or one that is wrong on disk: look again
        // while no writer can change it.
        return try store.entryLock(for: key).withLock {
            guard let spans = storedSpans(ifFile: fileName) else { throw invalidated() }
            guard spans.contains(range) else { throw CacheError(.notCached, "The bytes \(range) are not cached.") }
            switch try openBlocks(range, file: file, cipher: cipher, version: version) {
            case .opened(let bytes):
                return bytes
            case .rejected(let indexes):
                let wrong = indexes.map { cipher.layout.range(ofBlock: $0, length: nil) }
                let dropped = store.state.withLock { state -> [ByteRange] in
                    let dropped =
                        state.withRecord(key) { record -> [ByteRange] in
                            guard record.fileName == fileName else { return [] }
                            record.isDirty = true
                            return record.drop(wrong)
                        } ?? []
                    state.totalBytes -= dropped.reduce(0) { $0 + $1.length }
                    return dropped
                }
                store.damaged(indexes, of: key, ranges: dropped, during: "a read")
                throw CacheError(
                    .notCached,
                    "Stored bytes of the cache entry failed their check; they are dropped and fetched again.")
            }
        }
    }

    private enum OpenedBlocks {
        case opened(ByteBuffer)
        case rejected([Int64])
    }

    /// Reads the slots of the blocks under `range` in one call and opens each; a block
    /// serves the part of `range` in it only if its sealing holds all of that part.
    private func openBlocks(_ range: ByteRange, file: EntryFile, cipher: EntryCipher, version: UInt64) throws
        -> OpenedBlocks
    {
        let layout = cipher.layout
        guard let blocks = layout.blocks(covering: range) else { return .opened(store.allocator.buffer(capacity: 0)) }
        let slotSize = Int(layout.slotSize)
        let start = layout.slotOffset(blocks.lowerBound)
        let total = blocks.count * slotSize
        var available = 0
        let slots = try [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            available = try file.read(at: start, into: UnsafeMutableRawBufferPointer(buffer))
            count = available
        }
        var output = store.allocator.buffer(capacity: Int(range.length))
        var rejected: [Int64] = []
        for (position, index) in blocks.enumerated() {
            let from = min(position * slotSize, available)
            let block = layout.range(ofBlock: index, length: nil)
            let wanted = ByteRange(
                max(range.lowerBound, block.lowerBound) - block.lowerBound,
                min(range.upperBound, block.upperBound) - block.lowerBound)
            guard
                let (coverage, plaintext) = try? cipher.open(
                    slots[from..<min(from + slotSize, available)], index: index, version: version),
                coverage.contains(where: { $0.lowerBound <= wanted.lowerBound && $0.upperBound >= wanted.upperBound })
            else {
                rejected.append(index)
                continue
            }
            guard rejected.isEmpty else { continue }
            _ = plaintext.withUnsafeBytes {
                output.writeBytes(UnsafeRawBufferPointer(rebasing: $0[Int(wanted.lowerBound)..<Int(wanted.upperBound)]))
            }
        }
        return rejected.isEmpty ? .opened(output) : .rejected(rejected)
    }

    /// The plaintext of block `index` if its sealing opens and holds every run of `coverage`;
    /// `nil` otherwise.
    private func openBlock(
        _ index: Int64, holding coverage: [ByteRange], file: EntryFile, cipher: EntryCipher, version: UInt64
    ) throws -> Data? {
        let length = Int(cipher.layout.slotSize)
        var available = 0
        let slot = try [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            available = try file.read(at: cipher.layout.slotOffset(index), into: UnsafeMutableRawBufferPointer(buffer))
            count = available
        }
        guard let opened = try? cipher.open(slot[...], index: index, version: version) else { return nil }
        let held = SpanSet(opened.coverage)
        return coverage.allSatisfy { held.contains($0) } ? opened.plaintext : nil
    }

    /// The entry's spans while its data file is `fileName`; `nil` once it was replaced.
    private func storedSpans(ifFile fileName: String) -> SpanSet? {
        store.state.withLock { state in
            guard let record = state.records[key], record.fileName == fileName else { return nil }
            return record.spans
        }
    }

    func invalidated() -> CacheError {
        CacheError(
            .entryInvalidated, "The cache entry \(key) was removed or replaced by a newer version; open it again.")
    }
}

extension CacheStore {
    /// The lock writers of `key`'s entry hold while they seal or checksum and claim, and
    /// checkers while they check (striped: entries share a few locks, which they hold only
    /// for one write or check).
    func entryLock(for key: CacheKey) -> SealLock {
        sealLocks[Int(UInt(bitPattern: key.hashValue) % UInt(sealLocks.count))]
    }

    /// A lock held across blocking file calls on the I/O thread pool (never on an event
    /// loop or the cooperative executor).
    final class SealLock: Sendable {
        private let mutex = Mutex(())

        func withLock<T: Sendable>(_ body: () throws -> T) throws -> T {
            try mutex.withLock { _ in try body() }
        }
    }
}
