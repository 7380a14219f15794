// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// A live multivariant playlist whose audio is a rendition of its own (as most live HLS is):
/// the recording follows the variant and its default audio, each segment once, and its URL is
/// a multivariant playlist that plays picture and sound, through the proxy and exported.
extension RecordCommandTests {
    @Test(.enabled(if: ChildProcess.toolExists("ffmpeg"), "needs ffmpeg"))
    func aLiveVariantIsRecordedWithItsAudioRendition() async throws {
        let origin = try await TestOrigin.start()
        try await withTemporaryDirectory { directory in
            let made = try await ChildProcess.run([
                "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f",
                "lavfi", "-i", "sine=frequency=440",
                "-t", "10", "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a",
                "aac", "-f", "hls", "-hls_time", "1",
                "-hls_playlist_type", "vod", "-var_stream_map", "v:0,agroup:aud a:0,agroup:aud,default:yes,language:en",
                "-master_pl_name", "master.m3u8",
                "-hls_segment_filename", directory.path + "/%v_seg%d.ts", directory.path + "/%v.m3u8",
            ])
            try #require(made.status == 0, "ffmpeg: \(made.error)")
            var files: [String: [UInt8]] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".ts")
            {
                files[name] = Array(try Data(contentsOf: directory.appendingPathComponent(name)))
                var segment = TestOrigin.Resource(
                    body: .bytes(files[name]!), mimeType: "video/mp2t", etag: "\"\(name)\"")
                segment.cacheControl = "max-age=86400"
                origin.serve(segment, at: "/mv/" + name)
            }
            // Each track's durations as ffmpeg wrote them (the audio has one segment more).
            let durations = try (0..<2).map { track in
                try String(contentsOf: directory.appendingPathComponent("\(track).m3u8"), encoding: .utf8).split(
                    separator: "\n"
                )
                .filter { $0.hasPrefix("#EXTINF:") }.compactMap { Double($0.dropFirst(8).prefix { $0 != "," }) }
            }
            let master = try String(contentsOf: directory.appendingPathComponent("master.m3u8"), encoding: .utf8)
            origin.serve(
                TestOrigin.Resource(body: .bytes(Array(master.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                at: "/mv/master.m3u8")
            func advance(to first: Int, end: Bool) {
                for track in 0..<2 {
                    let start = min(first, durations[track].count - 3)
                    origin.serve(
                        Self.window(start, durations: durations[track], end: end, prefix: "\(track)_seg"),
                        at: "/mv/\(track).m3u8")
                }
            }
            advance(to: 0, end: false)
            try await RunningServer.with([], origin: origin) { server in
                let live = origin.url("/mv/master.m3u8").absoluteString
                let started = try await CacheCommandTests.json(
                    RecordingAnswer.self, ["record", "--cache-dir", server.folder, live])
                let id = started.job.id
                func taken() async throws -> Int {
                    try await DownloadCommandTests.job(id, on: server.info)?.resourcesDone ?? 0
                }
                try await waitUntil { try await taken() >= 6 }
                let last = durations[1].count - 3
                for first in 1...last {
                    advance(to: first, end: first == last)
                    let expected = min(first, durations[0].count - 3) + 3 + first + 3
                    try await waitUntil { try await taken() >= expected }
                }
                try await waitUntil { try await DownloadCommandTests.job(id, on: server.info)?.state == .completed }
                let top = try await RecordingCommandChecks.get(started.url)
                #expect(
                    top.contains("#EXT-X-MEDIA:TYPE=AUDIO") && top.contains("URI=\"recording.m3u8?job=\(id)&track=1\"")
                        && top.contains("AUDIO=\"group_aud\""), "\(top)")
                // Each track: every segment once, with the origin's bytes.
                for track in 0..<2 {
                    let text = try await RecordingCommandChecks.get(
                        server.info.baseURL + "/_mediacache/recording.m3u8?job=\(id)&track=\(track)")
                    #expect(text.contains("#EXT-X-PLAYLIST-TYPE:VOD"), "\(text)")
                    let uris = text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
                    #expect(uris.count == durations[track].count, "track \(track): \(text)")
                    for (index, uri) in uris.enumerated() {
                        let name = "\(track)_seg\(index).ts"
                        #expect(origin.requests("/mv/" + name).count == 1, "\(name)")
                        let response = try await HTTPClient.shared.execute(
                            HTTPClientRequest(url: uri), timeout: .seconds(30))
                        #expect(
                            Array(try await response.body.collect(upTo: 16 << 20).readableBytesView) == files[name],
                            "\(name)")
                    }
                }
                try await Self.expectPictureAndSound(started.url, seconds: durations[0].reduce(0, +))
                // Exported: the multivariant playlist and each track's, played with the origin stopped.
                try await origin.shutdown()
                let folder = directory.appendingPathComponent("export")
                let exported = try await Self.mediacache([
                    "export", "--cache-dir", server.folder, live, "--output", folder.path,
                ])
                #expect(exported.status == 0, "\(exported)")
                let index = try String(contentsOf: folder.appendingPathComponent("index.m3u8"), encoding: .utf8)
                #expect(index.contains("URI=\"track1.m3u8\"") && index.hasSuffix("track0.m3u8\n"), "\(index)")
                try await Self.expectPictureAndSound(
                    folder.appendingPathComponent("index.m3u8").path, seconds: durations[0].reduce(0, +))
                // As one file: the variant's and the audio rendition's packets in one programme,
                // decoded into the frames the exported folder decodes into.
                let file = directory.appendingPathComponent("recording.ts").path
                let written = try await Self.mediacache(["export", "--cache-dir", server.folder, live, "--file", file])
                #expect(written.status == 0, "\(written)")
                try await Self.expectPictureAndSound(file, seconds: durations[0].reduce(0, +))
                let fromFolder = try await ExportFileCommandTests.md5(
                    folder.appendingPathComponent("index.m3u8").path, ["v", "a"])
                #expect(try await ExportFileCommandTests.md5(file, ["v", "a"]) == fromFolder)
            }
        }
    }

    /// ffprobe finds a video and an audio stream in `path`, lasting at least `seconds` less
    /// half a second, and ffmpeg decodes it without a complaint.
    static func expectPictureAndSound(_ path: String, seconds: Double) async throws {
        let streams = try await ChildProcess.run([
            "ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", path,
        ])
        let types = Set(
            String(decoding: streams.output, as: UTF8.self).split(whereSeparator: \.isNewline).map {
                $0.trimmingCharacters(in: .whitespaces)
            })
        #expect(types.isSuperset(of: ["video", "audio"]), "ffprobe of \(path): \(types) \(streams.error)")
        let probed = try await ChildProcess.run([
            "ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "default=noprint_wrappers=1:nokey=1",
            path,
        ])
        let duration =
            Double(String(decoding: probed.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(duration >= seconds - 0.5, "ffprobe of \(path): \(duration) s")
        let decoded = try await ChildProcess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decoded.status == 0 && decoded.error.isEmpty, "ffmpeg of \(path): \(decoded.error)")
    }
}
