// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
package import MediaCacheHTTPFields

/// What a front door that answers players needs of the read path, and nothing more: the
/// proxy's answers (`ProxyHandler` and its playlist, manifest and subtitle parts) reach the
/// engine through this alone, as the preload runner reaches it through ``PreloadSource``.
/// What manages the cache (the admin endpoints, the CLI) uses ``CachingReader`` itself.
///
/// A request asks in this order: what the store holds, never waiting (``storedLease(for:headers:range:as:)``,
/// ``statusSnapshot(of:)``); then what to answer from (``answering(_:_:_:)``), whether it is
/// media or a playlist (``isMediaWithoutLook(_:_:from:)``, ``manifestKind(_:_:headers:planned:as:)``)
/// and the read that answers (``read(_:headers:planned:lengthless:takesReservation:as:resolving:)``),
/// the probe's held bytes let go when the answer is made.
package protocol PlayerSource: Sendable {
    /// What a playlist or manifest is (``CachingReader/ManifestKind``).
    typealias ManifestKind = CachingReader.ManifestKind
    /// Now, on the store's clock.
    var now: Date { get }
    /// A lease on what the store holds for the request, when it may answer without the origin.
    func storedLease(for url: URL, headers: RequestHeaders, range: RangeSpecifier?, as requester: Requester)
        -> StoredLease?
    /// What the store holds of `url` now, and when the origin last gave or confirmed it.
    func statusSnapshot(of url: URL) -> (metadata: ContentMetadata?, spans: SpanSet, validated: Date?)
    /// Answers a player's request: `answer` is given the content information the request is
    /// answered from (see ``PlayerAsk``), and the probe's bytes held for its read are let go
    /// when `answer` returns or throws, read or not.
    func answering<Answer>(
        _ url: URL, _ asked: PlayerAsk, _ answer: (ContentMetadata) async throws -> Answer
    ) async throws -> Answer
    /// Whether a read from `firstByte` is known to be of media without a look at the body's start.
    func isMediaWithoutLook(_ url: URL, _ metadata: ContentMetadata, from firstByte: Int64) -> Bool
    /// Whether the resource is an HLS playlist or a DASH manifest (looking at its start if need be).
    func manifestKind(
        _ url: URL, _ metadata: ContentMetadata, headers: RequestHeaders, planned: ContentMetadata?,
        as requester: Requester
    ) async throws -> ManifestKind?
    /// Reads the bytes `resolve` picks from the resource's length, in the version the read finds.
    func read(
        _ url: URL, headers: RequestHeaders, planned: ContentMetadata?, lengthless: (offset: Int64, length: Int64?),
        takesReservation: Bool, as requester: Requester, resolving resolve: (Int64) -> ByteRange?
    ) async throws -> ReadStream
    /// Playlists, keys, answers past the cache and side-loaded subtitles, read whole.
    var bodies: WholeBodies { get }
    /// What playlists teach the read path: segments to read ahead, variants, alternates, live folders.
    var learning: PlaylistLearning { get }
    /// What the store holds of whole assets (the renditions a master or manifest may keep).
    var held: HeldAssets { get }
}

/// What a player's request asks, as far as the content information it is answered from
/// depends on it.
package struct PlayerAsk: Sendable {
    /// The request's first byte (`nil`: no `Range`, or one the length must resolve first).
    package var firstByte: Int64?
    /// How many bytes from ``firstByte`` it asks for (`nil`: to the end).
    package var length: Int64?
    /// The player's fields to send to the origin, less its conditions.
    package var headers: RequestHeaders
    /// The player's conditional fields (RFC 9110 §13.1).
    package var conditions: RequestHeaders
    /// Whether the request is a player's ranged read (a play's, see ``Plays``).
    package var inPlay: Bool

    package init(
        firstByte: Int64?, length: Int64?, headers: RequestHeaders, conditions: RequestHeaders, inPlay: Bool
    ) {
        self.firstByte = firstByte
        self.length = length
        self.headers = headers
        self.conditions = conditions
        self.inPlay = inPlay
    }
}

extension CachingReader: PlayerSource {
    /// See ``PlayerSource/answering(_:_:_:)``: the probe's held bytes are let go with
    /// ``releaseReservation(for:)``.
    package func answering<Answer>(
        _ url: URL, _ asked: PlayerAsk, _ answer: (ContentMetadata) async throws -> Answer
    ) async throws -> Answer {
        defer { releaseReservation(for: url) }
        return try await answer(answerInfo(for: url, asked))
    }

    /// The content information `asked` is answered from: with one ranged `GET` of the bytes it
    /// asks for when nothing is stored (``contentInfoForRead(_:from:length:headers:inPlay:)``,
    /// whose held bytes ``answering(_:_:_:)`` lets go). The player's conditions go to the
    /// origin when the cache holds no version to answer them with (RFC 9111 §4.3.2); its `304`
    /// then comes back as it is.
    func answerInfo(for url: URL, _ asked: PlayerAsk) async throws -> ContentMetadata {
        let holdsVersion = asked.conditions.isEmpty || holdsVersion(of: url)
        let headers = holdsVersion ? asked.headers : asked.headers + asked.conditions
        guard let firstByte = asked.firstByte else { return try await contentInfo(for: url, headers: headers) }
        return try await contentInfoForRead(
            url, from: firstByte, length: asked.length, headers: headers, inPlay: asked.inPlay)
    }
}

extension PlayerSource {
    /// ``CachingReader/read(_:offset:length:headers:planned:)`` for `requester`: `length` bytes
    /// from `offset` (`nil`: to the end).
    package func read(
        _ url: URL, offset: Int64, length: Int64?, headers: RequestHeaders = [], planned: ContentMetadata? = nil,
        as requester: Requester
    ) async throws -> ReadStream {
        guard (0...ByteRange.maximumOffset).contains(offset), (length ?? 0) >= 0 else {
            throw CacheError(
                .rangeNotSatisfiable,
                "A read needs an offset between 0 and \(ByteRange.maximumOffset) and a non-negative length.")
        }
        // Lengths past the bound mean "to the end" (no resource is that long), and the
        // bound keeps `offset + length` from overflowing.
        let length = length.map { min($0, ByteRange.maximumOffset) }
        return try await read(
            url, headers: headers, planned: planned, lengthless: (offset, length), takesReservation: true, as: requester
        ) {
            total in
            guard offset < total || (offset == 0 && total == 0) else { return nil }
            return ByteRange(offset, length.map { min(total, offset + $0) } ?? total)
        }
    }
}
