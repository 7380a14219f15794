// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// Low-Latency HLS (RFC 8216bis §6.2.5.2): blocking playlist reloads and delta updates,
/// which a cache never answers, and what a reload waits for.
extension HLSPlaylist {
    /// The query parameters of a blocking playlist reload (RFC 8216bis §6.2.5.2): the origin
    /// holds the request until the segment or part is there, so it is never answered by a cache.
    public static let blockingReloadParameters: Set<String> = ["_HLS_msn", "_HLS_part", "_HLS_skip"]

    /// `EXT-X-DATERANGE`, which names an interstitial's asset or asset list.
    package static let dateRangeTag = "EXT-X-DATERANGE"
    /// The attributes of an interstitial (`CLASS="com.apple.hls.interstitial"`) that name a
    /// resource: a multivariant playlist to play, or a JSON list of them.
    package static let interstitialAttributes = ["X-ASSET-URI", "X-ASSET-LIST"]

    /// Whether `url` asks for a blocking reload or a delta update (see ``blockingReloadParameters``).
    public static func isBlockingReload(_ url: URL) -> Bool {
        guard url.queryMayNameUnderscores,
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems
        else { return false }
        return items.contains { blockingReloadParameters.contains($0.name) }
    }

    /// What a blocking reload of `url` waits for (RFC 8216bis §6.2.5.2): the media sequence
    /// number of `_HLS_msn` and the part index of `_HLS_part`; `nil` when it names no segment
    /// (or its numbers cannot be read: decimal, at most 2^60).
    public static func awaitedSegment(of url: URL) -> (mediaSequence: Int64, part: Int64?)? {
        guard let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems,
            let msn = items.first(where: { $0.name == "_HLS_msn" })?.value.flatMap({ decimal(Substring($0)) })
        else { return nil }
        let part = items.first(where: { $0.name == "_HLS_part" })?.value
        guard let part else { return (msn, nil) }
        guard let index = decimal(Substring(part)) else { return nil }
        return (msn, index)
    }

    /// Whether this media playlist holds the segment numbered `mediaSequence` (complete), or,
    /// with `part`, that part of it (the `EXT-X-PART` tags after the last complete segment
    /// are the parts of the next one). Segments left out of a delta update
    /// (`EXT-X-SKIP:SKIPPED-SEGMENTS=n`) count as held.
    public func contains(mediaSequence: Int64, part: Int64?) -> Bool {
        var skipped: Int64 = 0
        var trailingParts: Int64 = 0
        for line in lines {
            switch line.kind {
            case .tag(let name, let value) where name == "EXT-X-SKIP":
                let field = value?.split(separator: ",").first { $0.hasPrefix("SKIPPED-SEGMENTS=") }
                skipped = field.flatMap { Self.decimal($0.dropFirst("SKIPPED-SEGMENTS=".count)) } ?? 0
            case .tag(let name, _) where name == "EXT-X-PART":
                trailingParts += 1
            case .uri:
                trailingParts = 0
            default:
                break
            }
        }
        // The next segment's number; additions stay far below Int64's range (decimal bounds each).
        let next = self.mediaSequence + skipped + Int64(segments.count)
        if mediaSequence < next { return true }
        guard let part, mediaSequence == next else { return false }
        return part < trailingParts
    }
}

extension URL {
    /// Whether a query item of the URL may have a name with `_` in it: `false` when the URL has
    /// no query, or one with neither a `_` nor a `%` (whose escape might stand for one). Asked
    /// first by the checks for `_HLS_` and `_DASH_` parameters, which then parse the query: on
    /// every request, most of whose URLs have none of them.
    var queryMayNameUnderscores: Bool {
        let text = absoluteString.utf8
        guard let question = text.firstIndex(of: UInt8(ascii: "?")) else { return false }
        for byte in text[question...] {
            if byte == UInt8(ascii: "#") { return false }
            if byte == UInt8(ascii: "_") || byte == UInt8(ascii: "%") { return true }
        }
        return false
    }
}
