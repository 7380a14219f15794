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
    /// The check of the whole entry against its origin's digests (written `matched sha-256`
    /// or `mismatched` in JSON; a mismatched entry's stored representation was dropped); `nil`
    /// when the origin sent none or the entry is not whole.
    package var originDigest: DigestOutcome? = nil

    /// Whether the entry is sound now.
    package var isSound: Bool { damaged.isEmpty && originDigest != .mismatched }
}

extension DigestOutcome: Codable {
    /// As `verify --json` writes it: `matched` and the algorithms, `mismatched` or `unchecked`.
    package var text: String {
        switch self {
        case .matched(let algorithms): "matched " + algorithms.joined(separator: ", ")
        case .mismatched: "mismatched"
        case .unchecked: "unchecked"
        }
    }

    package init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        switch text {
        case "mismatched": self = .mismatched
        case "unchecked": self = .unchecked
        case _ where text.hasPrefix("matched "):
            self = .matched(text.dropFirst("matched ".count).components(separatedBy: ", "))
        default:
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "Not a digest outcome: \(text.prefix(40))"))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

/// Checks stored entries against their checksums (an encrypted store's seals) now, every
/// block, whatever this process checked before, and a whole one against its origin's digests; fetches the damaged bytes again through a
/// reader when asked (`mediacache verify`, and the scrub over pinned entries).
package struct StoreVerifier: Sendable {
    let store: CacheStore
    /// Fetches damaged bytes again; `nil`: report only.
    let reader: CachingReader?
    /// Who the repairs are for: a player (`verify`, which someone waits on) or the cache's own
    /// work (the scrub), which yields the origin to players.
    let requester: Requester
    /// The bytes checked in one step on the I/O pool (and under the entry's lock, which a
    /// write to the entry waits for).
    var step: Int64 = 4 << 20
    /// Called after each step with the bytes it checked: the scrub keeps its rate here.
    var pace: @Sendable (Int64) async -> Void = { _ in }
    /// Whether an entry already found to match its origin's digests is hashed again.
    var rechecksDigests = true

    package init(store: CacheStore, repairingWith reader: CachingReader?, as requester: Requester) {
        self.store = store
        self.reader = reader
        self.requester = requester
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
        await handle.checkEveryBlock(step: step, pace: pace)
        guard let after = store.integrity(of: key) else { return nil }
        var found = after.damaged
        for range in before.damaged.spans { found.remove(range) }
        let url = (try? handle.metadata().sourceURL) ?? nil
        var repairTried = false
        if let reader, let url, !after.damaged.isEmpty {
            repairTried = true
            for range in after.damaged.spans {
                guard
                    let stream = try? await reader.read(
                        url, offset: range.lowerBound, length: range.length, as: requester)
                else {
                    continue
                }
                do { for try await _ in stream {} } catch {}
            }
        }
        let left = store.integrity(of: key)?.damaged ?? SpanSet()
        if repairTried, !left.isEmpty {
            CacheMetrics.damagedBlocks(.unrecoverable, count: Self.blocks(in: left))
        }
        let matched = rechecksDigests ? nil : store.metadata(for: key)?.digestsMatched
        let digest: DigestOutcome? =
            if let matched { .matched(matched) } else {
                switch await OriginDigestCheck.check(key, in: store) {
                case .unchecked: nil
                case let outcome: outcome
                }
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
    /// fail; the entry's damaged bytes then name them. `step` bytes at a time on the I/O pool,
    /// `pace` called after each with the bytes it checked.
    func checkEveryBlock(step: Int64 = 4 << 20, pace: @Sendable (Int64) async -> Void = { _ in }) async {
        let step = max(BlockChecksums.blockSize, min(step, 1 << 40))
        guard let spans = try? spans() else { return }
        if let cipher {
            // Block by block: a block that fails leaves the others of its read unchecked.
            for span in spans.spans {
                var offset = span.lowerBound
                while offset < span.upperBound, !Task.isCancelled {
                    let end = (offset / cipher.layout.blockSize + 1) * cipher.layout.blockSize
                    let part = ByteRange(offset, min(end, span.upperBound))
                    _ = try? await read(part)
                    offset = part.upperBound
                    await pace(part.length)
                }
            }
            return
        }
        guard let (file, fileName) = try? await openedFile() else { return }
        for span in spans.spans {
            var offset = span.lowerBound
            while offset < span.upperBound, !Task.isCancelled {
                // Steps end on block boundaries: no block is read twice.
                let end = (offset + step) / BlockChecksums.blockSize * BlockChecksums.blockSize
                let part = ByteRange(offset, min(span.upperBound, max(end, offset + 1)))
                try? await BlockingIO.run { try self.check(part, file: file, fileName: fileName, everyBlock: true) }
                offset = part.upperBound
                await pace(part.length)
            }
        }
    }
}
