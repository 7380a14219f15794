// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// A recording in the engine: it stops at the pinned quota with the reason, and what it holds
/// stays a playable VOD playlist whose segments are the origin's bytes; a segment the origin
/// refuses is a gap, not a hole papered over.
@Suite(.stallLimit, .endToEnd) struct RecordingTests {
    static func window(_ first: Int, _ count: Int, total: Int, end: Bool = false) -> TestOrigin.Resource {
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:\(first)\n"
        for index in first..<min(total, first + count) { text += "#EXTINF:1.0,\nseg\(index).ts\n" }
        if end { text += "#EXT-X-ENDLIST\n" }
        var resource = TestOrigin.Resource(
            body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl", etag: "\"w\(first)\(end)\"")
        resource.cacheControl = "max-age=1"
        return resource
    }

    /// A harness whose store (of `limit` bytes, `pinned` of them pinned) runs on `clock`.
    static func withClock(_ clock: ManualClock, limit: Int64, pinned: Int64, _ body: (Harness) async throws -> Void)
        async throws
    {
        var configuration = PinnedDownloadsTests.store(limit: limit, pinned: pinned)
        configuration.clock = clock
        try await Harness.with(store: configuration, body)
    }

    @Test func aRecordingStopsAtThePinnedQuotaAndKeepsWhatItHolds() async throws {
        // Room for three segments of 100 kB in the pinned quota.
        try await Harness.with(store: PinnedDownloadsTests.store(limit: 10_000_000, pinned: 350_000)) { h in
            for index in 0..<8 {
                h.origin.serve(.generated(length: 100_000, seed: UInt64(80 + index)), at: "/live/seg\(index).ts")
            }
            h.origin.serve(Self.window(0, 2, total: 8), at: "/live/index.m3u8")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.record(h.origin.url("/live/index.m3u8"))
            try await waitUntil { queue.job(matching: job.id)?.resourcesDone == 2 }
            h.origin.serve(Self.window(2, 3, total: 8), at: "/live/index.m3u8")
            let ended = try await PinnedDownloadsTests.settled(job.id, in: queue)
            #expect(
                ended.state == .failed && ended.failure?.contains("pinned quota") == true
                    && ended.remedy == CacheError.Remedy(.raisePinnedQuota), "\(ended)")
            let (text, _, _) = try #require(queue.recordings.playlist(job.id))
            #expect(text.contains("#EXT-X-PLAYLIST-TYPE:VOD") && text.hasSuffix("#EXT-X-ENDLIST\n"), "\(text)")
            let held = try RecordedSegment.segments(
                of: HLSPlaylist(parsing: Array(text.utf8)), base: h.origin.url("/live/index.m3u8")
            ).filter { !$0.gap }
            #expect(held.count == 3, "\(text)")
            for segment in held {
                let url = try #require(URL(string: segment.url))
                let bytes = try await collect(try #require(h.reader.cachedRead(url, range: ByteRange(0, 100_000))))
                #expect(
                    DeterministicContent(seed: UInt64(80 + Int(segment.sequence))).firstMismatch(in: bytes, at: 0)
                        == nil, "\(segment.url)")
            }
            await queue.shutDown()
        }
    }

    /// In an encrypted store a recording keeps each key its segments name (pinned, sealed like
    /// the rest), so it plays offline; the playlist names the key where it changes.
    @Test func anEncryptedStoreKeepsTheRecordingsKeys() async throws {
        var configuration = PinnedDownloadsTests.store(limit: 10_000_000, pinned: 5_000_000)
        configuration.encryptionKey = TestSetup.encryptionKey
        try await Harness.with(store: configuration) { h in
            for index in 0..<4 {
                h.origin.serve(.generated(length: 40_000, seed: UInt64(70 + index)), at: "/enc/seg\(index).ts")
            }
            for name in ["k1", "k2"] {
                h.origin.serve(.generated(length: 16, seed: name == "k1" ? 1 : 2), at: "/enc/\(name).key")
            }
            var text =
                "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-KEY:METHOD=AES-128,URI=\"k1.key\"\n"
            for index in 0..<4 {
                if index == 2 { text += "#EXT-X-KEY:METHOD=AES-128,URI=\"k2.key\"\n" }
                text += "#EXTINF:1.0,\nseg\(index).ts\n"
            }
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(Array((text + "#EXT-X-ENDLIST\n").utf8)), mimeType: "application/vnd.apple.mpegurl"),
                at: "/enc/index.m3u8")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.record(h.origin.url("/enc/index.m3u8"))
            #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
            for name in ["k1", "k2"] {
                let key = h.store.key(for: h.origin.url("/enc/\(name).key"))
                #expect(h.store.isPinned(key) && h.store.spans(for: key).byteCount == 16, "\(name).key")
                #expect(h.origin.requests("/enc/\(name).key").count == 1)
            }
            let (playlist, _, _) = try #require(queue.recordings.playlist(job.id))
            #expect(playlist.components(separatedBy: "#EXT-X-KEY:").count == 3, "\(playlist)")
            await queue.shutDown()
        }
    }

    /// Past the origin's window and past their freshness, recorded segments the origin now
    /// answers 404 for still play, from the pin: a recording outlives the CDN.
    @Test func recordedSegmentsTheOriginDroppedStillPlay() async throws {
        let clock = ManualClock()
        try await Self.withClock(clock, limit: 10_000_000, pinned: 5_000_000) { h in
            h.origin.useClock(clock)
            for index in 0..<3 {
                var segment = TestOrigin.Resource.generated(length: 30_000, seed: UInt64(60 + index))
                segment.cacheControl = "max-age=60"
                h.origin.serve(segment, at: "/gone/seg\(index).ts")
            }
            h.origin.serve(Self.window(0, 3, total: 3, end: true), at: "/gone/index.m3u8")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.record(h.origin.url("/gone/index.m3u8"))
            #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
            await queue.shutDown()
            clock.advance(by: 3600)
            for index in 0..<3 { h.origin.update("/gone/seg\(index).ts") { $0.faults.status = 404 } }
            for index in 0..<3 {
                let bytes = try await collect(try await h.reader.read(h.origin.url("/gone/seg\(index).ts")))
                #expect(
                    bytes.readableBytes == 30_000
                        && DeterministicContent(seed: UInt64(60 + index)).firstMismatch(in: bytes, at: 0) == nil,
                    "seg\(index)")
                #expect(h.origin.requests("/gone/seg\(index).ts").count == 2, "fetched once, asked once more")
            }
        }
    }

    @Test func aSegmentTheOriginRefusesIsAGap() async throws {
        try await Harness.with(store: PinnedDownloadsTests.store(limit: 10_000_000, pinned: 5_000_000)) { h in
            for index in 0..<4 where index != 2 {
                h.origin.serve(.generated(length: 50_000, seed: UInt64(90 + index)), at: "/live/seg\(index).ts")
            }
            h.origin.serve(Self.window(0, 4, total: 4, end: true), at: "/live/index.m3u8")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.record(h.origin.url("/live/index.m3u8"))
            #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
            let (text, _, _) = try #require(queue.recordings.playlist(job.id))
            let lines = text.split(separator: "\n").map(String.init)
            let gap = try #require(lines.firstIndex(of: "#EXT-X-GAP"), "\(text)")
            #expect(lines[gap + 2].hasSuffix("seg2.ts") && lines.filter { $0 == "#EXT-X-GAP" }.count == 1, "\(text)")
            await queue.shutDown()
        }
    }
}

extension RecordingTests {
    /// A live `$Number$` template on a manual clock: the recorder's clock alone says which
    /// segments exist (availabilityStartTime + their end), so each step of the clock brings
    /// exactly the segment that ended; each is fetched once and holds the origin's bytes, and
    /// the recording stops when its time is up, by the same clock, as a static manifest.
    @Test func aLiveDASHTemplateFollowsTheClock() async throws {
        let clock = ManualClock()
        try await Self.withClock(clock, limit: 50_000_000, pinned: 20_000_000) { h in
            h.origin.useClock(clock)
            for name in ["v", "a"] {
                h.origin.serve(.generated(length: 1_000, seed: name == "v" ? 1 : 2), at: "/ld/init-\(name).m4s")
            }
            for number in 1...20 {
                for (name, seed) in [("v", 100), ("a", 200)] {
                    h.origin.serve(
                        .generated(length: 20_000, seed: UInt64(seed + number)), at: "/ld/\(name)-\(number).m4s")
                }
            }
            let start = clock.now
            let manifest = """
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" availabilityStartTime="\(DASHRecordingWriter.date(start))" timeShiftBufferDepth="PT4S">
                  <Period id="1" start="PT0S">
                    <AdaptationSet contentType="video" mimeType="video/mp4"><SegmentTemplate timescale="1000" duration="2000" startNumber="1" initialization="init-$RepresentationID$.m4s" media="$RepresentationID$-$Number$.m4s"/>
                      <Representation id="v" bandwidth="80000" codecs="avc1.42c00d"/></AdaptationSet>
                    <AdaptationSet contentType="audio" mimeType="audio/mp4" lang="en"><SegmentTemplate timescale="1000" duration="2000" startNumber="1" initialization="init-$RepresentationID$.m4s" media="$RepresentationID$-$Number$.m4s"/>
                      <Representation id="a" bandwidth="8000" codecs="mp4a.40.2"/></AdaptationSet>
                  </Period>
                </MPD>
                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(manifest.utf8)), mimeType: "application/dash+xml"),
                at: "/ld/m.mpd")
            clock.advance(by: 5)  // segments 1 and 2 have ended
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.record(h.origin.url("/ld/m.mpd"), for: .seconds(9))
            try await waitUntil { queue.job(matching: job.id)?.resourcesDone == 4 }
            let (growing, _) = try #require(queue.recordings.manifest(job.id))
            #expect(growing.contains("type=\"dynamic\"") && growing.contains("/ld/v-1.m4s"), "\(growing)")
            // Each 2 s of the clock, one more segment of each.
            for step in 1...4 {
                clock.advance(by: 2)
                try await waitUntil { queue.job(matching: job.id)?.resourcesDone == 4 + 2 * step }
            }
            // 15 s: past the recording's 9 s (from 5 s). Segment 7 (ended at 14 s) is taken if
            // the recorder looked before it saw the time was up: 1-6 for certain.
            clock.advance(by: 2)
            let ended = try await PinnedDownloadsTests.settled(job.id, in: queue)
            #expect(ended.state == .completed && ended.recordedSeconds ?? 0 >= 12, "\(ended)")
            let (text, base) = try #require(queue.recordings.manifest(job.id))
            #expect(text.contains("type=\"static\""), "\(text)")
            let presentation = try DASHManifest(parsing: Array(text.utf8)).presentation(base: base)
            for (set, (name, seed)) in zip(presentation.periods[0].adaptationSets, [("v", 100), ("a", 200)]) {
                let resources = set.representations[0].resources.dropFirst()
                let numbers = resources.map { Int($0.url.lastPathComponent.dropFirst(2).dropLast(4)) ?? 0 }
                #expect(numbers == Array(1...numbers.count) && numbers.count >= 6, "\(numbers)")
                for (number, resource) in zip(numbers, resources) {
                    #expect(h.origin.requests("/ld/\(name)-\(number).m4s").count == 1)
                    let bytes = try await collect(
                        try #require(h.reader.cachedRead(resource.url, range: ByteRange(0, 20_000))))
                    #expect(
                        DeterministicContent(seed: UInt64(seed + number)).firstMismatch(in: bytes, at: 0) == nil,
                        "\(resource.url)")
                }
            }
            await queue.shutDown()
        }
    }
}

extension RecordingTests {
    /// An origin that fails the playlist's reloads for a while does not end the recording: each
    /// failure is a warning with its cause, and when the origin answers again the recording
    /// goes on, the segments it missed meanwhile a discontinuity. An origin that fails for
    /// longer than the recording's patience (by the store's clock) ends it, saying so.
    @Test func aRecordingRidesOutAnOriginThatFailsAWhile() async throws {
        let clock = ManualClock()
        try await Self.withClock(clock, limit: 10_000_000, pinned: 5_000_000) { h in
            for index in 0..<10 {
                h.origin.serve(.generated(length: 10_000, seed: UInt64(40 + index)), at: "/down/seg\(index).ts")
            }
            // Revalidated at each reload, whatever the (manual) clock says.
            func window(_ first: Int) -> TestOrigin.Resource {
                var resource = Self.window(first, 3, total: 10)
                resource.cacheControl = "no-cache"
                return resource
            }
            h.origin.serve(window(0), at: "/down/index.m3u8")
            let log = LogRecorder()
            var queueConfiguration = DownloadQueue.Configuration()
            queueConfiguration.logger = log.logger()
            let queue = try DownloadQueue(reader: h.reader, configuration: queueConfiguration)
            queue.start()
            let job = try await queue.record(h.origin.url("/down/index.m3u8"))
            try await waitUntil { queue.job(matching: job.id)?.resourcesDone == 3 }
            func failures() -> [LogRecorder.Record] {
                log.all.filter { $0.level == .warning && $0.message.contains("could not reload") }
            }
            // The recording reloads once its copy is half a second old by the store's clock:
            // the clock moves on, and the test waits for the reload it brings.
            func reload(after seconds: Double = 1) async throws {
                let count = h.origin.requests("/down/index.m3u8").count
                clock.advance(by: seconds)
                try await waitUntil { h.origin.requests("/down/index.m3u8").count > count }
            }
            h.origin.update("/down/index.m3u8") { $0.faults.status = 503 }
            try await reload()
            try await waitUntil { failures().count >= 1 }
            try await reload()
            try await waitUntil { failures().count >= 2 }
            #expect(
                failures().allSatisfy { $0.metadata["reason"]?.contains("503") == true },
                "\(failures().map(\.metadata))")
            // Back, the window five segments on: 3 and 4 were missed.
            h.origin.serve(window(5), at: "/down/index.m3u8")
            try await reload()
            try await waitUntil { queue.job(matching: job.id)?.resourcesDone == 6 }
            let segments = try #require(queue.job(matching: job.id)?.recording?.hls?.timeline.segments)
            #expect(
                segments.map(\.sequence) == [0, 1, 2, 5, 6, 7]
                    && segments.map(\.discontinuity) == [false, false, false, true, false, false])
            // Down for longer than the patience: the recording ends, failed, saying why.
            h.origin.update("/down/index.m3u8") { $0.faults.status = 503 }
            try await reload()
            try await waitUntil { failures().count >= 3 }
            try await reload(after: Recorder.recordingPatience)
            let ended = try await PinnedDownloadsTests.settled(job.id, in: queue)
            #expect(ended.state == .failed && ended.failure?.contains("failed every reload") == true, "\(ended)")
            #expect(queue.recordings.playlist(job.id)?.text.contains("seg7.ts") == true, "what it holds stays")
            await queue.shutDown()
        }
    }
}

extension RecordingTests {
    /// A recording takes the renditions a choice names, as a pin does: French audio asked for,
    /// the French rendition is recorded beside the variant and the English default is not
    /// fetched; a language the stream lacks fails the recording, saying which it has.
    @Test func aRecordingTakesTheAudioLanguageAskedFor() async throws {
        try await Harness.with(store: PinnedDownloadsTests.store(limit: 10_000_000, pinned: 5_000_000)) { h in
            for track in ["v", "en", "fr"] {
                for index in 0..<3 {
                    h.origin.serve(
                        .generated(length: 5_000, seed: UInt64(index) + (track == "v" ? 10 : track == "en" ? 20 : 30)),
                        at: "/mv/\(track)\(index).ts")
                }
                var text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:0\n"
                for index in 0..<3 { text += "#EXTINF:1.0,\n\(track)\(index).ts\n" }
                h.origin.serve(
                    TestOrigin.Resource(
                        body: .bytes(Array((text + "#EXT-X-ENDLIST\n").utf8)), mimeType: "application/vnd.apple.mpegurl"
                    ), at: "/mv/\(track).m3u8")
            }
            let master = """
                #EXTM3U
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="en.m3u8"
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="Français",LANGUAGE="fr",URI="fr.m3u8"
                #EXT-X-STREAM-INF:BANDWIDTH=500000,AUDIO="a"
                v.m3u8

                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(master.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                at: "/mv/master.m3u8")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.record(
                h.origin.url("/mv/master.m3u8"), renditions: RenditionChoice(audio: .languages(["fr"])))
            #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
            let (top, _, isMaster) = try #require(queue.recordings.playlist(job.id, reference: { "t\($0)" }))
            #expect(
                isMaster && top.contains("LANGUAGE=\"fr\"") && top.contains("URI=\"t1\"")
                    && !top.contains("LANGUAGE=\"en\""), "\(top)")
            for index in 0..<3 {
                #expect(
                    h.origin.requests("/mv/fr\(index).ts").count == 1
                        && h.origin.requests("/mv/v\(index).ts").count == 1)
                #expect(h.origin.requests("/mv/en\(index).ts").isEmpty, "the English audio was not asked for")
            }
            let missing = try await queue.record(
                h.origin.url("/mv/master.m3u8"), renditions: RenditionChoice(audio: .languages(["de"])))
            let failed = try await PinnedDownloadsTests.settled(missing.id, in: queue)
            #expect(
                failed.state == .failed && failed.failure?.contains("no audio in de") == true
                    && failed.failure?.contains("en, fr") == true, "\(failed)")
            await queue.shutDown()
        }
    }
}
