// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// Offline by rendition: a pin of chosen languages, subtitles and quality; renditions added and
/// released; with the origin stopped, a master playlist or manifest that lists only what is held.
@Suite(.stallLimit, .endToEnd) struct RenditionPinTests {
    /// An HLS asset ffmpeg made: three video-only variants (160x120, 320x240, 480x360), audio in
    /// English and French (different tones), WebVTT subtitles in English and French; and
    /// `expected.m3u8`, the master with only the 240-line variant and both audio languages.
    static func makeHLS(in directory: URL) async throws {
        let hls = ["-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-threads", "1"]
        for (name, size) in [("v0", "160x120"), ("v1", "320x240"), ("v2", "480x360")] {
            let folder = directory.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let made = try await runTool(
                [
                    "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=\(size):rate=10",
                    "-an", "-c:v", "mpeg2video", "-q:v", "8",
                ] + hls
                    + [
                        "-hls_segment_filename", folder.appendingPathComponent("seg%03d.ts").path,
                        folder.appendingPathComponent("index.m3u8").path,
                    ])
            #expect(made.status == 0, "\(made.error)")
        }
        for (name, tone) in [("a_en", 440), ("a_fr", 550)] {
            let folder = directory.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let made = try await runTool(
                [
                    "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=\(tone):duration=3", "-c:a",
                    "mp2",
                ] + hls
                    + [
                        "-hls_segment_filename", folder.appendingPathComponent("seg%03d.ts").path,
                        folder.appendingPathComponent("index.m3u8").path,
                    ])
            #expect(made.status == 0, "\(made.error)")
        }
        for language in ["en", "fr"] {
            let folder = directory.appendingPathComponent("s_\(language)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try "WEBVTT\n\n00:00:00.000 --> 00:00:02.000\nHello (\(language))\n".write(
                to: folder.appendingPathComponent("sub.vtt"), atomically: true, encoding: .utf8)
            try "#EXTM3U\n#EXT-X-TARGETDURATION:3\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:3.0,\nsub.vtt\n#EXT-X-ENDLIST\n"
                .write(to: folder.appendingPathComponent("index.m3u8"), atomically: true, encoding: .utf8)
        }
        let audio = [
            #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,URI="a_en/index.m3u8""#,
            #"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="fr",NAME="Francais",AUTOSELECT=YES,URI="a_fr/index.m3u8""#,
        ]
        let subtitles = [
            #"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English",AUTOSELECT=YES,URI="s_en/index.m3u8""#,
            #"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="fr",NAME="Francais",AUTOSELECT=YES,URI="s_fr/index.m3u8""#,
        ]
        func variant(_ index: Int, _ size: String, subtitles: Bool = true) -> String {
            "#EXT-X-STREAM-INF:BANDWIDTH=\((index + 1) * 300_000),RESOLUTION=\(size),AUDIO=\"aud\"\(subtitles ? ",SUBTITLES=\"subs\"" : "")\nv\(index)/index.m3u8"
        }
        let master =
            ["#EXTM3U"] + audio + subtitles + [variant(0, "160x120"), variant(1, "320x240"), variant(2, "480x360")]
        try (master.joined(separator: "\n") + "\n").write(
            to: directory.appendingPathComponent("master.m3u8"), atomically: true, encoding: .utf8)
        let expected = ["#EXTM3U"] + audio + [variant(1, "320x240", subtitles: false)]
        try (expected.joined(separator: "\n") + "\n").write(
            to: directory.appendingPathComponent("expected.m3u8"), atomically: true, encoding: .utf8)
    }

    /// The paths under `/hls/<folder>/` the origin serves.
    static func paths(_ all: [String], in folders: [String]) -> [String] {
        all.filter { path in folders.contains { path.hasPrefix("/hls/\($0)/") } }
    }

    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func aPinOfChosenRenditionsPlaysWithTheOriginStoppedAndListsOnlyThem() async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            let made = directory.appendingPathComponent("made")
            try await Self.makeHLS(in: made)
            let served = try HLSProxyTests.serve(made, on: origin)
            let direct = try await HLSProxyTests.decodeHash(origin.url("/hls/expected.m3u8").absoluteString)
            origin.resetCounters()
            let master = origin.url("/hls/master.m3u8")
            let folder = directory.appendingPathComponent("store")
            try await PinnedDownloadsTests.withEngine(folder) { store, reader in
                let queue = try DownloadQueue(reader: reader)
                queue.start()
                // The 240-line variant, English audio and English subtitles.
                let first = try await queue.pin(
                    master,
                    renditions: RenditionChoice(
                        variants: [.atMostHeight(240)], audio: .languages(["en"]), subtitles: .languages(["en"])))
                let done = try await PinnedDownloadsTests.settled(first.id, in: queue)
                #expect(done.state == .completed, "\(done.failure ?? "")")
                #expect(
                    done.renditions?.map(\.rendition.role) == [.variant, .audio, .subtitles], "\(done.renditions ?? [])"
                )
                #expect(done.renditions?.allSatisfy { $0.state == .held } == true)
                let untouched = Self.paths(served, in: ["v0", "v2", "a_fr", "s_fr"])
                #expect(
                    untouched.count == 14 && untouched.allSatisfy { origin.requests($0).isEmpty },
                    "fetched what was not chosen")

                // French audio added: the origin sends that language's playlist and segments, nothing else.
                origin.resetCounters()
                let added = try await queue.pin(master, renditions: RenditionChoice(audio: .languages(["fr"])))
                #expect(added.id == first.id)
                let more = try await PinnedDownloadsTests.settled(first.id, in: queue)
                #expect(more.state == .completed && more.renditions?.count == 4, "\(more)")
                let french = Self.paths(served, in: ["a_fr"])
                let frenchBytes = try french.reduce(Int64(0)) {
                    $0 + Int64(try Data(contentsOf: made.appendingPathComponent(String($1.dropFirst(5)))).count)
                }
                #expect(
                    served.reduce(Int64(0)) { $0 + origin.bodyBytesSent($1) } == frenchBytes,
                    "only the French audio's bytes")
                #expect(french.allSatisfy { origin.bodyBytesSent($0) > 0 })

                // Released, French goes back to the streaming cache; added again, it costs nothing.
                #expect(try await queue.unpin(master, renditions: RenditionChoice(audio: .languages(["fr"]))))
                #expect(
                    !store.isPinned(store.key(for: origin.url("/hls/a_fr/seg000.ts")))
                        && store.isPinned(store.key(for: origin.url("/hls/a_en/seg000.ts"))))
                #expect(queue.job(matching: first.id)?.renditions?.count == 3)
                origin.resetCounters()
                _ = try await queue.pin(master, renditions: RenditionChoice(audio: .languages(["fr"])))
                #expect(try await PinnedDownloadsTests.settled(first.id, in: queue).state == .completed)
                #expect(
                    served.allSatisfy { origin.bodyBytesSent($0) == 0 }, "a rendition still stored was fetched again")
                await #expect(throws: CacheError.self, "a language the asset lacks") {
                    try await queue.pin(master, renditions: RenditionChoice(audio: .languages(["de"])))
                }
                await queue.shutDown()
            }
            // Online, the origin's master as it came (its URLs rewritten): every variant and language,
            // at the cost of one conditional request, which tells the origin is there.
            let asked = origin.requests("/hls/master.m3u8").count
            try await OfflineAndKeysTests.withProxy(folder, offline: false) { h in
                let text = String(buffer: try await h.get(h.proxyURL(for: master.absoluteString)).body)
                for listed in ["v0%2F", "v1%2F", "v2%2F", "s_fr%2F", "a_fr%2F"] {
                    #expect(text.contains(listed), "\(listed) missing online: \(text)")
                }
            }
            #expect(
                origin.requests("/hls/master.m3u8").dropFirst(asked).map(\.status) == [304],
                "\(origin.requests("/hls/master.m3u8"))")
            try await origin.shutdown()

            // The origin stopped, the proxy online: it finds out, and lists only what is held.
            for offline in [false, true] {
                try await OfflineAndKeysTests.withProxy(folder, offline: offline) { h in
                    let reply = try await h.get(h.proxyURL(for: master.absoluteString))
                    #expect(reply.status == 200)
                    let text = String(buffer: reply.body)
                    for kept in ["v1%2Findex", "a_en%2Findex", "a_fr%2Findex", "s_en%2Findex"] {
                        #expect(text.contains(kept), "\(kept) missing: \(text)")
                    }
                    for gone in ["v0%2F", "v2%2F", "s_fr%2F"] {
                        #expect(!text.contains(gone), "\(gone) listed: \(text)")
                    }
                    try await Self.expectEveryURIAnswersTheOriginsBytes(text, made: made, through: h)
                    #expect(
                        try await HLSProxyTests.decodeHash(h.proxyURL(for: master.absoluteString)) == direct,
                        "offline: \(offline)")
                }
            }
            // Exported, the same master: it plays from the folder.
            let exported = directory.appendingPathComponent("exported")
            try await PinnedDownloadsTests.withEngine(folder) { _, reader in
                let summary = try await reader.export(master, to: exported)
                #expect(
                    summary.files == 3 + 3 + 3 + 1 + 4 + 1,
                    "segments of three renditions, a subtitle file, four playlists and the master: \(summary)")
            }
            let index = try String(contentsOf: exported.appendingPathComponent("index.m3u8"), encoding: .utf8)
            #expect(!index.contains("http") && !index.contains("480x360") && index.contains("320x240"), "\(index)")
            #expect(try await HLSProxyTests.decodeHash(exported.appendingPathComponent("index.m3u8").path) == direct)
        }
    }

    /// A DASH presentation ffmpeg made (segment timelines): two video representations (`0` at
    /// 100 kbit/s, `1` at 400 kbit/s) and audio adaptation sets in English, French and German
    /// (streams 2, 3, 4); and `expected.mpd`, the same without representation 1 and German.
    static func makeDASH(in directory: URL) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let made = try await runTool(
            [
                "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10",
                "-f", "lavfi", "-i", "sine=frequency=440:duration=3", "-f", "lavfi", "-i",
                "sine=frequency=550:duration=3",
                "-f", "lavfi", "-i", "sine=frequency=660:duration=3", "-threads", "1",
                "-map", "0:v", "-map", "0:v", "-map", "1:a", "-map", "2:a", "-map", "3:a", "-c:v", "mpeg4", "-b:v:0",
                "100k", "-b:v:1", "400k", "-c:a", "aac",
                "-metadata:s:a:0", "language=en", "-metadata:s:a:1", "language=fr", "-metadata:s:a:2", "language=de",
                "-adaptation_sets", "id=0,streams=0,1 id=1,streams=2 id=2,streams=3 id=3,streams=4",
                "-f", "dash", "-seg_duration", "1", directory.appendingPathComponent("m.mpd").path,
            ])
        #expect(made.status == 0, "\(made.error)")
        var text = try String(contentsOf: directory.appendingPathComponent("m.mpd"), encoding: .utf8)
        for (open, close) in [
            ("<Representation id=\"1\"", "</Representation>"), ("<AdaptationSet id=\"3\"", "</AdaptationSet>"),
        ] {
            let start = try #require(text.range(of: open))
            let end = try #require(text.range(of: close, range: start.upperBound..<text.endIndex))
            text.replaceSubrange(start.lowerBound..<end.upperBound, with: "")
        }
        try text.write(to: directory.appendingPathComponent("expected.mpd"), atomically: true, encoding: .utf8)
    }

    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func aDASHPinOfChosenLanguagesPlaysWithTheOriginStoppedAndListsOnlyThem() async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            let made = directory.appendingPathComponent("made")
            try await Self.makeDASH(in: made)
            let served = try DASHProxyTests.serve(made, on: origin)
            let direct = try await DASHProxyTests.decodeHash(origin.url("/dash/expected.mpd").absoluteString)
            origin.resetCounters()
            let manifest = origin.url("/dash/m.mpd")
            let folder = directory.appendingPathComponent("store")
            func stream(_ number: Int) -> [String] { served.filter { $0.contains("stream\(number)") } }
            try await PinnedDownloadsTests.withEngine(folder) { _, reader in
                let queue = try DownloadQueue(reader: reader)
                queue.start()
                let job = try await queue.pin(
                    manifest, renditions: RenditionChoice(variants: [.lowestBandwidth], audio: .languages(["en"])))
                let done = try await PinnedDownloadsTests.settled(job.id, in: queue)
                #expect(done.state == .completed, "\(done.failure ?? "")")
                #expect(
                    done.renditions?.map { $0.rendition.representation ?? "" } == ["0", "2"], "\(done.renditions ?? [])"
                )
                #expect(
                    (stream(1) + stream(3) + stream(4)).allSatisfy { origin.requests($0).isEmpty },
                    "fetched what was not chosen")
                #expect(stream(0).count == 4 && stream(0).allSatisfy { !origin.requests($0).isEmpty })
                // French added: only its adaptation set's bytes.
                origin.resetCounters()
                _ = try await queue.pin(manifest, renditions: RenditionChoice(audio: .languages(["fr"])))
                #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
                let frenchBytes = try stream(3).reduce(Int64(0)) {
                    $0 + Int64(try Data(contentsOf: made.appendingPathComponent(String($1.dropFirst(6)))).count)
                }
                #expect(
                    served.reduce(Int64(0)) { $0 + origin.bodyBytesSent($1) } == frenchBytes,
                    "only the French audio's bytes")
                await queue.shutDown()
            }
            try await origin.shutdown()
            for offline in [false, true] {
                try await OfflineAndKeysTests.withProxy(folder, offline: offline) { h in
                    let reply = try await h.get(h.proxyURL(for: manifest.absoluteString))
                    #expect(reply.status == 200)
                    let text = String(buffer: reply.body)
                    #expect(!text.contains("<Representation id=\"1\"") && !text.contains("lang=\"de\""), "\(text)")
                    #expect(
                        text.contains("<Representation id=\"0\"") && text.contains("lang=\"en\"")
                            && text.contains("lang=\"fr\""), "\(text)")
                    #expect(
                        try await DASHProxyTests.decodeHash(h.proxyURL(for: manifest.absoluteString)) == direct,
                        "offline: \(offline)")
                }
            }
        }
    }

    /// Every URI of the master `text` the proxy served answers 200, and every segment of each
    /// media playlist it names answers the bytes of the file the origin served.
    static func expectEveryURIAnswersTheOriginsBytes(_ text: String, made: URL, through h: FolderProxy) async throws {
        let master = try HLSPlaylist(parsing: Array(text.utf8))
        var playlists: [URL] = []
        _ = master.rewritten(base: URL(string: "http://127.0.0.1:\(h.port)/")!) { uri, _ in
            playlists.append(uri)
            return uri.absoluteString
        }
        #expect(playlists.count == 4, "\(playlists)")
        for playlist in playlists {
            let reply = try await h.get(playlist.absoluteString)
            #expect(reply.status == 200, "\(playlist)")
            let media = try HLSPlaylist(parsing: Array(buffer: reply.body))
            #expect(!media.segments.isEmpty)
            for segment in media.segments {
                let segmentURL = try #require(HLSPlaylist.resolve(segment.uri, base: playlist))
                let answer = try await h.get(segmentURL.absoluteString)
                #expect(answer.status == 200, "\(segmentURL)")
                let item = URLComponents(url: segmentURL, resolvingAgainstBaseURL: false)?.queryItems?.first {
                    $0.name == "url"
                }
                let origin = try #require(item?.value.flatMap { URL(string: $0) })
                let file = made.appendingPathComponent(String(origin.path.dropFirst(5)))
                #expect(Array(buffer: answer.body) == Array(try Data(contentsOf: file)), "\(origin.path)")
            }
        }
    }
}
