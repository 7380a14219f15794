// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Logging
import NIOCore
import Synchronization

extension CachingReader {
    func markValidated(_ key: CacheKey) {
        validations.record(key, at: store.configuration.clock.now)
        answers.forget(key)  // the resource's own answer replaces any other the origin gave
    }

    /// How many resources' last validation the read path remembers (at most
    /// ``Configuration/validationMemoryLimit``).
    package var rememberedValidations: Int { validations.count }

    /// Whether the origin gave or confirmed the stored version of `url` less than `age` ago.
    package func wasConfirmed(_ url: URL, within age: Duration) -> Bool {
        let key = store.key(for: url)
        guard let stored = store.metadata(for: key) else { return false }
        return isYoung(stored, key: key, within: age)
    }

    /// Whether the origin gave or confirmed the stored `metadata` less than `age` ago.
    func isYoung(_ metadata: ContentMetadata, key: CacheKey, within age: Duration) -> Bool {
        guard let last = validations.date(of: key) ?? metadata.generatedAt else { return false }
        return Self.isWithin(age, from: last, to: store.configuration.clock.now)
    }

    /// Whether a stored entry may be used without asking the origin: it is fresh (RFC 9111
    /// §4.2; `no-cache` and `max-age=0` never are, so every use of them is validated), or the
    /// app prefers the cache. Requests that arrive while a validation runs share it
    /// (``contentInfo(for:readingFrom:length:headers:maximumAge:)``).
    func isCurrent(_ metadata: ContentMetadata, key: CacheKey) -> Bool {
        configuration.prefersCache || configuration.isOffline || metadata.isFresh(at: store.configuration.clock.now)
    }

    /// Whether `now` is less than `interval` after `start` (and not before it).
    static func isWithin(_ interval: Duration, from start: Date, to now: Date) -> Bool {
        let elapsed = now.timeIntervalSince(start)
        let limit = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        return elapsed >= 0 && elapsed < limit
    }

    /// Asks the origin whether the stored version is current, with `If-None-Match` /
    /// `If-Modified-Since` on a ranged GET from `offset`: "not modified" refreshes the
    /// entry's freshness at no body cost; any other answer is a version to adopt (a new one
    /// replaces the entry). An origin that cannot be reached leaves the stale entry in use
    /// (``Configuration/servesStaleOnOriginFailure``).
    func revalidate(
        _ url: URL, key: CacheKey, stored: ContentMetadata, offset: Int64, length: Int64? = nil, headers: RequestHeaders, reserves: Bool = false
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
            response = try await fetcher.fetch(url, range: ByteRange(start, start + size), ifRange: nil, headers: conditional)
        } catch let error as CacheError where error.isOriginFailure {
            let logMetadata: Logger.Metadata = ["url": "\(url.absoluteString.prefix(200))", "error": "\(error.message)"]
            guard configuration.servesStaleOnOriginFailure else {
                CacheMetrics.revalidated(.failed)
                throw error
            }
            guard !stored.requiresRevalidation else {
                CacheMetrics.revalidated(.failed)
                configuration.logger.warning(
                    "Not serving the stale cached copy (the origin said must-revalidate or no-cache): the origin failed to revalidate it", metadata: logMetadata)
                throw error
            }
            configuration.logger.warning("Serving a stale cached copy: the origin failed to revalidate it", metadata: logMetadata)
            CacheMetrics.revalidated(.servedStale)
            return stored
        } catch let error as CacheError where [404, 410].contains(error.originAnswer?.status ?? 0) && isWholePin(key, stored) {
            // The user kept it: a pinned resource the origin no longer has (a live segment past
            // the CDN's window, a download whose file was taken down) plays from the pin.
            configuration.logger.warning(
                "Serving a pinned copy the origin no longer has", metadata: ["url": "\(url.absoluteString.prefix(200))", "status": "\(error.originAnswer?.status ?? 0)"])
            CacheMetrics.revalidated(.servedStale)
            return stored
        }
        guard !response.isNotModified else {
            CacheMetrics.revalidated(.notModified)
            configuration.logger.debug("The origin confirmed the stored version", metadata: ["url": "\(url.absoluteString.prefix(200))"])
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
            configuration.logger.debug("A stale entry without a shared validator is replaced by the origin's answer", metadata: ["url": "\(url.absoluteString.prefix(200))"])
        }
        return try await adopt(
            response, url: url, key: key, offset: start, size: size, headers: headers, reserves: reserves, version: same ? .compare : .new)
    }

    /// Whether `key` is pinned and holds every byte of `stored`.
    func isWholePin(_ key: CacheKey, _ stored: ContentMetadata) -> Bool {
        guard store.isPinned(key), let length = stored.length else { return false }
        return length == 0 || store.spans(for: key).contains(ByteRange(0, length))
    }

    /// Asks for the first `size` bytes at `offset` and turns the answer into a
    /// download that readers can join; returns the content information it carries.
    func probe(_ url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders, reserves: Bool) async throws -> ContentMetadata {
        let response: OriginResponse
        do {
            response = try await fetcher.fetch(url, range: ByteRange(offset, offset + size), ifRange: nil, headers: headers)
        } catch let error as CacheError where error.code == .rangeNotSatisfiable {
            // Nothing at `offset` (an empty file, or a read past the end): the content
            // information is all there is to learn, and a 416 does not carry all of it.
            return await store(try await fetcher.contentInfo(for: url, headers: headers), key: key)
        }
        if response.isNotModified {
            // Nothing was stored, so the cache sent no condition: the `304` answers the player's own.
            throw CacheError(answer: response.answer ?? OriginAnswer(status: 304, reason: "Not Modified", headers: [], body: []), url: url.absoluteString)
        }
        return try await adopt(response, url: url, key: key, offset: offset, size: size, headers: headers.withoutConditions, reserves: reserves)
    }

    /// Stores what an origin answer for bytes from `offset` says of the resource (a new
    /// version replaces the entry) and turns its body (`size` bytes asked for) into a download that readers join.
    func adopt(
        _ response: OriginResponse, url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders,
        reserves: Bool = false, version: VersionChange = .compare
    ) async throws -> ContentMetadata {
        try response.check(askedFrom: offset, known: nil, url: url, logger: configuration.logger)
        let metadata = await store(response.metadata, key: key, version: version)
        markValidated(key)
        guard let total = metadata.length else {
            // No length: the read streams the body through (`passThrough`); the probe's is
            // held for the read that asked, so it costs no second request.
            if reserves, response.bodyOffset == 0 || response.bodyOffset == offset { scheduler.reserve(body: sharing(response, key: key), for: key) }
            return metadata
        }
        guard response.bodyOffset <= offset, offset < total else { return metadata }
        let download =
            metadata.acceptsRanges
            ? scheduler.makeDownload(
                url: url, key: key, start: offset, end: min(total, offset + size), isFullBody: false,
                stores: metadata.isStorable, headers: headers)
            : scheduler.makeDownload(url: url, key: key, start: 0, end: total, isFullBody: true, stores: metadata.isStorable, headers: headers)
        // The download is held for the read that asked (see `contentInfoForRead`): bytes that
        // are not stored would be lost without it, and a stored download would end when the
        // first reader to join it left (a look at its first bytes), and the read that answers
        // ask the origin again for the rest.
        if reserves { scheduler.reserve(download) }
        scheduler.start(download, transfer: transfer(for: download, firstResponse: response))
        return metadata
    }
}

/// The names of a request's conditional fields (RFC 9110 §13.1), lower-case.
package let conditionalFieldNames: Set<String> = ["if-match", "if-unmodified-since", "if-none-match", "if-modified-since", "if-range"]

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
