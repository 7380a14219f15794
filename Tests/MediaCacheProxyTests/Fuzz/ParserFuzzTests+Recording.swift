// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
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
            guard let again = try? HLSPlaylist(parsing: Array(written.utf8)) else { return ("unreadable", "the recording wrote \(written.debugDescription)") }
            guard again.segments.count == segments.count, again.isFinal else {
                return ("lost", "\(again.segments.count) segments read back of \(segments.count)")
            }
            return (segments.isEmpty ? "no segments" : "recorded", nil)
        }
        try Self.expectVaried(outcomes, ["recorded", "refused"])
    }
}
