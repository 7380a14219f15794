// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AVFoundation
import CheckedAVFoundationAdapter
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// AirPlay: the receiver fetches the item's URL from another device of the network. When the
/// player's external playback starts, `CachingAssets`' follower replaces the item, at the same
/// time, by one on the embedded proxy's LAN address (127.0.0.3 here, standing for the Wi-Fi
/// address) with the token in the path and no header; a pinned HLS asset then plays from that
/// URL with the origin stopped. When external playback ends, the item plays from loopback again
/// and the LAN address closes. An item nothing of which is held goes to the origin when the app
/// prefers it.
@Suite(.stallLimit) struct ExternalPlaybackTests {
    @Test func externalPlaybackMovesTheItemToACapabilityURLOnTheLANAddress() async throws {
        try await Harness.with { h in
            h.origin.serveRenditionAsset()
            let master = h.origin.url("/hls/master.m3u8")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.pin(master)
            try await waitUntil { queue.job(matching: job.id)?.state == .completed }
            await queue.shutDown()
            try await h.origin.shutdown()

            let assets = try await CachingAssets.start(reader: h.reader)
            let player = AVPlayer()
            player.replaceCurrentItem(with: try await assets.playerItem(for: master))
            player.simulatePlayback(at: CMTime(seconds: 1.5, preferredTimescale: 600))
            let follower = ExternalPlaybackFollower(player: player, assets: assets, lanAddress: { "127.0.0.3" })
            player.simulateExternalPlayback(true)
            try await waitUntil { (player.currentItem?.asset as? AVURLAsset)?.url.host == "127.0.0.3" }
            let url = try #require((player.currentItem?.asset as? AVURLAsset)?.url)
            #expect(url.path.hasPrefix("/o/") && url.query == nil, "the credential in the path: \(url)")
            #expect(url.port == assets.proxy.port && assets.originURL(of: AVURLAsset(url: url)) == master)
            #expect(player.simulatedSeeks.last == CMTime(seconds: 1.5, preferredTimescale: 600))
            // The receiver's requests: the master and a variant's playlist and segments, no header.
            let (data, response) = try await FoundationNetworking.URLSession.shared.data(from: url)
            #expect((response as? FoundationNetworking.HTTPURLResponse)?.statusCode == 200)
            let text = String(decoding: data, as: UTF8.self)
            let variant = try #require(text.split(separator: "\n").first { !$0.hasPrefix("#") })
            let variantURL = try #require(URL(string: String(variant), relativeTo: url)?.absoluteURL)
            #expect(variantURL.host == "127.0.0.3")
            let (media, mediaResponse) = try await FoundationNetworking.URLSession.shared.data(from: variantURL)
            #expect((mediaResponse as? FoundationNetworking.HTTPURLResponse)?.statusCode == 200)
            let segment = try #require(
                String(decoding: media, as: UTF8.self).split(separator: "\n").first { !$0.hasPrefix("#") })
            let segmentURL = try #require(URL(string: String(segment), relativeTo: variantURL)?.absoluteURL)
            let (bytes, segmentResponse) = try await FoundationNetworking.URLSession.shared.data(from: segmentURL)
            #expect(
                (segmentResponse as? FoundationNetworking.HTTPURLResponse)?.statusCode == 200 && bytes.count == 40_000)

            // External playback ends: loopback again, the LAN address closed.
            player.simulateExternalPlayback(false)
            try await waitUntil { (player.currentItem?.asset as? AVURLAsset)?.url.host == "127.0.0.1" }
            let closed = try? await FoundationNetworking.URLSession.shared.data(from: url)
            #expect(closed == nil, "the LAN address no longer answers")
            withExtendedLifetime(follower) {}
            await assets.stop()
        }
    }

    @Test func aReceiverGetsTheOriginWhenNothingIsHeldAndTheAppPrefersIt() async throws {
        try await Harness.with { h in
            h.origin.serve(.generated(length: 100_000, seed: 3, mimeType: "audio/mpeg"), at: "/new.mp3")
            let assets = try await CachingAssets.start(reader: h.reader)
            let episode = h.origin.url("/new.mp3")
            #expect(
                try await assets.proxy.externalSource(
                    for: episode, lanAddress: "127.0.0.3", prefersOriginWhenNothingHeld: true) == .origin(episode))
            #expect(try await assets.proxy.externalSource(for: episode, lanAddress: nil) == .origin(episode))
            let lan = try await assets.proxy.externalSource(for: episode, lanAddress: "127.0.0.3")
            guard case .lan(let url) = lan else { return #expect(Bool(false), "\(lan)") }
            let (data, _) = try await FoundationNetworking.URLSession.shared.data(from: url)
            #expect(data.count == 100_000)
            await assets.stop()
        }
    }
}
