// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// A recording's timeline as pure logic: snapshots of a live window merged into one run of
/// segments (new ones said once, missed ones a discontinuity, a restarted origin a
/// discontinuity), and the playlist it writes, table-checked against RFC 8216bis's rules.
@Suite(.stallLimit) struct RecordingTimelineTests {
    static let base = URL(string: "https://cdn.example/live/index.m3u8")!

    /// A live window of `count` 2-second segments from media sequence `first`.
    static func window(_ first: Int64, _ count: Int, extra: (Int64) -> String = { _ in "" }, end: Bool = false) throws
        -> [RecordedSegment]
    {
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:\(first)\n"
        for sequence in first..<(first + Int64(count)) {
            text += extra(sequence) + "#EXTINF:2.000,\nseg\(sequence).ts\n"
        }
        if end { text += "#EXT-X-ENDLIST\n" }
        return try RecordedSegment.segments(of: HLSPlaylist(parsing: Array(text.utf8)), base: base)
    }

    @Test func aWindowAdvancingTakesEachSegmentOnce() throws {
        var timeline = RecordingTimeline()
        #expect(timeline.merge(try Self.window(10, 3), endList: false).map(\.sequence) == [10, 11, 12])
        #expect(timeline.merge(try Self.window(10, 3), endList: false).isEmpty, "the same window: nothing new")
        #expect(timeline.merge(try Self.window(11, 3), endList: false).map(\.sequence) == [13])
        #expect(timeline.merge(try Self.window(13, 3), endList: false).map(\.sequence) == [14, 15])
        #expect(timeline.segments.map(\.sequence) == [10, 11, 12, 13, 14, 15])
        #expect(!timeline.segments.contains { $0.discontinuity })
        #expect(timeline.segments.first?.url == "https://cdn.example/live/seg10.ts")
        #expect(timeline.duration == 12)
    }

    @Test func missedSegmentsAndARestartedOriginAreDiscontinuities() throws {
        var timeline = RecordingTimeline()
        _ = timeline.merge(try Self.window(10, 3), endList: false)
        // Down for a while: 13 and 14 went past unseen.
        let later = timeline.merge(try Self.window(15, 3), endList: false)
        #expect(later.map(\.sequence) == [15, 16, 17] && later[0].discontinuity && !later[1].discontinuity)
        // The origin started again from 0.
        let restarted = timeline.merge(try Self.window(0, 2), endList: false)
        #expect(restarted.map(\.sequence) == [0, 1] && restarted[0].discontinuity)
        #expect(timeline.merge(try Self.window(1, 2), endList: false).map(\.sequence) == [2])
        // Stopped at the quota before 1: it and what came after leave.
        timeline.cut(from: 1)
        #expect(timeline.segments.map(\.sequence) == [10, 11, 12, 15, 16, 17, 0])
    }

    @Test func tagsInForceAreKeptWithEachSegment() throws {
        var timeline = RecordingTimeline()
        let segments = try Self.window(5, 4) { sequence in
            switch sequence {
            case 5:
                "#EXT-X-KEY:METHOD=AES-128,URI=\"k1.key\"\n#EXT-X-MAP:URI=\"init1.mp4\"\n#EXT-X-PROGRAM-DATE-TIME:2026-11-26T10:00:00Z\n"
            case 7: "#EXT-X-DISCONTINUITY\n#EXT-X-KEY:METHOD=AES-128,URI=\"k2.key\"\n#EXT-X-MAP:URI=\"init2.mp4\"\n"
            case 8: "#EXT-X-GAP\n"
            default: ""
            }
        }
        _ = timeline.merge(segments, endList: true)
        #expect(timeline.originEnded)
        #expect(segments[1].key == "#EXT-X-KEY:METHOD=AES-128,URI=\"https://cdn.example/live/k1.key\"")
        #expect(segments[1].map == "#EXT-X-MAP:URI=\"https://cdn.example/live/init1.mp4\"")
        #expect(segments[0].programDateTime != nil && segments[1].programDateTime == nil)
        #expect(segments[2].discontinuity && segments[2].key?.contains("k2.key") == true && segments[3].gap)
        let text = timeline.playlist(finished: true)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(
            lines.prefix(5) == [
                "#EXTM3U", "#EXT-X-VERSION:8", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:0",
                "#EXT-X-PLAYLIST-TYPE:VOD",
            ])
        #expect(lines.last == "#EXT-X-ENDLIST")
        #expect(lines.filter { $0.hasPrefix("#EXT-X-KEY") }.count == 2, "a key where it changes: \(text)")
        #expect(lines.filter { $0.hasPrefix("#EXT-X-MAP") }.count == 2)
        #expect(
            lines.filter { $0 == "#EXT-X-DISCONTINUITY" }.count == 1 && lines.filter { $0 == "#EXT-X-GAP" }.count == 1)
        // What it writes reads back as the same segments.
        let again = try RecordedSegment.segments(of: HLSPlaylist(parsing: Array(text.utf8)), base: Self.base)
        #expect(
            again.map(\.url) == segments.map(\.url) && again.map(\.key) == segments.map(\.key)
                && again.map(\.gap) == segments.map(\.gap))
        #expect(again.map(\.discontinuity) == segments.map(\.discontinuity))
    }

    /// The writer's rules, as a table: type, end, target duration, media sequence.
    @Test func thePlaylistFollowsTheRules() throws {
        var timeline = RecordingTimeline()
        #expect(
            timeline.playlist(finished: false)
                == "#EXTM3U\n#EXT-X-VERSION:8\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:EVENT\n"
        )
        var long = try Self.window(3, 2)
        long[1].duration = 6.006
        _ = timeline.merge(long, endList: false)
        let cases: [(finished: Bool, contains: String, lacks: String)] = [
            (false, "#EXT-X-PLAYLIST-TYPE:EVENT\n", "#EXT-X-ENDLIST"),
            (true, "#EXT-X-PLAYLIST-TYPE:VOD\n", "EVENT"),
            (false, "#EXT-X-TARGETDURATION:7\n", "#EXT-X-TARGETDURATION:6\n"),
            (true, "#EXTINF:6.006,\n", "#EXTINF:6.0060"),
            (false, "#EXT-X-MEDIA-SEQUENCE:0\n", "#EXT-X-MEDIA-SEQUENCE:3"),
        ]
        for (finished, contains, lacks) in cases {
            let text = timeline.playlist(finished: finished)
            #expect(text.contains(contains) && !text.contains(lacks), "\(finished): \(text)")
        }
        let parsed = try HLSPlaylist(parsing: Array(timeline.playlist(finished: true).utf8))
        #expect(parsed.isFinal && parsed.segments.count == 2 && parsed.targetDuration == 7)
    }
}
