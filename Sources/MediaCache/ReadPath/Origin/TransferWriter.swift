// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import NIOCore

/// The second stage of an ``OriginTransfer``: takes what its ``ChunkQueue`` holds and writes it
/// to the store, in as few calls as the body's pace allows, telling the ``SharedDownload`` what
/// is stored. Every queued byte was delivered, so every one is written (even when the readers
/// have left since), unless the store refuses: then the rest stays in memory only.
struct TransferWriter: Sendable {
    let download: SharedDownload
    let logger: Logger

    /// How the writing ended.
    enum Outcome: Equatable {
        /// Every queued byte was written.
        case done
        /// The entry was replaced (the resource changed): the transfer stops.
        case stop
        /// A write failed: the rest goes to readers from memory only.
        case storeFailed
    }

    /// Writes what `queue` holds from `start` on into `handle`, until the queue ends. In an
    /// encrypted store writes end on a block's end: the bytes past the last one wait (copied,
    /// at most a block) for the next batch or the queue's end, so each block is sealed once
    /// instead of being opened and sealed again by the next write.
    func write(from queue: ChunkQueue, at start: Int64, into handle: CacheEntryHandle) async -> Outcome {
        var handle: CacheEntryHandle? = handle
        let blockSize = handle?.cipher?.layout.blockSize
        var result = Outcome.done
        var offset = start
        /// Writes `parts`, one after another, at `offset`; `false` when the transfer must stop.
        func write(_ parts: [ByteBuffer]) async -> Bool {
            let end = offset + Int64(parts.reduce(0) { $0 + $1.readableBytes })
            defer { offset = end }
            guard let writer = handle else {
                download.writeFinished(upTo: end, stored: false)
                return true
            }
            let own = !download.playerWants(offset)
            do {
                try await writer.write(parts, at: offset, ownBytes: own)
                download.writeFinished(upTo: end, stored: true)
            } catch let error as CacheError where error.code == .entryInvalidated {
                download.writeFinished(upTo: end, stored: false)
                download.fail(
                    CacheError(
                        .resourceChanged,
                        "\(download.url.absoluteString) changed at the origin while it was being read."))
                queue.stop()
                return false
            } catch {
                download.writeFinished(upTo: end, stored: false)
                // The cache's own bytes (a fill's) finding no room of their kind is the policy's
                // answer, not a fault: they push out no player's. The fill stops (`store_refused`).
                let policy = own && (error as? CacheError)?.code == .capacityExceeded
                logger.log(
                    level: policy ? .debug : .warning,
                    policy
                        ? "The cache's own bytes find no room; the fill stops"
                        : "Cannot store fetched bytes; streaming them uncached",
                    metadata: ["url": "\(download.url)", "error": "\(error)"])
                handle = nil
                result = .storeFailed
            }
            return true
        }
        var carry: ByteBuffer?
        while let parts = await queue.takeAll() {
            guard let blockSize else {
                guard await write(parts) else { return .stop }
                continue
            }
            var batch = GatheredBytes(parts).joined
            if var block = carry {
                // Complete the block the last batch ended in.
                let missing = blockSize - (offset + Int64(block.readableBytes)) % blockSize
                var head = batch.readSlice(length: Int(min(missing, Int64(batch.readableBytes))))!
                block.writeBuffer(&head)
                guard (offset + Int64(block.readableBytes)) % blockSize == 0 else {
                    carry = block
                    continue
                }
                carry = nil
                guard await write([block]) else { return .stop }
            }
            let end = offset + Int64(batch.readableBytes)
            if end - end % blockSize > offset {
                guard await write([batch.readSlice(length: Int(end - end % blockSize - offset))!]) else { return .stop }
            }
            if batch.readableBytes > 0 {
                var tail = ByteBufferAllocator().buffer(capacity: Int(blockSize))
                tail.writeBuffer(&batch)
                carry = tail
            }
        }
        if let carry, await !write([carry]) { return .stop }
        return result
    }
}
