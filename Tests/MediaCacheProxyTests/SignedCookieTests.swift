// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import Testing

/// Streams behind signed cookies, as CloudFront serves them: the entry playlist's or
/// manifest's answer sets the cookies, and every other resource of the stream is refused
/// (`403`) without them. The proxy keeps them per origin and sends them back; the player
/// never sees them, and no other site gets them.
@Suite(.stallLimit, .serialized, .endToEnd) struct SignedCookieTests {
    static let signature = (name: "CloudFront-Signature", value: "sig~Abc_123-xyz")
    static let policy = (name: "CloudFront-Policy", value: "eyJTdGF0ZW1lbnQiOltdfQ__")

    /// Sets the cookies on the answer of `entry`, and requires the signature on every other
    /// path of `paths`.
    static func protect(_ paths: [String], entry: String, on origin: TestOrigin) {
        for path in paths {
            origin.update(path) { resource in
                if path == entry {
                    resource.extraHeaders += [
                        (name: "Set-Cookie", value: "\(signature.name)=\(signature.value); Path=/; HttpOnly"),
                        (name: "Set-Cookie", value: "\(policy.name)=\(policy.value); Path=/; Max-Age=3600"),
                    ]
                } else {
                    resource.faults.requiredCookie = signature
                }
            }
        }
    }

    /// Every request the origin got for `paths` but the entry's carried the signature, and none
    /// was refused.
    static func expectEveryRequestSigned(_ paths: [String], entry: String, on origin: TestOrigin) {
        let requests = paths.filter { $0 != entry }.flatMap { origin.requests($0) }
        #expect(!requests.isEmpty)
        #expect(
            requests.allSatisfy {
                $0.status != 403 && $0.header("cookie")?.contains("\(signature.name)=\(signature.value)") == true
            }, "\(requests)")
    }

    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func anHLSStreamBehindSignedCookiesPlaysInFFmpegAndNoOtherSiteGetsThem() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                let entry = "/hls/master.m3u8"
                try await HLSProxyTests.make(
                    .masterWithTwoVariants, in: directory,
                    originURL: String(h.origin.url("/").absoluteString.dropLast()))
                let paths = try HLSProxyTests.serve(directory, on: h.origin)
                Self.protect(paths, entry: entry, on: h.origin)
                // The player gets no Set-Cookie (its one origin is the proxy: every site's
                // cookies would mix there).
                let reply = try await h.get(h.url(entry))
                #expect(reply.status == 200 && reply.headers["set-cookie"].isEmpty, "\(reply.headers)")
                #expect(h.origin.requests(entry).allSatisfy { [200, 206].contains($0.status) })
                // ffmpeg alone sends the playlist's cookies back too: the direct decode.
                let direct = try await HLSProxyTests.decodeHash(h.origin.url(entry).absoluteString)
                h.origin.resetCounters()
                let proxied = try await HLSProxyTests.decodeHash(h.url(entry))
                #expect(direct.hasPrefix("MD5=") && proxied == direct, "direct \(direct), proxied \(proxied)")
                Self.expectEveryRequestSigned(paths, entry: entry, on: h.origin)
                // Another site, on another address, never receives them.
                let other = try await TestOrigin.start(host: "127.0.0.2")
                other.serve(
                    TestOrigin.Resource(
                        body: .generated(DeterministicContent(seed: 5), length: 1000), mimeType: "audio/mpeg"),
                    at: "/a.mp3")
                let answer = try await h.get(h.proxyURL(for: other.url("/a.mp3").absoluteString))
                #expect(
                    answer.status == 200 && answer.body.readableBytes == 1000
                        && DeterministicContent(seed: 5).firstMismatch(in: answer.body, at: 0) == nil)
                let asked = other.requests("/a.mp3")
                #expect(!asked.isEmpty && asked.allSatisfy { $0.header("cookie") == nil }, "\(asked.map(\.headers))")
                try await other.shutdown()
            }
        }
    }

    /// The same stream through a proxy that keeps no cookies (`serve --no-cookies`): the
    /// variant playlist is refused, so the jar is what makes the play above work.
    @Test func withoutAJarTheStreamIsRefusedAfterItsEntry() async throws {
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.cookieJar = nil
        try await ProxyHarness.with(fetcher: fetcher) { h in
            let playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nseg.ts\n#EXT-X-ENDLIST\n"
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(playlist.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                at: "/s/index.m3u8")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: 9), length: 5000), mimeType: "video/mp2t"),
                at: "/s/seg.ts")
            Self.protect(["/s/index.m3u8", "/s/seg.ts"], entry: "/s/index.m3u8", on: h.origin)
            #expect(try await h.get(h.url("/s/index.m3u8")).status == 200)
            #expect(try await h.get(h.url("/s/seg.ts")).status == 403)
            // A player that sends the cookie itself is passed through as it is.
            let own = try await h.get(
                h.url("/s/seg.ts"), headers: [("Cookie", "\(Self.signature.name)=\(Self.signature.value)")])
            #expect(
                own.status == 200 && own.body.readableBytes == 5000
                    && DeterministicContent(seed: 9).firstMismatch(in: own.body, at: 0) == nil)
        }
    }

    /// A player's own cookies (ffmpeg `-cookies`, AVURLAssetHTTPCookiesKey) are kept for the
    /// host it asked, so a later request without them still carries them.
    @Test func aPlayersCookieIsKeptForItsOrigin() async throws {
        try await ProxyHarness.with { h in
            h.origin.serve(
                TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: 3), length: 3000), mimeType: "video/mp2t"),
                at: "/p/a.ts")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: 4), length: 3000), mimeType: "video/mp2t"),
                at: "/p/b.ts")
            Self.protect(["/p/a.ts", "/p/b.ts"], entry: "", on: h.origin)
            #expect(try await h.get(h.url("/p/a.ts")).status == 403)
            let first = try await h.get(
                h.url("/p/a.ts"), headers: [("Cookie", "\(Self.signature.name)=\(Self.signature.value)")])
            #expect(first.status == 200)
            let second = try await h.get(h.url("/p/b.ts"))
            #expect(
                second.status == 200 && second.body.readableBytes == 3000
                    && DeterministicContent(seed: 4).firstMismatch(in: second.body, at: 0) == nil)
        }
    }

    @Test(
        .enabled(
            if: DASHProxyTests.hasFFmpeg && DASHProxyTests.hasGStreamer, "ffmpeg and GStreamer are installed by .ci/run"
        ))
    func aDASHPresentationBehindSignedCookiesPlaysInGStreamer() async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                let made = directory.appendingPathComponent("made")
                try await DASHProxyTests.make(.templateTimeline, in: made)
                // The same files unprotected, for the direct decode (GStreamer sends no cookie
                // it was given back to the segments).
                _ = try DASHProxyTests.serve(made, on: h.origin, under: "/open")
                let paths = try DASHProxyTests.serve(made, on: h.origin)
                Self.protect(paths, entry: "/dash/m.mpd", on: h.origin)
                let direct = try await DASHProxyTests.gstreamerPlay(
                    h.origin.url("/open/m.mpd").absoluteString, in: directory)
                h.origin.resetCounters()
                let proxied = try await DASHProxyTests.gstreamerPlay(
                    h.proxyURL(for: h.origin.url("/dash/m.mpd").absoluteString), in: directory)
                #expect(direct.videoBytes > 0 && proxied == direct, "direct \(direct), proxied \(proxied)")
                Self.expectEveryRequestSigned(paths, entry: "/dash/m.mpd", on: h.origin)
            }
        }
    }
}
