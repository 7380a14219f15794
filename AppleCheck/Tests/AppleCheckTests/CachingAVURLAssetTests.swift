// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AVFoundation
import CheckedAVFoundationAdapter
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The Apple adapter, compiled unchanged against the AVFoundation stand-in, driven as AVPlayer
/// drives a resource loader: AVPlayer's recorded requests for an MP4 (``AVPlayerTrace``)
/// against the test origin on loopback. What this proves: the adapter compiles with these
/// declarations, sets its delegate before any request, and answers content information, data
/// in order, finishing and cancels as the engine's own tests expect. What it cannot: the real
/// threading and timing of AVFoundation, which only a Mac shows.
@Suite(.stallLimit) struct CachingAVURLAssetTests {
    static let path = "/film.mp4"

    static func withAsset(_ body: (CachingAVURLAsset, TestOrigin, CachingReader) async throws -> Void) async throws {
        try await Harness.with { h in
            h.origin.serve(.generated(length: AVPlayerTrace.mp4Length, seed: 7), at: Self.path)
            let asset = CachingAVURLAsset(url: h.origin.url(Self.path), reader: h.reader)
            try await body(asset, h.origin, h.reader)
        }
    }

    /// Waits until the adapter has finished `request`.
    static func finished(_ request: AVAssetResourceLoadingRequest) async throws
        -> AVAssetResourceLoadingRequest.SimulatedRecord
    {
        try await waitUntil { request.isFinished }
        return request.simulatedRecord
    }

    @Test func theSchemeIsRewrittenAndTheDelegateSetBeforeAnyRequest() async throws {
        try await Self.withAsset { asset, origin, _ in
            #expect(asset.url.scheme == "mediacache-http")
            #expect(asset.originURL == origin.url(Self.path))
            #expect(asset.resourceLoader.delegate != nil && asset.resourceLoader.delegateQueue != nil)
        }
    }

    @Test func avPlayersRequestsGetTheOriginsBytesInOrder() async throws {
        try await Self.withAsset { asset, origin, _ in
            let content = DeterministicContent(seed: 7)
            // First, content information with the first two bytes, as AVPlayer asks.
            let first = AVAssetResourceLoadingRequest(simulatedContentInformation: true, offset: 0, length: 2)
            #expect(asset.resourceLoader.simulatedLoad(first))
            let record = try await Self.finished(first)
            #expect(record.calls == ["finishLoading"] && record.failure == nil)
            let information = try #require(first.contentInformationRequest)
            #expect(information.contentLength == AVPlayerTrace.mp4Length && information.isByteRangeAccessSupported)
            #expect(information.contentType == "public.mpeg-4")
            #expect(
                first.dataRequest?.simulatedReceived == Data(content.buffer(offset: 0, length: 2).readableBytesView))
            // Then the recorded data requests (each capped at 1 MiB here, to keep the test small).
            for (offset, length) in AVPlayerTrace.mp4.prefix(8) {
                let request = AVAssetResourceLoadingRequest(
                    simulatedContentInformation: false, offset: offset, length: Int(min(length, 1 << 20)))
                #expect(asset.resourceLoader.simulatedLoad(request))
                let done = try await Self.finished(request)
                #expect(done.calls == ["finishLoading"], "\(offset): \(done)")
                let received = try #require(request.dataRequest?.simulatedReceived)
                #expect(received.count == Int(min(length, 1 << 20)))
                #expect(content.firstMismatch(in: ByteBuffer(bytes: received), at: offset) == nil, "bytes at \(offset)")
                #expect(request.dataRequest?.currentOffset == offset + Int64(received.count))
            }
            // A replay is served from the cache: no new origin request.
            let before = origin.requests(Self.path).count
            let again = AVAssetResourceLoadingRequest(
                simulatedContentInformation: false, offset: AVPlayerTrace.mp4[0].offset, length: 65536)
            #expect(asset.resourceLoader.simulatedLoad(again))
            _ = try await Self.finished(again)
            #expect(origin.requests(Self.path).count == before)
        }
    }

    @Test func aCancelledRequestStopsAndIsNotFinished() async throws {
        try await Self.withAsset { asset, _, reader in
            let toEnd = AVAssetResourceLoadingRequest(
                simulatedContentInformation: false, offset: 1_000_000, toEnd: true)
            #expect(asset.resourceLoader.simulatedLoad(toEnd))
            try await waitUntil { (toEnd.dataRequest?.simulatedReceived.count ?? 0) > 0 }
            asset.resourceLoader.simulatedCancel(toEnd)
            try await waitUntil { reader.activeDownloads == 0 }
            #expect(!toEnd.isFinished, "AVFoundation must not hear of a request it cancelled")
            #expect((toEnd.dataRequest?.simulatedReceived.count ?? 0) < Int(AVPlayerTrace.mp4Length - 1_000_000))
        }
    }

    @Test func aQueuePlayerMovingOnCancelsThePreviousItemsLoading() async throws {
        try await Self.withAsset { asset, origin, reader in
            let next = CachingAVURLAsset(url: origin.url(Self.path), reader: reader)
            let player = AVQueuePlayer(items: [AVPlayerItem(asset: asset), AVPlayerItem(asset: next)])
            let canceller = QueuePlayerLoadingCanceller(player: player)
            let toEnd = AVAssetResourceLoadingRequest(simulatedContentInformation: false, offset: 0, toEnd: true)
            #expect(asset.resourceLoader.simulatedLoad(toEnd))
            try await waitUntil { (toEnd.dataRequest?.simulatedReceived.count ?? 0) > 0 }
            player.advanceToNextItem()
            try await waitUntil { toEnd.isFinished || reader.activeDownloads == 0 }
            #expect(toEnd.simulatedRecord.calls != ["finishLoading"], "the previous item's request ran on to the end")
            withExtendedLifetime(canceller) {}
        }
    }

    @Test func theAssetsPreloadTheNextItemsThroughTheReader() async throws {
        try await Harness.with { h in
            h.origin.serve(.generated(length: 4 << 20, seed: 8), at: "/next.mp4")
            let assets = try await CachingAssets.start(reader: h.reader)
            assets.preload([h.origin.url("/next.mp4")], seconds: 1)
            try await waitUntil { h.reader.preloadStatus.first?.state == .done }
            // Generated bytes have no readable layout: the start of the file is stored, from the origin's bytes.
            let stored = try #require(h.reader.preloadStatus.first?.bytesFetched)
            #expect(stored > 0 && stored < 4 << 20 && h.origin.bodyBytesSent("/next.mp4") == stored)
            let requests = h.origin.requests("/next.mp4").count
            let bytes = try await collect(try await h.reader.read(h.origin.url("/next.mp4"), offset: 0, length: stored))
            #expect(h.origin.resource(at: "/next.mp4")!.firstMismatch(in: bytes, at: 0) == nil)
            #expect(h.origin.requests("/next.mp4").count == requests, "the read after the preload is local")
            await assets.stop()
        }
    }

    /// The offline front door: an HLS asset pinned with the lower variant and French audio only,
    /// the origin failing (`503`). The asset `CachingAssets` makes leads to the embedded proxy, whose master
    /// lists only what is held (AVPlayer would otherwise pick the default English audio it
    /// cannot have), and every playlist and segment it names answers with the origin's bytes.
    @Test func aPinnedAssetPlaysTheRenditionsHeldThroughTheEmbeddedProxyWithTheOriginGone() async throws {
        try await Harness.with { h in
            h.origin.serveRenditionAsset()
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.pin(
                h.origin.url("/hls/master.m3u8"),
                renditions: RenditionChoice(variants: [.lowestBandwidth], audio: .languages(["fr"])))
            try await waitUntil { queue.job(matching: job.id)?.state == .completed }
            await queue.shutDown()
            // The origin fails from now on (its connections stay open, as a CDN's error pages do).
            for path in ["/hls/master.m3u8"] + TestOrigin.renditionPlaylists.map({ "/hls/\($0).m3u8" }) {
                h.origin.update(path) { $0.faults.status = 503 }
            }

            let assets = try await CachingAssets.start(reader: h.reader)
            let asset = try await assets.asset(for: h.origin.url("/hls/master.m3u8"))
            #expect(!(asset is CachingAVURLAsset), "an HLS asset plays through the embedded proxy")
            let served = String(decoding: try await Self.get(asset.url), as: UTF8.self)
            #expect(served.contains("v0.m3u8") && served.contains("a_fr.m3u8"), "\(served)")
            #expect(!served.contains("v1.m3u8") && !served.contains("a_en.m3u8"), "\(served)")
            var segments = 0
            for line in served.split(separator: "\n") where !line.hasPrefix("#") || line.contains("URI=") {
                let text =
                    line.hasPrefix("#")
                    ? String(line.components(separatedBy: "URI=\"")[1].prefix { $0 != "\"" }) : String(line)
                let playlistURL = try #require(URL(string: text, relativeTo: asset.url)?.absoluteURL)
                let media = String(decoding: try await Self.get(playlistURL), as: UTF8.self)
                for segment in media.split(separator: "\n") where !segment.hasPrefix("#") {
                    let segmentURL = try #require(URL(string: String(segment), relativeTo: playlistURL)?.absoluteURL)
                    let bytes = try await Self.get(segmentURL)
                    let originURL = try #require(
                        URLComponents(url: segmentURL, resolvingAgainstBaseURL: false)?.queryItems?.first {
                            $0.name == "url"
                        }?.value.flatMap { URL(string: $0) })
                    #expect(
                        h.origin.resource(at: originURL.path)?.firstMismatch(in: ByteBuffer(bytes: bytes), at: 0)
                            == nil, "\(originURL.path)")
                    #expect(bytes.count == 40_000)
                    segments += 1
                }
            }
            #expect(segments == 4, "two segments of the video and two of the French audio")
            await assets.stop()
        }
    }

    /// The player item `CachingAssets` makes starts on the first eligible variant: the one the
    /// embedded proxy lists first, whose start the cache holds.
    @Test func thePlayerItemStartsOnTheFirstEligibleVariant() async throws {
        try await Harness.with { h in
            h.origin.serveRenditionAsset()
            let assets = try await CachingAssets.start(reader: h.reader)
            let item = try await assets.playerItem(for: h.origin.url("/hls/master.m3u8"))
            #expect(item.startsOnFirstEligibleVariant)
            #expect(!(item.asset is CachingAVURLAsset), "an HLS asset plays through the embedded proxy")
            await assets.stop()
        }
    }

    /// The body of a `200` answer to `url`.
    static func get(_ url: URL) async throws -> [UInt8] {
        let (data, response) = try await FoundationNetworking.URLSession.shared.data(from: url)
        #expect((response as? FoundationNetworking.HTTPURLResponse)?.statusCode == 200, "\(url)")
        return Array(data)
    }
}
