// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// Whether a stored entry may be used as it is: its freshness, the validations the origin gave,
/// and the plays under way.
extension CachingReader {
    // MARK: Validation

    func markValidated(_ key: CacheKey) {
        plays.validated(key)
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

    /// Whether `metadata`, stored for `key`, is a media file whole on disk that a play under way
    /// began with (see ``Plays``). Playlists and manifests never are: they change as they are read.
    func isWholeInPlay(_ metadata: ContentMetadata, key: CacheKey, url: URL) -> Bool {
        guard let total = metadata.length, total > 0, plays.isUnderWay(key),
            FillPolicy.isMedia(mimeType: metadata.mimeType, path: (metadata.finalURL ?? url).path)
        else { return false }
        return store.spans(for: key).contains(ByteRange(0, total))
    }

    /// Whether a stored entry may be used without asking the origin: it is fresh (RFC 9111
    /// §4.2; `no-cache` and `max-age=0` never are, so every use of them is validated), or the
    /// app prefers the cache. Requests that arrive while a validation runs share it
    /// (``contentInfo(for:readingFrom:length:headers:maximumAge:)``).
    func isCurrent(_ metadata: ContentMetadata, key: CacheKey) -> Bool {
        configuration.prefersCache || configuration.isOffline || metadata.isFresh(at: store.configuration.clock.now)
    }

    /// The fills on play under way, and whether the network allows them (see ``FillPolicy``).
    package var fills: FillOnPlay { context.fills }

    /// Where a play's requests go (see ``PlayRoute``).
    var playRoute: PlayRoute {
        PlayRoute(fetcher: fetcher, plays: plays, logger: configuration.logger)
    }

    /// Whether `now` is less than `interval` after `start` (and not before it).
    static func isWithin(_ interval: Duration, from start: Date, to now: Date) -> Bool {
        Plays.isWithin(interval, from: start, to: now)
    }

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
        guard let stored = store.metadata(for: key), stored.length != nil, isCurrent(stored, key: key),
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
