// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Crypto
public import Foundation
public import MediaCache
import NIOCore

/// A workload for the crash test: writes deterministic bytes at random ranges of a few
/// entries, forever, replacing an entry's version now and then, so that a `kill -9` can
/// land at any instant. ``verify(directory:)`` then checks every byte the index claims.
public enum CrashWriter {
    /// The entries the writer uses.
    public static let keys = (0..<4).map { CacheKey("crash-entry-\($0) / any text: keys are not paths") }
    /// Each entry's length.
    public static let resourceLength: Int64 = 8 << 20

    /// The content of `key` at the version named by `etag`.
    public static func content(key: CacheKey, etag: String?) -> DeterministicContent {
        DeterministicContent(name: key.rawValue + "|" + (etag ?? "none"))
    }

    /// Writes until the process is killed. Prints `ready` once the store is open.
    public static func run(directory: URL, seed: UInt64, encryptionKey: SymmetricKey? = nil) async throws -> Never {
        var configuration = CacheStore.Configuration()
        configuration.encryptionKey = encryptionKey
        configuration.flushThreshold = 256 << 10
        configuration.maxBytes = 24 << 20
        let store = try await CacheStore.open(directory: directory, configuration: configuration)
        var random = SplitMix(seed: seed)
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        var handles = try keys.map { try store.openEntry($0) }
        var step = 0
        while true {
            step += 1
            let which = Int(random.next() % UInt64(keys.count))
            let handle = handles[which]
            if random.next() % 50 == 0 {
                // A new version of the resource: the old bytes must never be read again.
                _ = try handle.updateMetadata(
                    ContentMetadata(
                        length: resourceLength, mimeType: "video/mp4", acceptsRanges: true, etag: "\"v\(seed)-\(step)\""
                    ))
            } else if try handle.metadata().etag == nil {
                _ = try handle.updateMetadata(
                    ContentMetadata(length: resourceLength, mimeType: "video/mp4", acceptsRanges: true, etag: "\"v0\""))
            }
            if random.next() % 200 == 0 {
                handle.close()
                try await store.remove(keys[which])
                handles[which] = try store.openEntry(keys[which])
                continue
            }
            let etag = try handle.metadata().etag
            let offset = Int64(random.next() % UInt64(resourceLength))
            let length = min(Int64(random.next() % (512 << 10)) + 1, resourceLength - offset)
            let bytes = content(key: keys[which], etag: etag).buffer(offset: offset, length: Int(length))
            do {
                try await handle.write(bytes, at: offset)
            } catch let error as CacheError where error.code == .capacityExceeded {
                continue
            }
            if random.next() % 64 == 0 { try await store.flush() }
        }
    }

    /// Reopens the store in `directory` and checks every claimed byte against the content
    /// of its entry's version. Returns a list of problems (empty when all is right), the
    /// number of bytes checked and, in an encrypted store, how many sealed blocks failed
    /// their check (a block torn by the kill: a hole to fetch again, never bytes).
    public static func verify(directory: URL, encryptionKey: SymmetricKey? = nil) async throws -> (
        problems: [String], checkedBytes: Int64, rejectedBlocks: Int
    ) {
        var configuration = CacheStore.Configuration()
        configuration.encryptionKey = encryptionKey
        let store = try await CacheStore.open(directory: directory, configuration: configuration)
        var problems: [String] = []
        var checked: Int64 = 0
        for key in store.keys {
            // Every committed byte has its checksum (before any read could give it one).
            if encryptionKey == nil, let integrity = store.integrity(of: key),
                integrity.checksummedBlocks != integrity.storedBlocks
            {
                problems.append(
                    "\(key): \(integrity.storedBlocks - integrity.checksummedBlocks) of \(integrity.storedBlocks) blocks have no checksum"
                )
            }
            let handle = try store.openEntry(key)
            let metadata = try handle.metadata()
            let content = content(key: key, etag: metadata.etag)
            for span in try handle.spans().spans {
                if let length = metadata.length, span.upperBound > length {
                    problems.append("\(key): span \(span) beyond length \(length)")
                }
                var offset = span.lowerBound
                while offset < span.upperBound {
                    // In an encrypted store a block that fails its check leaves the spans:
                    // the rest of the span is checked from what remains.
                    let spans = try handle.spans()
                    guard let current = spans.span(containing: offset) else {
                        offset = spans.spans.first { $0.lowerBound > offset }?.lowerBound ?? span.upperBound
                        continue
                    }
                    let part = ByteRange(offset, min(offset + (1 << 20), span.upperBound, current.upperBound))
                    let bytes: ByteBuffer
                    do {
                        bytes = try await handle.read(part)
                    } catch let error as CacheError where error.code == .notCached && encryptionKey != nil {
                        guard try !handle.spans().contains(part) else {
                            problems.append("\(key): \(part) is claimed but reads as not cached")
                            break
                        }
                        continue
                    }
                    if let bad = content.firstMismatch(in: bytes, at: part.lowerBound) {
                        problems.append("\(key) version \(metadata.etag ?? "-"): wrong byte at \(bad) in span \(span)")
                        break
                    }
                    checked += part.length
                    offset = part.upperBound
                }
            }
            handle.close()
        }
        let rejected = store.summary().rejectedBlocks
        try await store.close()
        return (problems, checked, rejected)
    }
}

/// A small seeded random number generator (splitmix64), so runs can be repeated.
public struct SplitMix: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator from `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
