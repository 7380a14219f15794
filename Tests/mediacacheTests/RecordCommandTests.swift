// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// `mediacache record` against the real binary and a live window the test moves: each segment
/// is taken once as it appears, the recording's URL plays from the first segment while it
/// records (an `EVENT` playlist) and after (`VOD`), every segment's bytes are the origin's, and
/// it still plays with the origin stopped.
@Suite(.stallLimit, .endToEnd) struct RecordCommandTests {
    /// 12 segments of 1 s made by ffmpeg (`seg0.ts` …), by name.
    static func makeSegments(in directory: URL) async throws -> [String: [UInt8]] {
        let made = try await ChildProcess.run([
            "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi",
            "-i", "sine=frequency=440",
            "-t", "12", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac", "-f", "hls", "-hls_time",
            "1",
            "-hls_playlist_type", "vod", "-hls_segment_filename", directory.path + "/seg%d.ts",
            directory.path + "/made.m3u8",
        ])
        #expect(made.status == 0, "ffmpeg: \(made.error)")
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".ts") {
            files[name] = Array(try Data(contentsOf: directory.appendingPathComponent(name)))
        }
        return files
    }

    /// Serves the segments of ``makeSegments(in:)`` under `/live/` (fresh for a day, as live
    /// segments are); returns them by name, and each one's duration as ffmpeg wrote it.
    static func serveSegments(on origin: TestOrigin, in directory: URL) async throws -> (
        files: [String: [UInt8]], durations: [Double]
    ) {
        let files = try await makeSegments(in: directory)
        let made = try String(contentsOf: directory.appendingPathComponent("made.m3u8"), encoding: .utf8)
        let durations = made.split(separator: "\n").filter { $0.hasPrefix("#EXTINF:") }.compactMap {
            Double($0.dropFirst(8).prefix { $0 != "," })
        }
        try #require(durations.count >= 10 && files.count == durations.count)
        for (name, bytes) in files {
            var segment = TestOrigin.Resource(body: .bytes(bytes), mimeType: "video/mp2t", etag: "\"\(name)\"")
            segment.cacheControl = "max-age=86400"
            origin.serve(segment, at: "/live/" + name)
        }
        return (files, durations)
    }

    /// The live window of segments `first..<first + 3` (of `durations`), ended when `end`.
    static func window(_ first: Int, durations: [Double], end: Bool, prefix: String = "seg") -> TestOrigin.Resource {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:\(first)\n"
        for index in first..<min(durations.count, first + 3) {
            text += "#EXTINF:\(durations[index]),\n\(prefix)\(index).ts\n"
        }
        if end { text += "#EXT-X-ENDLIST\n" }
        var resource = TestOrigin.Resource(
            body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl",
            etag: "\"\(prefix)\(first)\(end)\"")
        resource.cacheControl = "max-age=1"
        return resource
    }

    @Test(.enabled(if: ChildProcess.toolExists("ffmpeg"), "needs ffmpeg"))
    func aLiveWindowIsRecordedAndPlaysFromTheFirstSegment() async throws {
        let origin = try await TestOrigin.start()
        try await withTemporaryDirectory { directory in
            let (files, durations) = try await Self.serveSegments(on: origin, in: directory)
            let count = durations.count
            origin.serve(Self.window(0, durations: durations, end: false), at: "/live/index.m3u8")
            try await RunningServer.with([], origin: origin) { server in
                let live = origin.url("/live/index.m3u8").absoluteString
                let started = try await CacheCommandTests.json(
                    RecordingAnswer.self, ["record", "--cache-dir", server.folder, "--for", "10m", live])
                #expect(
                    started.url.hasPrefix(server.info.baseURL + "/_mediacache/recording.m3u8?job="), "\(started.url)")
                let id = started.job.id
                func taken() async throws -> Int {
                    try await DownloadCommandTests.job(id, on: server.info)?.resourcesDone ?? 0
                }
                try await waitUntil { try await taken() >= 3 }
                // The window moves on, a segment at a time; each is taken as it appears.
                for first in 1...(count - 3) {
                    origin.serve(
                        Self.window(first, durations: durations, end: first == count - 3), at: "/live/index.m3u8")
                    try await waitUntil { try await taken() >= first + 3 }
                    if first == 4 {
                        let growing = try await RecordingCommandChecks.get(started.url)
                        #expect(
                            growing.contains("#EXT-X-PLAYLIST-TYPE:EVENT") && !growing.contains("#EXT-X-ENDLIST"),
                            "\(growing)")
                        #expect(
                            growing.contains(HLSPlaylist.percentEncoded(origin.url("/live/seg0.ts").absoluteString)),
                            "from the first segment: \(growing)")
                        let listed = try await Self.mediacache(["downloads", "--cache-dir", server.folder])
                        #expect(listed.output.contains("\(id)  recording"), "\(listed.output)")
                        let status = try await RecordingCommandChecks.get(server.info.baseURL + "/status")
                        #expect(
                            status.contains("recording, ") && status.contains(" s held"),
                            "the status page names the recording")
                    }
                }
                try await waitUntil { try await DownloadCommandTests.job(id, on: server.info)?.state == .completed }
                let final = try await RecordingCommandChecks.get(started.url)
                #expect(final.contains("#EXT-X-PLAYLIST-TYPE:VOD") && final.hasSuffix("#EXT-X-ENDLIST\n"), "\(final)")
                // Every segment once from the origin, and the recording's bytes are the origin's.
                for index in 0..<count {
                    #expect(
                        origin.requests("/live/seg\(index).ts").count == 1,
                        "seg\(index).ts: \(origin.requests("/live/seg\(index).ts"))")
                }
                let uris = final.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
                #expect(uris.count == count)
                for (index, uri) in uris.enumerated() {
                    let response = try await HTTPClient.shared.execute(
                        HTTPClientRequest(url: uri), timeout: .seconds(30))
                    let body = try await response.body.collect(upTo: 16 << 20)
                    #expect(Array(body.readableBytesView) == files["seg\(index).ts"], "segment \(index)")
                }
                // It plays from the first segment, all of it, with the origin stopped.
                try await origin.shutdown()
                let probe = try await ChildProcess.run([
                    "ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                    "default=noprint_wrappers=1:nokey=1", started.url,
                ])
                let seconds =
                    Double(
                        String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
                    ?? 0
                #expect(
                    probe.status == 0 && seconds >= durations.reduce(0, +) - 0.5,
                    "ffprobe: \(seconds) s; \(probe.error)")
                let decoded = try await ChildProcess.run([
                    "ffmpeg", "-nostdin", "-v", "error", "-i", started.url, "-f", "null", "-",
                ])
                #expect(decoded.status == 0 && decoded.error.isEmpty, "ffmpeg: \(decoded.error)")
                // Exported, it is a VOD folder that plays with no network.
                let folder = directory.appendingPathComponent("export")
                let exported = try await Self.mediacache([
                    "export", "--cache-dir", server.folder, live, "--output", folder.path,
                ])
                #expect(exported.status == 0, "\(exported)")
                let index = try String(contentsOf: folder.appendingPathComponent("index.m3u8"), encoding: .utf8)
                let names = index.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
                #expect(names.count == count && index.contains("#EXT-X-ENDLIST") && !index.contains("http"), "\(index)")
                for (number, name) in names.enumerated() {
                    #expect(
                        Array(try Data(contentsOf: folder.appendingPathComponent(name))) == files["seg\(number).ts"],
                        "\(name)")
                }
                let offline = try await ChildProcess.run([
                    "ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                    "default=noprint_wrappers=1:nokey=1", folder.appendingPathComponent("index.m3u8").path,
                ])
                let local =
                    Double(
                        String(decoding: offline.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
                    ?? 0
                #expect(
                    offline.status == 0 && local >= durations.reduce(0, +) - 0.5,
                    "ffprobe of the export: \(local) s; \(offline.error)")
            }
        }
    }

    static func mediacache(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        try await CacheCommandTests.mediacache(arguments)
    }
}

extension RecordCommandTests {
    /// `kill -9` of the server while it records, the window moving on meanwhile: the next
    /// `serve` resumes the recording, which plays back with a discontinuity where the missed
    /// segments were, and every other segment present with the origin's bytes.
    @Test(.enabled(if: ChildProcess.toolExists("ffmpeg"), "needs ffmpeg"))
    func aRecordingCutByKillDashNineResumesWithTheGapMarked() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        try await withTemporaryDirectory { directory in
            let (files, durations) = try await Self.serveSegments(on: origin, in: directory)
            let count = durations.count
            origin.serve(Self.window(0, durations: durations, end: false), at: "/live/index.m3u8")
            let folder = directory.appendingPathComponent("cache").path
            var (server, info) = try await DownloadCommandTests.startServer(folder)
            let answer = try await DownloadCommandTests.post(
                info, "record", ["target": origin.url("/live/index.m3u8").absoluteString])
            let id = try CacheCommandTests.decoder.decode(RecordingAnswer.self, from: Data(buffer: answer.body)).job.id
            func taken() async throws -> Int { try await DownloadCommandTests.job(id, on: info)?.resourcesDone ?? 0 }
            try await waitUntil { try await taken() >= 3 }
            origin.serve(Self.window(1, durations: durations, end: false), at: "/live/index.m3u8")
            try await waitUntil { try await taken() >= 4 }
            kill(server.processIdentifier, SIGKILL)
            await server.exited()
            // Down while the window moved from 1-3 to 6-8: segments 4 and 5 are missed.
            origin.serve(Self.window(6, durations: durations, end: false), at: "/live/index.m3u8")
            (server, info) = try await DownloadCommandTests.startServer(folder)
            try await runThenTearDown(
                server,
                { _ in
                    try await waitUntil {
                        try await DownloadCommandTests.job(id, on: info)?.recording?.hls?.timeline.lastSequence == 8
                    }
                    origin.serve(Self.window(count - 3, durations: durations, end: true), at: "/live/index.m3u8")
                    try await waitUntil { try await DownloadCommandTests.job(id, on: info)?.state == .completed }
                    let url = info.baseURL + "/_mediacache/recording.m3u8?job=" + id
                    let final = try await RecordingCommandChecks.get(url)
                    let lines = final.split(separator: "\n").map(String.init)
                    let uris = lines.filter { !$0.hasPrefix("#") }
                    let names = uris.compactMap {
                        URLComponents(string: $0)?.queryItems?.first { $0.name == "url" }?.value?.split(separator: "/")
                            .last.map(String.init)
                    }
                    let expected = (0..<count).filter { $0 != 4 && $0 != 5 }.map { "seg\($0).ts" }
                    #expect(names == expected, "\(final)")
                    // The discontinuity is right before seg6, and only there.
                    let discontinuities = lines.indices.filter { lines[$0] == "#EXT-X-DISCONTINUITY" }
                    #expect(discontinuities.count == 1 && lines[discontinuities[0] + 2].contains("seg6.ts"), "\(final)")
                    for (name, uri) in zip(names, uris) {
                        let response = try await HTTPClient.shared.execute(
                            HTTPClientRequest(url: uri), timeout: .seconds(30))
                        #expect(
                            Array(try await response.body.collect(upTo: 16 << 20).readableBytesView) == files[name],
                            "\(name)")
                    }
                    let decoded = try await ChildProcess.run([
                        "ffmpeg", "-nostdin", "-v", "error", "-i", url, "-f", "null", "-",
                    ])
                    #expect(decoded.status == 0, "ffmpeg: \(decoded.error)")
                }, tearDown: { await $0.stop() })
        }
    }
}

extension RecordCommandTests {
    /// Without a server, `record` records in the foreground until the presentation ends, and
    /// `export` then writes the recording from the folder.
    @Test func recordWithoutAServerRunsHereUntilTheEnd() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:7\n"
        for index in 7..<10 {
            origin.serve(.generated(length: 20_000, seed: UInt64(index)), at: "/here/seg\(index).ts")
            text += "#EXTINF:1.0,\nseg\(index).ts\n"
        }
        origin.serve(
            TestOrigin.Resource(
                body: .bytes(Array((text + "#EXT-X-ENDLIST\n").utf8)), mimeType: "application/vnd.apple.mpegurl"),
            at: "/here/index.m3u8")
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let live = origin.url("/here/index.m3u8").absoluteString
            let recorded = try await Self.mediacache(["record", "--cache-dir", folder, "--for", "60s", live])
            #expect(
                recorded.status == 0 && recorded.output.contains("completed")
                    && recorded.output.contains("3.0 s recorded"), "\(recorded)")
            let output = directory.appendingPathComponent("export")
            let exported = try await Self.mediacache(["export", "--cache-dir", folder, live, "--output", output.path])
            #expect(exported.status == 0, "\(exported)")
            let index = try String(contentsOf: output.appendingPathComponent("index.m3u8"), encoding: .utf8)
            let names = index.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
            #expect(names.count == 3 && index.contains("#EXT-X-PLAYLIST-TYPE:VOD"), "\(index)")
            for (offset, name) in names.enumerated() {
                let bytes = try Data(contentsOf: output.appendingPathComponent(name))
                #expect(
                    bytes.count == 20_000
                        && DeterministicContent(seed: UInt64(7 + offset)).firstMismatch(
                            in: ByteBuffer(data: bytes), at: 0) == nil,
                    "\(name)")
            }
        }
    }
}

enum RecordingCommandChecks {
    static func get(_ url: String) async throws -> String {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        return String(buffer: try await response.body.collect(upTo: 4 << 20))
    }
}
