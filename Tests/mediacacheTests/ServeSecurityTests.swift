// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// `mediacache serve` as SECURITY.md describes it: a listener beyond loopback needs a token,
/// signed URLs leave no secret in the log at the default level, refusals are counted.
@Suite(.stallLimit, .endToEnd) struct ServeSecurityTests {
    /// A user without privileges gets every connection served. A socket option once set at the
    /// wrong level (`SO_DEBUG` in place of `TCP_NODELAY`, the same number) needs `CAP_NET_ADMIN`
    /// on Linux: run by anyone but root, the server closed every connection it accepted, while
    /// every test (run as root) passed. As root, the server is started as `nobody`, with one
    /// capability only: to pass through folders (the build folder may be closed to others; a
    /// copy of the executable, written while other tests start processes, could not be run at
    /// once: "text file busy").
    @Test(
        .enabled(
            if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "setpriv (util-linux) runs it as nobody"))
    func anUnprivilegedUserIsServed() async throws {
        let launcher =
            getuid() == 0
            ? [
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+dac_read_search",
                "--ambient-caps=+dac_read_search",
            ]
            : []
        try await RunningServer.with(launcher: launcher) { server in
            let song = server.origin.url("/a/song.mp3").absoluteString
            var request = HTTPClientRequest(
                url: server.info.baseURL + "/?url="
                    + (song.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
            request.headers.add(name: "Range", value: "bytes=1000-60999")
            for _ in 0..<2 {  // from the origin, then from the cache
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 1 << 20)
                #expect(response.status.code == 206 && body.readableBytes == 60_000)
                #expect(DeterministicContent(seed: 1).firstMismatch(in: body, at: 1000) == nil)
            }
        }
    }

    /// Listening for other machines without `--token` would make the proxy an open door to
    /// the user's network for anyone on it: `serve` refuses to start, saying why.
    @Test func allowRemoteWithoutATokenDoesNotStart() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            for host in ["0.0.0.0", "127.0.0.1"] {
                let result = try await ChildProcess.run([
                    executable.path, "serve", "--port", "0", "--host", host, "--allow-remote",
                    "--cache-dir", directory.appendingPathComponent("cache").path,
                ])
                #expect(result.status != 0, "serve --allow-remote without a token must not start on \(host)")
                #expect(
                    result.error.contains("--allow-remote needs --token") && result.error.contains("fetch any address"),
                    "\(result.error)")
            }
            #expect(
                !FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache").path),
                "nothing was created")
        }
    }

    /// With a token (here from `MEDIACACHE_TOKEN`, which other users cannot read as they can
    /// a command line), on every address: a request without it, or with a wrong one, gets
    /// `403` and costs no origin request; with it the file comes, byte for byte. The start-up
    /// line does not print the token, and the server file that holds it is readable by its
    /// owner only.
    @Test func allowRemoteWithATokenRefusesRequestsWithoutIt() async throws {
        try await RunningServer.with(
            ["--host", "0.0.0.0", "--allow-remote"], environment: ["MEDIACACHE_TOKEN=t0k3n-for-the-lan"],
            readyLinePrefix: "Give a player:"
        ) { server in
            let (origin, info) = (server.origin, server.info)
            #expect(
                server.line.hasSuffix("&token=<the token>"),
                "the start-up line does not print the token: \(server.line)")
            var file = stat()
            #expect(stat(server.folder + "/server.json", &file) == 0 && file.st_mode & 0o777 == 0o600)
            let base = "http://127.0.0.1:\(info.port)"
            let song = origin.url("/a/song.mp3")
            for token in [nil, "wrong", "t0k3n-for-the-la", "t0k3n-for-the-lan!"] {
                let reply = try await MetricsAndStatusTests.get(base + ProxyURL.path(for: song, token: token))
                #expect(
                    reply.status == 403 && reply.body.contains("Missing or wrong access token"),
                    "token \(token ?? "none")")
            }
            #expect(origin.requests("/a/song.mp3").isEmpty)
            let request = HTTPClientRequest(url: base + ProxyURL.path(for: song, token: "t0k3n-for-the-lan"))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 20)
            #expect(
                response.status.code == 200 && DeterministicContent(seed: 1).firstMismatch(in: body, at: 0) == nil
                    && body.readableBytes == 300_000)
            // Several people's devices share this store: it caches as a shared cache, so an
            // answer marked private is never kept.
            var personal = TestOrigin.Resource.generated(length: 20_000, seed: 2, mimeType: "audio/mpeg")
            personal.cacheControl = "private, max-age=600"
            origin.serve(personal, at: "/a/mine.mp3")
            for _ in 0..<2 {
                let mine = try await HTTPClient.shared.execute(
                    HTTPClientRequest(
                        url: base + ProxyURL.path(for: origin.url("/a/mine.mp3"), token: "t0k3n-for-the-lan")),
                    timeout: .seconds(10))
                let bytes = try await mine.body.collect(upTo: 1 << 20)
                #expect(
                    mine.status.code == 200 && personal.firstMismatch(in: bytes, at: 0) == nil
                        && bytes.readableBytes == 20_000)
            }
            #expect(origin.requests("/a/mine.mp3").count == 2, "--allow-remote implies --shared-cache")
            // Nor are cookies kept: one person's signed cookie must not open a stream for another.
            var entry = TestOrigin.Resource.generated(length: 100, seed: 3, mimeType: "audio/mpeg")
            entry.extraHeaders = [(name: "Set-Cookie", value: "sig=one-persons; Path=/")]
            origin.serve(entry, at: "/c/entry.mp3")
            var next = TestOrigin.Resource.generated(length: 100, seed: 4, mimeType: "audio/mpeg")
            next.faults.requiredCookie = (name: "sig", value: "one-persons")
            origin.serve(next, at: "/c/next.mp3")
            for (path, status) in [("/c/entry.mp3", 200), ("/c/next.mp3", 403)] {
                let reply = try await MetricsAndStatusTests.get(
                    base + ProxyURL.path(for: origin.url(path), token: "t0k3n-for-the-lan"))
                #expect(reply.status == status, "\(path)")
            }
            #expect(origin.requests("/c/next.mp3").allSatisfy { $0.header("cookie") == nil })
        }
    }

    /// A run with signed URLs — a hit, a miss, an origin 404, a redirect, a lying origin, an
    /// HLS playlist with signed segments, a refused page with a secret in its Referer, a
    /// user and password in the URL — leaves no query secret in the log at the default level;
    /// the lines are there, with the names and `REDACTED`. At `--log-level debug` the whole
    /// URLs are logged. The refusal is counted in `/metrics`.
    @Test func theLogOfARunWithSignedURLsHoldsNoSecret() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let film = TestOrigin.Resource.generated(length: 200_000, seed: 150)
        origin.serve(film, at: "/signed/film.mp4")
        var gone = TestOrigin.Resource.generated(length: 10, seed: 151)
        gone.faults.status = 404
        origin.serve(gone, at: "/gone.mp4")
        var moved = TestOrigin.Resource.generated(length: 10, seed: 152)
        moved.faults.redirect = (
            302, "/signed/film.mp4?Expires=1798761600&Signature=sEcReT-lOcAtIoN&Key-Pair-Id=APKAsecret"
        )
        origin.serve(moved, at: "/moved.mp4")
        var liar = TestOrigin.Resource.generated(length: 1000, seed: 153)
        liar.faults.rawResponse = { _ in
            Array(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 500-549/1000\r\nContent-Length: 50\r\n\r\n".utf8)
                + Array(repeating: 7, count: 50)
        }
        origin.serve(liar, at: "/liar.mp4")
        let playlist =
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nseg0.ts?hdnts=exp=1798761600~hmac=sEcReT-sEgMeNt\n#EXT-X-ENDLIST\n"
        origin.serve(
            TestOrigin.Resource(body: .bytes(Array(playlist.utf8)), mimeType: "application/vnd.apple.mpegurl"),
            at: "/hls/index.m3u8")
        origin.serve(.generated(length: 5000, seed: 154, mimeType: "video/mp2t"), at: "/hls/seg0.ts")
        let secrets = [
            "sEcReT-fIlM", "sEcReT-gOnE", "sEcReT-mOvEd", "sEcReT-lOcAtIoN", "APKAsecret", "sEcReT-lIaR",
            "sEcReT-sEgMeNt", "sEcReT-pAsSwOrD",
            "sEcReT-pLaYlIsT", "sEcReT-rEfErEr",
        ]
        let signed =
            origin.url("/signed/film.mp4").absoluteString
            + "?Expires=1798761600&Signature=sEcReT-fIlM&Key-Pair-Id=APKAsecret"
        let withPassword = "http://viewer:sEcReT-pAsSwOrD@127.0.0.1:\(origin.port)/signed/film.mp4"
        let requests: [(url: String, headers: [(String, String)], status: Int)] = [
            (signed, [], 200), (signed, [("Range", "bytes=0-999")], 206),
            (origin.url("/gone.mp4").absoluteString + "?token=sEcReT-gOnE", [], 404),
            (origin.url("/moved.mp4").absoluteString + "?sig=sEcReT-mOvEd", [], 200),
            (origin.url("/liar.mp4").absoluteString + "?Signature=sEcReT-lIaR", [("Range", "bytes=0-99")], 502),
            (withPassword, [("Range", "bytes=0-99")], 206),
            (
                signed,
                [
                    ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors"), ("Sec-Fetch-Dest", "video"),
                    ("Referer", "https://evil.example/watch?session=sEcReT-rEfErEr"),
                ], 403
            ),
        ]
        for level in ["info", "debug"] {
            try await withTemporaryDirectory { directory in
                let log = directory.appendingPathComponent("serve.log")
                try await RunningServer.with(["--log-level", level], errorFile: log, origin: origin) { server in
                    try await Self.play(requests, through: server.info.baseURL, film: film, origin: origin)
                }
                let text = try String(contentsOf: log, encoding: .utf8)
                let leaked = secrets.filter(text.contains)
                if level == "info" {
                    #expect(leaked.isEmpty, "secrets in the log: \(leaked)\n\(text)")
                    for line in [
                        "Signature=REDACTED&Key-Pair-Id=REDACTED", "token=REDACTED", "sig=REDACTED", "hdnts=REDACTED",
                        "http://REDACTED@127.0.0.1",
                        "Refused a request", "cause=cross-site", "referer=https://evil.example",
                        "The origin answered with an error",
                        "Rejected an origin answer",
                    ] {
                        #expect(text.contains(line), "\(line) in:\n\(text)")
                    }
                } else {
                    #expect(
                        leaked.contains("sEcReT-fIlM") && leaked.contains("sEcReT-gOnE"),
                        "at debug the whole URLs are logged:\n\(text)")
                    #expect(!leaked.contains("sEcReT-rEfErEr"), "a refused page's Referer is logged as its origin only")
                }
            }
        }
    }

    /// Sends `requests` through the proxy at `base`, checking statuses and the film's bytes,
    /// then the HLS playlist and the segment it names, then the refusal count in `/metrics`.
    static func play(
        _ requests: [(url: String, headers: [(String, String)], status: Int)], through base: String,
        film: TestOrigin.Resource,
        origin: TestOrigin
    ) async throws {
        for (url, headers, status) in requests {
            var request = HTTPClientRequest(url: base + "/?url=" + HLSPlaylist.percentEncoded(url))
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 20)
            #expect(Int(response.status.code) == status, "\(url): \(String(buffer: body))")
            if status == 200, url.contains("/film.mp4") {
                #expect(film.firstMismatch(in: body, at: 0) == nil && body.readableBytes == 200_000)
            }
        }
        // The playlist, then the segment it names, through the proxy.
        let listed = try await MetricsAndStatusTests.get(
            base + "/?url="
                + HLSPlaylist.percentEncoded(origin.url("/hls/index.m3u8").absoluteString + "?token=sEcReT-pLaYlIsT"))
        let segment = try #require(listed.body.split(separator: "\n").first { $0.hasPrefix("http://") })
        let segmentReply = try await MetricsAndStatusTests.get(String(segment))
        #expect(listed.status == 200 && segmentReply.status == 200 && segmentReply.count == 5000)
        let metrics = try await MetricsAndStatusTests.get(base + "/metrics")
        #expect(
            MetricsAndStatusTests.sample(#"mediacache_refused_requests_total{cause="cross-site"}"#, in: metrics.body)
                == 1, "\(metrics.body)")
    }
}
