// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import MediaCacheHTTPFields

/// A DASH recording: the representations it follows, each a track per period (in the order
/// first seen), the origin root's namespaces, and when its first segment would have begun in
/// real time (its live manifest's `availabilityStartTime`).
package struct DASHRecording: Sendable, Codable, Equatable {
    /// What it takes of the manifest (by default the video's and the default audio's).
    package var choice: RenditionChoice
    /// When it stops, if not at the end of the presentation.
    package var until: Date?
    /// It stopped: at its time, at the end of the presentation, or by hand.
    package var finished = false
    package var tracks: [RecordedTrack] = []
    package var namespaces: String?
    package var anchor: Date?

    package init(choice: RenditionChoice = RenditionChoice(), until: Date? = nil) {
        self.choice = choice
        self.until = until
    }

    /// The seconds held (gaps left out): its longest track's per period.
    package var duration: Double {
        Dictionary(grouping: tracks, by: \.period).values.reduce(0) { $0 + ($1.map(\.timeline.duration).max() ?? 0) }
    }

    /// Applies `body` to the timeline of the track at `track`; nothing for a track it lacks.
    package mutating func update(_ track: Int?, _ body: (inout RecordingTimeline) -> Void) {
        guard let track, tracks.indices.contains(track) else { return }
        body(&tracks[track].timeline)
    }
}

/// One representation of one period of a live DASH presentation as a recording keeps it: how
/// its media time maps to the presentation's, its initialization, the XML of its adaptation set
/// and of itself (without segment information, which the recording writes), and the segments
/// seen (numbered by their time when the representation lists them by time, else by number).
package struct RecordedTrack: Sendable, Codable, Equatable {
    /// Which track: its period, role, language and representation `id`.
    package var key: String
    /// The origin period's `id` (or place), and its start in seconds.
    package var period: String
    package var periodStart: Double
    package var timescale: Int64
    /// The origin's `presentationTimeOffset`.
    package var offset: Int64
    /// The initialization segment's URL, absolute.
    package var initialization: String?
    /// The adaptation set's start tag and children but its representations and segment
    /// information; the representation's the same (neither with its end tag).
    package var adaptationSet: String
    package var representation: String
    package var timeline = RecordingTimeline()

    /// Where the segment `segment` begins, in seconds of the origin's presentation.
    func start(of segment: RecordedSegment) -> Double {
        periodStart + Double((segment.time ?? 0) &- offset) / Double(timescale)
    }

    /// Where the track's last segment ends, in seconds of the origin's presentation.
    var end: Double? { timeline.segments.last.map { start(of: $0) + $0.duration } }

    /// The segments of `representation` in a presentation, as a recording numbers them.
    package static func segments(of representation: DASHPresentation.Representation) -> [RecordedSegment] {
        representation.resources.compactMap { resource in
            guard let number = resource.number, let time = resource.time, let units = resource.units else { return nil }
            var segment = RecordedSegment(
                sequence: representation.timing.byTime ? time : number, duration: resource.duration,
                url: resource.url.absoluteString)
            segment.byteRange = resource.range.map { [$0.lowerBound, $0.upperBound] }
            segment.time = time
            segment.units = units
            segment.step = representation.timing.byTime ? max(1, units) : 1
            return segment
        }
    }
}

/// Writes a DASH recording's manifest. Pure.
package enum DASHRecordingWriter {
    /// The manifest of `tracks` (in the order they were first seen): one period per origin
    /// period recorded, starting at 0 with the first segment recorded; in each, every track's
    /// representation with a `SegmentList` naming its held segments (absolute URLs) and a
    /// `SegmentTimeline` whose explicit `t` marks where segments are missing (missed, or not
    /// fetched: a gap in the media timeline, never papered over). `static` once `finished`;
    /// else `dynamic` with `availabilityStartTime` at `anchor` (when the first segment would
    /// have begun in real time) so a player sees what is held as its time shift buffer and may
    /// start from the first segment. `namespaces`: the origin root's `xmlns:…` attributes;
    /// `name` gives the reference written for a segment's or initialization's URL (an export's
    /// local file name; by default the URL).
    package static func manifest(
        _ tracks: [RecordedTrack], namespaces: String, finished: Bool, anchor: Date, now: Date,
        name: (String) -> String = { $0 }
    ) -> String {
        var periods: [(id: String, tracks: [RecordedTrack])] = []
        for track in tracks where !track.timeline.segments.isEmpty {
            if let index = periods.firstIndex(where: { $0.id == track.period }) {
                periods[index].tracks.append(track)
            } else {
                periods.append((track.period, [track]))
            }
        }
        let firsts = periods.map { period in
            period.tracks.compactMap { $0.timeline.segments.first.map($0.start(of:)) }.min() ?? 0
        }
        let origin = firsts.first ?? 0
        var body = ""
        var end = 0.0
        for (index, period) in periods.enumerated() {
            // A period starts where its first segment does, never before the last one ends.
            let start = max(end, firsts[index] - origin)
            let shift = firsts[index]
            body += "  <Period id=\"p\(index)\" start=\"\(duration(start))\">\n"
            var sets: [String] = []
            for track in period.tracks where !sets.contains(track.adaptationSet) { sets.append(track.adaptationSet) }
            for set in sets {
                body += "    " + set + "\n"
                for track in period.tracks where track.adaptationSet == set {
                    body +=
                        "      " + track.representation + "\n" + segmentList(track, from: shift, name: name)
                        + "      </Representation>\n"
                }
                body += "    </AdaptationSet>\n"
            }
            body += "  </Period>\n"
            let last = period.tracks.compactMap(\.end).max() ?? shift
            end = max(end, start + last - shift)
        }
        var root = "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\"" + (namespaces.isEmpty ? "" : " " + namespaces)
        root += " profiles=\"urn:mpeg:dash:profile:isoff-live:2011\" minBufferTime=\"PT2S\""
        if finished {
            root += " type=\"static\" mediaPresentationDuration=\"\(duration(end))\">\n"
        } else {
            root += " type=\"dynamic\" availabilityStartTime=\"\(date(anchor))\" publishTime=\"\(date(now))\""
            root += " minimumUpdatePeriod=\"PT2S\" timeShiftBufferDepth=\"\(duration(end + 60))\">\n"
        }
        return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + root + body + "</MPD>\n"
    }

    /// A track's `SegmentList`, its period starting at `shift` (origin seconds).
    static func segmentList(_ track: RecordedTrack, from shift: Double, name: (String) -> String) -> String {
        let offset = track.offset &+ Int64(((shift - track.periodStart) * Double(track.timescale)).rounded())
        var text = "        <SegmentList timescale=\"\(track.timescale)\" presentationTimeOffset=\"\(offset)\">\n"
        if let initialization = track.initialization {
            text += "          <Initialization sourceURL=\"\(DASHManifest.escaped(name(initialization)))\"/>\n"
        }
        // Runs of contiguous segments of one duration: (t when it does not follow, d, r).
        var runs: [(t: Int64?, d: Int64, r: Int)] = []
        var next: Int64?
        var urls = ""
        for segment in track.timeline.segments where !segment.gap {
            guard let time = segment.time, let units = segment.units else { continue }
            if time == next, let last = runs.last, last.d == units {
                runs[runs.count - 1].r += 1
            } else {
                runs.append((time == next ? nil : time, units, 0))
            }
            next = time &+ units
            urls += "          <SegmentURL media=\"\(DASHManifest.escaped(name(segment.url)))\""
            if let range = segment.range { urls += " mediaRange=\"\(range.lowerBound)-\(range.upperBound - 1)\"" }
            urls += "/>\n"
        }
        text += "          <SegmentTimeline>\n"
        for run in runs {
            text +=
                "            <S" + (run.t.map { " t=\"\($0)\"" } ?? "") + " d=\"\(run.d)\""
                + (run.r > 0 ? " r=\"\(run.r)\"" : "") + "/>\n"
        }
        return text + "          </SegmentTimeline>\n" + urls + "        </SegmentList>\n"
    }

    /// `seconds` as an `xs:duration` (`PT12.48S`).
    static func duration(_ seconds: Double) -> String {
        let text = RecordingTimeline.seconds(max(0, seconds))
        return "PT" + (text.hasSuffix(".0") ? String(text.dropLast(2)) : text) + "S"
    }

    /// `date` as an `xs:dateTime` in UTC, to the millisecond.
    package static func date(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let days = milliseconds >= 0 ? milliseconds / 86_400_000 : (milliseconds - 86_399_999) / 86_400_000
        let (year, month, day) = CivilDate.civil(days: days)
        let rest = milliseconds - days * 86_400_000
        return String(
            format: "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ", year, month, day, rest / 3_600_000,
            rest / 60_000 % 60, rest / 1000 % 60, rest % 1000)
    }
}
