// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging

/// Asking the origin and adopting its answer: revalidations, probes, and what an answer
/// leaves in the store and the scheduler.
extension ContentValidator {
    /// Asks the origin whether the stored version is current, with `If-None-Match` /
    /// `If-Modified-Since` on a ranged GET from `offset`: "not modified" refreshes the
    /// entry's freshness at no body cost; any other answer is a version to adopt (a new one
    /// replaces the entry). An origin that cannot be reached leaves the stale entry in use
    /// (``CachingReader/Configuration/servesStaleOnOriginFailure``).
    func revalidate(
        _ url: URL, key: CacheKey, stored: ContentMetadata, offset: Int64, length: Int64? = nil,
        headers: RequestHeaders, reserves: Bool = false, as requester: Requester,
        promotion: ConnectionBudget.Promotion? = nil
    ) async throws -> ContentMetadata {
        // The answer may become a download a player joins: its request has a promotion.
        let promotion = promotion ?? ConnectionBudget.Promotion()
        var conditional = headers
        if let etag = stored.etag { conditional.append((name: "If-None-Match", value: etag)) }
        if let modified = stored.lastModified { conditional.append((name: "If-Modified-Since", value: modified)) }
        let start = min(offset, max(0, (stored.length ?? 1) - 1))
        // The read's own range when it is known (an answer other than `304` is the download the
        // read joins: the rest of its range would cost a second request), else a first window.
        let size = length.map { max(1, min($0, ByteRange.maximumOffset - start)) } ?? configuration.minimumRequest
        var questioned = Validation.Questioned()
        questioned.revalidates = true
        questioned.servesStaleOnFailure = configuration.servesStaleOnOriginFailure
        questioned.requiresRevalidation = stored.requiresRevalidation
        let (answer, response, failure): (Validation.Answer, OriginResponse?, CacheError?)
        do {
            // Within a play, asked where the play goes: the version it began with (``PlayRoute``).
            let given = try await playRoute.fetch(
                url, key: key, stored: stored, range: ByteRange(start, start + size), ifRange: nil,
                headers: conditional, as: requester, promotion: promotion)
            let kind: Validation.Answer =
                given.isNotModified ? .notModified : .body(provenSame: given.metadata.isProvenSameVersion(as: stored))
            (answer, response, failure) = (kind, given, nil)
        } catch let error as CacheError {
            (answer, response, failure) = (Validation.Answer(error), nil, error)
            questioned.isWholePin = isWholePin(key, stored)
        }
        func failed() -> CacheError {
            failure ?? CacheError(.originUnavailable, "\(url.absoluteString.prefix(200)) was not revalidated.")
        }
        var logMetadata: Logger.Metadata {
            ["url": "\(url.absoluteString.prefix(200))", "error": "\(failure?.message ?? "")"]
        }
        switch Validation.outcome(of: answer, questioned: questioned) {
        case .fail(.originError):
            throw failed()
        case .fail(.noStaleOnFailure):
            CacheMetrics.revalidated(.failed)
            throw failed()
        case .fail(.mustRevalidate):
            CacheMetrics.revalidated(.failed)
            configuration.logger.warning(
                "Not serving the stale cached copy (the origin said must-revalidate or no-cache): the origin failed to revalidate it",
                metadata: logMetadata)
            throw failed()
        case .serveStale:
            configuration.logger.warning(
                "Serving a stale cached copy: the origin failed to revalidate it", metadata: logMetadata)
            CacheMetrics.revalidated(.servedStale)
            return stored
        case .servePinned:
            // The user kept it: a pinned resource the origin no longer has (a live segment past
            // the CDN's window, a download whose file was taken down) plays from the pin.
            configuration.logger.warning(
                "Serving a pinned copy the origin no longer has",
                metadata: [
                    "url": "\(url.absoluteString.prefix(200))", "status": "\(failure?.originAnswer?.status ?? 0)",
                ])
            CacheMetrics.revalidated(.servedStale)
            return stored
        case .confirm:
            CacheMetrics.revalidated(.notModified)
            configuration.logger.debug(
                "The origin confirmed the stored version", metadata: ["url": "\(url.absoluteString.prefix(200))"])
            let metadata = await record(
                stored.refreshed(by: response!.metadata), key: key, version: .confirms(stored))
            markValidated(key)
            return metadata
        case .adopt(let newVersion):
            // A full answer: another version, or the same one from an origin that ignores
            // conditions. Only a validator both carry shows it is the same: an answer without one
            // (a live playlist from an origin that sends neither `ETag` nor `Last-Modified`) is a
            // new version even when its length is the old one's, and the stored bytes go.
            CacheMetrics.revalidated(newVersion ? .changed : .notModified)
            if newVersion, response!.metadata.isSameVersion(as: stored) {
                configuration.logger.debug(
                    "A stale entry without a shared validator is replaced by the origin's answer",
                    metadata: ["url": "\(url.absoluteString.prefix(200))"])
            }
            return try await adopt(
                response!, url: url, key: key, offset: start, size: size, headers: headers, reserves: reserves,
                version: newVersion ? .new : .compare, for: requester, promotion: promotion)
        case .askHead, .passNotModified:
            preconditionFailure("a revalidation's answer is never \(answer)")
        }
    }

    /// Whether `key` is pinned and holds every byte of `stored`.
    func isWholePin(_ key: CacheKey, _ stored: ContentMetadata) -> Bool {
        guard store.isPinned(key), let length = stored.length else { return false }
        return length == 0 || store.spans(for: key).contains(ByteRange(0, length))
    }

    /// Notes that the origin gave or confirmed the version of `key` now: a play that began with it
    /// keeps to it (``PlayRoute``), and the resource's own answer replaces any other it gave.
    func markValidated(_ key: CacheKey) {
        context.plays.validated(key)
        answers.forget(key)
    }

    /// Stores the content information the origin just gave for `key` (a `HEAD`'s), recording
    /// that it gave this version now.
    func storeGiven(_ metadata: ContentMetadata, key: CacheKey) async -> ContentMetadata {
        let stored = await record(metadata, key: key)
        if metadata.length != nil, metadata.isStorable { markValidated(key) }
        return stored
    }

    /// Stores `metadata` for `key` (the store may keep validators it already had) and
    /// returns what the entry now holds; `metadata` itself when the store refuses.
    /// `version` can say how it relates to the stored version (see ``VersionChange``).
    func record(_ metadata: ContentMetadata, key: CacheKey, version: VersionChange = .compare) async
        -> ContentMetadata
    {
        // Without a length the bytes stream through uncached (see `passThrough`).
        guard metadata.length != nil || store.metadata(for: key)?.length != nil else { return metadata }
        guard metadata.isStorable else {
            // `no-store`: nothing of it is kept, not even what an earlier answer allowed.
            if store.metadata(for: key) != nil { try? await store.remove(key) }
            return metadata
        }
        guard let handle = try? store.openEntry(key) else { return metadata }
        defer { handle.close() }
        _ = try? handle.updateMetadata(metadata, version: version)
        return (try? handle.metadata()) ?? metadata
    }

    /// Asks for the first `size` bytes at `offset` and turns the answer into a
    /// download that readers can join; returns the content information it carries.
    func probe(
        _ url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders, reserves: Bool,
        as requester: Requester, promotion: ConnectionBudget.Promotion
    ) async throws -> ContentMetadata {
        let (answer, response, failure): (Validation.Answer, OriginResponse?, CacheError?)
        do {
            let given = try await context.fetcher.fetch(
                url, range: ByteRange(offset, offset + size), ifRange: nil, headers: headers, as: requester,
                promotion: promotion)
            (answer, response, failure) = (given.isNotModified ? .notModified : .body(provenSame: false), given, nil)
        } catch let error as CacheError {
            (answer, response, failure) = (Validation.Answer(error), nil, error)
        }
        switch Validation.outcome(of: answer, questioned: Validation.Questioned()) {
        case .askHead:
            // Nothing at `offset` (an empty file, or a read past the end): the content
            // information is all there is to learn, and a 416 does not carry all of it.
            let metadata = try await context.fetcher.contentInfo(
                for: url, headers: headers, as: requester, promotion: promotion)
            return await storeGiven(metadata, key: key)
        case .passNotModified:
            // Nothing was stored, so the cache sent no condition: the `304` answers the player's own.
            throw CacheError(
                answer: response?.answer ?? OriginAnswer(status: 304, reason: "Not Modified", headers: [], body: []),
                url: url.absoluteString)
        case .adopt:
            return try await adopt(
                response!, url: url, key: key, offset: offset, size: size, headers: headers.withoutConditions,
                reserves: reserves, for: requester, promotion: promotion)
        case .fail, .serveStale, .servePinned, .confirm:
            throw failure ?? CacheError(.originUnavailable, "\(url.absoluteString.prefix(200)) was not answered.")
        }
    }

    /// Stores what an origin answer for bytes from `offset` says of the resource (a new
    /// version replaces the entry) and turns its body (`size` bytes asked for) into a download
    /// that readers join, `requester`'s until they do; a player who joins it promotes the
    /// answer's request through `promotion` (its pieces still to come, ``PiecedFetcher``).
    func adopt(
        _ response: OriginResponse, url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders,
        reserves: Bool = false, version: VersionChange = .compare, for requester: Requester,
        promotion: ConnectionBudget.Promotion
    ) async throws -> ContentMetadata {
        try response.check(askedFrom: offset, known: nil, url: url, logger: configuration.logger)
        let metadata = await record(response.metadata, key: key, version: version)
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
        download.asks(under: promotion)
        scheduler.start(download, transfer: context.transfer(for: download, firstResponse: response))
        return metadata
    }
}
