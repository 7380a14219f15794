// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// An HLS stream with content steering, played by a scripted client the way hls.js and
/// AVPlayer steer: the master playlist names a steering server and the variants of two
/// pathways (CDN A on 127.0.0.1, CDN B on 127.0.0.2, the same port, the same bytes); the client
/// plays from A, asks the steering server, which puts B first, and goes on from B.
@Suite(.stallLimit, .endToEnd) struct ContentSteeringProxyTests {
    static let segments = 3

    /// Serves the variant playlist and its segments on `origin`.
    static func serveVariant(on origin: TestOrigin) {
        var playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<segments {
            playlist += "#EXTINF:2.0,\nseg\(index).ts\n"
            origin.serve(
                .generated(length: 30_000, seed: UInt64(60 + index), mimeType: "video/mp2t"), at: "/v/seg\(index).ts")
        }
        playlist += "#EXT-X-ENDLIST\n"
        origin.serve(
            TestOrigin.Resource(body: .bytes(Array(playlist.utf8)), mimeType: "application/vnd.apple.mpegurl"),
            at: "/v/index.m3u8")
    }

    /// The URI lines of a playlist, each with the `PATHWAY-ID` of the `EXT-X-STREAM-INF` before it.
    static func variants(in text: String) -> [(pathway: String, uri: String)] {
        var result: [(String, String)] = []
        var pathway: String?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("#EXT-X-STREAM-INF:"), let range = line.range(of: "PATHWAY-ID=\"") {
                pathway = String(line[range.upperBound...].prefix { $0 != "\"" })
            } else if !line.hasPrefix("#"), let current = pathway {
                result.append((current, String(line)))
                pathway = nil
            }
        }
        return result
    }

    /// Plays the variant at `uri` through the proxy: every segment's bytes as the origin has them.
    static func play(_ uri: String, through h: ProxyHarness) async throws {
        let playlist = String(buffer: try await h.get(uri).body)
        let segmentURIs = playlist.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(segmentURIs.count == segments, "\(playlist)")
        for (index, segment) in segmentURIs.enumerated() {
            let reply = try await h.get(String(segment))
            #expect(
                reply.status == 200 && reply.body.readableBytes == 30_000
                    && DeterministicContent(seed: UInt64(60 + index)).firstMismatch(in: reply.body, at: 0) == nil,
                "\(segment)")
        }
    }

    /// With the two CDNs' hosts grouped (`--same-content-hosts`), the play from B after the
    /// steer costs B nothing; without, B sends each segment once. Either way the steering
    /// server is reached through the proxy with the player's parameters, its answer leads back
    /// through the proxy, and it is never stored.
    @Test(arguments: [true, false]) func aPlayerSteeredToAnotherCDNKeepsPlayingThroughTheProxy(grouped: Bool)
        async throws
    {
        var store = CacheStore.Configuration()
        if grouped { store.keyRule = CacheKeyRule(sameContentHosts: [["127.0.0.1", "127.0.0.2"]]) }
        try await ProxyHarness.with(store: store) { h in
            let cdnB = try await TestOrigin.start(host: "127.0.0.2", port: h.origin.port)
            defer { Task { try? await cdnB.shutdown() } }
            Self.serveVariant(on: h.origin)
            Self.serveVariant(on: cdnB)
            let master = """
                #EXTM3U
                #EXT-X-CONTENT-STEERING:SERVER-URI="/steer.json",PATHWAY-ID="A"
                #EXT-X-STREAM-INF:BANDWIDTH=500000,PATHWAY-ID="A",STABLE-VARIANT-ID="v"
                /v/index.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=500000,PATHWAY-ID="B",STABLE-VARIANT-ID="v"
                \(cdnB.url("/v/index.m3u8").absoluteString)

                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(master.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                at: "/master.m3u8")
            var steering = TestOrigin.Resource(
                body: .bytes(
                    Array(
                        #"{"VERSION":1,"TTL":1,"RELOAD-URI":"/steer.json?session=1","PATHWAY-PRIORITY":["B","A"]}"#.utf8
                    )), mimeType: "application/json")
            steering.cacheControl = "max-age=1"
            h.origin.serve(steering, at: "/steer.json")

            let text = String(buffer: try await h.get(h.url("/master.m3u8")).body)
            let server = try #require(LowLatencyHLSTests.uri(of: "#EXT-X-CONTENT-STEERING:", in: text), "\(text)")
            #expect(server.hasPrefix("http://127.0.0.1:\(h.port)/o/"), "\(server)")
            let variants = Self.variants(in: text)
            #expect(
                variants.map(\.pathway) == ["A", "B"]
                    && variants.allSatisfy { $0.uri.hasPrefix("http://127.0.0.1:\(h.port)/") }, "\(variants)")
            try await Self.play(variants[0].uri, through: h)

            // The steering server, as a player asks it: its answer puts B first and its
            // RELOAD-URI leads back through the proxy.
            let answer = try await h.get(server + "?_HLS_pathway=A&_HLS_throughput=2000000")
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView)) as? [String: Any],
                "\(String(buffer: answer.body))")
            #expect(answer.status == 200 && json["PATHWAY-PRIORITY"] as? [String] == ["B", "A"])
            let reload = try #require(json["RELOAD-URI"] as? String)
            #expect(
                reload.hasPrefix("http://127.0.0.1:\(h.port)/o/") && reload.hasSuffix("/steer.json?session=1"),
                "\(reload)")
            let again = try await h.get(reload + "&_HLS_pathway=B&_HLS_throughput=2000000")
            #expect(again.status == 200)
            #expect(
                h.origin.requests("/steer.json").map { $0.query ?? "" } == [
                    "_HLS_pathway=A&_HLS_throughput=2000000", "session=1&_HLS_pathway=B&_HLS_throughput=2000000",
                ])
            let steeringKey = h.base.store.key(
                for: try #require(
                    URL(string: h.origin.url("/steer.json").absoluteString + "?_HLS_pathway=A&_HLS_throughput=2000000"))
            )
            #expect(h.base.store.metadata(for: steeringKey) == nil, "a steering answer was stored")

            // Steered to B.
            try await Self.play(variants[1].uri, through: h)
            let fromB = (0..<Self.segments).flatMap { cdnB.requests("/v/seg\($0).ts") }
            if grouped {
                #expect(fromB.isEmpty, "B was asked for segments A had given: \(fromB)")
            } else {
                #expect(fromB.count == Self.segments, "\(fromB)")
            }
        }
    }

    /// ffmpeg, which does not steer, plays a steered master playlist (a variant on each CDN)
    /// through the proxy to what it decodes direct: the steering tag and the second pathway's
    /// absolute URIs break nothing.
    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func ffmpegPlaysASteeredStreamThroughTheProxyAsItDoesDirect() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                let cdnB = try await TestOrigin.start(host: "127.0.0.2", port: h.origin.port)
                defer { Task { try? await cdnB.shutdown() } }
                try await HLSProxyTests.make(
                    .masterWithTwoVariants, in: directory,
                    originURL: String(h.origin.url("/").absoluteString.dropLast()))
                _ = try HLSProxyTests.serve(directory, on: h.origin)
                _ = try HLSProxyTests.serve(directory, on: cdnB)
                let master = """
                    #EXTM3U
                    #EXT-X-CONTENT-STEERING:SERVER-URI="/steer.json",PATHWAY-ID="A"
                    #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120,PATHWAY-ID="A",STABLE-VARIANT-ID="low"
                    v0/index.m3u8
                    #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120,PATHWAY-ID="B",STABLE-VARIANT-ID="low"
                    \(cdnB.url("/hls/v0/index.m3u8").absoluteString)

                    """
                h.origin.serve(
                    TestOrigin.Resource(body: .bytes(Array(master.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                    at: "/hls/steered.m3u8")
                let direct = try await HLSProxyTests.decodeHash(h.origin.url("/hls/steered.m3u8").absoluteString)
                let proxied = try await HLSProxyTests.decodeHash(h.url("/hls/steered.m3u8"))
                #expect(direct.hasPrefix("MD5=") && proxied == direct, "direct \(direct), proxied \(proxied)")
            }
        }
    }
}
