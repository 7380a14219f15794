// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension OneVersionPerPlayTests {
    /// An episode's versions as a host that stitches ads makes them (ffmpeg, in the test): a
    /// tone of `version × 3` seconds (the ad, another length each time) before 200 s of content (past the distance at which a seek joins the fill under way).
    /// Each version is made once per test process (``madeOnce(_:_:)``).
    static func episodes(count: Int) async throws -> [[UInt8]] {
        var bodies: [[UInt8]] = []
        for version in 1...count {
            bodies.append(
                try await madeOnce("episode \(version)") {
                    try await withTemporaryDirectory { directory in
                        let file = directory.appendingPathComponent("v\(version).mp3")
                        let made = try await runTool([
                            "ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                            "sine=frequency=\(500 + version * 150):duration=\(version * 3)", "-f", "lavfi", "-i",
                            "sine=frequency=440:duration=200", "-filter_complex", "[0][1]concat=n=2:v=0:a=1", "-c:a",
                            "libmp3lame", "-b:a", "128k", file.path,
                        ])
                        #expect(made.status == 0, "\(made.error)")
                        return Array(try Data(contentsOf: file))
                    }
                })
        }
        return bodies
    }

    /// What a player does: starts the episode, seeks to 80 % at once and back to 10 %,
    /// decoding a second at each place. Each step is a new process, as a user's seeks are new
    /// requests. Both seek by bytes, as a podcast app does (libavformat's `fastseek`: without
    /// it an MP3 without a seek table is read from its start to the time asked).
    static func play(_ player: String, _ url: String, seconds: Double) async throws {
        for start in [0, seconds * 0.8, seconds * 0.1] {
            let arguments =
                player == "ffmpeg"
                ? [
                    "ffmpeg", "-nostdin", "-v", "error", "-fflags", "+fastseek", "-ss", "\(start)", "-i", url, "-t",
                    "1",
                    "-f", "null", "-",
                ]
                : [
                    "mpv", "--no-config", "--ytdl=no", "--vo=null", "--ao=null", "--untimed",
                    "--demuxer-lavf-o=fflags=+fastseek", "--start=\(start)",
                    "--length=1", "--msg-level=all=error", url,
                ]
            let played = try await runTool(arguments)
            #expect(played.status == 0, "\(player) at \(start) s: \(played.error)")
            #expect(!played.error.contains("rror"), "\(player) at \(start) s: \(played.error)")
        }
    }

    /// ffmpeg and mpv play an episode from a host that stitches other ads into each visit, a
    /// seek to 80 % right after the start and back to 10 %: no error, the trackers visited once,
    /// every byte the proxy holds and gave the first version's (the engine never splices, so
    /// what it gave came from what it holds); once filled, a second play costs the origin nothing.
    @Test(
        .enabled(if: toolExists("ffmpeg") && toolExists("mpv"), "needs ffmpeg and mpv"),
        arguments: ["ffmpeg", "mpv"])
    func realPlayersSeekingKeepTheFirstVersion(_ player: String) async throws {
        let bodies = try await Self.episodes(count: 3)
        try await ProxyHarness.with { proxy in
            // Slow enough that the seeks come while the fill is far behind.
            let host = AdStitchingHost(proxy.origin, bytesPerSecond: 256 << 10, prefix: "/\(player)", bodies: bodies)
            let url = proxy.url(host.entry)
            try await Self.play(player, url, seconds: 203)
            #expect(host.visits.load(ordering: .relaxed) == 1, "\(host.requests())")
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty }
            try await proxy.base.waitUntilQuiet(host.prefix + "/host/ep-1.mp3")
            let requests = host.requests()
            #expect(
                requests["/t3/ep.mp3"] == 1 && requests["/t1/ep.mp3"] == 1 && requests["/host/ep-2.mp3"] == nil,
                "\(requests)")
            // The seeks came ahead of the fill: asked of the URL the trackers led to, directly.
            let direct = proxy.origin.requests(host.prefix + "/host/ep-1.mp3").map { $0.range ?? "-" }
            #expect(direct.count >= 2, "\(direct)")
            // The entry holds version 1, whole.
            let key = proxy.base.store.key(for: proxy.origin.url(host.entry))
            let length = Int64(bodies[0].count)
            #expect(proxy.base.store.spans(for: key).contains(ByteRange(0, length)))
            let stream = try #require(
                proxy.base.reader.cachedRead(proxy.origin.url(host.entry), range: ByteRange(0, length)))
            var held: [UInt8] = []
            for try await chunk in stream { held += chunk.readableBytesView }
            #expect(held == bodies[0], "the stored episode is version 1, byte for byte")
            // A second play: the origin is not asked.
            proxy.origin.resetCounters()
            try await Self.play(player, url, seconds: 203)
            #expect(host.requests().values.allSatisfy { $0 == 0 }, "\(host.requests())")
        }
    }
}
