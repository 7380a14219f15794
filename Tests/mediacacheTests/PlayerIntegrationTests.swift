// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// A desktop player routed through MediaCache with nothing to configure: mpv with the script
/// `mediacache integrate mpv` writes plays http URLs (a playlist, an EDL as the yt-dlp hook
/// makes) through the running server and preloads the next entry; with no server it plays
/// directly and says so. `mediacache play` runs a player on the proxy URL, starting a server
/// for the session when none runs.
@Suite(.stallLimit, .endToEnd) struct PlayerIntegrationTests {
    /// Two short MP4 clips made by ffmpeg, served at `/clips/a.mp4` and `/clips/b.mp4`.
    static func serveClips(on origin: TestOrigin, in directory: URL) async throws {
        for (name, seconds) in [("a", 2), ("b", 1)] {
            let path = directory.appendingPathComponent("\(name).mp4").path
            let made = try await ChildProcess.run([
                "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-f",
                "lavfi", "-i", "sine=frequency=330",
                "-t", "\(seconds)", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-movflags", "+faststart",
                path,
            ])
            try #require(made.status == 0, "ffmpeg: \(made.error)")
            var clip = TestOrigin.Resource(
                body: .bytes(Array(try Data(contentsOf: URL(fileURLWithPath: path)))), mimeType: "video/mp4",
                etag: "\"\(name)\"")
            clip.cacheControl = "max-age=3600"
            origin.serve(clip, at: "/clips/\(name).mp4")
        }
    }

    /// mpv with only the script (no configuration, no yt-dlp), in real time: the next entry's
    /// preload has the first entry's two seconds to be asked for.
    static func mpv(script: URL, _ targets: [String]) async throws -> (status: Int32, output: String) {
        let run = try await ChildProcess.run(
            [
                "mpv", "--no-config", "--script=\(script.path)", "--ytdl=no", "--vo=null", "--ao=null",
                "--msg-level=all=warn,mediacache=info",
            ] + targets)
        return (run.status, String(decoding: run.output, as: UTF8.self) + run.error)
    }

    /// The script `integrate mpv --print` writes for `folder`.
    static func script(for folder: String, in directory: URL) async throws -> URL {
        let printed = try await CacheCommandTests.mediacache(["integrate", "mpv", "--print", "--cache-dir", folder])
        try #require(printed.status == 0 && printed.output.contains("mp.add_hook(\"on_load\""), "\(printed)")
        let file = directory.appendingPathComponent("mediacache.lua")
        try printed.output.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test(.enabled(if: ChildProcess.toolExists("mpv") && ChildProcess.toolExists("ffmpeg"), "needs mpv and ffmpeg"))
    func mpvWithTheScriptPlaysThroughTheServerAndPreloadsTheNextEntry() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        try await withTemporaryDirectory { directory in
            try await Self.serveClips(on: origin, in: directory)
            let a = origin.url("/clips/a.mp4").absoluteString
            let b = origin.url("/clips/b.mp4").absoluteString
            try await RunningServer.with([], origin: origin) { server in
                let script = try await Self.script(for: server.folder, in: directory)
                let played = try await Self.mpv(script: script, [a, b])
                #expect(played.status == 0, "\(played.output)")
                #expect(
                    played.output.contains("Playing through MediaCache: \(server.info.baseURL)"), "\(played.output)")
                // The second entry was preloaded while the first played.
                #expect(played.output.contains("MediaCache preloads \(b)"), "\(played.output)")
                // Both went through the server: each is in its folder, and the origin saw no other client.
                let listed = try await CacheCommandTests.mediacache(["ls", "--cache-dir", server.folder])
                #expect(listed.output.contains("/clips/a.mp4") && listed.output.contains("/clips/b.mp4"), "\(listed)")
                let recent = try await Self.recentRequests(server.info)
                #expect(
                    recent.contains { $0.contains("/clips/a.mp4") } && recent.contains { $0.contains("/clips/b.mp4") },
                    "the server's log: \(recent)")
                // An EDL (the yt-dlp hook's form for separate streams): its URLs go through as well.
                let before = origin.requests("/clips/b.mp4").count
                let edl = "edl://%\(b.utf8.count)%\(b)"
                let edlPlayed = try await Self.mpv(script: script, [edl])
                #expect(edlPlayed.status == 0, "\(edlPlayed.output)")
                #expect(
                    origin.requests("/clips/b.mp4").count == before, "b was held: the EDL's URL came through the server"
                )
            }
            // No server for the folder: mpv plays directly, and says so.
            let empty = directory.appendingPathComponent("no-server").path
            let script = try await Self.script(for: empty, in: directory)
            let direct = try await Self.mpv(script: script, [a])
            #expect(
                direct.status == 0 && direct.output.contains("No MediaCache server runs")
                    && direct.output.contains("Playing directly"), "\(direct.output)")
            #expect(!FileManager.default.fileExists(atPath: empty), "nothing was made of the folder with no server")
        }
    }

    /// The URLs of the requests the server `info` answered lately (its own log, `/_mediacache/stats`).
    static func recentRequests(_ info: ServerInfo) async throws -> [String] {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: info.baseURL + "/_mediacache/stats"), timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 16 << 20)
        let stats = try CacheCommandTests.decoder.decode(AdminStats.self, from: Data(buffer: body))
        return stats.proxy.recent.map(\.url)
    }

    @Test(.enabled(if: ChildProcess.toolExists("ffprobe") && ChildProcess.toolExists("ffmpeg"), "needs ffmpeg"))
    func playStartsAServerForTheSessionOrUsesTheRunningOne() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        try await withTemporaryDirectory { directory in
            try await Self.serveClips(on: origin, in: directory)
            let folder = directory.appendingPathComponent("cache").path
            let url = origin.url("/clips/a.mp4").absoluteString
            // ffprobe as the player: it prints what it read, through the session's server.
            let probe = [
                "--player", "ffprobe", "--cache-dir", folder, url, "--", "-v", "error", "-show_entries",
                "format=duration", "-of", "csv=p=0",
            ]
            let played = try await CacheCommandTests.mediacache(["play"] + probe)
            #expect(
                played.status == 0
                    && (Double(played.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 1.9, "\(played)")
            #expect(played.error.contains("MediaCache serves this session at"), "\(played.error)")
            // The session's server stopped, and what it fetched stays in the folder.
            let listed = try await CacheCommandTests.mediacache(["ls", "--cache-dir", folder])
            #expect(listed.status == 0 && listed.output.contains("/clips/a.mp4"), "\(listed)")
            // With a server running for the folder, `play` uses it and starts none.
            try await RunningServer.with([], origin: origin) { server in
                let again = try await CacheCommandTests.mediacache([
                    "play", "--player", "ffprobe", "--cache-dir", server.folder, url, "--", "-v", "error",
                ])
                #expect(again.status == 0 && !again.error.contains("serves this session"), "\(again)")
                let recent = try await Self.recentRequests(server.info)
                #expect(
                    recent.contains { $0.contains("/clips/a.mp4") }, "the running server answered ffprobe: \(recent)")
            }
        }
    }

    /// `integrate mpv` installs the script where mpv looks: `$MPV_HOME/scripts`, else under
    /// `$XDG_CONFIG_HOME` (or `~/.config`), or the folder given; another player is refused.
    @Test func theScriptIsInstalledWhereMPVLooks() async throws {
        try await withTemporaryDirectory { directory in
            let home = directory.appendingPathComponent("mpv-home").path
            let config = directory.appendingPathComponent("config").path
            let given = directory.appendingPathComponent("given").path
            let executable = try ChildProcess.executable(named: "mediacache").path
            for (environment, arguments, expected) in [
                (["MPV_HOME=\(home)"], [String](), home + "/scripts/mediacache.lua"),
                (["MPV_HOME=", "XDG_CONFIG_HOME=\(config)"], [], config + "/mpv/scripts/mediacache.lua"),
                (["MPV_HOME=\(home)"], ["--scripts-dir", given], given + "/mediacache.lua"),
            ] {
                let run = try await ChildProcess.run(
                    ["/usr/bin/env"] + environment + [executable, "integrate", "mpv"] + arguments)
                let output = String(decoding: run.output, as: UTF8.self)
                #expect(
                    run.status == 0 && output.contains("Installed \(expected)"),
                    "\(environment) \(arguments): \(output) \(run.error)")
                let script = try String(contentsOfFile: expected, encoding: .utf8)
                #expect(
                    script.contains("local executable = \"\(executable)\"")
                        && script.contains("mp.add_hook(\"on_load\", 50"), "\(expected)")
            }
            let refused = try await CacheCommandTests.mediacache(["integrate", "vlc"])
            #expect(refused.status != 0 && refused.error.contains("Only mpv can be integrated"), "\(refused)")
        }
    }
}
