// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// Prefetching an HLS asset through the engine: the chosen variant and its audio, as many
/// seconds as asked, progress that adds up, cancellation that keeps what arrived, and a
/// player that afterwards needs nothing from the origin.
@Suite(.stallLimit, .endToEnd) struct HLSPrefetchTests {
    static let playlistType = "application/vnd.apple.mpegurl"

    /// A master playlist at `/p/master.m3u8`: two video variants (`lo` 200 kbit/s, `hi`
    /// 800 kbit/s) sharing the audio group `aud` (`en` default, `fr`); each media playlist has
    /// an init section and four 2-second segments. Returns every segment and init path with its content.
    static func serveAsset(on origin: TestOrigin) -> [String: (DeterministicContent, Int64)] {
        var files: [String: (DeterministicContent, Int64)] = [:]
        origin.serve(
            TestOrigin.Resource(
                body: .bytes(
                    Array(
                        """
                        #EXTM3U
                        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="fr",URI="audio/fr.m3u8"
                        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",DEFAULT=YES,URI="audio/en.m3u8"
                        #EXT-X-STREAM-INF:BANDWIDTH=800000,AUDIO="aud"
                        hi/index.m3u8
                        #EXT-X-STREAM-INF:BANDWIDTH=200000,AUDIO="aud"
                        /p/lo/index.m3u8

                        """.utf8)), mimeType: playlistType), at: "/p/master.m3u8")
        for (index, folder) in ["lo", "hi", "audio/en", "audio/fr"].enumerated() {
            var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"init.mp4\"\n"
            for segment in 0..<4 { text += "#EXTINF:2.0,\ns\(segment).m4s\n" }
            text += "#EXT-X-ENDLIST\n"
            // The audio playlists sit beside their segments as `<lang>.m3u8`.
            let playlist = folder.hasPrefix("audio/") ? "/p/\(folder).m3u8" : "/p/\(folder)/index.m3u8"
            let directory = folder.hasPrefix("audio/") ? "/p/audio" : "/p/\(folder)"
            let prefix = folder.hasPrefix("audio/") ? String(folder.dropFirst(6)) + "-" : ""
            origin.serve(
                TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            text.replacingOccurrences(of: "init.mp4", with: prefix + "init.mp4")
                                .replacingOccurrences(of: "\ns", with: "\n" + prefix + "s").utf8)),
                    mimeType: playlistType), at: playlist)
            for (number, name) in (["init.mp4"] + (0..<4).map { "s\($0).m4s" }).enumerated() {
                let content = DeterministicContent(seed: UInt64(index * 10 + number + 1))
                let length = Int64(20_000 + index * 1_000 + number * 333)
                let path = "\(directory)/\(prefix)\(name)"
                origin.serve(
                    TestOrigin.Resource(body: .generated(content, length: length), mimeType: "video/iso.segment"),
                    at: path)
                files[path] = (content, length)
            }
        }
        return files
    }

    /// Every report, in order.
    final class Reports: Sendable {
        let all = Mutex<[PrefetchProgress]>([])
        func add(_ progress: PrefetchProgress) { all.withLock { $0.append(progress) } }
        var list: [PrefetchProgress] { all.withLock { $0 } }
    }

    /// Whether the store holds exactly `content`'s bytes for the whole of `path`.
    static func isStored(_ path: String, _ content: DeterministicContent, length: Int64, in h: Harness) async throws
        -> Bool
    {
        guard let stream = h.reader.cachedRead(h.origin.url(path), range: ByteRange(0, length)) else { return false }
        let bytes = try await collect(stream)
        return bytes.readableBytes == Int(length) && content.firstMismatch(in: bytes, at: 0) == nil
    }

    @Test func theChosenVariantAndItsDefaultAudioAreStoredWithProgressThatAddsUp() async throws {
        try await Harness.with { h in
            let files = Self.serveAsset(on: h.origin)
            let reports = Reports()
            let result = try await h.reader.prefetchHLS(
                h.origin.url("/p/master.m3u8"), options: .init(variant: .lowestBandwidth), progress: reports.add)
            let chosen = files.filter { $0.key.hasPrefix("/p/lo/") || $0.key.hasPrefix("/p/audio/en-") }
            let total = chosen.values.reduce(0) { $0 + $1.1 }
            #expect(result.playlists.map(\.path) == ["/p/lo/index.m3u8", "/p/audio/en.m3u8"])
            #expect(
                result.resourcesTotal == 10 && result.isComplete && result.bytesDone == total
                    && result.bytesTotal == total && result.bytesAlreadyCached == 0)
            for (path, (content, length)) in files {
                let stored = try await Self.isStored(path, content, length: length, in: h)
                #expect(stored == (chosen[path] != nil), "\(path)")
                #expect(
                    h.origin.requests(path).count == (chosen[path] != nil ? 1 : 0),
                    "\(path): \(h.origin.requests(path))")
            }
            // Reports only go forward, and the last is the result.
            let list = reports.list
            #expect(
                zip(list, list.dropFirst()).allSatisfy {
                    $0.bytesDone <= $1.bytesDone && $0.resourcesDone <= $1.resourcesDone
                })
            #expect(list.first?.bytesTotal == nil && list.last == result)
            // Again: everything is cached, nothing is fetched.
            h.origin.resetCounters()
            let again = try await h.reader.prefetchHLS(
                h.origin.url("/p/master.m3u8"), options: .init(variant: .lowestBandwidth))
            #expect(again.bytesDone == total && again.bytesAlreadyCached == total)
            #expect(files.keys.allSatisfy { h.origin.requests($0).isEmpty })
        }
    }

    @Test func secondsLimitEachMediaPlaylistAndBandwidthPicksTheVariant() async throws {
        try await Harness.with { h in
            let files = Self.serveAsset(on: h.origin)
            // 3 s: the segments until their durations reach 3 s, so two of 2 s (and the init section).
            let result = try await h.reader.prefetchHLS(
                h.origin.url("/p/master.m3u8"), options: .init(variant: .highestBandwidth, seconds: 3))
            let expected = [
                "/p/hi/init.mp4", "/p/hi/s0.m4s", "/p/hi/s1.m4s", "/p/audio/en-init.mp4", "/p/audio/en-s0.m4s",
                "/p/audio/en-s1.m4s",
            ]
            #expect(result.resourcesTotal == 6 && result.isComplete)
            #expect(Set(files.keys.filter { !h.origin.requests($0).isEmpty }) == Set(expected))
            // A media playlist given directly is its own plan.
            h.origin.resetCounters()
            let media = try await h.reader.prefetchHLS(h.origin.url("/p/lo/index.m3u8"), options: .init(seconds: 0.5))
            #expect(media.playlists.map(\.path) == ["/p/lo/index.m3u8"] && media.resourcesTotal == 2)
            #expect(Set(files.keys.filter { !h.origin.requests($0).isEmpty }) == ["/p/lo/init.mp4", "/p/lo/s0.m4s"])
        }
    }

    @Test func bandwidthChoices() {
        let variants = [
            HLSPlaylist.Variant(bandwidth: 500, uri: "mid"), .init(bandwidth: 100, uri: "low"),
            .init(bandwidth: 900, uri: "high"),
        ]
        let choices: [(HLSPrefetchOptions.VariantChoice, String)] = [
            (.first, "mid"), (.lowestBandwidth, "low"), (.highestBandwidth, "high"),
            (.atMost(bitsPerSecond: 600), "mid"), (.atMost(bitsPerSecond: 900), "high"),
            (.atMost(bitsPerSecond: 50), "low"),
        ]
        for (choice, uri) in choices {
            #expect(AssetPlanner.choose(choice, among: variants)?.uri == uri, "\(choice)")
        }
        #expect(AssetPlanner.choose(.first, among: []) == nil)
    }

    /// Byte-range segments of one file land in one sparse entry, only their bytes fetched;
    /// the total is known from the playlist before anything is fetched.
    @Test func byteRangeSegmentsFillOneSparseEntry() async throws {
        try await Harness.with { h in
            let content = DeterministicContent(seed: 77)
            h.origin.serve(
                TestOrigin.Resource(body: .generated(content, length: 30_000), mimeType: "video/mp2t"), at: "/b/all.ts")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            "#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:10000@0\nall.ts\n#EXTINF:1,\n#EXT-X-BYTERANGE:10000\nall.ts\n#EXTINF:1,\n#EXT-X-BYTERANGE:5000@25000\nall.ts\n#EXT-X-ENDLIST\n"
                                .utf8)),
                    mimeType: Self.playlistType), at: "/b/index.m3u8")
            let reports = Reports()
            let result = try await h.reader.prefetchHLS(h.origin.url("/b/index.m3u8"), progress: reports.add)
            #expect(
                reports.list.first?.bytesTotal == 25_000 && result.bytesDone == 25_000 && result.resourcesTotal == 3)
            #expect(h.origin.bodyBytesSent("/b/all.ts") == 25_000)
            let url = h.origin.url("/b/all.ts")
            for range in [ByteRange(0, 20_000), ByteRange(25_000, 30_000)] {
                let stream = try #require(h.reader.cachedRead(url, range: range))
                #expect(content.firstMismatch(in: try await collect(stream), at: range.lowerBound) == nil)
            }
            #expect(h.reader.cachedRead(url, range: ByteRange(20_000, 25_000)) == nil)
        }
    }

    /// Cancelling the prefetch's task stops it: it ends with `CancellationError`, the origin
    /// stops sending, and what arrived stays cached.
    @Test func cancellingStopsTheOriginAndKeepsWhatArrived() async throws {
        try await Harness.with { h in
            var slow = TestOrigin.Resource(
                body: .generated(DeterministicContent(seed: 5), length: 8 << 20), mimeType: "video/mp2t")
            slow.faults.bytesPerSecond = 1 << 20
            h.origin.serve(slow, at: "/c/big.ts")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(Array("#EXTM3U\n#EXTINF:60,\nbig.ts\n#EXT-X-ENDLIST\n".utf8)),
                    mimeType: Self.playlistType), at: "/c/index.m3u8")
            let started = AsyncStream.makeStream(of: Void.self)
            let task = Task {
                try await h.reader.prefetchHLS(h.origin.url("/c/index.m3u8")) { progress in
                    if progress.bytesDone >= 300_000 { started.continuation.yield() }
                }
            }
            var iterator = started.stream.makeAsyncIterator()
            await iterator.next()
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            // No download is left (that nothing more is then sent is shown without a network by
            // `ScriptedReadPathTests.aReaderThatGoesAwayCancelsTheOriginRequest`).
            try await waitUntil { h.reader.activeDownloads == 0 }
            let sent = h.origin.bodyBytesSent("/c/big.ts")
            #expect(sent < 4 << 20, "sent \(sent)")
            let kept = try #require(h.reader.cachedRead(h.origin.url("/c/big.ts"), range: ByteRange(0, 300_000)))
            #expect(DeterministicContent(seed: 5).firstMismatch(in: try await collect(kept), at: 0) == nil)
        }
    }
}
