// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// A DASH recording as pure logic: which segments a live manifest lists at a moment (its live
/// edge and time shift buffer, ISO/IEC 23009-1 §5.3.9.5), how snapshots merge into tracks, and
/// the manifest the recording writes, read back by the same parser a player's request goes
/// through.
@Suite(.stallLimit) struct DASHRecordingTests {
    static let base = URL(string: "https://cdn.example/live/m.mpd")!
    static let start = LiveEdge.date("2026-01-01T00:00:00Z")!

    /// A live manifest of a video and an audio representation, `segments` the template's
    /// content (a `duration`, or a `SegmentTimeline`), `extra` the root's more attributes.
    static func manifest(
        _ segments: String, media: String = "s-$RepresentationID$-$Number$.m4s",
        extra: String = "timeShiftBufferDepth=\"PT6S\""
    ) throws -> DASHManifest {
        let text = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" type="dynamic" availabilityStartTime="2026-01-01T00:00:00Z" \(extra)>
              <Period id="live" start="PT0S">
                <AdaptationSet contentType="video" mimeType="video/mp4"><Representation id="v" bandwidth="500000" codecs="avc1.42c00d" width="320" height="240">
                  <SegmentTemplate timescale="10" initialization="init-$RepresentationID$.m4s" media="\(media)" startNumber="1" \(segments)</SegmentTemplate>
                </Representation></AdaptationSet>
                <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en"><Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>
                  <Representation id="a" bandwidth="64000" codecs="mp4a.40.2"><SegmentTemplate timescale="10" initialization="init-$RepresentationID$.m4s" media="\(media)" startNumber="1" \(segments)</SegmentTemplate></Representation>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        return try DASHManifest(parsing: Array(text.utf8))
    }

    static func numbers(_ manifest: DASHManifest, at seconds: Double) -> [[Int64]] {
        manifest.presentation(base: base, now: start.addingTimeInterval(seconds)).periods[0].adaptationSets.map {
            $0.representations[0].resources.compactMap(\.number)
        }
    }

    @Test func dateTimesAreReadWithBounds() {
        #expect(LiveEdge.date("2026-11-26T08:30:15Z")?.timeIntervalSince1970 == 1_795_681_815)
        #expect(LiveEdge.date("2026-11-26T09:30:15.250+01:00")?.timeIntervalSince1970 == 1_795_681_815.25)
        #expect(LiveEdge.date("2026-11-26T08:30:15") == LiveEdge.date("2026-11-26T08:30:15Z"), "no zone: UTC")
        for bad in [
            "", "2026-11-26", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-26T24:00:00Z",
            "2026-11-26T08:30:15+15:00", "2026-11-26T08:30:15Zjunk",
            "2026-11-26T08:30:15.Z", "+026-11-26T08:30:15Z",
        ] {
            #expect(LiveEdge.date(bad) == nil, "\(bad)")
        }
        let now = Date(timeIntervalSince1970: 1_795_681_815.123)
        #expect(
            LiveEdge.date(DASHRecordingWriter.date(now)) == now,
            "what the writer writes reads back: \(DASHRecordingWriter.date(now))")
        #expect(DASHRecordingWriter.date(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
    }

    @Test func aNumberTemplateListsTheSegmentsEndedWithinTheBuffer() throws {
        let manifest = try Self.manifest("duration=\"20\">")
        // 11 s after the start: segments 1-5 have ended (each 2 s); a 6 s buffer keeps 3-5.
        #expect(Self.numbers(manifest, at: 11) == [[3, 4, 5], [3, 4, 5]])
        #expect(Self.numbers(manifest, at: 12) == [[4, 5, 6], [4, 5, 6]])
        #expect(Self.numbers(manifest, at: 1.9) == [[], []], "nothing has ended yet")
        #expect(Self.numbers(manifest, at: -30) == [[], []], "before the start")
        let times = manifest.presentation(base: Self.base, now: Self.start.addingTimeInterval(11)).periods[0]
            .adaptationSets[0].representations[0]
        #expect(
            times.resources.compactMap(\.time) == [40, 60, 80]
                && times.timing.initialization?.absoluteString == "https://cdn.example/live/init-v.m4s")
        // Without a buffer depth, the last minute; without now, none (no end to list to).
        let unbounded = try Self.manifest("duration=\"20\">", extra: "")
        #expect(Self.numbers(unbounded, at: 3600)[0].count == 30)
        #expect(
            unbounded.presentation(base: Self.base).periods[0].adaptationSets[0].representations[0].resources.count
                == 1, "the initialization only")
        // A start a century ago costs no more than the bound.
        #expect(Self.numbers(unbounded, at: 3e9)[0].count == 30)
    }

    @Test func anOpenEndedTimelineRunsToTheLiveEdge() throws {
        let manifest = try Self.manifest(
            "><SegmentTimeline><S t=\"0\" d=\"20\" r=\"-1\"/></SegmentTimeline>", extra: "timeShiftBufferDepth=\"PT5S\""
        )
        let video = manifest.presentation(base: Self.base, now: Self.start.addingTimeInterval(9.5)).periods[0]
            .adaptationSets[0].representations[0]
        #expect(video.resources.compactMap(\.time) == [40, 60] && video.timing.byTime, "\(video.resources)")
        // A -1 before another S runs to that S's time.
        let middle = try Self.manifest(
            "><SegmentTimeline><S t=\"0\" d=\"20\" r=\"-1\"/><S t=\"60\" d=\"10\"/></SegmentTimeline>", extra: "")
        let listed = middle.presentation(base: Self.base, now: Self.start.addingTimeInterval(8)).periods[0]
            .adaptationSets[0].representations[0]
        #expect(
            listed.resources.compactMap(\.time) == [0, 20, 40, 60]
                && listed.resources.compactMap(\.units) == [20, 20, 20, 10])
        // Three days of 1-s segments, no buffer depth given: the last minute, not the first
        // segments up to the bound.
        let long = try Self.manifest("><SegmentTimeline><S t=\"0\" d=\"10\" r=\"-1\"/></SegmentTimeline>", extra: "")
        let latest = long.presentation(base: Self.base, now: Self.start.addingTimeInterval(3 * 86_400)).periods[0]
            .adaptationSets[0].representations[0]
        let times = latest.resources.compactMap(\.time)
        #expect(
            times.count == 60 && times.last == (3 * 86_400 - 1) * 10 && latest.resources.last?.number == 3 * 86_400,
            "\(times.suffix(3))")
    }

    /// Two snapshots of a timeline window merged: new segments once, a missed one a hole in
    /// the written timeline (an explicit `t`), the audio and video in one period aligned on the
    /// first recorded instant, and the written manifest read back lists exactly the held
    /// segments, at the origin.
    @Test func snapshotsMergeAndTheManifestReadsBack() throws {
        func window(_ first: Int64) throws -> DASHManifest {
            let entries = (first..<(first + 3)).map { "<S t=\"\($0 * 20)\" d=\"20\"/>" }.joined()
            return try Self.manifest(
                "><SegmentTimeline>\(entries)</SegmentTimeline>", media: "s-$RepresentationID$-$Time$.m4s")
        }
        var recording = DASHRecording()
        let now = Self.start.addingTimeInterval(30)
        let first = try Recorder.tracks(
            of: try window(10), url: Self.base, base: Self.base, now: now, choice: RenditionChoice())
        #expect(first.map(\.track.key) == ["live|variant||v", "live|audio|en|a"])
        var taken = Recorder.merge(first, into: &recording, ended: false, now: now)
        #expect(taken.map(\.segments.count) == [3, 3] && recording.anchor == now.addingTimeInterval(-6))
        taken = Recorder.merge(
            try Recorder.tracks(
                of: try window(11), url: Self.base, base: Self.base, now: now, choice: RenditionChoice()),
            into: &recording, ended: false, now: now)
        #expect(taken.map { $0.segments.map(\.sequence) } == [[260], [260]], "by time: the new one")
        // 14 and 15 went past unseen.
        taken = Recorder.merge(
            try Recorder.tracks(
                of: try window(16), url: Self.base, base: Self.base, now: now, choice: RenditionChoice()),
            into: &recording, ended: false, now: now)
        #expect(
            taken.map { $0.segments.map(\.sequence) } == [[320, 340, 360], [320, 340, 360]]
                && taken[0].segments[0].discontinuity)
        let tracks = recording.tracks
        let text = DASHRecordingWriter.manifest(
            tracks, namespaces: "xmlns:cenc=\"urn:mpeg:cenc:2013\"", finished: true, anchor: now, now: now)
        #expect(text.contains("type=\"static\" mediaPresentationDuration=\"PT18S\""), "from 20.0 s to 38.0 s: \(text)")
        #expect(
            text.contains("<S t=\"200\" d=\"20\" r=\"3\"/>") && text.contains("<S t=\"320\" d=\"20\" r=\"2\"/>"),
            "\(text)")
        #expect(text.contains("presentationTimeOffset=\"200\"") && text.contains("xmlns:cenc="), "\(text)")
        #expect(
            text.contains("<Role schemeIdUri=\"urn:mpeg:dash:role:2011\" value=\"main\"/>")
                && !text.contains("SegmentTemplate"), "\(text)")
        let back = try DASHManifest(parsing: Array(text.utf8)).presentation(base: Self.base)
        #expect(back.periods.count == 1 && back.periods[0].adaptationSets.count == 2)
        for (set, id) in zip(back.periods[0].adaptationSets, ["v", "a"]) {
            let urls = set.representations[0].resources.map(\.url.absoluteString)
            let expected = ["init-\(id).m4s"] + [10, 11, 12, 13, 16, 17, 18].map { "s-\(id)-\($0 * 20).m4s" }
            #expect(urls == expected.map { "https://cdn.example/live/" + $0 }, "\(urls)")
        }
        // While it records: dynamic, its buffer reaching the first segment.
        let live = DASHRecordingWriter.manifest(
            tracks, namespaces: "", finished: false, anchor: recording.anchor!, now: now)
        #expect(
            live.contains("type=\"dynamic\" availabilityStartTime=\"2026-01-01T00:00:24.000Z\"")
                && live.contains("timeShiftBufferDepth=\"PT78S\""), "\(live)")
        #expect(try DASHManifest(parsing: Array(live.utf8)).isDynamic)
    }

    /// A new period, and a timeline started again within one, each a period of the recording,
    /// starting where the one before ended at the earliest; a segment not fetched leaves a hole.
    @Test func periodsRestartsAndGapsAreKept() throws {
        func track(_ period: String, start: Double, times: [Int64]) -> (
            track: RecordedTrack, segments: [RecordedSegment]
        ) {
            let track = RecordedTrack(
                key: period + "|variant||v", period: period, periodStart: start, timescale: 10, offset: 0,
                initialization: "https://cdn.example/\(period)/init.m4s",
                adaptationSet: "<AdaptationSet contentType=\"video\">",
                representation: "<Representation id=\"v\" bandwidth=\"1\">")
            let segments = times.map { time in
                var segment = RecordedSegment(
                    sequence: time, duration: 2, url: "https://cdn.example/\(period)/\(time).m4s")
                (segment.time, segment.units, segment.step) = (time, 20, 20)
                return segment
            }
            return (track, segments)
        }
        var recording = DASHRecording()
        let now = Self.start
        _ = Recorder.merge([track("a", start: 0, times: [100, 120])], into: &recording, ended: false, now: now)
        _ = Recorder.merge([track("b", start: 14, times: [0, 20])], into: &recording, ended: false, now: now)
        // Period b's timeline starts again at 0.
        let restarted = Recorder.merge([track("b", start: 14, times: [0])], into: &recording, ended: false, now: now)
        #expect(restarted.map(\.track) == [2] && recording.tracks.map(\.period) == ["a", "b", "b~1"])
        recording.update(1) { $0.markGap(20) }
        let text = DASHRecordingWriter.manifest(
            recording.tracks, namespaces: "", finished: true, anchor: now, now: now)
        let periods = text.components(separatedBy: "<Period ").dropFirst().map {
            String($0.prefix(while: { $0 != ">" }))
        }
        // b's gap is time that passed: b~1 starts after it.
        #expect(
            periods == ["id=\"p0\" start=\"PT0S\"", "id=\"p1\" start=\"PT4S\"", "id=\"p2\" start=\"PT8S\""], "\(text)")
        #expect(text.contains("mediaPresentationDuration=\"PT10S\"") && !text.contains("/b/20.m4s"), "\(text)")
        #expect(recording.duration == 8, "a: 4 s, b: 2 s held, b again: 2 s")
        let back = try DASHManifest(parsing: Array(text.utf8)).presentation(base: Self.base)
        #expect(back.periods.map { $0.adaptationSets[0].representations[0].resources.count } == [3, 2, 2])
    }
}
