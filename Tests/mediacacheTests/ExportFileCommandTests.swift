// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// `mediacache export --file` against a real `serve` and real tools: an fMP4 HLS asset with its
/// audio as a rendition of its own and WebVTT subtitles, an MPEG-TS one under AES-128, a DASH
/// presentation and packed audio, each pinned and then exported with the origin stopped. ffprobe reads each file's
/// streams and duration, ffmpeg decodes it into the same frames (md5 of video, of audio) as it
/// decodes the asset through the proxy, and mpv plays it from 80 %; an `.m4a` holds the audio
/// rendition alone. A variant not held, SAMPLE-AES
/// and a plain file are refused, saying why.
@Suite(.stallLimit, .endToEnd) struct ExportFileCommandTests {
    static let tools = ["ffmpeg", "ffprobe", "mpv"].allSatisfy(ChildProcess.toolExists)

    @Test(.enabled(if: tools, "needs ffmpeg, ffprobe and mpv"))
    func pinnedAssetsExportAsOneFileThatPlaysAsThroughTheProxy() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        try await withTemporaryDirectory { directory in
            try await Self.makeAssets(in: directory, on: origin)
            let key = directory.appendingPathComponent("store.key")
            try Data((0..<32).map { String(format: "%02x", UInt8($0) &* 11 &+ 5) }.joined().utf8).write(to: key)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key.path)
            try await RunningServer.with(["--encryption-key-file", key.path], origin: origin) { server in
                // A subtitle file of its own (SRT), pinned with the HLS asset and written beside it.
                let sideLoaded = ["--subtitle-file", "fr=\(origin.url("/x/hls/extra.srt").absoluteString),Français"]
                // What each asset is, what the pin chooses, and which proxied playlists carry its
                // picture and its sound for ffmpeg.
                let assets: [(url: URL, file: String, pin: [String], picture: URL?, sound: URL)] = [
                    (
                        origin.url("/x/hls/master.m3u8"), "film.mp4",
                        ["--variant", "lowest", "--subtitles", "en"] + sideLoaded,
                        origin.url("/x/hls/m1.m3u8"), origin.url("/x/hls/m2.m3u8")
                    ),
                    (
                        origin.url("/x/ts/index.m3u8"), "film.ts", [], origin.url("/x/ts/index.m3u8"),
                        origin.url("/x/ts/index.m3u8")
                    ),
                    (
                        origin.url("/x/dash/m.mpd"), "dash.mp4", [], origin.url("/x/dash/m.mpd"),
                        origin.url("/x/dash/m.mpd")
                    ),
                    (origin.url("/x/aac/index.m3u8"), "radio.aac", [], nil, origin.url("/x/aac/index.m3u8")),
                ]
                var throughProxy: [String: [String]] = [:]
                for asset in assets {
                    let pinned = try await CacheCommandTests.mediacache(
                        ["pin", "--cache-dir", server.folder] + asset.pin + [asset.url.absoluteString])
                    try #require(pinned.status == 0, "pin \(asset.url): \(pinned.error)")
                    var frames: [String] = []
                    if let picture = asset.picture, picture != asset.sound {
                        frames += try await Self.md5(
                            server.info.baseURL + ProxyURL.path(for: picture, token: nil), ["v"])
                    }
                    frames += try await Self.md5(
                        server.info.baseURL + ProxyURL.path(for: asset.sound, token: nil),
                        asset.picture == asset.sound ? ["v", "a"] : ["a"])
                    throughProxy[asset.file] = frames
                }
                // For the refusals: a SAMPLE-AES playlist, and the first 10 s of the other variant
                // (so the best variant wholly held is still the lowest).
                for pin in [
                    [origin.url("/x/ts/sample-aes.m3u8").absoluteString],
                    ["--variant", "highest", "--seconds", "10", origin.url("/x/hls/again.m3u8").absoluteString],
                ] {
                    let pinned = try await CacheCommandTests.mediacache(["pin", "--cache-dir", server.folder] + pin)
                    try #require(pinned.status == 0, "pin \(pin): \(pinned.error)")
                }
                try await origin.shutdown()
                for asset in assets {
                    let path = directory.appendingPathComponent(asset.file).path
                    let exported = try await CacheCommandTests.mediacache(
                        ["export", "--cache-dir", server.folder, "--file", path]
                            + (asset.file == "film.mp4" ? sideLoaded : []) + [asset.url.absoluteString])
                    try #require(exported.status == 0, "export \(asset.url): \(exported.error)")
                    let probe = try await ChildProcess.run([
                        "ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_type,height", "-of",
                        "compact", path,
                    ])
                    let text = String(decoding: probe.output, as: UTF8.self)
                    #expect(
                        text.contains("codec_type=video") == (asset.picture != nil)
                            && text.contains("codec_type=audio"),
                        "\(asset.file): \(text)")
                    let duration = text.split(separator: "\n").first { $0.hasPrefix("format|") }
                        .flatMap { Double($0.split(separator: "=").last ?? "") }
                    #expect(duration.map { abs($0 - 60) <= 2 } ?? false, "\(asset.file): 60 s ± one segment: \(text)")
                    if asset.file == "film.mp4" { #expect(text.contains("height=120"), "the variant held: \(text)") }
                    let decoded = try await Self.md5(path, asset.picture == nil ? ["a"] : ["v", "a"])
                    #expect(decoded == throughProxy[asset.file], "\(asset.file): the proxy's frames")
                    try await Self.playFromEightyPercent(path, in: directory)
                }
                // The subtitles chosen, beside the file, timed as the rendition is; the SRT file as WebVTT.
                let subtitles = try String(contentsOf: directory.appendingPathComponent("film.en.vtt"), encoding: .utf8)
                #expect(subtitles.hasPrefix("WEBVTT"))
                for cue in [
                    "00:00:01.000 --> 00:00:03.000\nFirst words", "00:00:30.000 --> 00:00:33.000\nMiddle words",
                    "00:00:55.000 --> 00:00:58.000\nLast words",
                ] {
                    #expect(subtitles.contains(cue), "\(subtitles)")
                }
                let french = try String(contentsOf: directory.appendingPathComponent("film.fr.vtt"), encoding: .utf8)
                #expect(
                    french.hasPrefix("WEBVTT") && french.contains("00:00:02.000 --> 00:00:04.000\nBonjour"), "\(french)"
                )
                // `.m4a`: the audio rendition alone, the proxy's audio frames.
                let sound = directory.appendingPathComponent("sound.m4a").path
                let audio = try await CacheCommandTests.mediacache([
                    "export", "--cache-dir", server.folder, "--file", sound,
                    origin.url("/x/hls/master.m3u8").absoluteString,
                ])
                try #require(audio.status == 0, "export .m4a: \(audio.error)")
                let streams = try await ChildProcess.run([
                    "ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", sound,
                ])
                #expect(String(decoding: streams.output, as: UTF8.self) == "audio\n")
                #expect(try await Self.md5(sound, ["a"]) == throughProxy["film.mp4"].map { [$0[1]] })
                try await Self.refusals(server, directory: directory)
            }
        }
    }

    /// What cannot be one file is refused, naming what is missing, and leaves no file.
    static func refusals(_ server: RunningServer, directory: URL) async throws {
        let cases: [(url: String, choice: [String], words: [String])] = [
            (
                server.origin.url("/x/hls/master.m3u8").absoluteString, ["--variant", "highest"],
                [
                    "The variant 240p at 515900 bit/s", "(\(server.origin.url("/x/hls/m0.m3u8"))) is not held",
                    "25 of its 31 resources are missing",
                ]
            ),
            (
                server.origin.url("/x/ts/sample-aes.m3u8").absoluteString, [],
                ["encrypted sample by sample (SAMPLE-AES)"]
            ),
            (server.origin.url("/x/ts/key.bin").absoluteString, [], ["is a file, not an HLS or DASH asset"]),
        ]
        for (index, refused) in cases.enumerated() {
            let path = directory.appendingPathComponent("refused\(index).mp4").path
            let result = try await CacheCommandTests.mediacache(
                ["export", "--cache-dir", server.folder, "--file", path] + refused.choice + [refused.url])
            #expect(result.status != 0, "\(refused.url) refused")
            for words in refused.words { #expect(result.error.contains(words), "\(words): \(result.error)") }
            #expect(!FileManager.default.fileExists(atPath: path))
            let partial = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                $0.hasSuffix(".partial")
            }
            #expect(partial.isEmpty, "\(partial)")
        }
    }

    /// mpv opens `path`, seeks to 80 % and plays a second from there, with no error.
    static func playFromEightyPercent(_ path: String, in directory: URL) async throws {
        try await withTemporaryDirectory { folder in
            let mpv = try MPVControl(path, in: folder)
            defer { mpv.process.terminate() }
            try await waitUntil { mpv.isListening }
            try await waitUntil { try await mpv.number("duration") != nil }
            let duration = try #require(try await mpv.number("duration"))
            // mpv refuses a seek until the file is open for playing: ask until it takes it.
            try await waitUntil { (try? await mpv.send(["seek", 80, "absolute-percent+exact"])) != nil }
            try await mpv.send(["set_property", "pause", false])
            try await waitUntil { (try await mpv.number("time-pos")).map { $0 >= duration * 0.8 + 1 } ?? false }
            try await mpv.send(["quit"])
            await mpv.process.exited()
            let errors = (try? String(contentsOf: mpv.errors, encoding: .utf8)) ?? ""
            #expect(mpv.process.terminationStatus == 0 && errors.isEmpty, "mpv \(path): \(errors)")
        }
    }

    /// The md5 of the frames of each of `streams` (`v`: `input`'s first video stream, `a`: its
    /// first audio stream) as ffmpeg decodes them, in one run (every frame as decoded, none
    /// dropped or repeated to align the streams); decoding must end without an error.
    static func md5(_ input: String, _ streams: [String]) async throws -> [String] {
        let result = try await ChildProcess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-xerror", "-i", input] + streams.flatMap { ["-map", "0:\($0):0"] }
                + ["-fps_mode", "passthrough", "-f", "streamhash", "-hash", "md5", "-"])
        #expect(result.status == 0 && result.error.isEmpty, "ffmpeg \(input): \(result.error)")
        // One line per stream: `0,v,MD5=…`.
        return String(decoding: result.output, as: UTF8.self).split(separator: "\n").map {
            String($0.split(separator: ",").last ?? "")
        }
    }

    /// Makes and serves under `/x/`: `hls/` (fMP4, variants 320x240 and 160x120, audio and WebVTT
    /// subtitles as renditions; `again.m3u8` the same master), `ts/` (MPEG-TS under AES-128, and `sample-aes.m3u8` naming the same
    /// segments as SAMPLE-AES), `dash/`, `aac/` (packed audio); 60 s each, in 2 s segments.
    static func makeAssets(in directory: URL, on origin: TestOrigin) async throws {
        let source = [
            "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi",
            "-i", "sine=frequency=440", "-t", "60",
        ]
        let encode = ["-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "aac"]
        let hls = ["-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod"]
        for name in ["hls", "ts", "dash"] {
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        let folder = directory.path
        try Data((0..<16).map { UInt8($0 &* 13 &+ 1) }).write(to: directory.appendingPathComponent("ts/key.bin"))
        try "key.bin\n\(folder)/ts/key.bin\n".write(
            to: directory.appendingPathComponent("key.info"), atomically: true, encoding: .utf8)
        for command in [
            source + [
                "-filter_complex", "[0:v]split=2[a][b];[b]scale=160:120[c]", "-map", "[a]", "-map", "[c]", "-map",
                "1:a",
            ] + encode + ["-b:v:0", "400k", "-b:v:1", "150k"] + hls + [
                "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4", "-var_stream_map",
                "v:0,agroup:aud v:1,agroup:aud a:0,agroup:aud,default:yes,language:en", "-master_pl_name",
                "master.m3u8",
                "-hls_segment_filename", "\(folder)/hls/s%v_%03d.m4s", "\(folder)/hls/m%v.m3u8",
            ],
            source + encode + hls + [
                "-hls_key_info_file", "\(folder)/key.info", "-hls_segment_filename", "\(folder)/ts/s%03d.ts",
                "\(folder)/ts/index.m3u8",
            ],
            source + ["-map", "0:v", "-map", "1:a"] + encode + [
                "-f", "dash", "-seg_duration", "2", "\(folder)/dash/m.mpd",
            ],
        ] {
            let made = try await ChildProcess.run(command)
            try #require(made.status == 0, "ffmpeg: \(made.error)")
        }
        // Packed audio (AAC in ADTS), each segment led by the ID3 tag of its timestamp, as HLS has it.
        let aac = directory.appendingPathComponent("aac")
        try FileManager.default.createDirectory(at: aac, withIntermediateDirectories: true)
        let packed = try await ChildProcess.run(
            Array(source.prefix(4)) + [
                "-f", "lavfi", "-i", "sine=frequency=440", "-t", "60", "-c:a", "aac", "-f", "segment",
                "-segment_time", "2", "-segment_format", "adts", "-segment_list", aac.path + "/index.m3u8",
                "-segment_list_type", "m3u8", aac.path + "/s%03d.aac",
            ])
        try #require(packed.status == 0, "ffmpeg: \(packed.error)")
        for (index, name) in try FileManager.default.contentsOfDirectory(atPath: aac.path).filter({
            $0.hasSuffix(".aac")
        })
        .sorted().enumerated() {
            let file = aac.appendingPathComponent(name)
            let owner = Array("com.apple.streaming.transportStreamTimestamp\0".utf8)
            let stamp = (0..<8).map { UInt8(truncatingIfNeeded: UInt64(index * 180_000) >> (56 - 8 * $0)) }
            let frame = Array("PRIV".utf8) + [0, 0, 0, UInt8(owner.count + 8), 0, 0] + owner + stamp
            let tag = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, UInt8(frame.count)] + frame
            try Data(tag + Array(try Data(contentsOf: file))).write(to: file)
        }
        // Subtitles as a rendition: three WebVTT segments of 20 s, each mapped to the stream's time.
        var media = "#EXTM3U\n#EXT-X-TARGETDURATION:20\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for (index, cue) in [
            ("00:00:01.000 --> 00:00:03.000", "First words"), ("00:00:10.000 --> 00:00:13.000", "Middle words"),
            ("00:00:15.000 --> 00:00:18.000", "Last words"),
        ].enumerated() {
            let text = "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:\(index * 1_800_000),LOCAL:00:00:00.000\n\n\(cue.0)\n\(cue.1)\n"
            try text.write(
                to: directory.appendingPathComponent("hls/sub\(index).vtt"), atomically: true, encoding: .utf8)
            media += "#EXTINF:20,\nsub\(index).vtt\n"
        }
        try (media + "#EXT-X-ENDLIST\n").write(
            to: directory.appendingPathComponent("hls/subs.m3u8"), atomically: true, encoding: .utf8)
        let master = try String(contentsOf: directory.appendingPathComponent("hls/master.m3u8"), encoding: .utf8)
        try master.replacingOccurrences(of: "AUDIO=\"group_aud\"", with: "AUDIO=\"group_aud\",SUBTITLES=\"subs\"")
            .replacingOccurrences(
                of: "#EXT-X-STREAM-INF",
                with:
                    "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"English\",LANGUAGE=\"en\",URI=\"subs.m3u8\"\n#EXT-X-STREAM-INF",
                options: [], range: master.range(of: "#EXT-X-STREAM-INF")
            )
            .write(to: directory.appendingPathComponent("hls/master.m3u8"), atomically: true, encoding: .utf8)
        try "1\n00:00:02,000 --> 00:00:04,000\nBonjour\n".write(
            to: directory.appendingPathComponent("hls/extra.srt"), atomically: true, encoding: .utf8)
        // The same master at a second URL: a pin of its own.
        try FileManager.default.copyItem(
            at: directory.appendingPathComponent("hls/master.m3u8"),
            to: directory.appendingPathComponent("hls/again.m3u8"))
        let aes = try String(contentsOf: directory.appendingPathComponent("ts/index.m3u8"), encoding: .utf8)
        try aes.replacingOccurrences(of: "METHOD=AES-128", with: "METHOD=SAMPLE-AES").write(
            to: directory.appendingPathComponent("ts/sample-aes.m3u8"), atomically: true, encoding: .utf8)
        let types = [
            "m3u8": "application/vnd.apple.mpegurl", "ts": "video/mp2t", "m4s": "video/iso.segment", "mp4": "video/mp4",
            "mpd": "application/dash+xml", "vtt": "text/vtt", "bin": "application/octet-stream", "aac": "audio/aac",
            "srt": "application/x-subrip",
        ]
        for name in ["hls", "ts", "dash", "aac"] {
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent(name).path)
            {
                let bytes = Array(try Data(contentsOf: directory.appendingPathComponent("\(name)/\(file)")))
                let ext = String(file.split(separator: ".").last ?? "")
                origin.serve(
                    TestOrigin.Resource(body: .bytes(bytes), mimeType: types[ext] ?? "application/octet-stream"),
                    at: "/x/\(name)/\(file)")
            }
        }
    }
}
