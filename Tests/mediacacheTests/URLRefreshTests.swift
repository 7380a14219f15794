// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// `serve --refresh-command`: an origin whose signed tokens live 20 seconds (`403` after, and a
/// body cut when its token expires on the way) and a two-minute play through ffmpeg, of an HLS
/// stream whose playlists carry the token and of an MP3. The origin's clock moves with the
/// media it sends (a second per second of media), so two minutes of play pass in the time the
/// bytes take on loopback, and the play meets six expiries whatever the machine's speed.
@Suite(.stallLimit, .endToEnd, .enabled(if: ChildProcess.toolExists("ffmpeg") && ChildProcess.toolExists("curl")))
struct URLRefreshTests {
    /// A refresh command that asks the origin's signing service (`/_origin/sign`), as a
    /// deployment's would ask its own.
    static func signingCommand(in directory: URL, origin: TestOrigin) throws -> String {
        let script = directory.appendingPathComponent("refresh.sh")
        try """
        #!/bin/sh
        exec curl -sf --get --data-urlencode "url=$1" "http://127.0.0.1:\(origin.port)/_origin/sign"

        """.write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        return script.path
    }

    static func proxied(_ server: RunningServer, _ url: String) -> String {
        server.info.baseURL + "/?url=" + HLSPlaylist.percentEncoded(url)
    }

    /// The refresh command was run once for each token that expired in the play (each is
    /// presented once after it expired, refused, and renewed with every URL signed alike).
    static func expectOneRenewalPerExpiry(
        _ signer: TokenSigner, atLeast: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let expiries = signer.expiredTokensPresented.count
        #expect(expiries >= atLeast, "\(signer.renewalsAsked)", sourceLocation: sourceLocation)
        #expect(signer.renewalsAsked.count == expiries, "\(signer.renewalsAsked)", sourceLocation: sourceLocation)
    }

    /// Runs `body` with an origin whose signing service gives 20-second tokens (with `exp=`
    /// when `statesExpiry`) on a clock of its own, and a temporary folder. A token that states
    /// its expiry is judged by the server on the real clock, so then the signer's clock never
    /// falls behind the real one (on a slow machine the test's set-up alone takes longer than a
    /// token's lifetime, and every token would be born expired).
    static func withSigningOrigin(
        statesExpiry: Bool, _ body: (TestOrigin, ManualClock, TokenSigner, URL) async throws -> Void
    ) async throws {
        let origin = try await TestOrigin.start(acceptsControl: true)
        defer { Task { try? await origin.shutdown() } }
        let clock = ManualClock(start: Date())
        let signer = TokenSigner(
            lifetime: 20, statesExpiry: statesExpiry, clock: statesExpiry ? NeverBehindRealTime(clock) : clock)
        origin.useSigner(signer)
        try await withTemporaryDirectory { try await body(origin, clock, signer, $0) }
    }

    /// `base`'s time, or the real time when `base` is behind it.
    struct NeverBehindRealTime: WallClock {
        let base: ManualClock
        init(_ base: ManualClock) { self.base = base }
        var now: Date { max(base.now, Date()) }
    }

    /// No request line of the server's log says it answered a player `401`, `403` or `410`
    /// (the origin's refusals were all renewed), and it logged answers at all.
    static func expectNoRefusalAnswered(in log: URL, sourceLocation: SourceLocation = #_sourceLocation) {
        let lines = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n")
        let answers = lines.filter { $0.contains("[MediaCacheProxy] GET") }
        #expect(!answers.isEmpty, sourceLocation: sourceLocation)
        let refused = answers.filter { [" status=401 ", " status=403 ", " status=410 "].contains(where: $0.contains) }
        #expect(refused.isEmpty, "\(refused)", sourceLocation: sourceLocation)
    }

    @Test func aTwoMinuteMP3PlaysThroughSixExpiries() async throws {
        // Tokens without a stated expiry: the cache learns of each from the origin's 403.
        try await Self.withSigningOrigin(statesExpiry: false) { origin, clock, signer, directory in
            let file = directory.appendingPathComponent("ep.mp3")
            let made = try await ChildProcess.run([
                "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=120", "-c:a",
                "libmp3lame", "-b:a", "64k", file.path,
            ])
            try #require(made.status == 0, "ffmpeg: \(made.error)")
            let bytes = Array(try Data(contentsOf: file))
            var episode = TestOrigin.Resource(body: .bytes(bytes), mimeType: "audio/mpeg", etag: "\"ep\"")
            episode.faults.signer = signer
            // 64 kbit/s: 8,000 bytes a second of media.
            episode.faults.onBodyBytes = { clock.advance(by: Double($0) / 8_000) }
            origin.serve(episode, at: "/ep.mp3")
            let command = try Self.signingCommand(in: directory, origin: origin)
            let log = directory.appendingPathComponent("serve.log")
            try await RunningServer.with(["--refresh-command", command], errorFile: log, origin: origin) { server in
                let signed = origin.url("/ep.mp3").absoluteString + "?" + signer.freshQuery()
                let url = Self.proxied(server, signed)
                let play = try await ChildProcess.run([
                    "ffmpeg", "-nostdin", "-v", "error", "-i", url, "-f", "null", "-",
                ])
                #expect(play.status == 0 && play.error.isEmpty, "\(play.error)")
                Self.expectOneRenewalPerExpiry(signer, atLeast: 4)
                // Every byte the origin's, and now a hit (however long the token has been dead).
                let replay = try await ChildProcess.run(["curl", "-sf", url])
                #expect(replay.status == 0 && Array(replay.output) == bytes)
                let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                #expect(said.contains("A signed URL was renewed"), "\(said.suffix(2000))")
                Self.expectNoRefusalAnswered(in: log)
            }
        }
    }

    @Test func aTwoMinuteHLSPlayWhosePlaylistsCarryTheTokenRenewsOncePerExpiry() async throws {
        try await Self.withSigningOrigin(statesExpiry: true) { origin, clock, signer, directory in
            let made = try await ChildProcess.run([
                "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=duration=120:size=96x54:rate=10",
                "-f", "lavfi", "-i", "sine=frequency=330:duration=120", "-shortest", "-threads", "1", "-c:v", "libx264",
                "-preset", "ultrafast", "-g", "40", "-c:a", "aac", "-b:a", "32k", "-f", "hls", "-hls_time", "4",
                "-hls_playlist_type", "vod", "-hls_segment_filename", directory.appendingPathComponent("seg%d.ts").path,
                directory.appendingPathComponent("index.m3u8").path,
            ])
            try #require(made.status == 0, "ffmpeg: \(made.error)")
            // The origin's time starts now, however long the set-up took: 120 s of media then
            // move it by 120 s.
            clock.advance(by: max(0, Date().timeIntervalSince(clock.now)))
            // The playlists carry the token the master was signed with, as a signing CDN writes them.
            let token = signer.freshQuery()
            let media = try String(contentsOf: directory.appendingPathComponent("index.m3u8"), encoding: .utf8)
            var segments: [(name: String, bytes: [UInt8])] = []
            var durations: [String: Double] = [:]
            var lastDuration = 0.0
            let signedMedia =
                media.split(separator: "\n").map { line -> String in
                    if line.hasPrefix("#EXTINF:") { lastDuration = Double(line.dropFirst(8).prefix { $0 != "," }) ?? 0 }
                    guard !line.hasPrefix("#") else { return String(line) }
                    durations[String(line)] = lastDuration
                    return "\(line)?\(token)"
                }.joined(separator: "\n") + "\n"
            for name in durations.keys.sorted() {
                segments.append((name, Array(try Data(contentsOf: directory.appendingPathComponent(name)))))
            }
            #expect(segments.count >= 30)
            for (name, bytes) in segments {
                var segment = TestOrigin.Resource(body: .bytes(bytes), mimeType: "video/mp2t", etag: "\"\(name)\"")
                segment.faults.signer = signer
                let secondsPerByte = (durations[name] ?? 4) / Double(bytes.count)
                segment.faults.onBodyBytes = { clock.advance(by: Double($0) * secondsPerByte) }
                origin.serve(segment, at: "/live/\(name)")
            }
            let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=200000,RESOLUTION=96x54\nindex.m3u8?\(token)\n"
            for (path, text) in [("/live/master.m3u8", master), ("/live/index.m3u8", signedMedia)] {
                var playlist = TestOrigin.Resource(
                    body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl", etag: nil)
                playlist.faults.signer = signer
                origin.serve(playlist, at: path)
            }
            let command = try Self.signingCommand(in: directory, origin: origin)
            let log = directory.appendingPathComponent("serve.log")
            try await RunningServer.with(["--refresh-command", command], errorFile: log, origin: origin) { server in
                let url = Self.proxied(server, origin.url("/live/master.m3u8").absoluteString + "?" + token)
                let play = try await ChildProcess.run([
                    "ffmpeg", "-nostdin", "-v", "error", "-i", url, "-f", "null", "-",
                ])
                #expect(play.status == 0 && play.error.isEmpty, "\(play.error)")
                // 120 s of media, tokens of 20 s: five or six expiries, each renewed once, for
                // every segment after it (the playlists' token renewed with the segment's).
                Self.expectOneRenewalPerExpiry(signer, atLeast: 4)
                // Every segment was fetched whole with the origin's bytes: a replay asks nothing.
                origin.resetCounters()
                for (name, bytes) in segments {
                    let replay = try await ChildProcess.run([
                        "curl", "-sf", Self.proxied(server, origin.url("/live/\(name)").absoluteString + "?" + token),
                    ])
                    #expect(replay.status == 0 && Array(replay.output) == bytes, "\(name)")
                }
                #expect(segments.allSatisfy { origin.requests("/live/\($0.name)").isEmpty })
                Self.expectNoRefusalAnswered(in: log)
            }
        }
    }

    @Test func aFailingRefreshCommandGivesThePlayerTheOriginsRefusalAndSaysWhy() async throws {
        try await Self.withSigningOrigin(statesExpiry: false) { origin, clock, signer, directory in
            var episode = TestOrigin.Resource.generated(length: 200_000, seed: 166, mimeType: "audio/mpeg")
            episode.faults.signer = signer
            origin.serve(episode, at: "/ep.mp3")
            let script = directory.appendingPathComponent("broken.sh")
            try "#!/bin/sh\necho \"signing service unreachable for $1\" >&2\nexit 3\n".write(
                to: script, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
            let log = directory.appendingPathComponent("serve.log")
            try await RunningServer.with(["--refresh-command", script.path], errorFile: log, origin: origin) { server in
                let signed = origin.url("/ep.mp3").absoluteString + "?" + signer.freshQuery()
                clock.advance(by: 21)
                let answer = try await ChildProcess.run([
                    "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", Self.proxied(server, signed),
                ])
                #expect(String(decoding: answer.output, as: UTF8.self) == "403", "the origin's answer, passed on")
                let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                #expect(
                    said.contains("could not be renewed") && said.contains("exited with status 3")
                        && said.contains("signing service unreachable"), "\(said.suffix(2000))")
            }
        }
    }
}
