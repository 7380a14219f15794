// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Synchronization

/// What one entry holds, for listings (`mediacache ls`, `info`, the status page).
package struct CacheEntrySummary: Sendable, Codable, Equatable {
    /// The cache key (the hex SHA-256 of the normalized URL by default).
    package var key: String
    /// The URL the resource was last asked for by, if known.
    package var url: String?
    /// The resource's length, if known.
    package var length: Int64?
    /// How many of its bytes are stored.
    package var storedBytes: Int64
    /// The stored byte ranges, each `[start, end)`.
    package var spans: [[Int64]]
    package var mimeType: String?
    package var etag: String?
    package var lastModified: String?
    /// Until when it may be served without asking the origin, if the origin said.
    package var freshUntil: Date?
    package var createdAt: Date
    package var lastAccess: Date
    /// Whether the entry is pinned (kept whatever the limits, see ``CacheStore/pin(_:)``).
    package var isPinned = false
    /// Bytes dropped because their block failed its check and not stored again since, each
    /// `[start, end)`: the entry is damaged while there are any (`nil` for none).
    package var damaged: [[Int64]]?
    /// The digests the origin sent for this version, as `sha-256 (Repr-Digest)` (`nil`: none).
    package var originDigests: [String]?
    /// The algorithms of those the whole stored representation was found to match, strongest
    /// first: the entry is verified against its origin (`nil`: not checked yet).
    package var digestsMatched: [String]?

    /// Whether every byte is stored.
    package var isComplete: Bool { length.map { $0 == storedBytes } ?? false }

    /// The stored share of the resource, 0...1 (0 while the length is unknown).
    package var fraction: Double {
        guard let length, length > 0 else { return length == 0 ? 1 : 0 }
        return Double(storedBytes) / Double(length)
    }

    /// The stored spans.
    package var spanSet: SpanSet {
        SpanSet(spans.compactMap { $0.count == 2 && $0[0] <= $0[1] ? ByteRange($0[0], $0[1]) : nil })
    }
}

/// The store as a whole.
package struct CacheStoreSummary: Sendable, Codable, Equatable {
    package var directory: String
    package var entries: Int
    /// Stored bytes in all entries.
    package var bytes: Int64
    /// ``CacheStore/Configuration/maxBytes``.
    package var limit: Int64
    /// Whether the store is encrypted at rest.
    package var encrypted: Bool
    /// Entries sealed with another key: misses for this store, kept until evicted (their
    /// bytes are in ``bytes``).
    package var entriesSealedWithAnotherKey: Int
    /// Sealed blocks that failed their check since the store opened (each fetched again).
    package var rejectedBlocks: Int
    /// Of ``bytes``, those in pinned entries.
    package var pinnedBytes: Int64 = 0
    /// ``CacheStore/Configuration/pinnedQuota``.
    package var pinnedLimit: Int64 = 0
}

extension CacheStore {
    /// A summary of every entry, in no particular order.
    package func entrySummaries() -> [CacheEntrySummary] {
        state.withLock { state in
            state.records.map { key, record in Self.summary(key, record) }
        }
    }

    /// The summary of the entry for `key`, if there is one.
    package func entrySummary(for key: CacheKey) -> CacheEntrySummary? {
        state.withLock { state in state.records[key].map { Self.summary(key, $0) } }
    }

    /// Counts and sizes.
    package func summary() -> CacheStoreSummary {
        state.withLock { state in
            CacheStoreSummary(
                directory: directory.path, entries: state.records.count, bytes: state.totalBytes,
                limit: configuration.maxBytes,
                encrypted: isEncrypted, entriesSealedWithAnotherKey: state.otherRows.count,
                rejectedBlocks: rejectedBlocks.load(ordering: .relaxed), pinnedBytes: state.pinnedBytes,
                pinnedLimit: configuration.pinnedQuota)
        }
    }

    private static func summary(_ key: CacheKey, _ record: Record) -> CacheEntrySummary {
        let metadata = record.metadata
        let digests = metadata.originDigests
        return CacheEntrySummary(
            key: key.rawValue, url: metadata.sourceURL?.absoluteString, length: metadata.length,
            storedBytes: record.spans.byteCount,
            spans: record.spans.spans.map { [$0.lowerBound, $0.upperBound] }, mimeType: metadata.mimeType,
            etag: metadata.etag,
            lastModified: metadata.lastModified, freshUntil: metadata.freshUntil, createdAt: record.createdAt,
            lastAccess: record.lastAccess,
            isPinned: record.isPinned,
            damaged: record.damaged.isEmpty ? nil : record.damaged.spans.map { [$0.lowerBound, $0.upperBound] },
            originDigests: digests.isEmpty ? nil : digests.map { "\($0.algorithm.rawValue) (\($0.field))" },
            digestsMatched: metadata.digestsMatched)
    }

    /// How `key`'s stored blocks stand: how many hold stored bytes, how many of those have a
    /// checksum, the bytes this process checked, the damaged bytes.
    package func integrity(of key: CacheKey) -> (
        storedBlocks: Int, checksummedBlocks: Int, verified: SpanSet, damaged: SpanSet
    )? {
        state.withLock { state in
            state.records[key].map { record in
                let blocks = Set(record.spans.spans.flatMap { BlockChecksums.blocks(overlapping: $0) })
                return (
                    blocks.count, blocks.filter { record.checksums[$0] != nil }.count, record.verified,
                    record.damaged
                )
            }
        }
    }
}

/// Byte counts for people: `512 B`, `5.2 KiB`, `1.9 MiB` (powers of 1024).
package enum ByteCountText {
    package static func format(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }
}
