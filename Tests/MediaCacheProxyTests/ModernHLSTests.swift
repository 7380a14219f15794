// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// A multivariant playlist as a current packager writes it (protocol version 11: variables,
/// interstitials, session data, subtitles, I-frame and image playlists), read by a scripted
/// player that follows RFC 8216bis through the proxy: every URI it meets must answer with the
/// origin's bytes and none may need what the player cannot resolve.
@Suite(.stallLimit, .endToEnd) struct ModernHLSTests {
    /// Serves the asset under `/p/` and returns the master's origin URL (with `?token=abc`).
    static func serveAsset(on origin: TestOrigin) -> URL {
        let cdn = String(origin.url("/p").absoluteString)
        func text(_ body: String, _ type: String = "application/vnd.apple.mpegurl") -> TestOrigin.Resource {
            TestOrigin.Resource(body: .bytes(Array(body.utf8)), mimeType: type)
        }
        origin.serve(
            text(
                """
                #EXTM3U
                #EXT-X-VERSION:11
                #EXT-X-DEFINE:NAME="cdn",VALUE="\(cdn)"
                #EXT-X-DEFINE:QUERYPARAM="token"
                #EXT-X-SESSION-DATA:DATA-ID="com.example.title",URI="title.json"
                #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",URI="subs/en.m3u8"
                #EXT-X-STREAM-INF:BANDWIDTH=500000,RESOLUTION=320x240,SUBTITLES="subs"
                {$cdn}/v0/index.m3u8?token={$token}
                #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,RESOLUTION=320x240,URI="v0/iframes.m3u8"
                #EXT-X-IMAGE-STREAM-INF:BANDWIDTH=10000,RESOLUTION=320x180,CODECS="jpeg",URI="thumbs/index.m3u8"

                """), at: "/p/master.m3u8")
        origin.serve(
            text(
                """
                #EXTM3U
                #EXT-X-VERSION:11
                #EXT-X-DEFINE:IMPORT="cdn"
                #EXT-X-TARGETDURATION:2
                #EXT-X-PLAYLIST-TYPE:VOD
                #EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z
                #EXT-X-DATERANGE:ID="ad1",CLASS="com.apple.hls.interstitial",START-DATE="2026-01-01T00:00:02Z",X-ASSET-URI="{$cdn}/ad/master.m3u8"
                #EXT-X-DATERANGE:ID="ad2",CLASS="com.apple.hls.interstitial",START-DATE="2026-01-01T00:00:04Z",X-ASSET-LIST="ads.json"
                #EXTINF:2,
                {$cdn}/v0/s0.ts
                #EXTINF:2,
                s1.ts
                #EXT-X-ENDLIST

                """), at: "/p/v0/index.m3u8")
        origin.serve(
            text(
                "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-I-FRAMES-ONLY\n#EXT-X-BYTERANGE:1000@0\n#EXTINF:4,\ns0.ts\n#EXT-X-ENDLIST\n"
            ), at: "/p/v0/iframes.m3u8")
        origin.serve(
            text("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:4,\nen.vtt\n#EXT-X-ENDLIST\n"),
            at: "/p/subs/en.m3u8")
        origin.serve(
            text(
                "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-IMAGES-ONLY\n#EXT-X-TILES:RESOLUTION=64x36,LAYOUT=5x2,DURATION=0.4\n#EXTINF:4,\nt0.jpg\n#EXT-X-ENDLIST\n"
            ),
            at: "/p/thumbs/index.m3u8")
        origin.serve(text("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=300000\nad.m3u8\n"), at: "/p/ad/master.m3u8")
        origin.serve(
            text("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:2,\nad0.ts\n#EXT-X-ENDLIST\n"),
            at: "/p/ad/ad.m3u8")
        origin.serve(
            text(#"{"ASSETS":[{"URI":"../ad/master.m3u8","DURATION":2.0}]}"#, "application/json"), at: "/p/v0/ads.json")
        origin.serve(text(#"{"title":"A film"}"#, "application/json"), at: "/p/title.json")
        origin.serve(text("WEBVTT\n\n00:00.000 --> 00:02.000\nHello\n", "text/vtt"), at: "/p/subs/en.vtt")
        for (seed, path) in ["/p/v0/s0.ts", "/p/v0/s1.ts", "/p/ad/ad0.ts", "/p/thumbs/t0.jpg"].enumerated() {
            origin.serve(.generated(length: 20_000, seed: UInt64(300 + seed), mimeType: "video/mp2t"), at: path)
        }
        return origin.url("/p/master.m3u8?token=abc")
    }

    /// The URIs a playlist names, as a player finds them: URI lines, `URI` attributes, and an
    /// interstitial's `X-ASSET-URI` and `X-ASSET-LIST`.
    static func uris(in text: String) -> [(kind: String, uri: String)] {
        var found: [(String, String)] = []
        for line in text.split(separator: "\n").map(String.init) where !line.isEmpty {
            guard line.hasPrefix("#") else {
                found.append(("line", line))
                continue
            }
            for attribute in ["URI", "X-ASSET-URI", "X-ASSET-LIST"] {
                guard let start = line.range(of: "," + attribute + "=\"") ?? line.range(of: ":" + attribute + "=\"")
                else { continue }
                found.append((attribute, String(line[start.upperBound...].prefix { $0 != "\"" })))
            }
        }
        return found
    }

    @Test func aScriptedPlayerMeetsOnlyURIsThatLeadBackThroughTheProxy() async throws {
        try await ProxyHarness.with { h in
            let master = Self.serveAsset(on: h.origin)
            let originAddress = "127.0.0.1:\(h.origin.port)"
            var checks: [String: Bool] = [:]
            let top = try await h.get(h.proxyURL(for: master.absoluteString))
            let masterText = String(buffer: top.body)
            // 1. Variables resolved: nothing left for the player to substitute, no define naming the origin.
            checks["master has no variables"] =
                top.status == 200 && !masterText.contains("{$") && !masterText.contains("EXT-X-DEFINE")
            checks["master names no origin address"] = !masterText.contains(originAddress)
            let masterURIs = Self.uris(in: masterText)
            var media = ""
            for (kind, uri) in masterURIs {
                let reply = try await h.get(uri)
                let body = String(buffer: reply.body)
                switch kind {
                case "line":
                    // 2. The variant (its URI made of two variables) reaches the origin with the token.
                    checks["variant from variables"] =
                        reply.status == 200 && h.origin.requests("/p/v0/index.m3u8").first?.query == "token=abc"
                    media = body
                case "URI" where body.contains("#EXT-X-I-FRAMES-ONLY"): checks["I-frame playlist"] = reply.status == 200
                case "URI" where body.contains("#EXT-X-IMAGES-ONLY"):
                    // 3. The image playlist and its tile.
                    let tile = try await h.get(try #require(Self.uris(in: body).first).uri)
                    checks["image playlist and tile"] =
                        reply.status == 200
                        && h.origin.resource(at: "/p/thumbs/t0.jpg")!.firstMismatch(in: tile.body, at: 0) == nil
                case "URI" where body.contains("en.vtt"):
                    let cue = try await h.get(try #require(Self.uris(in: body).first).uri)
                    checks["subtitles"] = reply.status == 200 && String(buffer: cue.body).contains("Hello")
                case "URI": checks["session data"] = reply.status == 200 && body == #"{"title":"A film"}"#
                default: Issue.record("an unexpected URI in the master: \(kind) \(uri)")
                }
            }
            // 4. The media playlist imported a variable: resolved, and nothing of the origin left.
            checks["media has no variables"] =
                !media.isEmpty && !media.contains("{$") && !media.contains("EXT-X-DEFINE")
            checks["media names no origin address"] = !media.isEmpty && !media.contains(originAddress)
            var segments = 0
            for (kind, uri) in Self.uris(in: media) {
                switch kind {
                case "line":
                    let reply = try await h.get(uri)
                    let path = ["/p/v0/s0.ts", "/p/v0/s1.ts"][segments]
                    if reply.status == 200, h.origin.resource(at: path)!.firstMismatch(in: reply.body, at: 0) == nil {
                        segments += 1
                    }
                case "X-ASSET-URI":
                    // 5. An interstitial's asset: a multivariant playlist through the proxy.
                    let reply = try await h.get(uri)
                    let ad = try await h.get(try #require(Self.uris(in: String(buffer: reply.body)).first).uri)
                    checks["interstitial asset"] =
                        reply.status == 200 && ad.status == 200 && String(buffer: ad.body).contains("ad0.ts")
                case "X-ASSET-LIST":
                    // 6. The asset list, with what the player appends to its URL, reaching the origin;
                    // 7. its assets' URIs lead back through the proxy.
                    let reply = try await h.get(uri + "&_HLS_primary_id=p1&_HLS_start_offset=0")
                    let asked = h.origin.requests("/p/v0/ads.json").last?.query ?? ""
                    checks["asset list reaches the origin with _HLS_ parameters"] =
                        reply.status == 200 && asked == "_HLS_primary_id=p1&_HLS_start_offset=0"
                    let list = try? JSONDecoder().decode(
                        [String: [[String: JSONValue]]].self, from: Data(Array(buffer: reply.body)))
                    guard case .string(let asset)? = list?["ASSETS"]?.first?["URI"] else {
                        Issue.record("no asset URI: \(reply.status) \(String(buffer: reply.body))")
                        continue
                    }
                    let adMaster = try await h.get(asset)
                    checks["asset list's assets through the proxy"] =
                        !asset.contains(originAddress) && adMaster.status == 200
                    checks["asset list not stored"] = reply.headers.first(name: "cache-control") == "no-store"
                default: Issue.record("an unexpected URI in the media playlist: \(kind) \(uri)")
                }
            }
            checks["segments"] = segments == 2
            let failed = checks.filter { !$0.value }.map(\.key).sorted()
            #expect(
                checks.count == 14 && failed.isEmpty,
                "\(checks.count - failed.count) of \(checks.count) hold; failing: \(failed)")
        }
    }
}
