// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheHTTPFields

/// What checking an entry against its origin's digests found.
package enum DigestOutcome: Sendable, Equatable {
    /// Every digest matched: the algorithms, strongest first.
    case matched([String])
    /// A digest did not match: the stored representation was dropped.
    case mismatched
    /// Nothing to check now: no digests, not whole, a block failed its own check (it is
    /// fetched again and the entry checked when whole again), or the entry changed.
    case unchecked
}

/// Checks whole entries against the digests their origin sent (`Repr-Digest`, `Content-Digest`,
/// S3's and Google's checksum fields), through what the store exposes: its entry handles and
/// the work it starts when an entry becomes whole.
package enum OriginDigestCheck {
    /// Makes `store` check each entry that becomes whole, in the background at a low priority,
    /// unless its origin sent no digests or it was checked already.
    package static func start(in store: CacheStore) {
        store.startWhenWhole(
            CacheStore.WholeEntryWork(
                applies: { !$0.originDigests.isEmpty && $0.digestsMatched == nil },
                run: { store, key in _ = await check(key, in: store) }))
    }

    /// Checks `key`'s stored bytes against the digests its origin sent, when it holds all of
    /// them: they are read back through the checked read (each block against its checksum
    /// first) in 1 MiB parts on the I/O pool and hashed with every algorithm given. A match is
    /// kept with the version (``ContentMetadata/digestsMatched``); a mismatch drops the stored
    /// representation once the reads under way have ended, so nothing of it is served after
    /// them and the next read asks the origin, logged at warning with both digests and counted.
    package static func check(_ key: CacheKey, in store: CacheStore) async -> DigestOutcome {
        guard let handle = try? store.openEntry(key) else { return .unchecked }
        defer { handle.close() }
        guard let metadata = try? handle.metadata(), let length = metadata.length,
            (try? handle.spans().contains(ByteRange(0, length))) == true
        else { return .unchecked }
        let digests = metadata.originDigests
        guard !digests.isEmpty else { return .unchecked }
        var hasher = DigestHasher(Set(digests.map(\.algorithm)))
        var offset: Int64 = 0
        while offset < length {
            guard !Task.isCancelled else { return .unchecked }
            let part = ByteRange(offset, min(length, offset + (1 << 20)))
            guard let bytes = try? await handle.read(part) else { return .unchecked }
            bytes.withUnsafeReadableBytes { hasher.update($0) }
            offset = part.upperBound
        }
        let computed = hasher.finalize()
        let url = metadata.sourceURL?.absoluteString ?? key.rawValue
        if let wrong = digests.first(where: { computed[$0.algorithm] != $0.value }) {
            // The reads under way finish first (they hold what the origin sent): dropping the
            // representation under them would cut their answers short.
            await handle.untilAlone()
            guard !Task.isCancelled else { return .unchecked }
            CacheMetrics.originDigest(.mismatched)
            let ours = OriginDigest(algorithm: wrong.algorithm, value: computed[wrong.algorithm] ?? [], field: "")
            store.configuration.logger.warning(
                "The stored bytes do not match the origin's digest; the stored representation is dropped and asked for again",
                metadata: [
                    "url": "\(url)", "field": "\(wrong.field)", "origin": "\(wrong.text)", "stored": "\(ours.text)",
                ])
            var dropped = ContentMetadata(mimeType: metadata.mimeType)
            dropped.sourceURL = metadata.sourceURL
            _ = try? handle.updateMetadata(dropped, version: .new)
            return .mismatched
        }
        let algorithms = OriginDigest.Algorithm.allCases.filter { computed[$0] != nil }.map(\.rawValue)
        do { try handle.recordDigestsMatched(algorithms, of: digests) } catch { return .unchecked }
        CacheMetrics.originDigest(.matched)
        return .matched(algorithms)
    }
}

/// Hashes bytes with each algorithm asked for, in one pass.
struct DigestHasher {
    private var sha512: SHA512?
    private var sha256: SHA256?
    private var md5: Insecure.MD5?
    private var crc32c: CRC32C?

    init(_ algorithms: Set<OriginDigest.Algorithm>) {
        if algorithms.contains(.sha512) { sha512 = SHA512() }
        if algorithms.contains(.sha256) { sha256 = SHA256() }
        if algorithms.contains(.md5) { md5 = Insecure.MD5() }
        if algorithms.contains(.crc32c) { crc32c = CRC32C() }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        sha512?.update(bufferPointer: bytes)
        sha256?.update(bufferPointer: bytes)
        md5?.update(bufferPointer: bytes)
        crc32c?.update(bytes)
    }

    /// Each digest's bytes (a CRC-32C big-endian, as origins send it).
    func finalize() -> [OriginDigest.Algorithm: [UInt8]] {
        var result: [OriginDigest.Algorithm: [UInt8]] = [:]
        if let sha512 { result[.sha512] = Array(sha512.finalize()) }
        if let sha256 { result[.sha256] = Array(sha256.finalize()) }
        if let md5 { result[.md5] = Array(md5.finalize()) }
        if let crc32c { result[.crc32c] = withUnsafeBytes(of: crc32c.value.bigEndian) { Array($0) } }
        return result
    }
}
