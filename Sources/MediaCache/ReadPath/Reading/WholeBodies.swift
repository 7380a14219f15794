// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// Bodies read whole into memory, each with the metadata of the version it is: playlists and
/// manifests through the cache, keys kept in memory only, answers that go past the cache
/// (steering, asset lists), a side-loaded subtitle file and the timeline it follows. Reads
/// through its ``CachingReader`` (``CachingReader/bodies``); keeps nothing of its own.
package struct WholeBodies: Sendable {
    let reader: CachingReader

    /// The whole body of `url` through the cache, refused past ``HLSPlaylist/maximumSize``,
    /// and the metadata of the version it is.
    /// - Throws: ``CacheError``: the read's errors; `.originRejected` for a body too large.
    /// - Parameter requester: who reads.
    package func playlistBody(
        _ url: URL, headers: RequestHeaders = [], planned: ContentMetadata? = nil, as requester: Requester
    ) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        try await storedBody(
            of: url, headers: headers, limit: max(HLSPlaylist.maximumSize, DASHManifest.maximumSize), planned: planned,
            as: requester)
    }

    /// ``playlistBody(_:headers:planned:as:)`` of a playlist or manifest that may be live: one
    /// whose `lifetime` says how old it may be (`nil` for a final one) and that the origin gave
    /// or confirmed longer ago than that is validated, then read again (RFC 8216 §6.3.4 has a
    /// client reload a live playlist after at most its target duration, and a cache in front
    /// must not make it older).
    package func livePlaylistBody(
        _ url: URL, headers: RequestHeaders, planned: ContentMetadata, as requester: Requester,
        lifetime: ([UInt8]) -> Duration?
    ) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        let first = try await playlistBody(url, headers: headers, planned: planned, as: requester)
        guard let lifetime = lifetime(first.body), !reader.wasConfirmed(url, within: lifetime) else { return first }
        let current = try await reader.contentInfo(for: url, headers: headers, maximumAge: lifetime, as: requester)
        return try await playlistBody(url, headers: headers, planned: current, as: requester)
    }

    /// The largest body kept in memory by ``memoryOnlyBody(of:headers:)`` (an AES-128 key is 16 bytes).
    static let memoryOnlyLimit = 64 << 10

    /// The whole body of `url`, never read from or written to an unencrypted store: from
    /// memory while it may be used without asking the origin (fresh, or
    /// ``CachingReader/Configuration/prefersCache``), else fetched again. At most ``MemoryBodies/capacity`` are kept; `no-store` bodies are
    /// not kept at all. In an encrypted store the body is an entry like any other (sealed on
    /// disk), so an HLS key survives a restart and an asset prefetched for offline use plays
    /// offline.
    /// - Throws: ``CacheError`` for an origin failure, or `.originRejected` for a body over
    ///   ``memoryOnlyLimit``.
    /// - Parameter requester: who asks.
    package func memoryOnlyBody(of url: URL, headers: RequestHeaders = [], as requester: Requester)
        async throws -> (body: [UInt8], metadata: ContentMetadata)
    {
        if reader.store.isEncrypted {
            return try await storedBody(of: url, headers: headers, limit: Self.memoryOnlyLimit, as: requester)
        }
        let key = reader.store.key(for: url)
        if let kept = reader.memoryBodies.withLock({ $0.entries[key] }), reader.validator.isCurrent(kept.metadata) {
            return (kept.body, kept.metadata)
        }
        let fetched = try await originBody(of: url, headers: headers, limit: Self.memoryOnlyLimit, as: requester)
        reader.validator.markValidated(key)
        if fetched.metadata.isStorable {
            reader.memoryBodies.withLock {
                $0.keep(MemoryBodies.Entry(body: fetched.body, metadata: fetched.metadata), for: key)
            }
        }
        return fetched
    }

    /// The whole body of `url` through the cache, refused past `limit` bytes, and the
    /// metadata of the version it is.
    /// - Throws: ``CacheError``: the read's errors; `.originRejected` for a body too large.
    /// - Parameter planned: see ``CachingReader/read(_:offset:length:headers:planned:)``.
    /// - Parameter requester: who reads.
    func storedBody(
        of url: URL, headers: RequestHeaders = [], limit: Int, planned: ContentMetadata? = nil, as requester: Requester
    ) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        let stream = try await reader.read(
            url, offset: 0, length: nil, headers: headers, planned: planned, as: requester)
        var body: [UInt8] = []
        for try await chunk in stream {
            body += chunk.readableBytesView
            guard body.count <= limit else {
                stream.cancel()
                throw CacheError(
                    .originRejected, "The body of \(url.absoluteString.prefix(200)) is larger than \(limit) bytes.")
            }
        }
        return (body, stream.metadata)
    }

    /// The whole body of `url` in one `GET` straight from the origin, past the cache:
    /// nothing is read from or written to the reader.store.
    /// - Throws: ``CacheError``: the origin's failure; `.originRejected` when the body is
    ///   longer than `limit` or than its stated length; `.originUnavailable` when it is shorter.
    /// - Parameter requester: who asks.
    package func originBody(of url: URL, headers: RequestHeaders = [], limit: Int, as requester: Requester)
        async throws -> (body: [UInt8], metadata: ContentMetadata)
    {
        let response = try await reader.fetcher.fetch(url, range: nil, ifRange: nil, headers: headers, as: requester)
        try response.check(askedFrom: 0, known: nil, url: url, logger: reader.configuration.logger)
        var body: [UInt8] = []
        for try await chunk in response.body {
            body += chunk.readableBytesView
            guard body.count <= limit, body.count <= response.metadata.length ?? Int64.max else {
                let reason = body.count > limit ? "is longer than \(limit) bytes" : "is longer than its Content-Length"
                reader.configuration.logger.warning(
                    "Rejected an origin answer",
                    metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "the body \(reason)"])
                throw CacheError(.originRejected, "\(url.absoluteString.prefix(200)): the body \(reason).")
            }
        }
        if let length = response.metadata.length, body.count < length {
            throw CacheError(
                .originUnavailable,
                "\(url.absoluteString.prefix(200)): the body ended after \(body.count) of \(length) bytes.")
        }
        return (body, response.metadata)
    }

    // MARK: Side-loaded subtitles

    /// How much of a stream's first segment is looked at for its first timestamp.
    static let timestampProbe = 188 * 1024

    /// The timeline a side-loaded subtitle track follows: the length of the media playlist at
    /// `variant` (the sum of its segments' durations), and the earliest timestamp of its first
    /// segment when that is MPEG-TS (`nil` for fragmented MP4 and others: time zero is 0). Both
    /// read through the cache: the segment is stored whole, as the player will ask for it.
    package func subtitleTimeline(of variant: URL, headers: RequestHeaders = [], as requester: Requester) async throws
        -> (duration: Double, mpegts: Int64?)
    {
        let (body, metadata) = try await playlistBody(variant, headers: headers, as: requester)
        let playlist = try HLSPlaylist(parsing: body, url: variant, imports: [:])
        let duration = playlist.segments.reduce(0) { $0 + $1.duration }
        guard let first = playlist.segments.first, first.initSection == nil,
            let segment = HLSPlaylist.resolve(first.uri, base: metadata.finalURL ?? variant)
        else { return (duration, nil) }
        let (offset, length) = (first.byteRange?.lowerBound ?? 0, first.byteRange?.length)
        let stream = try await reader.read(segment, offset: offset, length: length, headers: headers, as: requester)
        var start: [UInt8] = []
        for try await chunk in stream where start.count < Self.timestampProbe {
            start += chunk.readableBytesView.prefix(Self.timestampProbe - start.count)
        }
        return (duration, MPEGTSTimestamps.earliestPTS(start))
    }

    /// The subtitle file at `url` as WebVTT mapped to `mpegts` (``SubtitleText``), read through
    /// the cache (so a pin or an export of the asset holds it, and it plays offline).
    /// - Throws: ``SubtitleText/Failure`` for a file that is neither SRT nor WebVTT or is too
    ///   large; ``CacheError`` for the origin's.
    package func sideLoadedWebVTT(_ url: URL, mpegts: Int64?, headers: RequestHeaders = []) async throws -> String {
        let (body, _) = try await storedBody(
            of: url, headers: headers, limit: SideLoadedSubtitles.maximumFileSize + 1, as: .player)
        return try SubtitleText.webVTT(body, mpegts: mpegts)
    }
}

extension CachingReader {
    /// Bodies read whole into memory (``WholeBodies``).
    package var bodies: WholeBodies { WholeBodies(reader: self) }
}
