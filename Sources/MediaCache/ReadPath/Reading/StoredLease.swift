// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields

/// What the store holds for one request, taken in one look without waiting
/// (``CachingReader/storedLease(for:headers:range:)``): the stored answer's content information,
/// current and matching the request, and the stored span at the offset the request starts
/// from. A server plans its answer from ``metadata`` and then takes the bytes it planned: one
/// region of the data file (``region(_:)``, sent with `sendfile`, no read built around it and
/// no entry opened) or a read of a range every byte of which is stored (``read(_:)``, an
/// encrypted store's or a long range's). What it takes is of the version ``metadata``
/// describes (a read finds a version stored since and gives nothing).
///
/// An event loop can take and drop one.
package struct StoredLease: Sendable {
    /// The stored answer's content information (its length is known).
    package let metadata: ContentMetadata
    private let context: ReadContext
    private let url: URL
    private let key: CacheKey
    private let headers: RequestHeaders
    /// The stored span at the request's offset, with the data file, read with ``metadata``.
    private let stored: CacheStore.StoredSpan?
    /// Who reads (a player's read is a play: see ``Plays``).
    private let requester: Requester

    init(
        metadata: ContentMetadata, context: ReadContext, url: URL, key: CacheKey, headers: RequestHeaders,
        stored: CacheStore.StoredSpan?, requester: Requester
    ) {
        (self.metadata, self.context, self.url, self.key, self.headers, self.stored) = (
            metadata, context, url, key, headers, stored
        )
        self.requester = requester
    }

    /// Whether every byte of `range` is stored (and the stored version is still this one).
    package func holds(_ range: ByteRange) -> Bool {
        guard let handle = try? context.store.openEntry(key) else { return false }
        defer { handle.close() }
        return handle.cachedWhole(range).map { $0.metadata.isSameVersion(as: metadata) } ?? false
    }

    /// `range` as one region of the entry's data file, when it lies in the stored span the
    /// lease was taken at and is no longer than a read's first region
    /// (``CachingReader/Configuration/fileRegionSize`` shared among the open reads): `nil`
    /// otherwise, in an encrypted store, and for a range past byte 0 in a play of another
    /// version (``Plays``: the read refuses it).
    package func region(_ range: ByteRange) -> StoredRegion? {
        guard !range.isEmpty, let stored, case let span = stored.span, span.lowerBound <= range.lowerBound,
            range.lowerBound < span.upperBound,
            ReadSession.regionEnd(at: range.lowerBound, of: range, in: span, context: context) == range.upperBound,
            context.plays.begin(key, version: metadata, from: range.lowerBound, by: requester)
        else { return nil }
        return StoredRegion(file: stored.file, range: range)
    }

    /// A read of `range`, whose every byte is stored. `nil` when a byte is missing (or another
    /// version was stored since the lease was taken).
    package func read(_ range: ByteRange) -> ReadStream? {
        guard let handle = try? context.store.openEntry(key) else { return nil }
        guard let (current, cached) = handle.cachedWhole(range), current.isSameVersion(as: metadata),
            context.plays.begin(key, version: current, from: range.lowerBound, by: requester)
        else {
            handle.close()
            return nil
        }
        let session = ReadSession(
            context: context, url: url, key: key, range: range, headers: headers, handle: handle,
            requester: requester, resourceLength: current.length, cached: cached)
        return ReadStream(metadata: current, range: range, session: session)
    }
}
