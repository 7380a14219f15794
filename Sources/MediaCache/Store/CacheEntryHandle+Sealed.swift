import Crypto
import Foundation
import NIOCore
import Synchronization

/// The I/O of an encrypted entry: its data file holds sealed blocks in fixed slots
/// (``BlockLayout``), each bound to the spans it covers (``EntryCipher``).
///
/// Writers of one entry take its seal lock for the whole read-modify-write of a block and
/// the claim of the new span, so a block on disk and the spans in memory always agree when
/// the lock is free. Readers do not take it: a block sealed again between their look at the
/// spans and their read does not open, and they try once more under the lock, where a block
/// that still does not open is wrong on disk (a flipped bit, a torn write after a crash, a
/// block swapped, copied or restored from before): it is dropped from the spans, logged and
/// counted, and fetched again.
extension CacheEntryHandle {
    /// Seals the blocks `bytes` (the resource's `range`) lands in, merging the bytes already
    /// stored in its edge blocks, writes them, and claims `range`.
    /// - Returns: whether a flush is due.
    func writeSealed(_ bytes: ByteBuffer, range: ByteRange, file: EntryFile, fileName: String, incoming: Int64, cipher: EntryCipher) throws -> Bool {
        try store.sealLock(for: key).withLock {
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
                if stored.contains(ByteRange(blockStart + block.destination.lowerBound, blockStart + block.destination.upperBound)) { continue }
                var coverage = block.coverage
                var plaintext = [UInt8](repeating: 0, count: Int(coverage.last!.upperBound))
                if block.mergesStoredBytes {
                    let old = cipher.coverage(ofBlock: block.index, in: stored)
                    if let opened = try openBlock(block.index, coverage: old, file: file, cipher: cipher, version: version) {
                        plaintext.replaceSubrange(0..<opened.count, with: opened)
                    } else {
                        // The stored part of the block is wrong on disk: it is a hole now.
                        lost += old.map { ByteRange($0.lowerBound + blockStart, $0.upperBound + blockStart) }
                        rejected(block.index, fileName: fileName, during: "a write")
                        coverage = [block.destination]
                        plaintext = [UInt8](repeating: 0, count: Int(block.destination.upperBound))
                    }
                }
                bytes.withUnsafeReadableBytes { source in
                    plaintext.withUnsafeMutableBytes { target in
                        target.baseAddress!.advanced(by: Int(block.destination.lowerBound))
                            .copyMemory(from: source.baseAddress!.advanced(by: Int(block.source.lowerBound)), byteCount: Int(block.source.length))
                    }
                }
                let sealed = try cipher.seal(plaintext, index: block.index, version: version, coverage: coverage)
                let slot = layout.slotOffset(block.index)
                if !run.isEmpty, runOffset + Int64(run.count) != slot {
                    try run.withUnsafeBytes { try file.write($0, at: runOffset) }
                    run.removeAll(keepingCapacity: true)
                }
                if run.isEmpty { runOffset = slot }
                run += sealed
            }
            if !run.isEmpty { try run.withUnsafeBytes { try file.write($0, at: runOffset) } }
            return claim(range, fileName: fileName, incoming: incoming, lost: lost)
        }
    }

    /// The bytes of `range` (which the spans claim), opened from their blocks.
    /// - Throws: `.notCached` after dropping a block that fails its check; `.entryInvalidated`.
    func readSealed(_ range: ByteRange, file: EntryFile, fileName: String, cipher: EntryCipher) throws -> ByteBuffer {
        let version = EntryCipher.version(ofFileName: fileName)
        guard let spans = storedSpans(ifFile: fileName) else { throw invalidated() }
        if case .opened(let bytes) = try openBlocks(range, spans: spans, file: file, cipher: cipher, version: version) { return bytes }
        // A block sealed again since the spans were read, or one that is wrong on disk: look
        // again while no writer can change them.
        return try store.sealLock(for: key).withLock {
            guard let spans = storedSpans(ifFile: fileName) else { throw invalidated() }
            guard spans.contains(range) else { throw CacheError(.notCached, "The bytes \(range) are not cached.") }
            switch try openBlocks(range, spans: spans, file: file, cipher: cipher, version: version) {
            case .opened(let bytes):
                return bytes
            case .rejected(let indexes):
                for index in indexes { rejected(index, fileName: fileName, during: "a read") }
                let wrong = indexes.map { cipher.layout.range(ofBlock: $0, length: nil) }
                store.state.withLock { state in
                    guard let record = state.records[key], record.fileName == fileName else { return }
                    let before = record.spans.byteCount
                    for range in wrong { state.records[key]!.spans.remove(range) }
                    state.records[key]!.isDirty = true
                    state.totalBytes += state.records[key]!.spans.byteCount - before
                }
                throw CacheError(.notCached, "Blocks \(indexes) of the cache entry failed their check; their bytes are fetched again.")
            }
        }
    }

    private enum OpenedBlocks {
        case opened(ByteBuffer)
        case rejected([Int64])
    }

    /// Reads the slots of the blocks under `range` in one call and opens each with the
    /// coverage `spans` give it.
    private func openBlocks(_ range: ByteRange, spans: SpanSet, file: EntryFile, cipher: EntryCipher, version: UInt64) throws -> OpenedBlocks {
        let layout = cipher.layout
        guard let blocks = layout.blocks(covering: range) else { return .opened(store.allocator.buffer(capacity: 0)) }
        let coverages = blocks.map { cipher.coverage(ofBlock: $0, in: spans) }
        guard coverages.allSatisfy({ !$0.isEmpty }) else { return .rejected([]) }
        let start = layout.slotOffset(blocks.lowerBound)
        let total = Int(layout.slotOffset(blocks.upperBound) - start + BlockLayout.sealedLength(plaintextLength: coverages.last!.last!.upperBound))
        var available = 0
        let sealed = try [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            available = try file.read(at: start, into: UnsafeMutableRawBufferPointer(buffer))
            count = available
        }
        var output = store.allocator.buffer(capacity: Int(range.length))
        var rejected: [Int64] = []
        for (index, coverage) in zip(blocks, coverages) {
            let from = Int(layout.slotOffset(index) - start)
            let to = from + Int(BlockLayout.sealedLength(plaintextLength: coverage.last!.upperBound))
            guard to <= available, let plaintext = try? cipher.open(sealed[from..<to], index: index, version: version, coverage: coverage) else {
                rejected.append(index)
                continue
            }
            guard rejected.isEmpty else { continue }
            let block = layout.range(ofBlock: index, length: nil)
            let lower = Int(max(range.lowerBound, block.lowerBound) - block.lowerBound)
            let upper = Int(min(range.upperBound, block.upperBound) - block.lowerBound)
            plaintext.withUnsafeBytes { output.writeBytes(UnsafeRawBufferPointer(rebasing: $0[lower..<upper])) }
        }
        return rejected.isEmpty ? .opened(output) : .rejected(rejected)
    }

    /// The plaintext of block `index` sealed with `coverage`, or `nil` when it does not open.
    private func openBlock(_ index: Int64, coverage: [ByteRange], file: EntryFile, cipher: EntryCipher, version: UInt64) throws -> [UInt8]? {
        let length = Int(BlockLayout.sealedLength(plaintextLength: coverage.last!.upperBound))
        var available = 0
        let sealed = try [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            available = try file.read(at: cipher.layout.slotOffset(index), into: UnsafeMutableRawBufferPointer(buffer))
            count = available
        }
        guard available == length else { return nil }
        return try? cipher.open(sealed, index: index, version: version, coverage: coverage)
    }

    /// Logs and counts a block that failed its check.
    private func rejected(_ index: Int64, fileName: String, during operation: String) {
        store.rejectedBlocks.add(1, ordering: .relaxed)
        CacheMetrics.rejectedBlocks.increment()
        store.configuration.logger.warning("A sealed block failed its check (tampered with, torn by a crash, or sealed with another key); its bytes are dropped and fetched again",
                                           metadata: ["block": "\(index)", "entry": "\(fileName)", "during": "\(operation)"])
    }

    /// The entry's spans while its data file is `fileName`; `nil` once it was replaced.
    private func storedSpans(ifFile fileName: String) -> SpanSet? {
        store.state.withLock { state in
            guard let record = state.records[key], record.fileName == fileName else { return nil }
            return record.spans
        }
    }

    private func invalidated() -> CacheError {
        CacheError(.entryInvalidated, "The cache entry \(key) was removed or replaced by a newer version; open it again.")
    }
}

extension EntryCipher {
    /// The version an entry's blocks are bound to: 64 bits of the SHA-256 of its data file's
    /// name, which is new (random) for every version of a resource.
    static func version(ofFileName fileName: String) -> UInt64 {
        SHA256.hash(data: Data(fileName.utf8)).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    }
}

extension CacheStore {
    /// The lock writers of `key`'s entry hold while they seal and claim (striped: entries
    /// share a few locks, which they hold only for one write).
    func sealLock(for key: CacheKey) -> SealLock {
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
