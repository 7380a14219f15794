// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import Logging
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOHTTP1
import Testing

/// No web page can turn the proxy against its user: a request a browser sends for a page of
/// another site is refused before the cache is looked at, with the fields browsers really send
/// (Fetch Metadata), unless the page's origin is listed with `--cors-origin` and asks in CORS
/// mode. See SECURITY.md.
@Suite(.stallLimit, .endToEnd) struct WebPageIsolationTests {
    static let listed = "https://app.example"
    static let evil = "https://evil.example"

    /// The fields a browser sends for one kind of request, as Chromium sends them.
    struct BrowserRequest: CustomStringConvertible {
        var site: String?
        var destination: String
        /// A page's `Origin`, sent in CORS mode (`<video crossorigin>`, `fetch`).
        var origin: String?

        var headers: [(String, String)] {
            // A player: no Sec-Fetch-*.
            guard let site else { return [("User-Agent", "Lavf/61.7.100"), ("Range", "bytes=0-")] }
            var fields: [(String, String)] = [
                ("Sec-Fetch-Site", site), ("Sec-Fetch-Dest", destination),
                ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0.0.0 Safari/537.36"),
            ]
            switch destination {
            case "document":
                fields += [
                    ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1"), ("Upgrade-Insecure-Requests", "1"),
                    ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
                ]
            case "image":
                fields += [
                    ("Sec-Fetch-Mode", origin == nil ? "no-cors" : "cors"),
                    ("Accept", "image/avif,image/webp,image/apng,*/*;q=0.8"),
                ]
            case "empty":
                fields += [("Sec-Fetch-Mode", "cors"), ("Accept", "*/*")]
            default:  // video, audio
                fields += [
                    ("Sec-Fetch-Mode", origin == nil ? "no-cors" : "cors"), ("Accept", "*/*"), ("Range", "bytes=0-"),
                    ("Accept-Encoding", "identity;q=1, *;q=0"),
                ]
            }
            if site != "none" { fields.append(("Referer", (origin ?? WebPageIsolationTests.evil) + "/watch")) }
            if let origin { fields.append(("Origin", origin)) }
            return fields
        }

        /// What the rules say: a page of another site is refused unless its origin is listed.
        var isServed: Bool { site != "cross-site" || origin == WebPageIsolationTests.listed }

        var description: String { "site=\(site ?? "-") dest=\(destination) origin=\(origin ?? "-")" }
    }

    static let requests: [BrowserRequest] = {
        var all = [BrowserRequest(site: nil, destination: "-", origin: nil)]
        for site in ["cross-site", "same-site", "same-origin", "none"] {
            for destination in ["video", "audio", "image", "empty", "document"] {
                for origin in [nil, listed, evil] where site != "none" || origin == nil {
                    all.append(BrowserRequest(site: site, destination: destination, origin: origin))
                }
            }
        }
        return all
    }()

    /// Every `Sec-Fetch-Site` value and destination, with no `Origin`, a listed one and another:
    /// refused (`403`, zero origin requests, a warning with the cause) or served with the
    /// origin's bytes, as the rules say; a listed origin gets its CORS fields.
    @Test func eachSiteAndDestinationIsRefusedOrServedAsTheRulesSay() async throws {
        let recorder = LogRecorder()
        try await ProxyHarness.with(configure: {
            var configuration = $0
            configuration.corsOrigins = [Self.listed]
            configuration.logger = recorder.logger()
            return configuration
        }) { h in
            let resource = TestOrigin.Resource.generated(length: 200_000, seed: 140)
            h.origin.serve(resource, at: "/hot.mp4")
            h.origin.serve(.generated(length: 200_000, seed: 141), at: "/cold.mp4")
            let warm = try await h.get(h.url("/hot.mp4"))
            #expect(warm.status == 200 && resource.firstMismatch(in: warm.body, at: 0) == nil)
            var refusals = 0
            for request in Self.requests {
                let originRequests = h.origin.requests("/hot.mp4").count + h.origin.requests("/cold.mp4").count
                let hot = try await h.get(h.url("/hot.mp4"), headers: request.headers)
                if request.isServed {
                    #expect(hot.status == 200 || hot.status == 206, "\(request): \(String(buffer: hot.body))")
                    #expect(
                        hot.body.readableBytes == 200_000 && resource.firstMismatch(in: hot.body, at: 0) == nil,
                        "\(request)")
                    let allowed = hot.headers.first(name: "access-control-allow-origin")
                    #expect(allowed == (request.origin == Self.listed ? Self.listed : nil), "\(request)")
                } else {
                    refusals += 2
                    let cold = try await h.get(h.url("/cold.mp4"), headers: request.headers)
                    for reply in [hot, cold] {
                        #expect(
                            reply.status == 403
                                && String(buffer: reply.body).contains("A page of another site asked for this"),
                            "\(request)")
                        #expect(reply.headers.first(name: "access-control-allow-origin") == nil)
                    }
                    #expect(
                        h.origin.requests("/hot.mp4").count + h.origin.requests("/cold.mp4").count == originRequests,
                        "a refusal costs no origin request: \(request)")
                }
            }
            #expect(refusals == 2 * 10, "cross-site with no origin or an unlisted one, five destinations")
            #expect(h.origin.requests("/cold.mp4").isEmpty)
            let warnings = recorder.all.filter { $0.level == .warning && $0.metadata["cause"] == "cross-site" }
            #expect(warnings.count == refusals)
            #expect(
                warnings.allSatisfy {
                    $0.metadata["referer"] == "https://evil.example" || $0.metadata["referer"] == Self.listed
                })
            // A value the proxy does not know, or two values, is not a site it serves.
            for sites in [["cross-origin"], ["same-origin", "cross-site"]] {
                let reply = try await h.get(h.url("/hot.mp4"), headers: sites.map { ("Sec-Fetch-Site", $0) })
                #expect(reply.status == 403, "\(sites)")
            }
        }
    }

    /// The same rule guards the status page, the metrics and the admin endpoints, which a page
    /// of another site could otherwise read through an `<img>`'s timing or clear with a form.
    @Test func theAdminEndpointsAndTheStatusPageFollowTheSameRule() async throws {
        try await ProxyHarness.with { h in
            h.origin.serve(.generated(length: 10_000, seed: 142), at: "/kept.mp4")
            #expect(try await h.get(h.url("/kept.mp4")).status == 200)
            let base = "http://127.0.0.1:\(h.port)"
            let crossSite = [
                ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors"), ("Sec-Fetch-Dest", "image"),
                ("Referer", "https://evil.example/"),
            ]
            for path in ["/status", "/status.json", "/_mediacache/stats", "/_mediacache/entries"] {
                #expect(try await h.get(base + path, headers: crossSite).status == 403, "\(path)")
                #expect(
                    try await h.get(base + path, headers: [("Sec-Fetch-Site", "none"), ("Sec-Fetch-Dest", "document")])
                        .status == 200, "\(path) typed by the user")
                #expect(
                    try await h.get(base + path, headers: [("Sec-Fetch-Site", "same-origin")]).status == 200,
                    "\(path) from the proxy's own page")
            }
            let clear = try await h.get(
                base + "/_mediacache/clear", method: .POST, headers: crossSite + [("X-MediaCache-Admin", "1")])
            #expect(clear.status == 403)
            #expect(h.base.store.summary().entries == 1, "nothing was cleared")
        }
    }

    /// A refused request is refused before the cache is looked at: over 200 requests of each
    /// kind, alternated, one for a cached file and one for a file never fetched (whose origin
    /// takes at least 100 ms to send it, so a refusal that reached for it would show), their
    /// medians are equal within noise, and no request reaches the origin.
    @Test func aRefusalTakesTheSameTimeWhetherOrNotTheFileIsCached() async throws {
        try await ProxyHarness.with { h in
            let cached = TestOrigin.Resource.generated(length: 64 << 10, seed: 143)
            h.origin.serve(cached, at: "/played.mp4")
            var slow = TestOrigin.Resource.generated(length: 64 << 10, seed: 144)
            slow.faults.bytesPerSecond = 640 << 10
            h.origin.serve(slow, at: "/never.mp4")
            #expect(try await h.get(h.url("/played.mp4")).status == 200)
            let refusedFields = BrowserRequest(site: "cross-site", destination: "video", origin: nil).headers
            var times: [String: [Duration]] = ["/played.mp4": [], "/never.mp4": []]
            for round in 0..<400 {
                let path = round % 2 == 0 ? "/played.mp4" : "/never.mp4"
                let started = ContinuousClock.now
                let reply = try await h.get(h.url(path), headers: refusedFields)
                times[path, default: []].append(ContinuousClock.now - started)
                #expect(reply.status == 403)
            }
            func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
            let (hit, miss) = (median(times["/played.mp4"] ?? []), median(times["/never.mp4"] ?? []))
            print("refused, cached: median \(hit); refused, never fetched: median \(miss)")
            #expect(h.origin.requests("/played.mp4").count == 1 && h.origin.requests("/never.mp4").isEmpty)
            // The origin would take 100 ms for the file never fetched; half of that is far
            // beyond any noise between two interleaved medians of sub-millisecond answers.
            #expect(abs((hit - miss) / .milliseconds(1)) < 50, "cached \(hit) vs never fetched \(miss)")
        }
    }

    // MARK: In a browser

    static let chromium = ["chromium", "chromium-browser"].first(where: ChildProcess.toolExists)

    /// One second of a 440 Hz tone, 8 kHz mono 16-bit PCM, as a WAV file: media every
    /// Chromium build decodes, whose decoded duration proves its header came through whole.
    static let tone: [UInt8] = {
        let samples = (0..<8000).map { Int16(8000 * sin(Double($0) * 2 * .pi * 440 / 8000)) }
        func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        let data = samples.flatMap { le($0) }
        return Array("RIFF".utf8) + le(UInt32(36 + data.count)) + Array("WAVEfmt ".utf8) + le(UInt32(16))
            + le(UInt16(1)) + le(UInt16(1))
            + le(UInt32(8000)) + le(UInt32(16000)) + le(UInt16(2)) + le(UInt16(16)) + Array("data".utf8)
            + le(UInt32(data.count)) + data
    }()

    /// A page that puts `target` in a `<video>` (with `crossorigin` if asked) and reads it with
    /// `fetch` (what hls.js, dash.js and Shaka do), whole and as a range with a field that
    /// needs a preflight, then reports the outcomes to its own site at `report`: the decoded
    /// duration or the media error, the body's SHA-256, the range's status and length, or the errors.
    static func page(target: String, crossOrigin: Bool, report: String) -> String {
        """
        <!doctype html><html><head><title>player</title></head><body><script>
        const target = \(String(reflecting: target));
        const results = {};
        function done(name, value) {
          results[name] = value;
          if ("video" in results && "fetch" in results && "range" in results) {
            new Image().src = "\(report)?video=" + encodeURIComponent(results.video) + "&fetch=" + encodeURIComponent(results.fetch)
              + "&range=" + encodeURIComponent(results.range);
          }
        }
        const video = document.createElement("video");
        \(crossOrigin ? "video.crossOrigin = \"anonymous\";" : "")
        video.preload = "auto";
        video.muted = true;
        video.onloadedmetadata = () => done("video", "duration " + video.duration.toFixed(2));
        video.onerror = () => done("video", "error " + (video.error ? video.error.code : "?"));
        video.src = target;
        document.body.appendChild(video);
        fetch(target)
          .then(response => response.arrayBuffer())
          .then(body => crypto.subtle.digest("SHA-256", body))
          .then(digest => done("fetch", "sha256 " + Array.from(new Uint8Array(digest)).map(b => b.toString(16).padStart(2, "0")).join("")))
          .catch(error => done("fetch", "error " + error.name));
        // A range with a field of the player's own, as script players send: a preflight first.
        // What the cache did (Cache-Status) is readable too, to leave hits out of an estimate.
        fetch(target, { headers: { "Range": "bytes=100-199", "X-Player": "test" } })
          .then(response => response.arrayBuffer().then(body => done("range", response.status + " " + body.byteLength
            + " " + (response.headers.get("Cache-Status") || "hidden").split(";")[0])))
          .catch(error => done("range", "error " + error.name));
        </script></body></html>
        """
    }

    /// Opens `url` in headless Chromium and waits for the page's report at `report` on `pages`;
    /// returns what it reported.
    static func visit(_ url: String, report: String, on pages: TestOrigin, profile: URL) async throws -> (
        video: String, fetch: String, range: String
    ) {
        let items = try await reported(url, report: report, on: pages, profile: profile)
        return (items["video"] ?? "-", items["fetch"] ?? "-", items["range"] ?? "-")
    }

    /// Opens `url` in headless Chromium and waits for the page's report at `report` on `pages`;
    /// returns the items of the report's query.
    static func reported(_ url: String, report: String, on pages: TestOrigin, profile: URL) async throws
        -> [String: String]
    {
        let browser = try #require(chromium)
        let null = try #require(FileHandle(forWritingAtPath: "/dev/null"))
        defer { try? null.close() }
        let process = try SpawnedProcess(
            browser,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--mute-audio",
                "--autoplay-policy=no-user-gesture-required", "--user-data-dir=\(profile.path)", url,
            ],
            searchingPath: true, standardOutput: null.fileDescriptor, standardError: null.fileDescriptor)
        return try await runThenTearDown(
            process,
            { _ in
                try await waitUntil { !pages.requests(report).isEmpty }
                let items = URLComponents(string: "/?" + (pages.requests(report).first?.query ?? ""))?.queryItems ?? []
                return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
            }, tearDown: { await $0.stop() })
    }

    /// In a real browser: a page served from `http://localhost:A` is of another site than the
    /// proxy on `http://127.0.0.1:B`; its `<video>` and its `fetch` are refused and cost no
    /// origin request. A page on another port of 127.0.0.1 is of the same site: its `<video>`
    /// plays (but it cannot read the bytes from script: no CORS). With the localhost page's
    /// origin listed, its script reads the origin's exact bytes and its `<video crossorigin>`
    /// plays; a plain `<video>` (no `Origin` sent) is still refused. The proxy's status page,
    /// opened by the user, is unaffected.
    @Test(.enabled(if: chromium != nil, "chromium is installed by .ci/run"))
    func inChromiumAPageOfAnotherSiteIsRefusedAndAListedOnePlays() async throws {
        let pages = try await TestOrigin.start()
        defer { Task { try? await pages.shutdown() } }
        let digest = "sha256 " + SHA256.hash(data: Self.tone).map { String(format: "%02x", $0) }.joined()
        let refused = ("error 4", "error TypeError", "error TypeError")
        let plays = "duration 1.00"
        var visits = 0
        for listed in [false, true] {
            let pageOrigin = "http://localhost:\(pages.port)"
            try await ProxyHarness.with(configure: {
                var configuration = $0
                if listed { configuration.corsOrigins = [pageOrigin] }
                return configuration
            }) { h in
                h.origin.serve(TestOrigin.Resource(body: .bytes(Self.tone), mimeType: "audio/wav"), at: "/tone.wav")
                let target = h.url("/tone.wav")
                let cases:
                    [(host: String, crossOrigin: Bool, expected: (video: String, fetch: String, range: String))] =
                        listed
                        ? [
                            ("localhost", false, ("error 4", digest, "206 100 MediaCache")),
                            ("localhost", true, (plays, digest, "206 100 MediaCache")),
                        ]
                        : [
                            ("localhost", false, refused), ("localhost", true, refused),
                            ("127.0.0.1", false, (plays, "error TypeError", "error TypeError")),
                        ]
                for (host, crossOrigin, expected) in cases {
                    visits += 1
                    let before = h.origin.requests("/tone.wav").count
                    pages.serve(
                        TestOrigin.Resource(
                            body: .bytes(
                                Array(
                                    Self.page(target: target, crossOrigin: crossOrigin, report: "/report-\(visits)")
                                        .utf8)),
                            mimeType: "text/html"), at: "/page-\(visits).html")
                    pages.serve(TestOrigin.Resource(body: .bytes([]), mimeType: "image/gif"), at: "/report-\(visits)")
                    let seen = try await withTemporaryDirectory { profile in
                        try await Self.visit(
                            "http://\(host):\(pages.port)/page-\(visits).html", report: "/report-\(visits)", on: pages,
                            profile: profile)
                    }
                    let label = "listed \(listed), page on \(host), crossorigin \(crossOrigin)"
                    #expect(seen == expected, "\(label): \(seen)")
                    if expected == refused {
                        #expect(
                            h.origin.requests("/tone.wav").count == before,
                            "\(label): a refused page costs no origin request")
                    }
                }
                // The user opens the status page: typed, so not refused.
                let status = try await withTemporaryDirectory { profile in
                    try await ChildProcess.run([
                        try #require(Self.chromium), "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage",
                        "--user-data-dir=\(profile.path)", "--dump-dom", "http://127.0.0.1:\(h.port)/status",
                    ])
                }
                #expect(
                    String(decoding: status.output, as: UTF8.self).contains("id=\"hit-ratio\""),
                    "\(status.error.suffix(500))")
            }
        }
    }
}
