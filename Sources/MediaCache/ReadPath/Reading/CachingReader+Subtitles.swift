// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

extension CachingReader {
    /// How much of a stream's first segment is looked at for its first timestamp.
    static let timestampProbe = 188 * 1024

    /// The timeline a side-loaded subtitle track follows: the length of the media playlist at
    /// `variant` (the sum of its segments' durations), and the earliest timestamp of its first
    /// segment when that is MPEG-TS (`nil` for fragmented MP4 and others: time zero is 0). Both
    /// read through the cache: the segment is stored whole, as the player will ask for it.
    package func subtitleTimeline(of variant: URL, headers: RequestHeaders = []) async throws -> (
        duration: Double, mpegts: Int64?
    ) {
        let (body, metadata) = try await playlistBody(variant, headers: headers)
        let playlist = try HLSPlaylist(parsing: body, url: variant, imports: [:])
        let duration = playlist.segments.reduce(0) { $0 + $1.duration }
        guard let first = playlist.segments.first, first.initSection == nil,
            let segment = HLSPlaylist.resolve(first.uri, base: metadata.finalURL ?? variant)
        else { return (duration, nil) }
        let stream = try await read(
            segment, offset: first.byteRange?.lowerBound ?? 0, length: first.byteRange?.length, headers: headers)
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
