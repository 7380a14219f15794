// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

extension DASHProxyTests {
    /// A dynamic MPD whose segments advance at the origin advances through the proxy once
    /// its `minimumUpdatePeriod` has passed, though the origin called it fresh for a minute;
    /// a static one with the same headers is served from the cache. A templated segment the
    /// origin does not have yet (404) is asked for again, never remembered.
    @Test func aLiveManifestAdvancesThroughTheProxy() async throws {
        let clock = ManualClock()
        var store = CacheStore.Configuration()
        store.clock = clock
        try await ProxyHarness.with(store: store) { h in
            h.origin.useClock(clock)
            func manifest(start: Int, live: Bool) -> TestOrigin.Resource {
                let text = """
                    <?xml version="1.0"?>
                    <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="\(live ? "dynamic" : "static")" minimumUpdatePeriod="PT2S">
                      <Period start="PT0S"><AdaptationSet><Representation id="v" bandwidth="100000">
                        <SegmentTemplate media="seg-$Number$.m4s" initialization="init.mp4" startNumber="\(start)" duration="2" timescale="1"/>
                      </Representation></AdaptationSet></Period>
                    </MPD>
                    """
                var resource = TestOrigin.Resource(
                    body: .bytes(Array(text.utf8)), mimeType: "application/dash+xml", etag: "\"s\(start)\"")
                resource.cacheControl = "max-age=60"
                return resource
            }
            for (path, live) in [("/live/m.mpd", true), ("/vod/m.mpd", false)] {
                h.origin.serve(manifest(start: 1, live: live), at: path)
                let first = String(buffer: try await h.get(h.url(path)).body)
                #expect(
                    first.contains("startNumber=\"1\"") && first.contains("<BaseURL>http://127.0.0.1:\(h.port)/o/"),
                    "\(path): \(first)")
                h.origin.serve(manifest(start: 5, live: live), at: path)
                clock.advance(by: 2.3)
                let later = String(buffer: try await h.get(h.url(path)).body)
                if live {
                    #expect(later.contains("startNumber=\"5\""), "\(path) did not advance: \(later)")
                } else {
                    #expect(later == first, "\(path): a static manifest fresh for a minute is served from the cache")
                }
            }
            // The player asks for a segment through the base; it is not there yet, then it is.
            let later = String(buffer: try await h.get(h.url("/live/m.mpd")).body)
            let base = try #require(
                later.split(separator: "<BaseURL>").dropFirst().first?.split(separator: "<").first.map(String.init))
            var missing = TestOrigin.Resource(body: .bytes([]), mimeType: "video/iso.segment")
            missing.faults.status = 404
            h.origin.serve(missing, at: "/live/seg-6.m4s")
            #expect(try await h.get(base + "seg-6.m4s").status == 404)
            h.origin.serve(.generated(length: 10_000, seed: 85), at: "/live/seg-6.m4s")
            let arrived = try await h.get(base + "seg-6.m4s")
            #expect(
                arrived.status == 200 && DeterministicContent(seed: 85).firstMismatch(in: arrived.body, at: 0) == nil)
        }
    }

    /// A live presentation ffmpeg makes as the test runs (`-streaming 1 -window_size 5`, in real
    /// time): its manifest advances through the proxy as it does direct (the origin calls it
    /// fresh for a minute; its `minimumUpdatePeriod` is 1 s), it never shows what the origin
    /// did not, and a segment it names comes through with the origin's bytes. The origin serves
    /// ffmpeg's folder as it is whenever the test asks for the manifest.
    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func anFFmpegLiveManifestAdvancesThroughTheProxyAsItDoesDirect() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                let manifest = directory.appendingPathComponent("m.mpd")
                let ffmpeg = try SpawnedProcess(
                    "ffmpeg",
                    [
                        "-nostdin", "-v", "error", "-re", "-f", "lavfi", "-i",
                        "testsrc=duration=60:size=160x120:rate=10",
                        "-c:v", "mpeg4", "-q:v", "8", "-threads", "1", "-f", "dash", "-seg_duration", "1",
                        "-streaming", "1", "-window_size", "5", manifest.path,
                    ], searchingPath: true)
                try await runThenTearDown(
                    ffmpeg,
                    { _ in
                        var published: Set<String> = []
                        /// Serves the folder as it is now; returns the manifest's publishTime.
                        func mirror() throws -> String? {
                            guard let text = try? String(contentsOf: manifest, encoding: .utf8), text.contains("</MPD>")
                            else { return nil }
                            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
                            where name.hasSuffix(".m4s") {
                                let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent(name)))
                                h.origin.serve(
                                    TestOrigin.Resource(
                                        body: .bytes(bytes), mimeType: "video/iso.segment", etag: "\"\(bytes.count)\""),
                                    at: "/live/" + name)
                            }
                            let time = Self.attribute("publishTime", in: text)
                            var resource = TestOrigin.Resource(
                                body: .bytes(Array(text.utf8)), mimeType: "application/dash+xml",
                                etag: "\"\(time ?? "")\"")
                            resource.cacheControl = "max-age=60"
                            h.origin.serve(resource, at: "/live/m.mpd")
                            if let time { published.insert(time) }
                            return time
                        }
                        try await waitUntil { (try? mirror()) != nil }
                        let first = String(buffer: try await h.get(h.url("/live/m.mpd")).body)
                        #expect(
                            first.contains("type=\"dynamic\"")
                                && first.contains("<BaseURL>http://127.0.0.1:\(h.port)/o/"), "\(first)")
                        let firstTime = try #require(Self.attribute("publishTime", in: first))
                        #expect(published.contains(firstTime))
                        // The origin's manifest moves on as ffmpeg writes; so does the proxy's.
                        var later = first
                        try await waitUntil {
                            _ = try mirror()
                            later = String(buffer: try await h.get(h.url("/live/m.mpd")).body)
                            return Self.attribute("publishTime", in: later) != firstTime
                        }
                        let laterTime = try #require(Self.attribute("publishTime", in: later))
                        #expect(
                            published.contains(laterTime),
                            "the proxy showed a manifest the origin never served: \(laterTime)")
                        // A segment ffmpeg has written whole, through the base the manifest gives.
                        let base = try #require(
                            later.split(separator: "<BaseURL>").dropFirst().first?.split(separator: "<").first.map(
                                String.init))
                        _ = try mirror()
                        let segment = try #require(
                            try FileManager.default.contentsOfDirectory(atPath: directory.path)
                                .filter { $0.hasPrefix("chunk-stream0-") && $0.hasSuffix(".m4s") }.max())
                        let resource = try #require(h.origin.resource(at: "/live/" + segment))
                        let expected = resource.bytes(0..<resource.length)
                        let reply = try await h.get(base + segment)
                        #expect(reply.status == 200 && reply.body == expected, "\(segment)")
                    },
                    tearDown: { ffmpeg in
                        // Nothing of what it would write on a gentler stop is needed.
                        kill(ffmpeg.processIdentifier, SIGKILL)
                        await ffmpeg.exited()
                    })
            }
        }
    }

    /// The value of the first `name="…"` in `text`.
    static func attribute(_ name: String, in text: String) -> String? {
        guard let start = text.range(of: name + "=\"") else { return nil }
        return text[start.upperBound...].split(separator: "\"", maxSplits: 1).first.map(String.init)
    }

    /// The path form carries the same checks as `?url=`: the token (in its first segment),
    /// the allow-list; a first segment that names no origin is a 400.
    @Test func thePathFormIsCheckedAsUrlIs() async throws {
        try await ProxyHarness.with(allowedHosts: ["127.0.0.1"], token: "s3cret") { h in
            h.origin.serve(.generated(length: 5_000, seed: 86), at: "/a/film.mp4")
            let url = h.origin.url("/a/film.mp4?x=1")
            let good = "http://127.0.0.1:\(h.port)" + ProxyURL.pathForm(for: url, token: "s3cret")
            let reply = try await h.get(good)
            #expect(reply.status == 200 && DeterministicContent(seed: 86).firstMismatch(in: reply.body, at: 0) == nil)
            #expect(h.origin.requests("/a/film.mp4").last?.query == "x=1", "the origin's query goes to the origin")
            #expect(
                try await h.get("http://127.0.0.1:\(h.port)" + ProxyURL.pathForm(for: url, token: nil)).status == 403)
            #expect(
                try await h.get("http://127.0.0.1:\(h.port)" + ProxyURL.pathForm(for: url, token: "wrong")).status
                    == 403)
            // A query token= is the origin's, not the proxy's.
            #expect(
                try await h.get(
                    "http://127.0.0.1:\(h.port)"
                        + ProxyURL.pathForm(for: h.origin.url("/a/film.mp4?token=s3cret"), token: nil)
                ).status == 403)
            let elsewhere = URL(string: "http://localhost:\(h.origin.port)/a/film.mp4")!
            #expect(
                try await h.get("http://127.0.0.1:\(h.port)" + ProxyURL.pathForm(for: elsewhere, token: "s3cret"))
                    .status == 403)
            // (The token is checked first: without it these are 403s that say nothing of the target.)
            for bad in ["/o/!!!/x", "/o/" + Data("ftp://x".utf8).base64EncodedString() + "/x", "/o/aHR0cDovL2EvYg/x"] {
                let reply = try await h.get(
                    "http://127.0.0.1:\(h.port)" + bad, headers: [("X-MediaCache-Token", "s3cret")])
                #expect(reply.status == 400, "\(bad): \(reply.status) \(String(buffer: reply.body))")
            }
        }
    }

    /// ffmpeg's DASH muxer with `-hls_playlist 1` writes HLS playlists beside the manifest,
    /// naming the same segments. Played as HLS through the proxy, then as DASH, each to its
    /// direct play's md5: the DASH play asks the origin for its manifest alone, as the HLS
    /// play does after a DASH one, so the two forms share one set of cache entries.
    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"), arguments: [true, false])
    func theHLSAndDASHFormsOfOnePresentationShareTheirEntries(hlsFirst: Bool) async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                try await Self.make(.templateTimeline, in: directory, options: ["-hls_playlist", "1"])
                let paths = try Self.serve(directory, on: h.origin)
                let segments = paths.filter { $0.hasSuffix(".m4s") }
                #expect(paths.contains("/dash/master.m3u8") && segments.count >= 6, "\(paths)")
                let forms = hlsFirst ? ["/dash/master.m3u8", "/dash/m.mpd"] : ["/dash/m.mpd", "/dash/master.m3u8"]
                let direct = [
                    try await Self.decodeHash(h.origin.url(forms[0]).absoluteString),
                    try await Self.decodeHash(h.origin.url(forms[1]).absoluteString),
                ]
                h.origin.resetCounters()
                #expect(
                    try await Self.decodeHash(h.proxyURL(for: h.origin.url(forms[0]).absoluteString)) == direct[0],
                    "\(forms[0]) through the proxy")
                let fetched = segments.filter { !h.origin.requests($0).isEmpty }
                #expect(
                    fetched == segments, "\(forms[0]) played without: \(Set(segments).subtracting(fetched).sorted())")
                h.origin.resetCounters()
                #expect(
                    try await Self.decodeHash(h.proxyURL(for: h.origin.url(forms[1]).absoluteString)) == direct[1],
                    "\(forms[1]) through the proxy")
                let asked = paths.filter { !h.origin.requests($0).isEmpty }
                let manifests =
                    hlsFirst ? ["/dash/m.mpd"] : ["/dash/master.m3u8", "/dash/media_0.m3u8", "/dash/media_1.m3u8"]
                #expect(
                    asked.sorted() == manifests, "\(forms[1]) after \(forms[0]) asked the origin for \(asked.sorted())")
            }
        }
    }

    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"), arguments: Form.allCases)
    func playsThroughTheProxyThenFromTheCache(_ form: Form) async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                try await Self.make(form, in: directory)
                let paths = try Self.serve(directory, on: h.origin)
                let origin = String(h.origin.url("/").absoluteString.dropLast())
                let served = String(
                    decoding: try Data(contentsOf: directory.appendingPathComponent("m.mpd")), as: UTF8.self)
                #expect(served.contains(form.marker), "\(form): \(served)")
                let entry = h.origin.url("/").absoluteString.dropLast() + form.entry
                let manifest = try await h.get(h.proxyURL(for: String(entry)))
                let text = String(buffer: manifest.body)
                #expect(manifest.status == 200 && text.contains("<MPD"), "\(manifest.status)")
                #expect(!text.contains(origin), "the manifest names the origin: \(text)")
                #expect(text.contains("<BaseURL>http://127.0.0.1:\(h.port)/o/"), "\(text)")
                let direct = try await Self.decodeHash(h.origin.url(form.direct).absoluteString)
                let proxied = try await Self.decodeHash(h.proxyURL(for: String(entry)))
                #expect(direct.hasPrefix("MD5=") && proxied == direct, "direct \(direct), proxied \(proxied)")
                // A second play costs the origin nothing.
                h.origin.resetCounters()
                #expect(try await Self.decodeHash(h.proxyURL(for: String(entry))) == direct)
                let asked = paths.flatMap { h.origin.requests($0) }
                #expect(asked.isEmpty, "second play reached the origin: \(asked)")
            }
        }
    }
}
