// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// Through the proxy: signed URLs under a key rule, offline mode, and export.
@Suite(.stallLimit, .endToEnd) struct OfflineAndKeysTests {
    static func cloudFront() -> CacheStore.Configuration {
        var configuration = CacheStore.Configuration()
        configuration.keyRule = CacheKeyRule.preset(named: "cloudfront")!
        return configuration
    }

    /// The same file under two signatures: with the rule the second is a hit and costs the
    /// origin nothing, though the origin got the signature it asked for the first time;
    /// without the rule it is a miss.
    @Test(arguments: [true, false]) func aResignedURLIsAHitOnlyUnderTheKeyRule(withRule: Bool) async throws {
        try await ProxyHarness.with(store: withRule ? Self.cloudFront() : CacheStore.Configuration()) { h in
            let content = DeterministicContent(seed: 80)
            h.origin.serve(.generated(length: 300_000, seed: 80), at: "/film.mp4")
            let first = "/film.mp4?Expires=1700000000&Signature=first&Key-Pair-Id=K1"
            let again = "/film.mp4?Expires=1700003600&Signature=second&Key-Pair-Id=K1"
            let reply = try await h.get(h.url(first))
            #expect(reply.status == 200)
            #expect(content.firstMismatch(in: reply.body, at: 0) == nil)
            #expect(h.origin.requests("/film.mp4").allSatisfy { $0.query?.contains("Signature=first") == true })
            let before = h.origin.requests("/film.mp4").count
            let second = try await h.get(h.url(again))
            #expect(second.status == 200)
            #expect(content.firstMismatch(in: second.body, at: 0) == nil)
            #expect(second.body.readableBytes == 300_000)
            let after = h.origin.requests("/film.mp4")
            if withRule {
                #expect(after.count == before)
            } else {
                #expect(after.count > before)
                #expect(after.last?.query?.contains("Signature=second") == true)
            }
        }
    }

    /// HLS segment URLs inside playlists follow the key rule: a playlist re-signed at the
    /// origin names the same segments under new signatures, and they are hits.
    @Test func resignedSegmentsInAPlaylistAreHits() async throws {
        try await ProxyHarness.with(store: Self.cloudFront()) { h in
            func playlist(_ signature: String) -> TestOrigin.Resource {
                var resource = TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ts?Expires=1&Signature=\(signature)\n#EXT-X-ENDLIST\n"
                                .utf8)),
                    mimeType: "application/vnd.apple.mpegurl")
                resource.cacheControl = "no-cache"
                resource.etag = "\"\(signature)\""
                return resource
            }
            h.origin.serve(playlist("first"), at: "/s/index.m3u8")
            h.origin.serve(.generated(length: 50_000, seed: 84), at: "/s/seg0.ts")
            func segmentURL() async throws -> String {
                let text = String(buffer: try await h.get(h.url("/s/index.m3u8")).body)
                return try #require(text.split(separator: "\n").first { !$0.hasPrefix("#") }.map(String.init))
            }
            let first = try await segmentURL()
            #expect(first.contains("Signature%3Dfirst"), "\(first)")
            #expect(DeterministicContent(seed: 84).firstMismatch(in: try await h.get(first).body, at: 0) == nil)
            h.origin.serve(playlist("second"), at: "/s/index.m3u8")
            let second = try await segmentURL()
            #expect(second.contains("Signature%3Dsecond"), "\(second)")
            let before = h.origin.requests("/s/seg0.ts").count
            let reply = try await h.get(second)
            #expect(reply.status == 200 && DeterministicContent(seed: 84).firstMismatch(in: reply.body, at: 0) == nil)
            #expect(h.origin.requests("/s/seg0.ts").count == before)
        }
    }

    /// Offline, what is cached is served whatever its freshness, with no connection to the
    /// origin; the rest is a 504 that says why.
    @Test func offlineServesWhatIsCachedAndAnswers504ForTheRest() async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("store")
            let origin = try await TestOrigin.start()
            var stale = TestOrigin.Resource.generated(length: 200_000, seed: 81)
            stale.cacheControl = "no-cache"
            origin.serve(stale, at: "/stale.mp4")
            origin.serve(.generated(length: 200_000, seed: 82), at: "/half.mp4")
            origin.serve(.generated(length: 1_000, seed: 83), at: "/never.mp4")
            // Online: the first file whole, half of the second.
            try await Self.withProxy(folder, offline: false) { h in
                let whole = try await h.get(h.proxyURL(for: origin.url("/stale.mp4").absoluteString))
                let half = try await h.get(
                    h.proxyURL(for: origin.url("/half.mp4").absoluteString), headers: [("Range", "bytes=0-99999")])
                #expect(whole.status == 200)
                #expect(half.status == 206)
            }
            let connections = origin.connectionsAccepted
            try await Self.withProxy(folder, offline: true) { h in
                let whole = try await h.get(h.proxyURL(for: origin.url("/stale.mp4").absoluteString))
                #expect(whole.status == 200)
                #expect(DeterministicContent(seed: 81).firstMismatch(in: whole.body, at: 0) == nil)
                #expect(whole.body.readableBytes == 200_000)
                let cachedHalf = try await h.get(
                    h.proxyURL(for: origin.url("/half.mp4").absoluteString), headers: [("Range", "bytes=1000-1999")])
                #expect(cachedHalf.status == 206)
                #expect(DeterministicContent(seed: 82).firstMismatch(in: cachedHalf.body, at: 1000) == nil)
                let missing = try await h.get(h.proxyURL(for: origin.url("/half.mp4").absoluteString))
                #expect(missing.status == 504)
                #expect(String(buffer: missing.body).contains("not all cached"))
                let unknown = try await h.get(h.proxyURL(for: origin.url("/never.mp4").absoluteString))
                #expect(unknown.status == 504)
                #expect(String(buffer: unknown.body).contains("Offline"))
            }
            #expect(origin.connectionsAccepted == connections)
            try await origin.shutdown()
        }
    }

    /// A pinned HLS asset (the lowest variant of a master playlist ffmpeg made) plays through
    /// an offline proxy with the direct play's md5 and no connection to the origin, also once
    /// the origin is stopped; its export plays in ffmpeg from the folder alone.
    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func aPinnedHLSAssetPlaysOfflineAndItsExportPlaysFromAFolder() async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            let made = directory.appendingPathComponent("made")
            try await HLSProxyTests.make(
                .masterWithTwoVariants, in: made, originURL: String(origin.url("/").absoluteString.dropLast()))
            _ = try HLSProxyTests.serve(made, on: origin)
            let direct = try await HLSProxyTests.decodeHash(origin.url("/hls/v0/index.m3u8").absoluteString)
            let folder = directory.appendingPathComponent("store")
            let exported = directory.appendingPathComponent("export")
            try await PinnedDownloadsTests.withEngine(folder) { store, reader in
                let queue = try DownloadQueue(reader: reader)
                queue.start()
                let job = try await queue.pin(origin.url("/hls/master.m3u8"), variant: .lowestBandwidth)
                let done = try await PinnedDownloadsTests.settled(job.id, in: queue)
                #expect(done.state == .completed && done.resourcesDone == 3, "\(done)")
                await queue.shutDown()
                let summary = try await reader.export(
                    origin.url("/hls/master.m3u8"), to: exported,
                    renditions: RenditionChoice(variants: [.lowestBandwidth]))
                #expect(summary.files == 5, "three segments, the media playlist and index.m3u8: \(summary)")
            }
            #expect(origin.requests("/hls/v1/seg000.ts").isEmpty)
            let connections = origin.connectionsAccepted
            try await Self.withProxy(folder, offline: true) { h in
                #expect(
                    try await HLSProxyTests.decodeHash(h.proxyURL(for: origin.url("/hls/v0/index.m3u8").absoluteString))
                        == direct)
                let master = try await h.get(h.proxyURL(for: origin.url("/hls/master.m3u8").absoluteString))
                #expect(master.status == 200 && String(buffer: master.body).contains("#EXT-X-STREAM-INF"))
                let other = try await h.get(h.proxyURL(for: origin.url("/hls/v1/index.m3u8").absoluteString))
                #expect(other.status == 504, "the variant not pinned")
            }
            #expect(origin.connectionsAccepted == connections, "an offline play connected to the origin")
            try await origin.shutdown()
            try await Self.withProxy(folder, offline: true) { h in
                let played = try await HLSProxyTests.decodeHash(
                    h.proxyURL(for: origin.url("/hls/v0/index.m3u8").absoluteString))
                #expect(played == direct, "with the origin stopped")
            }
            let index = try String(contentsOf: exported.appendingPathComponent("index.m3u8"), encoding: .utf8)
            #expect(!index.contains("http"), "\(index)")
            #expect(try await HLSProxyTests.decodeHash(exported.appendingPathComponent("index.m3u8").path) == direct)
        }
    }

    /// The proxy over the store in `folder`, offline or not.
    static func withProxy(_ folder: URL, offline: Bool, _ body: (FolderProxy) async throws -> Void) async throws {
        let store = try await CacheStore.open(directory: folder)
        let fetcher = HTTPOriginFetcher()
        var configuration = CachingReader.Configuration()
        configuration.isOffline = offline
        let reader = CachingReader(store: store, fetcher: fetcher, configuration: configuration)
        var proxyConfiguration = ProxyConfiguration()
        proxyConfiguration.port = 0
        let proxy = try await EmbeddedProxy.start(reader: reader, configuration: proxyConfiguration)
        try await runThenTearDown(FolderProxy(port: proxy.port), body) { _ in
            await proxy.stop()
            await reader.shutDown()
            try await store.close()
            try await fetcher.shutdown()
        }
    }
}

/// A proxy on a store folder the test chose (it outlives one proxy).
struct FolderProxy {
    let port: Int

    func proxyURL(for originURL: String) -> String {
        "http://127.0.0.1:\(port)/?url="
            + (originURL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? originURL)
    }

    func get(_ url: String, headers: [(String, String)] = []) async throws -> ProxyHarness.Reply {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        return ProxyHarness.Reply(
            status: Int(response.status.code), headers: response.headers,
            body: try await response.body.collect(upTo: 64 << 20))
    }
}
