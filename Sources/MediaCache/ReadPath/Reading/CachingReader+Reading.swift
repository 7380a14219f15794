// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
package import MediaCacheHTTPFields
import NIOCore
import Synchronization

extension CachingReader {
    // MARK: Reading

    /// Starts reading `length` bytes at `offset` (to the end when `length` is `nil`).
    ///
    /// Returns once the content information is known and, if bytes are missing, the origin
    /// has confirmed the cached bytes are current, so ``ReadStream/metadata`` and
    /// ``ReadStream/range`` can be sent to a player before the first byte. A read is a
    /// player's: within a play (see ``Configuration/playWindow``) a read past byte 0 reads a
    /// whole stored file as it is, though it turned stale, and is refused with
    /// `.resourceChanged` when the file changed since the play began.
    /// - Throws: `.rangeNotSatisfiable` (with ``CacheError/resourceLength``) when `offset`
    ///   is at or past the end; origin errors.
    /// - Parameter url: the resource.
    /// - Parameter offset: the first byte to read.
    /// - Parameter length: how many bytes to read; `nil` for all to the end.
    /// - Parameter headers: the player's request headers, sent with the origin requests this
    ///   read starts (a download shared by several reads carries those of the read that
    ///   started it: one cache serves one user).
    /// - Parameter planned: the content information the caller just got from
    ///   ``contentInfo(for:readingFrom:length:headers:maximumAge:)`` for this same request: the
    ///   read plans from it instead of asking again, so a resource that must be validated on
    ///   every use (`no-cache`) or is never stored (`no-store`) costs one origin request, not two.
    public func read(
        _ url: URL, offset: Int64 = 0, length: Int64? = nil, headers: RequestHeaders = [],
        planned: ContentMetadata? = nil
    ) async throws -> ReadStream {
        try await read(url, offset: offset, length: length, headers: headers, planned: planned, as: .player)
    }

    /// Starts reading the bytes `resolve` picks from the resource's length, in the version
    /// the read finds: when the origin turns out to hold another version than `planned`, the
    /// range is resolved again from the new length, so ``ReadStream/metadata`` and
    /// ``ReadStream/range`` always agree (a front door writes its head from them alone). The
    /// one place a read plans again, at most three times.
    /// - Parameter lengthless: the offset and length to read when the resource has no length.
    /// - Parameter takesReservation: whether the read is the one its front door planned with
    ///   ``contentInfoForRead(_:from:length:headers:)``, and so takes the probe's download held
    ///   for it (a look at the body's first bytes is not: it joins that download and leaves it
    ///   running for the read that answers).
    /// - Parameter requester: who reads (a player's read is a play: see ``Plays``).
    /// - Parameter resolve: the bytes to read of a resource of the given length; `nil` when
    ///   none can be (`.rangeNotSatisfiable`, with ``CacheError/resourceLength``).
    package func read(
        _ url: URL, headers: RequestHeaders, planned: ContentMetadata?, lengthless: (offset: Int64, length: Int64?),
        takesReservation: Bool = true, as requester: Requester, resolving resolve: (Int64) -> ByteRange?
    ) async throws -> ReadStream {
        let key = store.key(for: url)
        if requester.isPlayer { preloader.played(key) }
        var planned = planned
        for _ in 0..<3 {
            let metadata: ContentMetadata
            if let known = planned {
                metadata = known
                planned = nil  // a version that changed under the read is asked for again
            } else {
                var request = ContentRequest(url: url, headers: headers, requester: requester)
                request.playFrom = lengthless.offset
                metadata = try await validator.contentInfo(request)
            }
            guard let total = metadata.length else {
                return try await self.lengthless.read(
                    url, key: key, offset: lengthless.offset, length: lengthless.length, headers: headers,
                    as: requester)
            }
            guard let range = resolve(total) else {
                var error = CacheError(.rangeNotSatisfiable, "The range is outside the \(total)-byte resource.")
                error.resourceLength = total
                throw error
            }
            let handle = metadata.isStorable ? try? store.openEntry(key) : nil
            if configuration.isOffline, !range.isEmpty, (try? handle?.spans())?.contains(range) != true {
                handle?.close()
                throw OfflineFetcher.error(
                    url, "bytes \(range.lowerBound)-\(range.upperBound - 1) of it are not all cached")
            }
            let session = ReadSession(
                context: context, url: url, key: key, range: range, headers: headers, handle: handle,
                requester: requester, resourceLength: total)
            if takesReservation { session.joinReservedDownload() }
            if needsValidation(key, range: range, handle: handle, stale: !validator.isCurrent(metadata)) {
                switch await session.startFirstDownloadAndWaitForResponse() {
                case .ready:
                    break
                case .resourceChanged:
                    // The entry now holds the new version's metadata; plan again from it.
                    session.close()
                    continue
                case .failed(let error):
                    session.close()
                    throw error
                }
            }
            let current = (try? handle?.metadata()) ?? metadata
            guard current.length == total, current.isSameVersion(as: metadata) else {
                session.close()  // another version was stored meanwhile: plan again from it
                continue
            }
            // After planning: the play this read is in is the one before it.
            guard plays.begin(key, version: current, from: range.lowerBound, by: requester) else {
                session.close()
                throw playChanged(url)
            }
            return ReadStream(metadata: current, range: range, session: session)
        }
        throw CacheError(
            .resourceChanged, "\(url.absoluteString) kept changing at the origin while being read; try again later.")
    }

    /// The error of a read past byte 0 in a play of another version than the one stored now:
    /// logged and counted (the origin changed the resource during the play).
    func playChanged(_ url: URL) -> CacheError {
        configuration.logger.warning(
            "Refused a read in the middle of a play: the resource changed at the origin since the play began",
            metadata: ["url": "\(url.absoluteString.prefix(200))"])
        CacheMetrics.changedMidRead()
        return CacheError(
            .resourceChanged,
            "\(url.absoluteString) changed at the origin during this play; play it again from the start.")
    }

    /// Whether a read of `range` waits for the origin's answer to its first request (which
    /// carries `If-Range`) before it gives a stored byte: a byte of the range is missing, and
    /// the stored version is `stale` or was not given or confirmed within the revalidation
    /// interval.
    func needsValidation(_ key: CacheKey, range: ByteRange, handle: CacheEntryHandle?, stale: Bool = false) -> Bool {
        guard let spans = try? handle?.spans(), !spans.contains(range) else { return false }
        if stale { return true }
        let last = validations.date(of: key)
        return last.map {
            !Plays.isWithin(configuration.revalidationInterval, from: $0, to: store.configuration.clock.now)
        } ?? true
    }

    /// What each running origin download fetches (the status page).
    package var activeDownloadSummaries: [DownloadSummary] {
        scheduler.summaries
    }

    /// Records the gauges of the metrics (downloads in flight, and the store's size, limit and
    /// entries) as they are now: call it before an export.
    public func recordMetrics() {
        CacheMetrics.downloadsInFlight.record(scheduler.count)
        let summary = store.summary()
        CacheMetrics.cacheSize.record(summary.bytes)
        CacheMetrics.cacheEntries.record(summary.entries)
        CacheMetrics.cacheLimit.record(summary.limit)
    }

    /// How many origin downloads are running (each one may serve several readers).
    public var activeDownloads: Int { scheduler.count }

    // MARK: What the store holds

    /// The lease on what the store holds for `url` when the store alone can answer a request
    /// with `headers`: the stored answer has a length, may be used without asking the origin
    /// (fresh, or the reader prefers the cache or is offline), is storable, and matches the
    /// request's fields as its `Vary` asks (RFC 9111 §4.1). `nil` otherwise. Never waits.
    /// - Parameter range: the request's `Range` (`nil`: none): the stored span where it starts
    ///   comes with the lease, for ``StoredLease/region(_:)``.
    /// - Parameter requester: who asks (a player's read is a play: see ``Plays``).
    package func storedLease(
        for url: URL, headers: RequestHeaders = [], range: RangeSpecifier? = nil, as requester: Requester
    ) -> StoredLease? {
        let key = store.key(for: url)
        let snapshot = store.storedSnapshot(key, played: requester.isPlayer) { length in
            range.map { $0.resolve(length: length) } ?? ByteRange(0, length)
        }
        guard let snapshot, case let metadata = snapshot.metadata, metadata.isStorable, validator.isCurrent(metadata),
            metadata.matches(request: headers)
        else { return nil }
        if requester.isPlayer { preloader.played(key) }
        return StoredLease(
            metadata: metadata, context: context, url: url, key: key, headers: headers, stored: snapshot.region,
            requester: requester)
    }
}

extension CachingReader: PreloadSource {
    func metadata(of url: URL) async throws -> ContentMetadata {
        try await contentInfo(for: url, as: .own(.preload))
    }

    func manifestKind(of url: URL, _ metadata: ContentMetadata) async throws -> ManifestKind? {
        try await manifestKind(url, metadata, as: .own(.preload))
    }

    func assetPlan(_ url: URL, kind: ManifestKind, options: HLSPrefetchOptions) async throws -> PrefetchPlan {
        try await planner(for: .own(.preload)).plan(url, kind: kind, options: options)
    }

    func key(for url: URL) -> CacheKey { store.key(for: url) }

    func storedByteCount(of url: URL) -> Int64 { store.spans(for: store.key(for: url)).byteCount }

    func missingBytes(of piece: PrefetchItem) -> Int64? {
        let key = store.key(for: piece.url)
        let known = piece.range ?? store.metadata(for: key)?.length.map { ByteRange(0, $0) }
        return known.map { store.spans(for: key).holes(in: $0).reduce(0) { $0 + $1.length } }
    }

    func store(_ piece: PrefetchItem) async throws -> Int64 {
        let before = storedByteCount(of: piece.url)
        try await prefetch(piece.url, range: piece.range, as: .own(.preload))
        return max(0, storedByteCount(of: piece.url) - before)
    }

    var hasShutDown: Bool { scheduler.hasShutDown }

    /// The bytes of `range` of `url`, read through the cache (and so stored) as a preload.
    func bytes(of url: URL, in range: ByteRange) async throws -> [UInt8] {
        let stream = try await read(url, offset: range.lowerBound, length: range.length, as: .own(.preload))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(range.length))
        for try await chunk in stream { bytes += chunk.readableBytesView }
        return bytes
    }
}
