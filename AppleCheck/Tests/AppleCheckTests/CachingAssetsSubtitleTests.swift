// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AVFoundation
import CheckedAVFoundationAdapter
import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// Side-loaded subtitles through the Apple front door: an app pins an HLS asset with a French
/// SRT (`RenditionChoice.sideLoaded`) and plays it with the same track
/// (`CachingAssets.playerItem(for:subtitles:)`) while the origin fails. AVPlayer's requests
/// with the French legible option selected, in its order (the master, the selected subtitle
/// rendition's playlist and its WebVTT, then the variant and its segments), are all answered
/// from the cache: the track is listed, its cues are WebVTT mapped to the stream's first
/// timestamp, and every segment is the origin's bytes.
@Suite(.stallLimit) struct CachingAssetsSubtitleTests {
    static let srt = "1\n00:00:02,000 --> 00:00:04,000\nBonjour <i>à tous</i>\n"

    @Test func aPinnedSideLoadedTrackIsSelectedAndPlaysWithTheOriginGone() async throws {
        try await Harness.with { h in
            let segments = [
                SyntheticTransportStream.segment(pts: 900_000), SyntheticTransportStream.segment(pts: 1_260_000),
            ]
            for (index, bytes) in segments.enumerated() {
                h.origin.serve(
                    TestOrigin.Resource(body: .bytes(bytes), mimeType: "video/mp2t"), at: "/hls/s\(index).ts")
            }
            let media =
                "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:4,\ns0.ts\n#EXTINF:4,\ns1.ts\n#EXT-X-ENDLIST\n"
            let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\nv.m3u8\n"
            for (path, text, type) in [
                ("/hls/v.m3u8", media, "application/vnd.apple.mpegurl"),
                ("/hls/master.m3u8", master, "application/vnd.apple.mpegurl"), ("/subs/fr.srt", Self.srt, "text/plain"),
            ] {
                h.origin.serve(TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: type), at: path)
            }
            let french = try #require(
                SideLoadedSubtitle(language: "fr", url: h.origin.url("/subs/fr.srt"), name: "Français"))
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            var choice = RenditionChoice()
            choice.sideLoaded = [french]
            let job = try await queue.pin(h.origin.url("/hls/master.m3u8"), renditions: choice)
            try await waitUntil { queue.job(matching: job.id)?.state == .completed }
            await queue.shutDown()
            for path in ["/hls/master.m3u8", "/hls/v.m3u8", "/hls/s0.ts", "/hls/s1.ts", "/subs/fr.srt"] {
                h.origin.update(path) { $0.faults.status = 503 }
            }
            h.origin.resetCounters()

            let assets = try await CachingAssets.start(reader: h.reader)
            let item = try await assets.playerItem(for: h.origin.url("/hls/master.m3u8"), subtitles: [french])
            let asset = try #require(item.asset as? AVURLAsset)
            let served = String(decoding: try await CachingAVURLAssetTests.get(asset.url), as: UTF8.self)
            // AVPlayer's legible group is the SUBTITLES renditions; the app selects French.
            let selected = try #require(
                served.split(separator: "\n").first {
                    $0.hasPrefix("#EXT-X-MEDIA:TYPE=SUBTITLES") && $0.contains("LANGUAGE=\"fr\"")
                })
            let group = try #require(Self.attribute("GROUP-ID", of: selected))
            #expect(Self.attribute("NAME", of: selected) == "Français")
            let variantLines = served.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-STREAM-INF") }
            #expect(variantLines.count == 1 && variantLines.allSatisfy { Self.attribute("SUBTITLES", of: $0) == group })
            let subtitlePlaylistURL = try #require(
                URL(string: Self.attribute("URI", of: selected) ?? "", relativeTo: asset.url)?.absoluteURL)
            let subtitlePlaylist = String(
                decoding: try await CachingAVURLAssetTests.get(subtitlePlaylistURL), as: UTF8.self)
            #expect(subtitlePlaylist.contains("#EXTINF:8.000,\n") && subtitlePlaylist.hasSuffix("#EXT-X-ENDLIST\n"))
            let cueFile = try #require(Self.uris(in: subtitlePlaylist, relativeTo: subtitlePlaylistURL).first)
            let cues = String(decoding: try await CachingAVURLAssetTests.get(cueFile), as: UTF8.self)
            #expect(
                cues
                    == "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\n00:00:02.000 --> 00:00:04.000\nBonjour <i>à tous</i>\n",
                "\(cues)")
            let variantURL = try #require(Self.uris(in: served, relativeTo: asset.url).first)
            let variant = String(decoding: try await CachingAVURLAssetTests.get(variantURL), as: UTF8.self)
            let segmentURLs = Self.uris(in: variant, relativeTo: variantURL)
            #expect(segmentURLs.count == 2)
            for (index, url) in segmentURLs.enumerated() {
                #expect(try await CachingAVURLAssetTests.get(url) == segments[index])
            }
            #expect(h.origin.requests("/subs/fr.srt").isEmpty && h.origin.requests("/hls/s0.ts").isEmpty)
            await assets.stop()
        }
    }

    /// A quoted attribute's value in a playlist tag line.
    static func attribute(_ name: String, of line: Substring) -> String? {
        guard let start = line.range(of: name + "=\"") else { return nil }
        return String(line[start.upperBound...].prefix { $0 != "\"" })
    }

    /// The URI lines of a playlist, resolved.
    static func uris(in playlist: String, relativeTo base: URL) -> [URL] {
        playlist.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
            URL(string: String($0), relativeTo: base)?.absoluteURL
        }
    }
}
