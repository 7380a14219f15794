// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// A live playlist from an origin, as a recording reads it: every playlist the parser takes
    /// gives one recorded segment per segment (or is refused whole), and the recording's own
    /// playlist, written from them, reads back with the same segments in the same order.
    @Test func aRecordingReadsAnyPlaylistAndWritesOneThatReadsBack() throws {
        let base = URL(string: "https://cdn.example/live/index.m3u8")!
        let outcomes = try Mutator.run("hls", share: 5) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            guard let playlist = try? HLSPlaylist(parsing: Array(text.utf8)) else { return ("refused", nil) }
            guard let segments = try? RecordedSegment.segments(of: playlist, base: base) else { return ("unread", nil) }
            guard segments.count <= playlist.segments.count else {
                return ("too many", "\(segments.count) recorded of \(playlist.segments.count) segments")
            }
            var timeline = RecordingTimeline()
            let taken = timeline.merge(segments, endList: playlist.hasEndList)
            guard taken == segments else { return ("merge", "the first snapshot was not taken whole") }
            let written = timeline.playlist(finished: true)
            guard let again = try? HLSPlaylist(parsing: Array(written.utf8)) else {
                return ("unreadable", "the recording wrote \(written.debugDescription)")
            }
            guard again.segments.count == segments.count, again.isFinal else {
                return ("lost", "\(again.segments.count) segments read back of \(segments.count)")
            }
            return (segments.isEmpty ? "no segments" : "recorded", nil)
        }
        try Mutator.expectVaried(outcomes, ["recorded", "refused"])
    }
}

extension ParserFuzzTests {
    /// A live DASH manifest from an origin, as a recording reads it at a moment: the tracks it
    /// follows list no more segments than the bounds allow, and the recording's manifest,
    /// written from them, reads back with each track's segments, in order, and its
    /// initialization.
    @Test func aDASHRecordingReadsAnyManifestAndWritesOneThatReadsBack() throws {
        let base = URL(string: "https://cdn.example/live/m.mpd")!
        let now = LiveEdge.date("2026-11-26T08:00:30Z")!
        // A twentieth of the inputs (5,000 by default): each parses, records and writes a manifest.
        let outcomes = try Mutator.run("mpd", share: 20) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n")
            guard let manifest = try? DASHManifest(parsing: Array(text.utf8)) else { return ("refused", nil) }
            guard
                let snapshot = try? Recorder.tracks(
                    of: manifest, url: base, base: base, now: now, choice: RenditionChoice())
            else { return ("no choice", nil) }
            guard snapshot.allSatisfy({ $0.segments.count <= DASHPresentation.maximumSegments }) else {
                return ("too many", "past the bound")
            }
            var recording = DASHRecording()
            _ = Recorder.merge(snapshot, into: &recording, ended: false, now: now)
            let tracks = recording.tracks
            let written = DASHRecordingWriter.manifest(tracks, namespaces: "", finished: true, anchor: now, now: now)
            guard let again = try? DASHManifest(parsing: Array(written.utf8)) else {
                return ("unreadable", "the recording wrote \(written.prefix(2000).debugDescription)")
            }
            let read = again.presentation(base: base).periods.flatMap(\.adaptationSets).flatMap(\.representations).map {
                $0.resources.map(\.url.absoluteString)
            }
            let expected = tracks.filter { !$0.timeline.segments.isEmpty }.map { track in
                (track.initialization.map { [$0] } ?? [])
                    + track.timeline.segments.compactMap { URL(string: $0.url)?.absoluteString }
            }
            guard read == expected else {
                return ("lost", "read back \(read.map(\.count)) of \(expected.map(\.count))")
            }
            return (tracks.isEmpty ? "no tracks" : "recorded", nil)
        }
        try Mutator.expectVaried(outcomes, ["recorded", "refused"])
    }

    /// An `xs:dateTime` (a live manifest's `availabilityStartTime`): any text is a date or
    /// refused, never a trap, and a date read writes as one that reads back the same.
    @Test func dateTimesReadOrAreRefusedAndWriteBack() throws {
        let outcomes = try Mutator.run("date-time") { input in
            guard let date = LiveEdge.date(input) else { return ("refused", nil) }
            let written = DASHRecordingWriter.date(date)
            guard let again = LiveEdge.date(written), abs(again.timeIntervalSince(date)) < 0.001 else {
                return (
                    "read",
                    "\(input.debugDescription) read as \(date), written \(written), read back \(String(describing: LiveEdge.date(written)))"
                )
            }
            return ("read", nil)
        }
        try Mutator.expectVaried(outcomes, ["read", "refused"])
    }
}
