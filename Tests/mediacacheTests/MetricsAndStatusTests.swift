// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// `mediacache serve`'s `/metrics` (read by Prometheus's own parser, `promtool check metrics`,
/// with values that match what the test did) and `/status` (loaded in headless Chromium,
/// its DOM checked).
@Suite(.stallLimit, .endToEnd) struct MetricsAndStatusTests {
    static let hasPromtool = ChildProcess.toolExists("promtool")
    static let chromium = ["chromium", "chromium-browser"].first(where: ChildProcess.toolExists)

    /// A server on a fresh folder, with the test origin's two files, after: a whole read
    /// (miss), the same again (hit), a range of the other file (miss), and a 404 (error).
    static func withServedRequests(token: String? = nil, _ body: (ServerInfo, TestOrigin) async throws -> Void)
        async throws
    {
        try await RunningServer.with(token.map { ["--token", $0] } ?? []) { server in
            let (info, origin) = (server.info, server.origin)
            let plays: [(String, (String, String)?, Int)] = [
                ("/a/song.mp3", nil, 200), ("/a/song.mp3", nil, 200), ("/b/film.mp4", ("Range", "bytes=0-99999"), 206),
                ("/missing.mp3", nil, 404),
            ]
            for (path, header, status) in plays {
                var request = HTTPClientRequest(url: info.baseURL + ProxyURL.path(for: origin.url(path), token: token))
                if let (name, value) = header { request.headers.add(name: name, value: value) }
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                _ = try await response.body.collect(upTo: 1 << 20)
                #expect(Int(response.status.code) == status, "\(path)")
            }
            try await body(info, origin)
        }
    }

    static func get(_ url: String) async throws -> (status: Int, body: String, count: Int) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 4 << 20)
        return (Int(response.status.code), String(buffer: body), body.readableBytes)
    }

    /// The value of the sample `series` (name and labels as printed) in a text export.
    static func sample(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap {
            Double($0.split(separator: " ").last ?? "")
        }
    }

    @Test(.enabled(if: hasPromtool, "promtool (Debian prometheus) is installed by .ci/run"))
    func metricsParseWithPromtoolAndCountWhatHappened() async throws {
        try await Self.withServedRequests { info, _ in
            let metrics = try await Self.get(info.baseURL + "/metrics")
            #expect(metrics.status == 200)
            try await withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("metrics.txt")
                try metrics.body.write(to: file, atomically: true, encoding: .utf8)
                let check = try await ChildProcess.run(["sh", "-c", "promtool check metrics < '\(file.path)'"])
                #expect(check.status == 0, "promtool: \(String(decoding: check.output, as: UTF8.self)) \(check.error)")
            }
            let text = metrics.body
            let expected: [(String, Double)] = [
                (#"mediacache_requests_total{result="miss"}"#, 2), (#"mediacache_requests_total{result="hit"}"#, 1),
                (#"mediacache_requests_total{result="error"}"#, 1),
                (#"mediacache_requests_total{result="partial"}"#, 0),
                (#"mediacache_served_bytes_total{source="cache"}"#, 300_000),
                (#"mediacache_served_bytes_total{source="origin"}"#, 400_000),
                ("mediacache_origin_bytes_total", 400_000), ("mediacache_cache_entries", 2),
                ("mediacache_cache_size_bytes", 400_000),
                ("mediacache_cache_limit_bytes", 1_073_741_824), ("mediacache_downloads_in_flight", 0),
                ("mediacache_request_duration_seconds_count", 4),
            ]
            for (series, value) in expected {
                #expect(Self.sample(series, in: text) == value, "\(series) in:\n\(text)")
            }
            // One origin request per file, and the 404 (at least one: the 404 may be asked again).
            #expect((Self.sample("mediacache_origin_requests_total", in: text) ?? 0) >= 3)
            #expect(
                text.contains("# TYPE mediacache_request_duration_seconds histogram") && !text.contains("127.0.0.1"),
                "no URL is a label")
            #expect(
                MetricsHelp.texts.keys.allSatisfy { text.contains("# HELP \($0) ") }, "every metric has its help line")
        }
    }

    @Test func theStatusEndpointsNeedTheTokenAndNeverProxy() async throws {
        try await Self.withServedRequests(token: "s3cret") { info, origin in
            #expect(try await Self.get(info.baseURL + "/status").status == 403)
            #expect(try await Self.get(info.baseURL + "/metrics").status == 403)
            let json = try await Self.get(info.baseURL + "/status.json?token=s3cret")
            let report = try CacheCommandTests.decoder.decode(StatusReport.self, from: Data(json.body.utf8))
            #expect(report.store.entries == 2 && report.proxy.recent.map(\.result) == ["miss", "hit", "miss", "error"])
            #expect(
                Set(report.entries.compactMap(\.url)) == [
                    origin.url("/a/song.mp3").absoluteString, origin.url("/b/film.mp4").absoluteString,
                ])
            // A status path with url= is a proxy request like any other, not the page.
            let proxied = try await Self.get(
                info.baseURL + "/status?url=" + HLSPlaylist.percentEncoded(origin.url("/a/song.mp3").absoluteString)
                    + "&token=s3cret")
            #expect(proxied.status == 200 && proxied.count == 300_000)
        }
    }

    @Test(.enabled(if: chromium != nil, "chromium is installed by .ci/run"))
    func theStatusPageLoadsInChromium() async throws {
        try await Self.withServedRequests { info, origin in
            try await withTemporaryDirectory { directory in
                let browser = try #require(Self.chromium)
                let flags = [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--user-data-dir=\(directory.appendingPathComponent("profile").path)",
                ]
                let dom = try await ChildProcess.run([browser] + flags + ["--dump-dom", info.baseURL + "/status"])
                let html = String(decoding: dom.output, as: UTF8.self)
                #expect(dom.status == 0, "\(dom.error)")
                // 300,000 of 700,000 bytes came from the cache: 43 %.
                #expect(html.contains(#"<div class="card" id="hit-ratio"><b>43%</b>"#), "\(html.prefix(2000))")
                // Over the cache's life too, and a day's bar of the chart.
                #expect(html.contains(#"<div class="card" id="lifetime"><b>293.0 KiB</b>"#), "\(html.prefix(3000))")
                #expect(html.contains(#"<svg id="hit-chart""#) && html.contains("<rect"), "the hit ratio by day")
                #expect(
                    html.contains(origin.url("/a/song.mp3").absoluteString)
                        && html.contains(origin.url("/b/film.mp4").absoluteString))
                #expect(
                    html.contains("<b>hit</b> 1") && html.contains("<b>miss</b> 2") && html.contains("<b>error</b> 1"))
                #expect(
                    html.contains("████████████████████████████████") && html.contains("<b>5%</b> of 1.9 MiB"),
                    "the coverage bars")
                let shot = directory.appendingPathComponent("status.png")
                let screenshot = try await ChildProcess.run(
                    [browser] + flags + [
                        "--window-size=412,915", "--screenshot=\(shot.path)", info.baseURL + "/status",
                    ])
                let png = try Data(contentsOf: shot)
                #expect(
                    screenshot.status == 0 && png.count > 10_000 && png.starts(with: [0x89, 0x50, 0x4E, 0x47]),
                    "\(screenshot.error)")
                if let keep = ProcessInfo.processInfo.environment["MEDIACACHE_STATUS_SCREENSHOT"] {
                    try png.write(to: URL(fileURLWithPath: keep))
                }
            }
        }
    }
}
