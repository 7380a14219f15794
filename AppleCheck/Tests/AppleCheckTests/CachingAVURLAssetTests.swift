// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AVFoundation
import CheckedAVFoundationAdapter
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport
import NIOCore
import Testing

/// The Apple adapter, compiled unchanged against the AVFoundation stand-in, driven as AVPlayer
/// drives a resource loader: AVPlayer's recorded requests for an MP4 (``AVPlayerTrace``)
/// against the test origin on loopback. What this proves: the adapter compiles with these
/// declarations, sets its delegate before any request, and answers content information, data
/// in order, finishing and cancels as the engine's own tests expect. What it cannot: the real
/// threading and timing of AVFoundation, which only a Mac shows.
@Suite struct CachingAVURLAssetTests {
    static let path = "/film.mp4"

    static func withAsset(_ body: (CachingAVURLAsset, TestOrigin, CachingReader) async throws -> Void) async throws {
        try await Harness.with { h in
            h.origin.serve(.generated(length: AVPlayerTrace.mp4Length, seed: 7), at: Self.path)
            let asset = CachingAVURLAsset(url: h.origin.url(Self.path), reader: h.reader)
            try await body(asset, h.origin, h.reader)
        }
    }

    /// Waits until the adapter has finished `request`.
    static func finished(_ request: AVAssetResourceLoadingRequest) async throws -> AVAssetResourceLoadingRequest.SimulatedRecord {
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
            #expect(first.dataRequest?.simulatedReceived == Data(content.buffer(offset: 0, length: 2).readableBytesView))
            // Then the recorded data requests (each capped at 1 MiB here, to keep the test small).
            for (offset, length) in AVPlayerTrace.mp4.prefix(8) {
                let request = AVAssetResourceLoadingRequest(simulatedContentInformation: false, offset: offset, length: Int(min(length, 1 << 20)))
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
            let again = AVAssetResourceLoadingRequest(simulatedContentInformation: false, offset: AVPlayerTrace.mp4[0].offset, length: 65536)
            #expect(asset.resourceLoader.simulatedLoad(again))
            _ = try await Self.finished(again)
            #expect(origin.requests(Self.path).count == before)
        }
    }

    @Test func aCancelledRequestStopsAndIsNotFinished() async throws {
        try await Self.withAsset { asset, _, reader in
            let toEnd = AVAssetResourceLoadingRequest(simulatedContentInformation: false, offset: 1_000_000, toEnd: true)
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
}
