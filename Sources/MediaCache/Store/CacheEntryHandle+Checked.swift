// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore

/// The I/O of an unencrypted entry's checksums (``BlockChecksums``): each 64 KiB block's
/// CRC-32C over its stored bytes, computed as they are written and claimed with them, checked
/// before they are first served by this process.
///
/// Writers of one entry and checkers take its lock (``CacheStore/entryLock(for:)``) for the
/// write (or the check) and the claim, so a block's bytes, spans and checksum agree whenever
/// one of them looks. A block that fails its check (a flipped bit, a sector gone bad, a file
/// restored from before, a bug) is dropped from the spans, logged and counted, and becomes a
/// hole to fetch again, exactly as a sealed block that fails in an encrypted store.
extension CacheEntryHandle {
    /// Writes `bytes` (the resource's `range`) and claims it with the new checksums of the
    /// blocks it lands in.
    /// - Returns: whether a flush is due.
    func writeChecked(_ bytes: GatheredBytes, range: ByteRange, file: EntryFile, fileName: String, incoming: Int64)
        throws -> Bool
    {
        try store.entryLock(for: key).withLock {
            guard let (stored, sums, _) = checkState(ifFile: fileName) else {
                return claim(range, fileName: fileName, incoming: incoming)  // replaced meanwhile: not claimed
            }
            var lost: [ByteRange] = []
            var lostBlocks: [Int64] = []
            var computed: [(block: Int64, value: UInt32)] = []
            var checked: [ByteRange] = [range]
            var scratch: [UInt8] = []
            /// Where `part` lies in `bytes`.
            func slice(_ part: ByteRange) -> Range<Int> {
                Int(part.lowerBound - range.lowerBound)..<Int(part.upperBound - range.lowerBound)
            }
            for block in BlockChecksums.blocks(overlapping: range) {
                let blockRange = BlockChecksums.range(ofBlock: block)
                let old = stored.spans(in: blockRange)
                let part = ByteRange(
                    max(range.lowerBound, blockRange.lowerBound), min(range.upperBound, blockRange.upperBound))
                if old.contains(where: { $0.lowerBound <= part.lowerBound && $0.upperBound >= part.upperBound }) {
                    continue  // nothing new in this block: its checksum stays
                }
                if old.isEmpty {
                    computed.append((block, bytes.checksum(of: slice(part))))
                    continue
                }
                if let sum = sums[block], let last = old.last, part.lowerBound >= last.lowerBound,
                    part.lowerBound <= last.upperBound
                {
                    // The write extends the block's last run: its checksum goes on from there.
                    let extended = slice(ByteRange(last.upperBound, part.upperBound))
                    computed.append((block, bytes.checksum(of: extended, extending: CRC32C(continuing: sum))))
                    continue
                }
                // Anything else: the block's stored bytes from the file, checked, merged.
                if scratch.isEmpty { scratch = [UInt8](repeating: 0, count: Int(BlockChecksums.blockSize)) }
                var keep = old
                if let read = try readRuns(old, of: blockRange, file: file, into: &scratch),
                    sums[block] == nil || sums[block] == read
                {
                    checked += old
                } else {
                    lost += old
                    lostBlocks.append(block)
                    keep = []
                }
                scratch.withUnsafeMutableBytes { target in
                    let at = Int(part.lowerBound - blockRange.lowerBound)
                    bytes.copy(slice(part), to: target.baseAddress!.advanced(by: at))
                }
                var merged = SpanSet(keep)
                merged.insert(part)
                computed.append((block, Self.checksum(of: merged.spans, in: blockRange, scratch: scratch)))
            }
            try file.write(bytes, at: range.lowerBound)
            if !lost.isEmpty { store.damaged(lostBlocks, of: key, ranges: lost, during: "a write") }
            return claim(
                range, fileName: fileName, incoming: incoming, lost: lost, checksums: computed, verified: checked)
        }
    }

    /// Checks the blocks under `range` this process has not checked since the file was
    /// opened; a block with no checksum yet (stored before checksums were kept) gains one.
    /// - Throws: `.notCached` after dropping the blocks that fail; `.entryInvalidated`.
    /// With `everyBlock`, every stored block under `range` is checked, whatever this process
    /// checked before (``CacheStore/verify(_:)``).
    func check(_ range: ByteRange, file: EntryFile, fileName: String, everyBlock: Bool = false) throws {
        try store.entryLock(for: key).withLock {
            guard let (spans, sums, verified) = checkState(ifFile: fileName) else { throw invalidated() }
            var passed: [ByteRange] = []
            var gained: [(block: Int64, value: UInt32)] = []
            var failed: [Int64] = []
            var scratch = [UInt8](repeating: 0, count: Int(BlockChecksums.blockSize))
            for block in BlockChecksums.blocks(overlapping: range) {
                let blockRange = BlockChecksums.range(ofBlock: block)
                let runs = spans.spans(in: blockRange)
                guard !runs.isEmpty, everyBlock || !runs.allSatisfy({ verified.contains($0) }) else { continue }
                let crc = try readRuns(runs, of: blockRange, file: file, into: &scratch)
                switch (crc, sums[block]) {
                case (let crc?, nil):
                    gained.append((block, crc))
                    passed += runs
                case (let crc?, let sum?) where crc == sum:
                    passed += runs
                default:
                    failed.append(block)
                }
            }
            let dropped = store.state.withLock { state -> [ByteRange] in
                state.withRecord(key) { record -> [ByteRange] in
                    guard record.fileName == fileName else { return [] }
                    for run in passed { record.verified.insert(run) }
                    for (block, value) in gained { record.checksums[block] = value }
                    let dropped = record.drop(blocks: failed)
                    if !gained.isEmpty || !dropped.isEmpty { record.isDirty = true }
                    return dropped
                }.map { dropped in
                    state.totalBytes -= dropped.reduce(0) { $0 + $1.length }
                    return dropped
                } ?? []
            }
            if !gained.isEmpty || !dropped.isEmpty { store.scheduleFlush() }
            guard failed.isEmpty else {
                store.damaged(failed, of: key, ranges: dropped, during: "a read")
                throw CacheError(
                    .notCached,
                    "Stored bytes of the cache entry failed their check; they are dropped and fetched again.")
            }
        }
    }

    /// The checksum of `runs` (the stored bytes of `block`) read from the file into `scratch`
    /// at their place in the block; `nil` when the file ends before them.
    private func readRuns(_ runs: [ByteRange], of block: ByteRange, file: EntryFile, into scratch: inout [UInt8])
        throws -> UInt32?
    {
        guard let first = runs.first, let last = runs.last else { return 0 }
        let hull = ByteRange(first.lowerBound, last.upperBound)
        let start = Int(hull.lowerBound - block.lowerBound)
        let read = try scratch.withUnsafeMutableBytes { target in
            try file.read(
                at: hull.lowerBound,
                into: UnsafeMutableRawBufferPointer(rebasing: target[start..<start + Int(hull.length)]))
        }
        guard read == Int(hull.length) else { return nil }
        return Self.checksum(of: runs, in: block, scratch: scratch)
    }

    /// The CRC-32C of `runs` of `block`, one after the other, whose bytes `scratch` holds at
    /// their place in the block.
    private static func checksum(of runs: [ByteRange], in block: ByteRange, scratch: [UInt8]) -> UInt32 {
        var crc = CRC32C()
        scratch.withUnsafeBytes { bytes in
            for run in runs {
                crc.update(
                    UnsafeRawBufferPointer(
                        rebasing: bytes[Int(run.lowerBound - block.lowerBound)..<Int(run.upperBound - block.lowerBound)]
                    ))
            }
        }
        return crc.value
    }

    /// The entry's spans, checksums and checked bytes while its data file is `fileName`; `nil`
    /// once it was replaced.
    private func checkState(ifFile fileName: String) -> (SpanSet, BlockChecksums, SpanSet)? {
        store.state.withLock { state in
            state.withRecord(key) { record in
                record.fileName == fileName ? (record.spans, record.checksums, record.verified) : nil
            } ?? nil
        }
    }
}

extension CacheStore.Record {
    /// Claims `range`, just written, with the checksums of the blocks it changed; `lost` are
    /// stored bytes found wrong meanwhile (dropped: damaged), `checked` bytes checked or
    /// written now. Returns how many blocks that held damaged bytes are whole again.
    mutating func claim(
        _ range: ByteRange, lost: [ByteRange], checksums computed: [(block: Int64, value: UInt32)],
        verified checked: [ByteRange]
    ) -> Int {
        for wrong in lost {
            spans.remove(wrong)
            verified.remove(wrong)
            damaged.insert(wrong)
        }
        spans.insert(range)
        for (block, value) in computed { checksums[block] = value }
        for run in checked where spans.contains(run) { verified.insert(run) }
        guard !damaged.isEmpty else { return 0 }
        let healed = BlockChecksums.blocks(overlapping: range).filter { block in
            let blockRange = BlockChecksums.range(ofBlock: block)
            return damaged.spans(in: blockRange).contains { spans.contains($0) }
        }
        for block in healed {
            for run in damaged.spans(in: BlockChecksums.range(ofBlock: block)) where spans.contains(run) {
                damaged.remove(run)
            }
        }
        return healed.count
    }

    /// Drops the stored bytes of `blocks`, which failed their check: they are damaged until
    /// stored again. Returns the byte ranges dropped.
    mutating func drop(blocks: [Int64]) -> [ByteRange] {
        for block in blocks { checksums[block] = nil }
        return drop(blocks.map(BlockChecksums.range(ofBlock:)))
    }

    /// Drops the stored bytes within `ranges` (blocks that failed their check): they are
    /// damaged until stored again. Returns the byte ranges dropped.
    mutating func drop(_ ranges: [ByteRange]) -> [ByteRange] {
        var dropped: [ByteRange] = []
        for range in ranges {
            let runs = spans.spans(in: range)
            for run in runs {
                spans.remove(run)
                verified.remove(run)
                damaged.insert(run)
            }
            dropped += runs
        }
        return dropped
    }
}

extension CacheStore {
    /// Logs and counts stored blocks that failed their check (a checksum, or an encrypted
    /// store's seal): their bytes are dropped and fetched again.
    func damaged(_ blocks: [Int64], of key: CacheKey, ranges: [ByteRange], during operation: String) {
        rejectedBlocks.add(blocks.count, ordering: .relaxed)
        CacheMetrics.rejectedBlocks.increment(by: blocks.count)
        let url = state.withLock { $0.records[key]?.metadata.sourceURL?.absoluteString } ?? key.rawValue
        let bytes = SpanSet(ranges.isEmpty ? blocks.map { BlockChecksums.range(ofBlock: $0) } : ranges).spans
        configuration.logger.warning(
            "Stored bytes failed their check (changed on disk: bit rot, a restore, a crash, or tampering); they are dropped and fetched again",
            metadata: ["url": "\(url)", "bytes": "\(bytes)", "blocks": "\(blocks.count)", "during": "\(operation)"])
    }

    /// Logs and counts blocks that held damaged bytes and are stored again, right.
    func healed(blocks: Int, of key: CacheKey, range: ByteRange) {
        CacheMetrics.damagedBlocks(.refetched, count: blocks)
        let url = state.withLock { $0.records[key]?.metadata.sourceURL?.absoluteString } ?? key.rawValue
        configuration.logger.warning(
            "Damaged stored bytes were fetched again and stored right",
            metadata: ["url": "\(url)", "bytes": "\(range)", "blocks": "\(blocks)"])
    }
}
