// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
import NIOCore
import Synchronization

extension CachingReader {
    // MARK: Content information

    /// The resource's content information: from the store when its length is known there
    /// and it is fresh (RFC 9111 §4.2; see ``Configuration/prefersCache``), else from the
    /// origin: a stale entry is revalidated with a conditional request (a "not modified"
    /// answer costs no body bytes and refreshes it; a new version replaces it), an unknown
    /// one is asked for. Concurrent calls share one origin request.
    ///
    /// - Parameter url: the resource.
    /// - Parameter offset: where a read will start, if one follows. For an uncached
    ///   resource the origin is then asked with a ranged `GET` from there instead of a
    ///   `HEAD`: its head gives the content information and its body becomes the first
    ///   download, which the read joins, so the first byte costs one round trip, not two.
    /// - Parameter length: how many bytes that read wants, if it says: the `GET` then asks
    ///   for no more than that (at most 256 KiB).
    /// - Parameter headers: the player's request headers to send to the origin (see
    ///   ``RequestHeaders``); they do not change the cache key.
    /// - Throws: ``CacheError`` with an origin code when the origin fails.
    /// - Parameter maximumAge: when given, a stored entry the origin gave or confirmed longer
    ///   ago than this is revalidated whatever its freshness and ``Configuration/prefersCache``
    ///   say (a live HLS playlist: RFC 8216 §6.3.4 has a client reload it after at most its
    ///   target duration, and a cache in front must not make it older).
    public func contentInfo(
        for url: URL, readingFrom offset: Int64? = nil, length: Int64? = nil, headers: RequestHeaders = [],
        maximumAge: Duration? = nil
    ) async throws -> ContentMetadata {
        try await contentInfo(
            for: url, readingFrom: offset, length: length, headers: headers, maximumAge: maximumAge, as: .player)
    }

    /// ``contentInfo(for:readingFrom:length:headers:maximumAge:)`` for `requester`.
    package func contentInfo(
        for url: URL, readingFrom offset: Int64? = nil, length: Int64? = nil, headers: RequestHeaders = [],
        maximumAge: Duration? = nil, as requester: Requester
    ) async throws -> ContentMetadata {
        try await validator.contentInfo(
            ContentRequest(
                url: url, offset: offset, length: length, headers: headers, maximumAge: maximumAge,
                requester: requester))
    }

    /// ``contentInfo(for:readingFrom:length:headers:maximumAge:)`` for a caller that reads
    /// next: when the answer is not stored (`no-store`) or has no length, the probe's bytes
    /// are held for that read, so the probe's request is the read's (one origin request, not
    /// two). The caller calls ``releaseReservation(for:)`` when it is done, read or not.
    /// - Parameter inPlay: whether the read is a player's ranged read (a play's, see ``Plays``),
    ///   not a whole download.
    func contentInfoForRead(
        _ url: URL, from offset: Int64, length: Int64?, headers: RequestHeaders, inPlay: Bool = false
    ) async throws -> ContentMetadata {
        var request = ContentRequest(url: url, offset: offset, length: length, headers: headers, requester: .player)
        request.reserves = true
        request.playFrom = inPlay ? offset : nil
        return try await validator.contentInfo(request)
    }

    /// Lets go of the probe bytes held for a read of `url` that did not take them.
    func releaseReservation(for url: URL) {
        scheduler.releaseReservation(store.key(for: url))
    }

    /// How many background revalidations run (tests wait on it).
    package var backgroundRevalidationCount: Int { validator.backgroundRevalidations.withLock { $0.count } }

    // MARK: Freshness

    /// How many resources' last validation the read path remembers (at most
    /// ``Configuration/validationMemoryLimit``).
    package var rememberedValidations: Int { validations.count }

    /// Whether the origin gave or confirmed the stored version of `url` less than `age` ago.
    func wasConfirmed(_ url: URL, within age: Duration) -> Bool {
        let key = store.key(for: url)
        guard let stored = store.metadata(for: key) else { return false }
        return validator.isYoung(stored, key: key, within: age)
    }

    /// The fills on play under way, and whether the network allows them (see ``FillPolicy``).
    package var fills: FillOnPlay { context.fills }

    /// When the origin last confirmed each resource.
    var validations: RecentDates<Void> { plays.validations }

    /// The content information when the store alone can give it now: the entry's length is
    /// known and it may be used without asking the origin (see ``contentInfo(for:readingFrom:headers:)``);
    /// `nil` otherwise. Never waits.
    /// - Parameter headers: the player's request fields, matched against the stored answer's `Vary`.
    func cachedContentInfo(for url: URL, headers: RequestHeaders = []) -> ContentMetadata? {
        cachedContentInfo(key: store.key(for: url), headers: headers)
    }

    private func cachedContentInfo(key: CacheKey, headers: RequestHeaders) -> ContentMetadata? {
        guard let stored = store.metadata(for: key), stored.length != nil, validator.isCurrent(stored),
            stored.matches(request: headers)
        else { return nil }
        return stored
    }

    /// Whether a version of `url` whose length is known is stored, fresh or not (the cache can
    /// then answer a player's conditions itself, RFC 9111 §4.3.2).
    package func holdsVersion(of url: URL) -> Bool {
        store.metadata(for: store.key(for: url))?.length != nil
    }

    /// Now, on the store's clock (which tests set).
    package var now: Date { store.configuration.clock.now }

    /// What the store holds of `url` now, and when the origin last gave or confirmed it (a
    /// server says from them what it did for an answer: RFC 9211's `Cache-Status`).
    package func statusSnapshot(of url: URL) -> (metadata: ContentMetadata?, spans: SpanSet, validated: Date?) {
        let key = store.key(for: url)
        return (
            store.metadata(for: key).flatMap { $0.length != nil ? $0 : nil }, store.spans(for: key),
            validations.date(of: key)
        )
    }
}

/// The names of a request's conditional fields (RFC 9110 §13.1), lower-case.
package let conditionalFieldNames: Set<String> = [
    "if-match", "if-unmodified-since", "if-none-match", "if-modified-since", "if-range",
]

extension [(name: String, value: String)] {
    /// The fields less the player's own conditions (``conditionalFieldNames``): the cache's
    /// own requests carry its own.
    var withoutConditions: RequestHeaders {
        filter { !Self.isConditional($0.name) }
    }

    /// Whether any field is one of the player's conditions.
    package var hasConditions: Bool {
        contains { Self.isConditional($0.name) }
    }

    /// Whether `name` is a conditional field's; every one starts with `If-`, so most names
    /// are told apart without a lower-cased copy.
    package static func isConditional(_ name: String) -> Bool {
        let bytes = name.utf8
        guard bytes.count >= 7, bytes.first.map({ $0 | 0x20 }) == UInt8(ascii: "i") else { return false }
        return conditionalFieldNames.contains(name.lowercased())
    }
}

// MARK: The narrow sources of the runners

extension CachingReader: PrefetchSource, PlanSource, HeldAssetsSource {
    func storedLength(ifHolding item: PrefetchItem, as requester: Requester) -> Int64? {
        guard let total = cachedContentInfo(for: item.url)?.length else { return nil }
        let range = item.range.map { ByteRange($0.lowerBound, min($0.upperBound, total)) } ?? ByteRange(0, total)
        return range.isEmpty || storedLease(for: item.url, as: requester)?.holds(range) == true ? total : nil
    }

    func probe(_ item: PrefetchItem, headers: RequestHeaders, as requester: Requester) async throws {
        _ = try await contentInfo(
            for: item.url, readingFrom: item.range?.lowerBound ?? 0, length: item.range?.length, headers: headers,
            as: requester)
    }

    func read(_ item: PrefetchItem, headers: RequestHeaders, as requester: Requester) async throws -> ReadStream {
        try await read(
            item.url, offset: item.range?.lowerBound ?? 0, length: item.range?.length, headers: headers, as: requester)
    }

    func readPlaylist(_ url: URL, headers: RequestHeaders, as requester: Requester) async throws -> (
        body: [UInt8], metadata: ContentMetadata
    ) {
        try await bodies.playlistBody(url, headers: headers, as: requester)
    }

    var storesKeys: Bool { store.isEncrypted }

    var logger: Logger { configuration.logger }

    func storedLength(of url: URL) -> Int64? {
        store.metadata(for: store.key(for: url))?.length
    }

    func isPinned(_ url: URL) -> Bool {
        store.isPinned(store.key(for: url))
    }

    func originIsAway(for url: URL) -> Bool {
        configuration.isOffline || fetcher.reachability.isFailing(url)
    }

    var heldPlanner: AssetPlanner { offlineTwin.planner(for: .own(.export)) }

    func confirm(_ url: URL) async {
        _ = try? await contentInfo(for: url, maximumAge: .zero)
    }
}
