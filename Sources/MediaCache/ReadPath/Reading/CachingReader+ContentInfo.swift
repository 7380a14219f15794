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
    func contentInfo(
        for url: URL, readingFrom offset: Int64? = nil, length: Int64? = nil, headers: RequestHeaders = [],
        maximumAge: Duration? = nil, as requester: Requester
    ) async throws -> ContentMetadata {
        try await contentInfo(
            for: url, readingFrom: offset, length: length, headers: headers, maximumAge: maximumAge, reserves: false,
            as: requester)
    }

    /// ``contentInfo(for:readingFrom:length:headers:maximumAge:)`` for a caller that reads
    /// next: when the answer is not stored (`no-store`) or has no length, the probe's bytes
    /// are held for that read, so the probe's request is the read's (one origin request, not
    /// two). The caller calls ``releaseReservation(for:)`` when it is done, read or not.
    /// - Parameter inPlay: whether the read is a player's ranged read (a play's, see ``Plays``),
    ///   not a whole download.
    package func contentInfoForRead(
        _ url: URL, from offset: Int64, length: Int64?, headers: RequestHeaders, inPlay: Bool = false
    ) async throws -> ContentMetadata {
        try await contentInfo(
            for: url, readingFrom: offset, length: length, headers: headers, maximumAge: nil, reserves: true,
            playFrom: inPlay ? offset : nil, as: .player)
    }

    /// Lets go of the probe bytes held for a read of `url` that did not take them.
    package func releaseReservation(for url: URL) {
        scheduler.releaseReservation(store.key(for: url))
    }

    /// - Parameter playFrom: where a player's ranged read that follows starts (`nil`: none
    ///   follows): a play's read past byte 0 keeps to a whole stored version
    ///   (``isWholeInPlay(_:key:url:)``); one from byte 0 begins a new play, asked as any other.
    /// - Parameter requester: who asks: the probe's download is its.
    func contentInfo(
        for url: URL, readingFrom offset: Int64?, length: Int64?, headers: RequestHeaders,
        maximumAge: Duration?, reserves: Bool, yielded: Bool = false, playFrom: Int64? = nil, as requester: Requester
    ) async throws -> ContentMetadata {
        let offset = offset.map { min(max(0, $0), ByteRange.maximumOffset) }
        let key = store.key(for: url)
        if !headers.hasConditions, let remembered = answers.answer(for: key, at: store.configuration.clock.now) {
            // The origin's own answer (a `404`, a `301`), still fresh: given again, not asked for.
            throw CacheError(answer: remembered, url: url.absoluteString)
        }
        var stored = store.metadata(for: key).flatMap { $0.length != nil ? $0 : nil }
        if let varied = stored, !varied.matches(request: headers) {
            // Stored for a request whose varying fields differ: a miss that fetches and replaces.
            configuration.logger.debug(
                "The stored answer varies on fields this request does not match",
                metadata: ["url": "\(url.absoluteString.prefix(200))"])
            try? await store.remove(key)
            stored = nil
        }
        if stored == nil, let offset, let growing = growingBodies.withLock({ $0[key] }), growing.isJoinable,
            growing.bodyOffset == offset
        {
            // A body without a length is coming from the origin for this read's start: the
            // read joins it (``passThrough``) rather than asking again.
            return growing.metadata
        }
        if let stored, isCurrent(stored, key: key),
            configuration.isOffline || (maximumAge.map({ isYoung(stored, key: key, within: $0) }) ?? true)
        {
            // A probe or revalidation that stored this metadata may not have started the
            // download of the bytes it asked for yet: a read that went on now would find
            // neither them nor a download to join, and ask the origin a second time. Its
            // result is shared instead (it ends once the download is there).
            if !headers.hasConditions, !configuration.isOffline, let running = contentInfoTasks.withLock({ $0[key] }) {
                if requester.isPlayer { running.promotion.promote() }
                if let shared = try? await running.task.value() { return shared }
            }
            return stored
        }
        if let stored, let start = playFrom, start > 0, maximumAge == nil, !headers.hasConditions,
            !stored.requiresRevalidation, isWholeInPlay(stored, key: key, url: url)
        {
            // Stale, but whole on disk and in a play that began with it, which goes on past byte
            // 0 (a seek, a resume): served as it is, so a play keeps to one version
            // (docs/http.md). A read from byte 0 begins a new play and asks as any other; an
            // origin that said `no-cache` or `must-revalidate` is always asked.
            return stored
        }
        if let stored, maximumAge == nil, !headers.hasConditions, !scheduler.hasShutDown,
            stored.mayServeWhileRevalidating(at: store.configuration.clock.now)
        {
            // Stale, within the origin's `stale-while-revalidate`: served as it is while one
            // revalidation runs in the background (RFC 5861 §3).
            revalidateInBackground(url, key: key, stored: stored, headers: headers.withoutConditions, as: requester)
            return stored
        }
        if let stored, let offset, let total = stored.length, maximumAge == nil, !headers.hasConditions,
            stored.ifRangeValidator != nil,
            offset < total,
            !store.spans(for: key).contains(ByteRange(offset, min(total, offset + min(length ?? total, total))))
        {
            // Stale, and the read misses bytes: its request for the first of them carries
            // `If-Range` with the stored validator, and the read waits for that answer before
            // its first byte (`needsValidation`, a stale version). The answer validates the
            // stored version and brings the bytes at once: a conditional request first would
            // cost the read a second origin request.
            return stored
        }
        // A request carrying the player's own conditions may get the origin's `304` for it:
        // such a request shares no task with others.
        let shares = !headers.hasConditions
        if !requester.isPlayer, !yielded, contentInfoTasks.withLock({ $0[key] == nil }) {
            // The cache's own question waits while players wait on an origin: before any shared
            // task exists, so a player never waits on a task that waits for it. The players may
            // have fetched and stored the resource meanwhile (a segment read ahead of a player
            // that asked for it first): everything is looked at again, never asked from what was
            // seen before the wait.
            var seen = priority.generation
            await priority.yieldToPlayers(seen: &seen)
            return try await contentInfo(
                for: url, readingFrom: offset, length: length, headers: headers, maximumAge: maximumAge,
                reserves: reserves, yielded: true, playFrom: playFrom, as: requester)
        }
        if scheduler.hasShutDown { throw DownloadScheduler.shutDownError }
        let shared = contentInfoTasks.withLock { tasks in
            if shares, let running = tasks[key] { return running }
            let promotion = ConnectionBudget.Promotion()
            let task = SharedTask { [self, stored] in
                do {
                    if let stored {
                        return try await revalidate(
                            url, key: key, stored: stored, offset: offset ?? 0,
                            length: offset == nil ? nil : length ?? ByteRange.maximumOffset,
                            headers: headers.withoutConditions, reserves: reserves, as: requester,
                            promotion: promotion)
                    }
                    guard let offset else {
                        return await storeGiven(
                            try await fetcher.contentInfo(
                                for: url, headers: headers, as: requester, promotion: promotion), key: key)
                    }
                    // The bytes the read asks for, in one request: an open-ended read asks to
                    // the end (`bytes=a-`), which the origin streams as the player reads.
                    let size = max(1, min(length ?? ByteRange.maximumOffset, ByteRange.maximumOffset - offset))
                    return try await probe(
                        url, key: key, offset: offset, size: size, headers: headers, reserves: reserves,
                        as: requester, promotion: promotion)
                } catch let error as CacheError {
                    // An answer the origin lets a cache reuse (it carries its freshness) is kept for the next request.
                    if shares, let answer = error.originAnswer, answer.freshUntil != nil,
                        !isNotYetAvailable(answer, url: url)
                    {
                        answers.remember(answer, for: key, at: store.configuration.clock.now)
                    }
                    throw error
                }
            }
            let started = Probe(task: task, promotion: promotion)
            if shares { tasks[key] = started }
            return started
        }
        // A player who waits on a probe the cache's own work began makes its request a player's.
        if requester.isPlayer { shared.promotion.promote() }
        let task = shared.task
        defer { contentInfoTasks.withLock { if $0[key]?.task === task { $0[key] = nil } } }
        waitingForOrigin.add(1, ordering: .relaxed)
        defer { waitingForOrigin.subtract(1, ordering: .relaxed) }
        // A caller that is cancelled stops waiting at once; a shared task goes on for the
        // others and for the store, one of this caller's own is cancelled with it.
        return try await withTaskCancellationHandler {
            try await priority.whilePlayerWaits(requester) { try await task.value() }
        } onCancel: {
            if !shares { task.cancel() }
        }
    }

    /// Starts a revalidation of `stored` on a task of its own unless one runs for `key`
    /// already (see ``backgroundRevalidations``); its result goes to the store only.
    func revalidateInBackground(
        _ url: URL, key: CacheKey, stored: ContentMetadata, headers: RequestHeaders, as requester: Requester
    ) {
        backgroundRevalidations.withLock { tasks in
            // Checked under the lock `shutDown()` takes to collect them: none starts after.
            guard tasks[key] == nil, !scheduler.hasShutDown else { return }
            configuration.logger.debug(
                "Serving a stale copy while it is revalidated (stale-while-revalidate)",
                metadata: ["url": "\(url.absoluteString.prefix(200))"])
            // Only this task removes `key`, and the lock held here makes it wait until it is in.
            tasks[key] = Task { [self] in
                defer { _ = backgroundRevalidations.withLock { $0.removeValue(forKey: key) } }
                _ = try? await revalidate(url, key: key, stored: stored, offset: 0, headers: headers, as: requester)
            }
        }
    }

    /// How many background revalidations run (tests wait on it).
    package var backgroundRevalidationCount: Int { backgroundRevalidations.withLock { $0.count } }

    /// Asks the origin whether the stored version is current, with `If-None-Match` /
    /// `If-Modified-Since` on a ranged GET from `offset`: "not modified" refreshes the
    /// entry's freshness at no body cost; any other answer is a version to adopt (a new one
    /// replaces the entry). An origin that cannot be reached leaves the stale entry in use
    /// (``Configuration/servesStaleOnOriginFailure``).
    func revalidate(
        _ url: URL, key: CacheKey, stored: ContentMetadata, offset: Int64, length: Int64? = nil,
        headers: RequestHeaders, reserves: Bool = false, as requester: Requester,
        promotion: ConnectionBudget.Promotion? = nil
    ) async throws -> ContentMetadata {
        var conditional = headers
        if let etag = stored.etag { conditional.append((name: "If-None-Match", value: etag)) }
        if let modified = stored.lastModified { conditional.append((name: "If-Modified-Since", value: modified)) }
        let start = min(offset, max(0, (stored.length ?? 1) - 1))
        // The read's own range when it is known (an answer other than `304` is the download the
        // read joins: the rest of its range would cost a second request), else a first window.
        let size = length.map { max(1, min($0, ByteRange.maximumOffset - start)) } ?? configuration.minimumRequest
        let response: OriginResponse
        do {
            // Within a play, asked where the play goes: the version it began with (``PlayRoute``).
            response = try await playRoute.fetch(
                url, key: key, stored: stored, range: ByteRange(start, start + size), ifRange: nil,
                headers: conditional, as: requester, promotion: promotion)
        } catch let error as CacheError where error.isOriginFailure {
            let logMetadata: Logger.Metadata = [
                "url": "\(url.absoluteString.prefix(200))", "error": "\(error.message)",
            ]
            guard configuration.servesStaleOnOriginFailure else {
                CacheMetrics.revalidated(.failed)
                throw error
            }
            guard !stored.requiresRevalidation else {
                CacheMetrics.revalidated(.failed)
                configuration.logger.warning(
                    "Not serving the stale cached copy (the origin said must-revalidate or no-cache): the origin failed to revalidate it",
                    metadata: logMetadata)
                throw error
            }
            configuration.logger.warning(
                "Serving a stale cached copy: the origin failed to revalidate it", metadata: logMetadata)
            CacheMetrics.revalidated(.servedStale)
            return stored
        } catch let error as CacheError
            where [404, 410].contains(error.originAnswer?.status ?? 0) && isWholePin(key, stored)
        {
            // The user kept it: a pinned resource the origin no longer has (a live segment past
            // the CDN's window, a download whose file was taken down) plays from the pin.
            configuration.logger.warning(
                "Serving a pinned copy the origin no longer has",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "status": "\(error.originAnswer?.status ?? 0)"])
            CacheMetrics.revalidated(.servedStale)
            return stored
        }
        guard !response.isNotModified else {
            CacheMetrics.revalidated(.notModified)
            configuration.logger.debug(
                "The origin confirmed the stored version", metadata: ["url": "\(url.absoluteString.prefix(200))"])
            let metadata = await store(stored.refreshed(by: response.metadata), key: key, version: .confirms(stored))
            markValidated(key)
            return metadata
        }
        // A full answer: another version, or the same one from an origin that ignores
        // conditions. Only a validator both carry shows it is the same: an answer without one
        // (a live playlist from an origin that sends neither `ETag` nor `Last-Modified`) is a
        // new version even when its length is the old one's, and the stored bytes go.
        let same = response.metadata.isProvenSameVersion(as: stored)
        CacheMetrics.revalidated(same ? .notModified : .changed)
        if !same, response.metadata.isSameVersion(as: stored) {
            configuration.logger.debug(
                "A stale entry without a shared validator is replaced by the origin's answer",
                metadata: ["url": "\(url.absoluteString.prefix(200))"])
        }
        return try await adopt(
            response, url: url, key: key, offset: start, size: size, headers: headers, reserves: reserves,
            version: same ? .compare : .new, for: requester)
    }

    /// Whether `key` is pinned and holds every byte of `stored`.
    func isWholePin(_ key: CacheKey, _ stored: ContentMetadata) -> Bool {
        guard store.isPinned(key), let length = stored.length else { return false }
        return length == 0 || store.spans(for: key).contains(ByteRange(0, length))
    }

    /// Stores the content information the origin just gave for `key` (a `HEAD`'s), recording
    /// that it gave this version now: a play that began with it keeps to it (``PlayRoute``).
    func storeGiven(_ metadata: ContentMetadata, key: CacheKey) async -> ContentMetadata {
        let stored = await store(metadata, key: key)
        if metadata.length != nil, metadata.isStorable { markValidated(key) }
        return stored
    }

    /// Asks for the first `size` bytes at `offset` and turns the answer into a
    /// download that readers can join; returns the content information it carries.
    func probe(
        _ url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders, reserves: Bool,
        as requester: Requester, promotion: ConnectionBudget.Promotion
    ) async throws -> ContentMetadata {
        let response: OriginResponse
        do {
            response = try await fetcher.fetch(
                url, range: ByteRange(offset, offset + size), ifRange: nil, headers: headers, as: requester,
                promotion: promotion)
        } catch let error as CacheError where error.code == .rangeNotSatisfiable {
            // Nothing at `offset` (an empty file, or a read past the end): the content
            // information is all there is to learn, and a 416 does not carry all of it.
            let metadata = try await fetcher.contentInfo(
                for: url, headers: headers, as: requester, promotion: promotion)
            return await storeGiven(metadata, key: key)
        }
        if response.isNotModified {
            // Nothing was stored, so the cache sent no condition: the `304` answers the player's own.
            throw CacheError(
                answer: response.answer ?? OriginAnswer(status: 304, reason: "Not Modified", headers: [], body: []),
                url: url.absoluteString)
        }
        return try await adopt(
            response, url: url, key: key, offset: offset, size: size, headers: headers.withoutConditions,
            reserves: reserves, for: requester)
    }

    /// Stores what an origin answer for bytes from `offset` says of the resource (a new
    /// version replaces the entry) and turns its body (`size` bytes asked for) into a download
    /// that readers join, `requester`'s until they do.
    func adopt(
        _ response: OriginResponse, url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders,
        reserves: Bool = false, version: VersionChange = .compare, for requester: Requester
    ) async throws -> ContentMetadata {
        try response.check(askedFrom: offset, known: nil, url: url, logger: configuration.logger)
        let metadata = await store(response.metadata, key: key, version: version)
        markValidated(key)
        guard let total = metadata.length else {
            // No length: the read streams the body through (`passThrough`); the probe's is
            // held for the read that asked, so it costs no second request.
            if reserves, response.bodyOffset == 0 || response.bodyOffset == offset {
                scheduler.reserve(body: sharing(response, key: key), for: key)
            }
            return metadata
        }
        guard response.bodyOffset <= offset, offset < total else { return metadata }
        let download =
            metadata.acceptsRanges
            ? scheduler.makeDownload(
                url: url, key: key, start: offset, end: min(total, offset + size), isFullBody: false,
                stores: metadata.isStorable, headers: headers, startedBy: requester)
            : scheduler.makeDownload(
                url: url, key: key, start: 0, end: total, isFullBody: true, stores: metadata.isStorable,
                headers: headers, startedBy: requester)
        // The download is held for the read that asked (see `contentInfoForRead`): bytes that
        // are not stored would be lost without it, and a stored download would end when the
        // first reader to join it left (a look at its first bytes), and the read that answers
        // ask the origin again for the rest.
        if reserves { scheduler.reserve(download, for: requester) }
        scheduler.start(download, transfer: transfer(for: download, firstResponse: response))
        return metadata
    }

    // MARK: Remembered answers

    /// Notes `folder` as where a live presentation's segments are (a live playlist's or a
    /// dynamic manifest's base): a segment there that does not exist yet gets a `404` that is
    /// not remembered, so the player's next try, once it is made, reaches the origin.
    package func noteLive(_ folder: URL) {
        let text = folder.absoluteString
        liveFolders.withLock { folders in
            guard !folders.contains(text) else { return }
            if folders.count >= 64 { folders.removeFirst() }
            folders.append(text)
        }
    }

    /// Whether `answer` says `url` is missing where a live presentation's segments appear.
    func isNotYetAvailable(_ answer: OriginAnswer, url: URL) -> Bool {
        guard answer.status == 404 || answer.status == 410 else { return false }
        let text = url.absoluteString
        return liveFolders.withLock { $0.contains { text.hasPrefix($0) } }
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
