// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// CMCD (CTA-5004): out of cache keys, on to the origin; with `--cmcd`, written by the proxy
/// for players that send none, and the cache's own fetches marked.
@Suite(.stallLimit, .endToEnd) struct CMCDTests {
    /// Two players' requests for one segment that differ only in CMCD (as a query parameter,
    /// then as fields, with the origin naming a CMCD field in `Vary`) cost one origin request
    /// each way, and the origin sees the first player's CMCD on it.
    /// The session ID the proxy writes for a player that sends none: a version 4 UUID as
    /// Foundation writes one (lower case), a new one each time, a valid CMCD `sid`.
    @Test func aNewSessionIDIsAVersionFourUUID() {
        let ids = (0..<200).map { _ in CMCD.newSessionID() }
        for id in ids {
            let parsed = UUID(uuidString: id)
            #expect(parsed?.uuidString.lowercased() == id, "\(id)")
            let groups = id.split(separator: "-")
            #expect(
                groups.map(\.count) == [8, 4, 4, 4, 12] && groups[2].first == "4"
                    && "89ab".contains(groups[3].first ?? "x"), "\(id)")
            #expect(CMCD(parsing: "sid=\"\(id)\"").sessionID == id)
        }
        #expect(Set(ids).count == ids.count)
    }

    @Test func requestsDifferingOnlyInCMCDShareOneOriginRequest() async throws {
        try await ProxyHarness.with { h in
            h.origin.serve(.generated(length: 300_000, seed: 61), at: "/q.ts")
            var varying = TestOrigin.Resource.generated(length: 300_000, seed: 62)
            varying.extraHeaders = [("Vary", "CMCD-Request")]
            h.origin.serve(varying, at: "/f.ts")
            let first = try await h.get(h.proxyURL(for: h.origin.url("/q.ts?CMCD=bl%3D1000%2Cot%3Dv").absoluteString))
            let second = try await h.get(h.proxyURL(for: h.origin.url("/q.ts?CMCD=bl%3D4000%2Cot%3Dv").absoluteString))
            #expect(first.status == 200 && second.status == 200)
            #expect(h.origin.resource(at: "/q.ts")!.firstMismatch(in: second.body, at: 0) == nil)
            #expect(h.origin.requests("/q.ts").map(\.query) == ["CMCD=bl=1000,ot=v"], "\(h.origin.requests("/q.ts"))")

            let a = try await h.get(
                h.url("/f.ts"), headers: [("CMCD-Request", "bl=1000"), ("CMCD-Session", "sid=\"a\"")])
            let b = try await h.get(
                h.url("/f.ts"), headers: [("CMCD-Request", "bl=9000"), ("CMCD-Session", "sid=\"b\"")])
            #expect(
                a.status == 200 && b.status == 200
                    && h.origin.resource(at: "/f.ts")!.firstMismatch(in: b.body, at: 0) == nil)
            #expect(h.origin.requests("/f.ts").count == 1, "\(h.origin.requests("/f.ts"))")
            #expect(h.origin.requests("/f.ts").first?.header("CMCD-Request") == "bl=1000")
        }
    }

    /// hls.js and dash.js append `CMCD=…` to the URL they were given, the proxy's: in the
    /// `?url=` form and in the path form it goes on to the origin as the player wrote it, and
    /// two requests that differ only in it cost one origin request.
    @Test func cmcdAppendedToTheProxyURLReachesTheOrigin() async throws {
        try await ProxyHarness.with { h in
            h.origin.serve(.generated(length: 200_000, seed: 63), at: "/u.ts")
            h.origin.serve(.generated(length: 200_000, seed: 64), at: "/p.ts")
            let first = try await h.get(h.url("/u.ts?a=1", extra: "&CMCD=bl%3D1000%2Csid%3D%22s1%22"))
            let second = try await h.get(h.url("/u.ts?a=1", extra: "&CMCD=bl%3D4000%2Csid%3D%22s2%22"))
            #expect(first.status == 200 && second.status == 200)
            #expect(h.origin.resource(at: "/u.ts")!.firstMismatch(in: first.body, at: 0) == nil)
            #expect(h.origin.resource(at: "/u.ts")!.firstMismatch(in: second.body, at: 0) == nil)
            #expect(
                h.origin.requests("/u.ts").map(\.rawQuery) == ["a=1&CMCD=bl%3D1000%2Csid%3D%22s1%22"],
                "\(h.origin.requests("/u.ts"))")

            let path = "http://127.0.0.1:\(h.port)" + ProxyURL.pathForm(for: h.origin.url("/p.ts"), token: nil)
            let one = try await h.get(path + "?CMCD=bl%3D1000")
            let two = try await h.get(path + "?CMCD=bl%3D2000")
            #expect(one.status == 200 && two.status == 200)
            #expect(h.origin.resource(at: "/p.ts")!.firstMismatch(in: two.body, at: 0) == nil)
            #expect(h.origin.requests("/p.ts").map(\.rawQuery) == ["CMCD=bl%3D1000"], "\(h.origin.requests("/p.ts"))")
        }
    }

    /// With `--cmcd`, an HLS play by a player that sends no CMCD reaches the origin with one
    /// session id on every request, the manifests marked `ot=m`, each segment with its
    /// duration; a player's own CMCD goes on unchanged; the cache's own fetches carry the custom key.
    @Test func theProxyWritesCMCDForAPlayerThatSendsNone() async throws {
        var reader = CachingReader.Configuration()
        reader.ownRequestFields = CMCD(isCachesOwn: true).fields
        reader.segmentReadAhead = 0
        try await ProxyHarness.with(
            reader: reader,
            configure: { configuration in
                var configuration = configuration
                configuration.addsCMCD = true
                return configuration
            }
        ) { h in
            h.origin.serveRenditionAsset()
            let master = try await h.get(h.url("/hls/master.m3u8"))
            let variant = try #require(
                String(buffer: master.body).split(separator: "\n").first { $0.contains("v0.m3u8") })
            let media = try await h.get(String(variant))
            let segment = try #require(
                String(buffer: media.body).split(separator: "\n").first { $0.contains("v0-0.ts") })
            let bytes = try await h.get(String(segment))
            #expect(h.origin.resource(at: "/hls/v0-0.ts")!.firstMismatch(in: bytes.body, at: 0) == nil)
            let asked = ["/hls/master.m3u8", "/hls/v0.m3u8", "/hls/v0-0.ts"].compactMap { h.origin.requests($0).first }
            #expect(asked.count == 3)
            // One session id throughout (the first request, the master's, is not yet known as HLS).
            let sessions = asked.map { request in CMCD.session(in: request.headers)?.sessionID }
            #expect(
                sessions.count == 3 && Set(sessions).count == 1 && sessions[0] != nil,
                "\(asked.map { $0.header("CMCD-Session") ?? "-" })")
            #expect(
                asked[1].header("CMCD-Object") == "ot=m"
                    && asked[1].header("CMCD-Session")?.hasPrefix("sf=h,sid=\"") == true
            )
            #expect(asked[2].header("CMCD-Object") == "d=2000", "\(asked[2])")
            #expect(
                asked.allSatisfy { $0.header("CMCD-Request") == nil }, "a player's request marked as the cache's own")

            // A player that sends its own: it goes on as it came, nothing added.
            _ = try await h.get(h.url("/hls/a_en-0.ts"), headers: [("CMCD-Session", "sid=\"player\"")])
            let own = try #require(h.origin.requests("/hls/a_en-0.ts").first)
            #expect(own.header("CMCD-Session") == "sid=\"player\"" && own.header("CMCD-Object") == nil)

            // The cache's own fetch (a prefetch) carries the custom key.
            try await h.base.reader.prefetch(h.origin.url("/hls/a_fr-1.ts"))
            #expect(h.origin.requests("/hls/a_fr-1.ts").first?.header("CMCD-Request") == CMCD.ownKey)
        }
    }

    /// ffmpeg, which sends no CMCD, plays an HLS master through `--cmcd`: every origin request
    /// of the play carries one session id, the playlists `ot=m`, the segments their duration.
    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func ffmpegsPlayReachesTheOriginInOneSession() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with(configure: { configuration in
                var configuration = configuration
                configuration.addsCMCD = true
                return configuration
            }) { h in
                let made = directory.appendingPathComponent("made")
                try await HLSProxyTests.make(
                    .masterWithTwoVariants, in: made, originURL: String(h.origin.url("/").absoluteString.dropLast()))
                let paths = try HLSProxyTests.serve(made, on: h.origin)
                _ = try await HLSProxyTests.decodeHash(h.url("/hls/master.m3u8"))
                let asked = paths.flatMap { h.origin.requests($0) }
                #expect(asked.count > 4)
                #expect(
                    Set(asked.map { CMCD.session(in: $0.headers)?.sessionID }).count == 1
                        && CMCD.session(in: asked[0].headers) != nil)
                let playlists = asked.filter { $0.path.hasSuffix("index.m3u8") }
                let segments = asked.filter { $0.path.hasSuffix(".ts") }
                #expect(
                    !playlists.isEmpty && playlists.allSatisfy { $0.header("CMCD-Object") == "ot=m" },
                    "\(playlists.map { $0.header("CMCD-Object") ?? "-" })")
                #expect(!segments.isEmpty && segments.allSatisfy { $0.header("CMCD-Object")?.hasPrefix("d=") == true })
                // Written as players write it: no space after any comma.
                let written = asked.flatMap { request in CMCD.fieldNames.compactMap { request.header($0) } }
                #expect(!written.isEmpty && !written.contains { $0.contains(", ") }, "\(written.prefix(4))")
            }
        }
    }

    /// The exact bytes, as hls.js writes them (CTA-5004 §3.2: keys in alphabetical order, joined
    /// by `,` with no space), in the compact text and in each header's shard.
    @Test func cmcdIsWrittenAsPlayersWriteIt() {
        let cmcd = CMCD(
            objectType: "m", streamingFormat: "h", sessionID: "6e2fb550-c457-11e9-bb97-0800200c9a66", duration: 2000)
        #expect(cmcd.text == "d=2000,ot=m,sf=h,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\"")
        #expect(
            cmcd.fields.map { "\($0.name): \($0.value)" } == [
                "CMCD-Object: d=2000,ot=m", "CMCD-Session: sf=h,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\"",
            ])
        #expect(
            CMCD(parsing: cmcd.text) == cmcd && CMCD(parsing: "d=2000, ot=m, sf=h") == CMCD(parsing: "d=2000,ot=m,sf=h")
        )
    }

    /// CMCD text from outside (a URI a player could change): only known keys with values in bounds.
    @Test func cmcdTextFromOutsideKeepsOnlyKnownKeysInBounds() {
        var random = SystemRandomNumberGenerator()
        let pieces = [
            "d=", "ot=", "sf=", "sid=", "\"", ",", "=", "m", "av", "h", "123", "99999999999", "-", "x", "é", "\u{0}",
        ]
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...12, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
            let parsed = CMCD(parsing: text)
            #expect(parsed.duration.map { (0...86_400_000).contains($0) } ?? true)
            #expect(parsed.objectType.map { ["m", "i", "k", "c", "a", "v", "av", "tt", "o"].contains($0) } ?? true)
            #expect(
                parsed.sessionID.map { !$0.isEmpty && $0.utf8.count <= 64 && !$0.contains("\"") && !$0.contains(",") }
                    ?? true)
            #expect(CMCD(parsing: parsed.text) == parsed, "\(text.debugDescription)")
        }
        #expect(
            CMCD(parsing: "d=2000,ot=m,sf=h,sid=\"ab-12\"")
                == CMCD(objectType: "m", streamingFormat: "h", sessionID: "ab-12", duration: 2000))
    }
}
