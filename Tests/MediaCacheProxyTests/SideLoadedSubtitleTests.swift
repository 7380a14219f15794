// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheProxy

/// `mediacache url --subtitles`: an HLS master made by ffmpeg (MPEG-TS segments, which start
/// at 1.4 s as ffmpeg writes them) plus an SRT and a WebVTT file. The proxy's master lists both
/// as `SUBTITLES` renditions on every variant, each with a one-segment WebVTT media playlist as
/// RFC 8216 asks, the cues converted and mapped to the first segment's timestamp.
@Suite(.stallLimit, .endToEnd, .enabled(if: toolExists("ffmpeg") && toolExists("ffprobe")))
struct SideLoadedSubtitleTests {
    static let srt = """
        1
        00:00:01,000 --> 00:00:02,500
        <font color="#ffff00">Hello</font> & <i>welcome</i>

        2
        00:00:03,250 --> 00:00:05,000
        {\\an8}Second -> line
        """

    static let vtt = "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n00:00.500 --> 00:02.000\nBonjour\n"

    /// The origin's stream (`/hls/master.m3u8` with two variants of one media playlist, whose
    /// first segment's timestamp is returned) and subtitle files.
    static func serveStream(on origin: TestOrigin, in directory: URL) async throws -> Int64 {
        try await NginxOriginTests.makeStreams(in: directory)
        let folder = directory.appendingPathComponent("hls")
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let bytes = Array(try Data(contentsOf: folder.appendingPathComponent(name)))
            let type = name.hasSuffix(".ts") ? "video/mp2t" : "application/vnd.apple.mpegurl"
            origin.serve(
                TestOrigin.Resource(body: .bytes(bytes), mimeType: type, etag: "\"\(name)\""), at: "/hls/\(name)")
        }
        let master = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=320x180
            index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=320x180
            index.m3u8?low

            """
        origin.serve(
            TestOrigin.Resource(body: .bytes(Array(master.utf8)), mimeType: "application/vnd.apple.mpegurl"),
            at: "/hls/master.m3u8")
        for (path, text) in [("/subs/en.srt", srt), ("/subs/fr.vtt", vtt), ("/subs/bad.srt", "\u{89}PNG\r\n\u{1a}\n")] {
            origin.serve(TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: "text/plain"), at: path)
        }
        origin.serve(.generated(length: 5_000_000, seed: 3, mimeType: "text/plain"), at: "/subs/huge.srt")
        let probe = try await runTool([
            "ffprobe", "-v", "error", "-show_entries", "format=start_time", "-of", "csv=p=0",
            folder.appendingPathComponent("seg0.ts").path,
        ])
        let start = try #require(
            Double(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        return Int64((start * 90_000).rounded())
    }

    @Test func theMasterListsTheFilesAndTheirPlaylistsFollowRFC8216() async throws {
        try await ProxyHarness.with { proxy in
            try await withTemporaryDirectory { directory in
                let pts = try await Self.serveStream(on: proxy.origin, in: directory)
                let tracks = [
                    SideLoadedSubtitle(parsing: "en=" + proxy.origin.url("/subs/en.srt").absoluteString + ",English")!,
                    SideLoadedSubtitle(language: "fr", url: proxy.origin.url("/subs/fr.vtt"), name: "Français")!,
                ]
                #expect(tracks[0].language == "en" && tracks[0].name == "English")
                let masterURL =
                    "http://127.0.0.1:\(proxy.port)"
                    + ProxyURL.path(for: proxy.origin.url("/hls/master.m3u8"), token: nil, subtitles: tracks)
                let master = try await proxy.get(masterURL)
                #expect(master.status == 200)
                let parsed = try HLSPlaylist(parsing: Array(master.body.readableBytesView))
                let subtitles = parsed.renditions.filter { $0.type == "SUBTITLES" }
                #expect(subtitles.map(\.language) == ["en", "fr"] && subtitles.map(\.name) == ["English", "Français"])
                #expect(subtitles.allSatisfy { $0.groupID == SideLoadedSubtitles.groupID && !$0.isDefault })
                #expect(
                    parsed.variants.count == 2
                        && parsed.variants.allSatisfy { $0.subtitlesGroup == SideLoadedSubtitles.groupID })
                let index = try HLSPlaylist(
                    parsing: Array(try Data(contentsOf: directory.appendingPathComponent("hls/index.m3u8"))))
                let streamDuration = index.segments.reduce(0) { $0 + $1.duration }
                for (track, expected) in zip(
                    subtitles,
                    ["00:00:01.000 --> 00:00:02.500\nHello &amp; <i>welcome</i>", "00:00.500 --> 00:02.000\nBonjour"])
                {
                    let playlistReply = try await proxy.get(track.uri)
                    #expect(playlistReply.status == 200)
                    let playlist = try HLSPlaylist(parsing: Array(playlistReply.body.readableBytesView))
                    // RFC 8216: one segment, its duration rounded within the target duration, VOD, ended.
                    #expect(playlist.segments.count == 1 && playlist.hasEndList && playlist.playlistType == "VOD")
                    let segment = try #require(playlist.segments.first)
                    #expect(abs(segment.duration - streamDuration) < 0.001)
                    #expect(Double(playlist.targetDuration ?? 0) >= segment.duration.rounded())
                    let file = try await proxy.get(segment.uri)
                    let text = String(decoding: file.body.readableBytesView, as: UTF8.self)
                    #expect(
                        file.status == 200 && file.headers.first(name: "content-type")?.hasPrefix("text/vtt") == true)
                    // Local zero is the first segment's timestamp (ffmpeg's 1.4 s), the file's own map replaced.
                    #expect(text.hasPrefix("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:\(pts),LOCAL:00:00:00.000\n"), "\(text)")
                    #expect(pts > 0 && text.contains(expected), "\(text)")
                    #expect(!text.contains("MPEGTS:0,"))
                }
                // The SRT's second cue: the ASS override gone, `->` escaped.
                let english = try await proxy.get(
                    try #require(
                        HLSPlaylist(parsing: Array(try await proxy.get(subtitles[0].uri).body.readableBytesView))
                            .segments.first?.uri))
                #expect(
                    String(decoding: english.body.readableBytesView, as: UTF8.self).contains(
                        "00:00:03.250 --> 00:00:05.000\nSecond -&gt; line\n"))
            }
        }
    }

    @Test func aFileThatIsNotSubtitlesOrIsTooLargeGetsAClearError() async throws {
        try await ProxyHarness.with { proxy in
            try await withTemporaryDirectory { directory in
                _ = try await Self.serveStream(on: proxy.origin, in: directory)
                for (path, reason) in [("/subs/bad.srt", "neither WebVTT nor SRT"), ("/subs/huge.srt", "larger than")] {
                    var target = ProxyTarget(proxy.origin.url(path))
                    target.subtitleRole = .file(mpegts: 126_000)
                    let reply = try await proxy.get("http://127.0.0.1:\(proxy.port)" + target.uri)
                    let said = String(decoding: reply.body.readableBytesView, as: UTF8.self)
                    #expect(reply.status == 502 && said.contains(reason), "\(path): \(reply.status) \(said)")
                }
            }
        }
    }

    /// Pinned with the asset, the tracks are stored whole; an export of the pin writes them as
    /// playlists of their own beside the stream, timed as the proxy times them, and ffmpeg plays
    /// the folder.
    @Test func aPinnedTrackIsExportedWithTheAsset() async throws {
        try await ProxyHarness.with { proxy in
            try await withTemporaryDirectory { directory in
                let pts = try await Self.serveStream(on: proxy.origin, in: directory)
                let french = try #require(SideLoadedSubtitle(language: "fr", url: proxy.origin.url("/subs/fr.vtt")))
                let queue = try DownloadQueue(reader: proxy.base.reader)
                queue.start()
                var choice = RenditionChoice()
                choice.sideLoaded = [french]
                let master = proxy.origin.url("/hls/master.m3u8")
                let job = try await queue.pin(master, renditions: choice)
                try await waitUntil { queue.job(matching: job.id)?.state == .completed }
                await queue.shutDown()
                #expect(proxy.origin.requests("/subs/fr.vtt").count == 1)
                proxy.origin.resetCounters()
                let exported = directory.appendingPathComponent("exported")
                let summary = try await proxy.base.reader.export(master, to: exported, renditions: choice)
                let index = try String(contentsOf: exported.appendingPathComponent("index.m3u8"), encoding: .utf8)
                #expect(index.contains("TYPE=SUBTITLES") && index.contains("URI=\"subtitles0.m3u8\""), "\(index)")
                #expect(!index.contains("http"), "\(index)")
                let cues = try String(contentsOf: exported.appendingPathComponent("subtitles0.vtt"), encoding: .utf8)
                #expect(
                    cues.hasPrefix("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:\(pts),LOCAL:00:00:00.000\n")
                        && cues.contains("Bonjour"))
                #expect(summary.files >= 6 + 2 + 2, "\(summary)")
                let play = try await runTool([
                    "ffmpeg", "-v", "error", "-i", exported.appendingPathComponent("index.m3u8").path, "-f", "null",
                    "-",
                ])
                #expect(play.status == 0, "\(play.error)")
                #expect(
                    proxy.origin.requests("/subs/fr.vtt").isEmpty && proxy.origin.requests("/hls/index.m3u8").isEmpty)
            }
        }
    }
}
