// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// What `mediacache verify` found of one entry.
package struct VerifyReport: Sendable, Codable, Equatable {
    /// The URL the entry was asked for by (its key when unknown).
    package var url: String
    package var key: String
    /// The stored bytes read and checked.
    package var checkedBytes: Int64
    /// The bytes that failed their check now, each `[start, end)`.
    package var found: [[Int64]]
    /// The damaged bytes left after the repair (all of them without one), each `[start, end)`:
    /// the entry stays damaged while there are any.
    package var damaged: [[Int64]]
    /// Whether the damaged bytes were asked of the origin again.
    package var repairTried: Bool
    /// The check of the whole entry against its origin's digests: `matched sha-256`, or
    /// `mismatched` (the stored representation was dropped); `nil` when the origin sent none
    /// or the entry is not whole.
    package var originDigest: String? = nil

    /// Whether the entry is sound now.
    package var isSound: Bool { damaged.isEmpty && originDigest != "mismatched" }
}

/// Checks stored entries against their checksums (an encrypted store's seals) now, every
/// block, whatever this process checked before, and a whole one against its origin's digests; fetches the damaged bytes again through a
/// reader when asked (`mediacache verify`, and the scrub over pinned entries).
package struct StoreVerifier: Sendable {
    let store: CacheStore
    /// Fetches damaged bytes again; `nil`: report only.
    let reader: CachingReader?

    package init(store: CacheStore, repairingWith reader: CachingReader?) {
        self.store = store
        self.reader = reader
    }

    /// Checks the entries of `keys` (every entry when `nil`), one after the other.
    package func verify(_ keys: [CacheKey]? = nil) async -> [VerifyReport] {
        var reports: [VerifyReport] = []
        for key in keys ?? store.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            if let report = await verify(key) { reports.append(report) }
        }
        return reports
    }

    /// Checks one entry; `nil` when there is none.
    package func verify(_ key: CacheKey) async -> VerifyReport? {
        guard let before = store.integrity(of: key), let handle = try? store.openEntry(key) else { return nil }
        defer { handle.close() }
        let checked = (try? handle.spans().byteCount) ?? 0
        await handle.checkEveryBlock()
        guard let after = store.integrity(of: key) else { return nil }
        var found = after.damaged
        for range in before.damaged.spans { found.remove(range) }
        let url = (try? handle.metadata().sourceURL) ?? nil
        var repairTried = false
        if let reader, let url, !after.damaged.isEmpty {
            repairTried = true
            for range in after.damaged.spans {
                guard let stream = try? await reader.read(url, offset: range.lowerBound, length: range.length) else {
                    continue
                }
                do { for try await _ in stream {} } catch {}
            }
        }
        let left = store.integrity(of: key)?.damaged ?? SpanSet()
        if repairTried, !left.isEmpty {
            CacheMetrics.damagedBlocks(.unrecoverable, count: Self.blocks(in: left))
        }
        let digest: String? =
            switch await store.checkOriginDigests(of: key) {
            case .matched(let algorithms): "matched " + algorithms.joined(separator: ", ")
            case .mismatched: "mismatched"
            case .unchecked: nil
            }
        return VerifyReport(
            url: url?.absoluteString ?? key.rawValue, key: key.rawValue, checkedBytes: checked,
            found: found.spans.map { [$0.lowerBound, $0.upperBound] },
            damaged: left.spans.map { [$0.lowerBound, $0.upperBound] }, repairTried: repairTried, originDigest: digest)
    }

    /// How many 64 KiB blocks hold bytes of `spans`.
    static func blocks(in spans: SpanSet) -> Int {
        Set(spans.spans.flatMap { BlockChecksums.blocks(overlapping: $0) }).count
    }
}

extension CacheEntryHandle {
    /// Checks every stored block now (in an encrypted store, opens each), dropping those that
    /// fail; the entry's damaged bytes then name them.
    func checkEveryBlock() async {
        guard let spans = try? spans(),
            let hull = spans.spans.first.map({ ByteRange($0.lowerBound, spans.spans.last!.upperBound) })
        else { return }
        if let cipher {
            // Block by block: a block that fails leaves the others of its read unchecked.
            for span in spans.spans {
                var offset = span.lowerBound
                while offset < span.upperBound {
                    let end = (offset / cipher.layout.blockSize + 1) * cipher.layout.blockSize
                    let part = ByteRange(offset, min(end, span.upperBound))
                    _ = try? await read(part)
                    offset = part.upperBound
                }
            }
            return
        }
        guard let (file, fileName) = try? await openedFile() else { return }
        try? await BlockingIO.run { try self.check(hull, file: file, fileName: fileName, everyBlock: true) }
    }
}
