// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// One segment of a live HLS media playlist as a recording keeps it: its origin media sequence
/// number, its URL (absolute) and what is in force for it (key, init section, date), with the
/// tags' text as the origin wrote them, URIs made absolute.
package struct RecordedSegment: Sendable, Codable, Equatable {
    /// The origin's media sequence number.
    package var sequence: Int64
    /// Seconds (`EXTINF`).
    package var duration: Double
    package var url: String
    /// `[start, end)` of the resource at ``url``, for an `EXT-X-BYTERANGE` segment.
    package var byteRange: [Int64]?
    /// The `EXT-X-KEY` line in force, `nil` for none.
    package var key: String?
    /// The `EXT-X-MAP` line in force, `nil` for none.
    package var map: String?
    /// The `EXT-X-PROGRAM-DATE-TIME` line before it, if any.
    package var programDateTime: String?
    /// A discontinuity comes before it: the origin's `EXT-X-DISCONTINUITY`, or segments the
    /// recording missed (the server was down, the window moved past them).
    package var discontinuity = false
    /// Not held: the origin marked it `EXT-X-GAP`, or fetching it failed. Written `EXT-X-GAP`.
    package var gap = false
    /// A DASH segment's media time and duration in its timescale.
    package var time: Int64?
    package var units: Int64?
    /// How far the next segment's ``sequence`` is when none is missing (1 when `nil`; a DASH
    /// segment listed by time: its duration).
    package var step: Int64?

    package init(sequence: Int64, duration: Double, url: String) {
        self.sequence = sequence
        self.duration = duration
        self.url = url
    }

    /// The segment's range, when it is a sub-range.
    package var range: ByteRange? {
        byteRange.flatMap { $0.count == 2 && $0[0] <= $0[1] ? ByteRange($0[0], $0[1]) : nil }
    }

    /// The segments of a live media playlist `playlist` (fetched from `base`), URIs made absolute.
    package static func segments(of playlist: HLSPlaylist, base: URL) throws -> [RecordedSegment] {
        let absolute = try HLSPlaylist(
            parsing: Array(playlist.rewritten(base: base) { url, _ in url.absoluteString }.utf8))
        var result: [RecordedSegment] = []
        var key: String?
        var map: String?
        var date: String?
        var discontinuity = false
        var gap = false
        for line in absolute.lines {
            switch line.kind {
            case .tag("EXT-X-KEY", let value):
                key = value.map { $0.uppercased().contains("METHOD=NONE") ? nil : line.text } ?? nil
            case .tag("EXT-X-MAP", _): map = line.text
            case .tag("EXT-X-PROGRAM-DATE-TIME", _): date = line.text
            case .tag("EXT-X-DISCONTINUITY", _): discontinuity = true
            case .tag("EXT-X-GAP", _): gap = true
            case .uri(let uri) where result.count < absolute.segments.count:
                let parsed = absolute.segments[result.count]
                var segment = RecordedSegment(
                    sequence: absolute.mediaSequence + Int64(result.count), duration: parsed.duration, url: uri)
                segment.byteRange = parsed.byteRange.map { [$0.lowerBound, $0.upperBound] }
                segment.key = key
                segment.map = map
                segment.programDateTime = date
                segment.discontinuity = discontinuity
                segment.gap = gap
                result.append(segment)
                (date, discontinuity, gap) = (nil, false, false)
            default: break
            }
        }
        return result
    }
}

/// What a recording of a live HLS media playlist holds: every segment seen since it began, in
/// order, with the gaps it could not fill marked. Pure: it is given each snapshot of the live
/// playlist and says which segments are new; it writes the recording's own playlist.
package struct RecordingTimeline: Sendable, Codable, Equatable {
    package private(set) var segments: [RecordedSegment] = []
    /// The origin media sequence number of the last segment taken.
    package private(set) var lastSequence: Int64?
    /// The origin said the presentation ended (`EXT-X-ENDLIST`).
    package private(set) var originEnded = false

    package init() {}

    /// Takes a snapshot of the live playlist: returns the segments not seen before, in order.
    /// Segments the window moved past unseen make a discontinuity before the first new one; a
    /// media sequence that went back (the origin started again) takes the whole window, after a
    /// discontinuity.
    package mutating func merge(_ snapshot: [RecordedSegment], endList: Bool) -> [RecordedSegment] {
        if endList { originEnded = true }
        guard let last = lastSequence else {
            segments = snapshot
            lastSequence = snapshot.last?.sequence
            return snapshot
        }
        var new: [RecordedSegment]
        if let newest = snapshot.last?.sequence, newest < last {
            new = snapshot
            if !new.isEmpty { new[0].discontinuity = true }
        } else {
            new = snapshot.filter { $0.sequence > last }
            let next = segments.last.map { $0.sequence &+ ($0.step ?? 1) } ?? last &+ 1
            if let first = new.first, first.sequence > next { new[0].discontinuity = true }
        }
        segments += new
        if let newest = new.last?.sequence { lastSequence = newest }
        return new
    }

    /// Marks the segment of origin sequence `sequence` (the last one so numbered) as not held.
    package mutating func markGap(_ sequence: Int64) {
        guard let index = segments.lastIndex(where: { $0.sequence == sequence }) else { return }
        segments[index].gap = true
    }

    /// Ends the recording before the segment of origin sequence `sequence` (the last one so
    /// numbered): it and those after it leave the timeline (the recording stopped there).
    package mutating func cut(from sequence: Int64) {
        guard let index = segments.lastIndex(where: { $0.sequence == sequence }) else { return }
        segments.removeSubrange(index...)
    }

    /// The seconds held (gaps left out).
    package var duration: Double { segments.reduce(0) { $0 + ($1.gap ? 0 : $1.duration) } }

    /// The recording as a media playlist: `EVENT` while it records (a player may start from the
    /// first segment while it grows), `VOD` with `EXT-X-ENDLIST` once `finished`. Its media
    /// sequence counts from 0 at the first recorded segment; the target duration is the longest
    /// segment rounded up (RFC 8216bis 4.4.3.1); a key or init section is written where it changes
    /// (and the init section again after a discontinuity); a missed run of segments is a
    /// discontinuity, a segment not held `EXT-X-GAP`.
    package func playlist(finished: Bool) -> String {
        let target = max(1, Int((segments.map(\.duration).max() ?? 1).rounded(.up)))
        var text = "#EXTM3U\n#EXT-X-VERSION:8\n#EXT-X-TARGETDURATION:\(target)\n#EXT-X-MEDIA-SEQUENCE:0\n"
        text += "#EXT-X-PLAYLIST-TYPE:\(finished ? "VOD" : "EVENT")\n"
        var key: String?
        var map: String?
        for segment in segments {
            if segment.discontinuity { text += "#EXT-X-DISCONTINUITY\n" }
            if segment.key != key {
                text += (segment.key ?? "#EXT-X-KEY:METHOD=NONE") + "\n"
                key = segment.key
            }
            if let segmentMap = segment.map, segmentMap != map || segment.discontinuity {
                text += segmentMap + "\n"
            }
            map = segment.map
            if let date = segment.programDateTime { text += date + "\n" }
            if segment.gap { text += "#EXT-X-GAP\n" }
            text += "#EXTINF:\(Self.seconds(segment.duration)),\n"
            if let range = segment.range { text += "#EXT-X-BYTERANGE:\(range.length)@\(range.lowerBound)\n" }
            text += segment.url + "\n"
        }
        if finished { text += "#EXT-X-ENDLIST\n" }
        return text
    }

    /// `seconds` with at most three decimals, no trailing zeros past the first.
    static func seconds(_ value: Double) -> String {
        var text = String(format: "%.3f", value)
        while text.hasSuffix("0"), !text.hasSuffix(".0") { text.removeLast() }
        return text
    }
}
