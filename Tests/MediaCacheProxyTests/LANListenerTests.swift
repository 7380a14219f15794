// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheProxy

/// `serve --lan`: the proxy also listens on a LAN address (127.0.0.3 here, standing for the
/// machine's Wi-Fi address) for the network's devices. A receiver page served from another
/// address (127.0.0.2, standing for the TV) reads an HLS and a DASH asset through capability
/// URLs in CORS mode, as a Cast receiver's player does, and plays an MP4 in a plain `<video>`,
/// all pinned and the origin stopped; without a credential minted for what it names, or for the
/// admin paths, the LAN address refuses; loopback behaves as before.
@Suite(.stallLimit, .endToEnd, .enabled(if: WebPageIsolationTests.chromium != nil && toolExists("ffmpeg")))
struct LANListenerTests {
    static let token = "lan-t0ken"
    static let capabilities = LANCapabilities.made()

    /// FNV-1a (32 bits) and the length, as the page computes them (`crypto.subtle` needs a
    /// secure context, which a LAN page over http is not).
    static func fingerprint(_ bytes: [UInt8]) -> String {
        var hash: UInt32 = 0x811c_9dc5
        for byte in bytes { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
        return String(hash, radix: 16) + ":\(bytes.count)"
    }

    /// Makes the test streams (`NginxOriginTests.makeStreams`) in `directory` and serves the
    /// folders `kinds` on `origin`, each file at `/<kind>/<name>` with its media type. Returns
    /// each path's bytes.
    static func serveStreams(_ kinds: [String], in directory: URL, on origin: TestOrigin) async throws -> [String:
        [UInt8]]
    {
        try await NginxOriginTests.makeStreams(in: directory)
        var files: [String: [UInt8]] = [:]
        for kind in kinds {
            let folder = directory.appendingPathComponent(kind)
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
                let bytes = Array(try Data(contentsOf: folder.appendingPathComponent(name)))
                files["/\(kind)/\(name)"] = bytes
                let type =
                    name.hasSuffix(".mpd")
                    ? "application/dash+xml"
                    : name.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : "application/octet-stream"
                origin.serve(TestOrigin.Resource(body: .bytes(bytes), mimeType: type), at: "/\(kind)/\(name)")
            }
        }
        return files
    }

    static func page(lan: String, hls: String, dash: String, mp4: String) -> String {
        """
        <!doctype html><html><body><video id="v" muted></video><script>
        const lan = "\(lan)";
        function fnv(buffer) {
          let h = 0x811c9dc5; const b = new Uint8Array(buffer);
          for (let i = 0; i < b.length; i++) { h ^= b[i]; h = Math.imul(h, 0x01000193) >>> 0; }
          return h.toString(16) + ":" + b.length;
        }
        const results = {};
        function done(name, value) {
          results[name] = value;
          if (Object.keys(results).length == 3) fetch("/report?" + new URLSearchParams(results).toString().replaceAll("+", "%20"));
        }
        const uris = text => text.split("\\n").filter(l => l && !l.startsWith("#"));
        async function hls(url) {
          const master = await (await fetch(url)).text();
          const variant = new URL(uris(master)[0], url);
          const segments = uris(await (await fetch(variant)).text()).map(u => new URL(u, variant));
          const everyURI = [variant, ...segments].every(u => u.origin == lan);
          return (everyURI ? "lan " : "elsewhere ") + fnv(await (await fetch(segments[0])).arrayBuffer());
        }
        async function dash(url) {
          const mpd = await (await fetch(url)).text();
          const base = new URL(/<BaseURL>([^<]*)<\\/BaseURL>/.exec(mpd)[1], url);
          const init = new URL(/initialization="([^"]*)"/.exec(mpd)[1].replace("$RepresentationID$", "0"), base);
          return (base.origin == lan && init.origin == lan ? "lan " : "elsewhere ")
            + fnv(await (await fetch(init)).arrayBuffer());
        }
        hls("\(hls)").then(r => done("hls", r), e => done("hls", "error " + e));
        dash("\(dash)").then(r => done("dash", r), e => done("dash", "error " + e));
        const v = document.getElementById("v");
        v.onloadedmetadata = () => done("video", "duration " + v.duration.toFixed(2));
        v.onerror = () => done("video", "error " + (v.error && v.error.code));
        v.src = "\(mp4)";
        </script></body></html>
        """
    }

    @Test func aReceiverPageOnAnotherAddressPlaysPinnedAssetsThroughCapabilityURLs() async throws {
        let pages = try await TestOrigin.start(host: "127.0.0.2")
        defer { Task { try? await pages.shutdown() } }
        let pageOrigin = "http://127.0.0.2:\(pages.port)"
        try await ProxyHarness.with(
            token: Self.token,
            configure: {
                var configuration = $0
                configuration.lanAddress = "127.0.0.3"
                configuration.lanCapabilities = Self.capabilities
                configuration.corsOrigins = [pageOrigin]
                return configuration
            }
        ) { proxy in
            try await withTemporaryDirectory { directory in
                let origin = proxy.origin
                let files = try await Self.serveStreams(["hls", "dash"], in: directory, on: origin)
                let masterText = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=500000,RESOLUTION=320x180\nindex.m3u8\n"
                origin.serve(
                    TestOrigin.Resource(
                        body: .bytes(Array(masterText.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                    at: "/hls/master.m3u8")
                let clip = directory.appendingPathComponent("clip.mp4")
                let made = try await runTool([
                    "ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=duration=2:size=160x90:rate=10", "-f",
                    "lavfi", "-i", "sine=duration=2", "-shortest", "-c:v", "libvpx-vp9", "-b:v", "100k", "-c:a",
                    "libopus", "-movflags", "+faststart", clip.path,
                ])
                try #require(made.status == 0, "\(made.error)")
                origin.serve(
                    TestOrigin.Resource(body: .bytes(Array(try Data(contentsOf: clip))), mimeType: "video/mp4"),
                    at: "/clip.mp4")
                // Pinned, then the origin stops.
                let queue = try DownloadQueue(reader: proxy.base.reader)
                queue.start()
                for path in ["/hls/master.m3u8", "/dash/manifest.mpd", "/clip.mp4"] {
                    let job = try await queue.pin(origin.url(path))
                    try await waitUntil { queue.job(matching: job.id)?.state == .completed }
                }
                await queue.shutDown()
                try await origin.shutdown()

                let lan = "http://127.0.0.3:\(proxy.port)"
                func capability(_ path: String) -> String {
                    lan + Self.capabilities.pathForm(for: origin.url(path))
                }
                let html = Self.page(
                    lan: lan, hls: capability("/hls/master.m3u8"), dash: capability("/dash/manifest.mpd"),
                    mp4: capability("/clip.mp4"))
                pages.serve(TestOrigin.Resource(body: .bytes(Array(html.utf8)), mimeType: "text/html"), at: "/tv.html")
                pages.serve(TestOrigin.Resource(body: .bytes([]), mimeType: "text/plain"), at: "/report")
                let report = try await withTemporaryDirectory { profile in
                    try await WebPageIsolationTests.reported(
                        pageOrigin + "/tv.html", report: "/report", on: pages, profile: profile)
                }
                #expect(report["hls"] == "lan " + Self.fingerprint(files["/hls/seg0.ts"] ?? []), "\(report)")
                #expect(report["dash"] == "lan " + Self.fingerprint(files["/dash/init-stream0.m4s"] ?? []), "\(report)")
                #expect(report["video"] == "duration 2.00", "\(report)")

                // The LAN address: no credential, the server's token, a header token, the admin
                // paths: refused.
                let master = origin.url("/hls/master.m3u8")
                let token = [("X-MediaCache-Token", Self.token)]
                for (url, headers) in [
                    (lan + ProxyURL.path(for: master, token: nil), []),
                    (lan + ProxyURL.pathForm(for: master, token: nil), []),
                    (lan + ProxyURL.path(for: master, token: Self.token), []),
                    (lan + ProxyURL.pathForm(for: master, token: Self.token), []),
                    (lan + ProxyURL.path(for: master, token: nil), token),
                    (lan + "/status?token=\(Self.token)", []), (lan + "/metrics?token=\(Self.token)", []),
                    (lan + "/_mediacache/entries?token=\(Self.token)", token),
                ] {
                    #expect(try await proxy.get(url, headers: headers).status == 403, "\(url)")
                }
                #expect(try await proxy.get(lan + Self.capabilities.pathForm(for: master)).status == 200)
                // Loopback as before: the header token and the status page are fine there.
                let loopback = "http://127.0.0.1:\(proxy.port)"
                #expect(
                    try await proxy.get(loopback + ProxyURL.path(for: master, token: nil), headers: token).status == 200
                )
                #expect(try await proxy.get(loopback + "/status?token=\(Self.token)").status == 200)
            }
        }
    }
}
