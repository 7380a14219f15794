// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Synchronization

/// Whole bodies: small resources that must not be written to disk unencrypted (HLS keys),
/// kept in memory by the rule the store's entries follow unless the store is encrypted;
/// bodies fetched straight from the origin past the cache (HLS blocking playlist reloads);
/// bodies read whole through the cache (playlists).
extension CachingReader {
    /// The largest body kept in memory by ``memoryOnlyBody(of:headers:)`` (an AES-128 key is 16 bytes).
    static let memoryOnlyLimit = 64 << 10

    /// The whole body of `url`, never read from or written to an unencrypted store: from
    /// memory while it may be used without asking the origin (fresh, or
    /// ``Configuration/prefersCache``), else fetched again. At most ``MemoryBodies/capacity`` are kept; `no-store` bodies are
    /// not kept at all. In an encrypted store the body is an entry like any other (sealed on
    /// disk), so an HLS key survives a restart and an asset prefetched for offline use plays
    /// offline.
    /// - Throws: ``CacheError`` for an origin failure, or `.originRejected` for a body over
    ///   ``memoryOnlyLimit``.
    package func memoryOnlyBody(of url: URL, headers: RequestHeaders = []) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        if store.isEncrypted { return try await storedBody(of: url, headers: headers, limit: Self.memoryOnlyLimit) }
        let key = store.key(for: url)
        if let kept = memoryBodies.withLock({ $0.entries[key] }), isCurrent(kept.metadata, key: key) {
            return (kept.body, kept.metadata)
        }
        let fetched = try await originBody(of: url, headers: headers, limit: Self.memoryOnlyLimit)
        markValidated(key)
        if fetched.metadata.isStorable {
            memoryBodies.withLock { $0.keep(MemoryBodies.Entry(body: fetched.body, metadata: fetched.metadata), for: key) }
        }
        return fetched
    }

    /// The whole body of `url` through the cache, refused past `limit` bytes, and the
    /// metadata of the version it is.
    /// - Throws: ``CacheError``: the read's errors; `.originRejected` for a body too large.
    /// - Parameter planned: see ``read(_:offset:length:headers:planned:)``.
    func storedBody(of url: URL, headers: RequestHeaders = [], limit: Int, planned: ContentMetadata? = nil) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        let stream = try await read(url, offset: 0, length: nil, headers: headers, planned: planned)
        var body: [UInt8] = []
        for try await chunk in stream {
            body += chunk.readableBytesView
            guard body.count <= limit else {
                stream.cancel()
                throw CacheError(.originRejected, "The body of \(url.absoluteString.prefix(200)) is larger than \(limit) bytes.")
            }
        }
        return (body, stream.metadata)
    }

    /// The whole body of `url` in one `GET` straight from the origin, past the cache:
    /// nothing is read from or written to the store.
    /// - Throws: ``CacheError``: the origin's failure; `.originRejected` when the body is
    ///   longer than `limit` or than its stated length; `.originUnavailable` when it is shorter.
    package func originBody(of url: URL, headers: RequestHeaders = [], limit: Int) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        let response = try await fetcher.fetch(url, range: nil, ifRange: nil, headers: headers)
        try response.check(askedFrom: 0, known: nil, url: url, logger: configuration.logger)
        var body: [UInt8] = []
        for try await chunk in response.body {
            body += chunk.readableBytesView
            guard body.count <= limit, body.count <= response.metadata.length ?? Int64.max else {
                let reason = body.count > limit ? "is longer than \(limit) bytes" : "is longer than its Content-Length"
                configuration.logger.warning("Rejected an origin answer", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "the body \(reason)"])
                throw CacheError(.originRejected, "\(url.absoluteString.prefix(200)): the body \(reason).")
            }
        }
        if let length = response.metadata.length, body.count < length {
            throw CacheError(.originUnavailable, "\(url.absoluteString.prefix(200)): the body ended after \(body.count) of \(length) bytes.")
        }
        return (body, response.metadata)
    }
}

/// The bodies ``CachingReader/memoryOnlyBody(of:headers:)`` keeps, oldest first out.
struct MemoryBodies: Sendable {
    struct Entry: Sendable {
        var body: [UInt8]
        var metadata: ContentMetadata
    }

    static let capacity = 256
    private(set) var entries: [CacheKey: Entry] = [:]
    private var order: [CacheKey] = []

    mutating func keep(_ entry: Entry, for key: CacheKey) {
        if entries.updateValue(entry, forKey: key) == nil { order.append(key) }
        while order.count > Self.capacity { entries[order.removeFirst()] = nil }
    }
}
