// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// DASH through the proxy, with presentations ffmpeg makes at test time and ffmpeg as the
/// player: each decodes through the proxy to the direct play's md5, the manifest the player
/// gets names no origin address, and a second play makes no origin request. One at a time,
/// for the reason HLSProxyTests gives.
@Suite(.stallLimit, .serialized, .endToEnd) struct DASHProxyTests {
    static let hasFFmpeg = toolExists("ffmpeg")

    /// The kinds of DASH the test origin serves, each under `/dash/`.
    enum Form: String, CaseIterable, CustomTestStringConvertible {
        /// `SegmentTemplate` with `$Number$` and a segment duration.
        case templateNumber
        /// `SegmentTemplate` with a `SegmentTimeline` and `$Number$`.
        case templateTimeline
        /// `SegmentTemplate` with a `SegmentTimeline` and `$Time$`.
        case templateTime
        /// `SegmentList` with a `SegmentURL` per segment.
        case segmentList
        /// Relative `BaseURL`s nested at the Period and AdaptationSet levels, the manifest asked
        /// for with a query that relative references do not inherit.
        case nestedBaseURLs

        var testDescription: String { rawValue }
        /// What the manifest the origin serves must hold, so the case is what it says.
        var marker: String {
            switch self {
            case .templateNumber: "duration=\"1000000\" initialization"
            case .templateTimeline: "<SegmentTimeline>"
            case .templateTime: "$Time$"
            case .segmentList: "<SegmentURL"
            case .nestedBaseURLs: "<BaseURL>v/</BaseURL>"
            }
        }
        var entry: String { self == .nestedBaseURLs ? "/dash/m.mpd?token=abc" : "/dash/m.mpd" }
        /// What the direct play is asked for.
        var direct: String { self == .nestedBaseURLs ? "/dash/flat.mpd" : "/dash/m.mpd" }
    }

    /// A player playing through a representation of a static manifest has its next segment
    /// read ahead, as through an HLS media playlist: the third segment it asks for after the
    /// two before it starts the fourth, which it then gets without a second origin request.
    /// The initialization starts nothing. Bytes checked.
    @Test func thePlayingPlayersNextSegmentIsReadAheadAndFetchedOnce() async throws {
        try await ProxyHarness.with { h in
            let manifest = """
                <?xml version="1.0"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S" minBufferTime="PT2S">
                  <Period>
                    <AdaptationSet mimeType="video/mp4">
                      <SegmentTemplate timescale="1" duration="2" initialization="init.mp4" media="seg$Number$.m4s" startNumber="0"/>
                      <Representation id="v" bandwidth="100000"/>
                    </AdaptationSet>
                  </Period>
                </MPD>
                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(manifest.utf8)), mimeType: "application/dash+xml"),
                at: "/ra/m.mpd")
            h.origin.serve(.generated(length: 2_000, seed: 70, mimeType: "video/mp4"), at: "/ra/init.mp4")
            for index in 0..<5 {
                h.origin.serve(
                    .generated(length: 300_000, seed: UInt64(71 + index), mimeType: "video/mp4"),
                    at: "/ra/seg\(index).m4s")
            }
            let rewritten = String(buffer: try await h.get(h.url("/ra/m.mpd")).body)
            // The template stays relative to the manifest's base, now a proxy URL (path form).
            let base = try #require(rewritten.firstMatch(of: /<BaseURL>([^<]+)<\/BaseURL>/).map { String($0.1) })
            let template = try #require(rewritten.firstMatch(of: /media="([^"]+)"/).map { base + $0.1 })
            let initialization = try #require(rewritten.firstMatch(of: /initialization="([^"]+)"/).map { base + $0.1 })
            #expect(
                base.hasPrefix("http://") && !rewritten.contains(h.origin.url("/ra/").absoluteString), "\(rewritten)")
            let start = try await h.get(initialization)
            #expect(start.status == 200 && DeterministicContent(seed: 70).firstMismatch(in: start.body, at: 0) == nil)
            func play(_ index: Int) async throws {
                let reply = try await h.get(template.replacingOccurrences(of: "$Number$", with: "\(index)"))
                #expect(reply.status == 200 && reply.body.readableBytes == 300_000)
                #expect(
                    DeterministicContent(seed: UInt64(71 + index)).firstMismatch(in: reply.body, at: 0) == nil,
                    "segment \(index)")
            }
            try await HLSProxyTests.playOnAndExpectTheFourthReadAhead(play: play) {
                h.origin.requests("/ra/seg\($0).m4s")
            }
        }
    }

    /// A manifest whose numbers are built to overflow or to cost billions of steps (segments of
    /// 1e-300 s, a timeline entry repeated a billion times, 20,000 of them) is answered, read
    /// within its bounds to read ahead of its players, and the proxy serves on. Bytes checked.
    @Test func aManifestBuiltToOverflowIsAnsweredAndTheProxyServesOn() async throws {
        try await ProxyHarness.with { h in
            let huge = String(repeating: "<S d=\"1\" r=\"999999999\"/>", count: 20_000)
            let manifest = """
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT5S"><Period>
                <AdaptationSet><SegmentTemplate timescale="1e300" duration="1" media="a$Number$.m4s"/><Representation id="a" bandwidth="1"/></AdaptationSet>
                <AdaptationSet><Representation id="b" bandwidth="1"><SegmentTemplate media="b$Number$.m4s"><SegmentTimeline>\(huge)</SegmentTimeline></SegmentTemplate></Representation></AdaptationSet>
                </Period></MPD>
                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(manifest.utf8)), mimeType: "application/dash+xml"),
                at: "/hostile/m.mpd")
            let answer = try await h.get(h.url("/hostile/m.mpd"))
            #expect(answer.status == 200 && String(buffer: answer.body).contains("<SegmentTimeline>"))
            h.origin.serve(.generated(length: 200_000, seed: 79, mimeType: "audio/mpeg"), at: "/hostile/after.mp3")
            let after = try await h.get(h.url("/hostile/after.mp3"))
            #expect(after.status == 200 && after.body.readableBytes == 200_000)
            #expect(DeterministicContent(seed: 79).firstMismatch(in: after.body, at: 0) == nil)
        }
    }

    /// Makes `form` in `directory`; with `extraVideo`, a second, higher video representation
    /// (stream 1; the audio is stream 2), and `low.mpd`, the same manifest without it; with
    /// `other`, another picture and tone; with `options`, more of the DASH muxer's options.
    static func make(
        _ form: Form, in directory: URL, extraVideo: Bool = false, other: Bool = false, options more: [String] = []
    ) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var options: [String] = []
        switch form {
        case .templateNumber, .nestedBaseURLs: options = ["-use_timeline", "0"]
        case .templateTimeline: break
        case .templateTime: options = ["-media_seg_name", "chunk-$RepresentationID$-$Time$.$ext$"]
        case .segmentList: options = ["-use_template", "0"]
        }
        let streams =
            extraVideo
            ? [
                "-map", "0:v", "-map", "0:v", "-map", "1:a", "-b:v:0", "100k", "-b:v:1", "400k", "-adaptation_sets",
                "id=0,streams=0,1 id=1,streams=2",
            ]
            : []
        let result = try await runTool(
            [
                "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                "\(other ? "testsrc2" : "testsrc")=duration=3:size=160x120:rate=10",
                "-f", "lavfi", "-i", "sine=frequency=\(other ? 440 : 330):duration=3", "-shortest", "-threads", "1",
            ] + streams
                + ["-c:v", "mpeg4", "-q:v", "8", "-c:a", "aac", "-f", "dash", "-seg_duration", "1"]
                + options + more + [directory.appendingPathComponent("m.mpd").path])
        #expect(result.status == 0, "ffmpeg \(form): \(result.error)")
        if extraVideo {
            // The same presentation without the higher representation: what the pinned one plays.
            let text = try String(contentsOf: directory.appendingPathComponent("m.mpd"), encoding: .utf8)
            let start = try #require(text.range(of: "<Representation id=\"1\""))
            let end = try #require(text.range(of: "</Representation>", range: start.upperBound..<text.endIndex))
            try text.replacingCharacters(in: start.lowerBound..<end.upperBound, with: "")
                .write(to: directory.appendingPathComponent("low.mpd"), atomically: true, encoding: .utf8)
        }
        guard form == .nestedBaseURLs else { return }
        // The segments move to media/v/, named by a Period base and an AdaptationSet base.
        let nested = directory.appendingPathComponent("media/v")
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".m4s") {
            try FileManager.default.moveItem(
                at: directory.appendingPathComponent(name), to: nested.appendingPathComponent(name))
        }
        let manifest = directory.appendingPathComponent("m.mpd")
        var text = try String(contentsOf: manifest, encoding: .utf8)
        // ffmpeg itself fails on nested relative bases ("Error when loading first fragment"):
        // the direct play it is compared with names the folder in the templates instead.
        try text.replacingOccurrences(of: "initialization=\"", with: "initialization=\"media/v/").replacingOccurrences(
            of: "media=\"", with: "media=\"media/v/"
        )
        .write(to: directory.appendingPathComponent("flat.mpd"), atomically: true, encoding: .utf8)
        text = text.replacingOccurrences(
            of: "<Period id=\"0\" start=\"PT0.0S\">",
            with: "<Period id=\"0\" start=\"PT0.0S\">\n\t\t<BaseURL>media/</BaseURL>")
        let sets = text.components(separatedBy: "<AdaptationSet ")
        text =
            sets[0]
            + sets.dropFirst().map { set in
                guard let close = set.firstIndex(of: ">") else { return "<AdaptationSet " + set }
                return "<AdaptationSet " + set[...close] + "\n\t\t\t<BaseURL>v/</BaseURL>"
                    + set[set.index(after: close)...]
            }.joined()
        try text.write(to: manifest, atomically: true, encoding: .utf8)
    }

    /// Serves every file of `directory` under `prefix`; returns their paths.
    static func serve(_ directory: URL, on origin: TestOrigin, under prefix: String = "/dash") throws -> [String] {
        let files =
            FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }
            ?? []
        var paths: [String] = []
        let types = [
            "mpd": "application/dash+xml", "m3u8": "application/vnd.apple.mpegurl", "m4s": "video/iso.segment",
            "mp4": "video/mp4",
        ]
        for file in files {
            guard let type = types[file.pathExtension] else { continue }
            let path = prefix + file.path.dropFirst(directory.path.count)
            origin.serve(TestOrigin.Resource(body: .bytes(Array(try Data(contentsOf: file))), mimeType: type), at: path)
            paths.append(path)
        }
        return paths
    }

    static func decodeHash(_ input: String) async throws -> String {
        let result = try await runTool([
            "ffmpeg", "-v", "error", "-i", input, "-map", "0", "-threads", "1", "-f", "md5", "-",
        ])
        #expect(result.status == 0, "ffmpeg \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self)
    }

    static let hasGStreamer = toolExists("gst-launch-1.0")

    /// The form ffmpeg cannot play, played by GStreamer's `dashdemux`: one file per
    /// representation addressed by `SegmentBase` (`indexRange` and `Initialization@range`,
    /// written over ffmpeg's `-single_file 1 -global_sidx 1` output). It decodes through the
    /// proxy to what it decodes to direct, and a second play makes no origin request.
    @Test(.enabled(if: hasFFmpeg && hasGStreamer, "ffmpeg and GStreamer are installed by .ci/run"))
    func segmentBasePlaysInGStreamer() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                let single = directory.appendingPathComponent("single")
                try FileManager.default.createDirectory(at: single, withIntermediateDirectories: true)
                let made = try await runTool([
                    "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10",
                    "-f", "lavfi", "-i", "sine=frequency=330:duration=3", "-shortest", "-threads", "1",
                    "-c:v", "mpeg4", "-q:v", "8", "-c:a", "aac", "-f", "dash", "-seg_duration", "1",
                    "-single_file", "1", "-global_sidx", "1", single.appendingPathComponent("m.mpd").path,
                ])
                #expect(made.status == 0, "\(made.error)")
                var text = try String(contentsOf: single.appendingPathComponent("m.mpd"), encoding: .utf8)
                for stream in ["0", "1"] {
                    let file = [UInt8](try Data(contentsOf: single.appendingPathComponent("m-stream\(stream).mp4")))
                    let boxes = Self.topLevelBoxes(file)
                    let moov = try #require(boxes["moov"])
                    let sidx = try #require(boxes["sidx"])
                    let list = try #require(text.range(of: "<SegmentList"), "\(text)")
                    let end = try #require(text.range(of: "</SegmentList>", range: list.upperBound..<text.endIndex))
                    text.replaceSubrange(
                        list.lowerBound..<end.upperBound,
                        with:
                            "<SegmentBase indexRange=\"\(sidx.lowerBound)-\(sidx.upperBound - 1)\"><Initialization range=\"0-\(moov.upperBound - 1)\"/></SegmentBase>"
                    )
                }
                try text.write(to: single.appendingPathComponent("base.mpd"), atomically: true, encoding: .utf8)
                let paths = try Self.serve(single, on: h.origin)
                #expect(paths.contains("/dash/base.mpd"))
                try await Self.expectGStreamerPlays("/dash/base.mpd", served: paths, through: h, in: directory)
            }
        }
    }

    /// A presentation of two periods, each with its own picture and folder (a relative
    /// `BaseURL` per period), played by GStreamer: both periods decode through the proxy to
    /// what they decode to direct, six seconds of video, and a second play makes no origin
    /// request. Video only: GStreamer 1.22's `playbin` deadlocks at a period switch with audio
    /// and video when segments arrive slowly, direct from any server (docs/dash.md).
    @Test(.enabled(if: hasFFmpeg && hasGStreamer, "ffmpeg and GStreamer are installed by .ci/run"))
    func multiPeriodPlaysInGStreamer() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                let made = directory.appendingPathComponent("made")
                try await Self.make(.templateNumber, in: made.appendingPathComponent("p1"))
                try await Self.make(.templateNumber, in: made.appendingPathComponent("p2"), other: true)
                let one = try String(contentsOf: made.appendingPathComponent("p1/m.mpd"), encoding: .utf8)
                let start = try #require(one.range(of: "<Period id=\"0\" start=\"PT0.0S\">"), "\(one)")
                let end = try #require(one.range(of: "</Period>", range: start.upperBound..<one.endIndex))
                var period = String(one[start.upperBound..<end.upperBound])
                let audio = try #require(period.range(of: "<AdaptationSet id=\"1\" contentType=\"audio\""), "\(period)")
                let audioEnd = try #require(
                    period.range(of: "</AdaptationSet>", range: audio.upperBound..<period.endIndex))
                period.removeSubrange(audio.lowerBound..<audioEnd.upperBound)
                let two =
                    String(one[..<start.lowerBound]).replacingOccurrences(
                        of: "mediaPresentationDuration=\"PT3.0S\"", with: "mediaPresentationDuration=\"PT6.0S\"")
                    + "<Period id=\"0\" start=\"PT0.0S\">\n\t\t<BaseURL>p1/</BaseURL>" + period
                    + "\n\t<Period id=\"1\" start=\"PT3.0S\">\n\t\t<BaseURL>p2/</BaseURL>" + period
                    + one[end.upperBound...]
                #expect(two.contains("PT6.0S") && two.components(separatedBy: "<Period ").count == 3, "\(two)")
                try two.write(to: made.appendingPathComponent("two.mpd"), atomically: true, encoding: .utf8)
                let paths = try Self.serve(made, on: h.origin, under: "/two")
                let direct = try await Self.expectGStreamerPlays(
                    "/two/two.mpd", served: paths, through: h, in: directory)
                // Six seconds of 160x120 I420 at 10 frames a second: both periods were played.
                #expect(direct.videoBytes == 6 * 10 * 160 * 120 * 3 / 2 && direct.audioBytes == 0, "\(direct)")
                for folder in ["/two/p1/", "/two/p2/"] {
                    #expect(paths.contains { $0.hasPrefix(folder + "chunk-stream0-") }, "\(paths)")
                }
            }
        }
    }

    /// Plays the manifest at `entry` of the test origin with GStreamer direct, through the
    /// proxy, and through the proxy again: each decodes to the same, the manifest the proxy
    /// gives names no origin address, and the second play asks the origin for none of `served`;
    /// then exports what was stored and plays the folder, to the same. Returns the direct play.
    @discardableResult
    static func expectGStreamerPlays(_ entry: String, served: [String], through h: ProxyHarness, in directory: URL)
        async throws -> GStreamerPlay
    {
        let origin = h.origin.url(entry).absoluteString
        let manifest = try await h.get(h.proxyURL(for: origin))
        let text = String(buffer: manifest.body)
        #expect(manifest.status == 200 && text.contains("<MPD"), "\(entry): \(manifest.status)")
        #expect(
            !text.contains(String(h.origin.url("/").absoluteString.dropLast())),
            "\(entry): the manifest names the origin: \(text)")
        let direct = try await Self.gstreamerPlay(origin, in: directory)
        let proxied = try await Self.gstreamerPlay(h.proxyURL(for: origin), in: directory)
        #expect(direct.videoBytes > 0 && proxied == direct, "\(entry): direct \(direct), proxied \(proxied)")
        h.origin.resetCounters()
        let again = try await Self.gstreamerPlay(h.proxyURL(for: origin), in: directory)
        #expect(again == direct, "\(entry): the second play")
        let asked = served.flatMap { h.origin.requests($0) }
        #expect(asked.isEmpty, "\(entry): the second play reached the origin: \(asked)")
        // What the plays stored, exported: a folder that plays the same.
        let exported = directory.appendingPathComponent("exported-\(UUID().uuidString)")
        let summary = try await h.base.reader.export(h.origin.url(entry), to: exported)
        #expect(
            try await Self.gstreamerPlay(URL(fileURLWithPath: summary.path).absoluteString, in: directory) == direct,
            "\(entry): the export")
        return direct
    }

    /// The ranges of an MP4 file's top-level boxes, by type (the first of each).
    static func topLevelBoxes(_ file: [UInt8]) -> [String: Range<Int>] {
        var boxes: [String: Range<Int>] = [:]
        var offset = 0
        while offset + 8 <= file.count {
            let size = file[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
            guard size >= 8, offset + size <= file.count else { break }
            let type = String(decoding: file[(offset + 4)..<(offset + 8)], as: UTF8.self)
            if boxes[type] == nil { boxes[type] = offset..<(offset + size) }
            offset += size
        }
        return boxes
    }

    /// What GStreamer decodes from a URI: the md5 and the size of its raw audio and video.
    struct GStreamerPlay: Equatable, CustomStringConvertible {
        var audio = "", video = ""
        var audioBytes = 0, videoBytes = 0
        var description: String {
            "audio \(audioBytes) bytes \(audio.prefix(8)), video \(videoBytes) bytes \(video.prefix(8))"
        }
    }

    /// What GStreamer decodes from `uri` (raw audio and video, not in real time); empty when
    /// it fails.
    static func gstreamerPlay(_ uri: String, in directory: URL) async throws -> GStreamerPlay {
        let audio = directory.appendingPathComponent("a-\(UUID().uuidString).raw")
        let video = directory.appendingPathComponent("v-\(UUID().uuidString).raw")
        let result = try await runTool([
            "timeout", "120", "gst-launch-1.0", "-q", "playbin", "uri=\(uri)",
            "audio-sink=audioconvert ! audio/x-raw,format=S16LE ! filesink sync=false location=\(audio.path)",
            "video-sink=videoconvert ! video/x-raw,format=I420 ! filesink sync=false location=\(video.path)",
        ])
        #expect(
            result.status == 0,
            "gst-launch \(uri): \(result.error) \(String(decoding: result.output, as: UTF8.self).suffix(500))")
        guard result.status == 0 else { return GStreamerPlay() }
        // A presentation without audio never starts the audio sink, which then writes no file.
        let audioBytes = FileManager.default.fileExists(atPath: audio.path) ? try Data(contentsOf: audio) : Data()
        let videoBytes = try Data(contentsOf: video)
        return GStreamerPlay(
            audio: Insecure.MD5.hash(data: audioBytes).map { String(format: "%02x", $0) }.joined(),
            video: Insecure.MD5.hash(data: videoBytes).map { String(format: "%02x", $0) }.joined(),
            audioBytes: audioBytes.count, videoBytes: videoBytes.count)
    }

    /// A DASH presentation pinned through the engine (the lowest representation of each
    /// adaptation set, two video representations to choose from) then plays through an
    /// offline proxy with the origin stopped, to the direct play's md5; the other
    /// representation was never fetched; exported, it plays from a folder. The manifest's lists
    /// are read as a player would.
    /// (Not with a `$Number$` template and a duration: ffmpeg's muxer writes an audio segment
    /// past the presentation's duration and ffmpeg's player reads it, while the manifest, and so
    /// the pin, counts the segments the duration covers; offline, ffmpeg then ends on a 504.)
    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"), arguments: [Form.templateTimeline, .segmentList])
    func aPinnedPresentationPlaysWithTheOriginStopped(_ form: Form) async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            let made = directory.appendingPathComponent("made")
            try await Self.make(form, in: made, extraVideo: true)
            let paths = try Self.serve(made, on: origin)
            let direct = try await Self.decodeHash(origin.url("/dash/low.mpd").absoluteString)
            let folder = directory.appendingPathComponent("store")
            try await Self.pinLowest(origin.url("/dash/low.mpd"), in: folder)
            let fetched = paths.filter { !origin.requests($0).isEmpty }
            #expect(!fetched.contains { $0.contains("stream1") }, "the higher representation was fetched: \(fetched)")
            try await origin.shutdown()
            try await OfflineAndKeysTests.withProxy(folder, offline: true) { h in
                let played = try await Self.decodeHash(h.proxyURL(for: origin.url("/dash/low.mpd").absoluteString))
                #expect(played == direct, "with the origin stopped")
            }
            // Exported from the store, the origin still stopped: a folder a player plays as it is.
            let exported = directory.appendingPathComponent("exported")
            try await PinnedDownloadsTests.withEngine(folder) { _, reader in
                let summary = try await reader.export(
                    origin.url("/dash/m.mpd"), to: exported, renditions: RenditionChoice(variants: [.lowestBandwidth]))
                #expect(
                    summary.path == exported.appendingPathComponent("index.mpd").path && summary.files == 9,
                    "\(summary)")
                // A template names every segment: a part of the presentation is refused, not cut short.
                let part = directory.appendingPathComponent("part")
                await #expect(throws: CacheError.self) {
                    try await reader.export(
                        origin.url("/dash/m.mpd"), to: part, renditions: RenditionChoice(variants: [.lowestBandwidth]),
                        seconds: 1)
                }
                #expect(!FileManager.default.fileExists(atPath: part.path))
            }
            let manifest = try String(contentsOf: exported.appendingPathComponent("index.mpd"), encoding: .utf8)
            #expect(
                !manifest.contains(String(origin.url("/").absoluteString.dropLast()))
                    && !manifest.contains("<Representation id=\"1\""), "\(manifest)")
            #expect(
                try await Self.decodeHash(exported.appendingPathComponent("index.mpd").path) == direct, "the export")
        }
    }

    /// Pins the lowest representations of the presentation `m.mpd` beside `url` in the store in
    /// `folder`, and stores `url`, the same presentation with only those.
    static func pinLowest(_ url: URL, in folder: URL) async throws {
        try await PinnedDownloadsTests.withEngine(folder) { _, reader in
            let queue = try DownloadQueue(reader: reader)
            queue.start()
            let job = try await queue.pin(
                url.appendingPathComponent("../m.mpd").standardized, variant: .lowestBandwidth)
            #expect(job.asset?.format == .dash)
            #expect(job.bytesTotal != nil)
            let done = try await PinnedDownloadsTests.settled(job.id, in: queue)
            #expect(done.state == .completed, "\(done.failure ?? "")")
            // Video stream 0 (the lower one) and audio stream 2: an init and three segments each.
            #expect(done.resourcesTotal == 8, "\(done)")
            await queue.shutDown()
            // The player below is given the manifest without the higher representation (ffmpeg
            // opens every representation it is offered): only that manifest is stored besides.
            try await reader.prefetch(url)
        }
    }
}
