// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// Fill on play: a player that starts an audio file has it fetched on to its end, on the origin
/// answer that began its play, as the cache's own work; the whole file then matches the
/// origin's byte for byte. What the policy leaves out (video by default, `none`, a metered
/// network) is fetched only as far as players read.
@Suite(.stallLimit, .endToEnd) struct FillOnPlayTests {
    static let length: Int64 = 6 << 20
    static let content = DeterministicContent(seed: 11)

    /// Reads the first `bytes` of `url` through the proxy (asked open-ended, as players ask),
    /// then hangs up.
    static func play(_ proxy: ProxyHarness, _ url: String, bytes: Int) async throws {
        let response = try await proxy.client.execute(
            {
                var request = HTTPClientRequest(url: url)
                request.headers.add(name: "Range", value: "bytes=0-")
                return request
            }(), timeout: .seconds(30))
        #expect(response.status == .partialContent)
        var got = ByteBuffer()
        for try await chunk in response.body {
            got.writeImmutableBuffer(chunk)
            if got.readableBytes >= bytes { break }
        }
        #expect(got.readableBytes >= bytes && content.firstMismatch(in: got, at: 0) == nil)
    }

    /// Whether the store holds every byte of `path`, and they are the origin's.
    static func isWhole(_ proxy: ProxyHarness, _ path: String) async throws -> Bool {
        let url = proxy.origin.url(path)
        guard proxy.base.store.spans(for: proxy.base.store.key(for: url)).contains(ByteRange(0, length)) else {
            return false
        }
        let stream = try #require(proxy.base.reader.cachedRead(url, range: ByteRange(0, length)))
        var all = ByteBuffer()
        for try await chunk in stream { all.writeImmutableBuffer(chunk) }
        #expect(Int64(all.readableBytes) == length && content.firstMismatch(in: all, at: 0) == nil)
        return true
    }

    @Test func aPlayedAudioFileIsFilledOnTheAnswerThatBeganThePlay() async throws {
        try await ProxyHarness.with { proxy in
            var episode = TestOrigin.Resource.generated(length: Self.length, seed: 11, mimeType: "audio/mpeg")
            episode.faults.bytesPerSecond = 16 << 20
            proxy.origin.serve(episode, at: "/pod/episode.mp3")
            try await Self.play(proxy, proxy.url("/pod/episode.mp3"), bytes: 256 << 10)
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty }
            #expect(try await Self.isWhole(proxy, "/pod/episode.mp3"))
            let requests = proxy.origin.requests("/pod/episode.mp3")
            #expect(requests.count == 1, "the play's own answer goes on to the end: \(requests)")
        }
    }

    /// A player that asks for a bounded range first (a probe of the header) gets it, and the
    /// rest of the file comes in one more request.
    @Test func aBoundedFirstRangeIsFilledWithOneMoreRequest() async throws {
        try await ProxyHarness.with { proxy in
            proxy.origin.serve(
                .generated(length: Self.length, seed: 11, mimeType: "audio/mpeg"), at: "/pod/bounded.mp3")
            let reply = try await proxy.get(proxy.url("/pod/bounded.mp3"), headers: [("Range", "bytes=0-65535")])
            #expect(reply.status == 206 && reply.body.readableBytes == 65536)
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty && proxy.base.reader.activeDownloads == 0 }
            #expect(try await Self.isWhole(proxy, "/pod/bounded.mp3"))
            let ranges = proxy.origin.requests("/pod/bounded.mp3").map(\.range)
            #expect(ranges == ["bytes=0-65535", "bytes=65536-\(Self.length - 1)"], "\(ranges)")
        }
    }

    /// A `HEAD` plays nothing: the file is not filled.
    @Test func aHeadIsNoPlay() async throws {
        try await ProxyHarness.with { proxy in
            proxy.origin.serve(.generated(length: Self.length, seed: 11, mimeType: "audio/mpeg"), at: "/pod/head.mp3")
            let reply = try await proxy.get(proxy.url("/pod/head.mp3"), method: .HEAD)
            #expect(reply.status == 200 && reply.headers.first(name: "Content-Length") == "\(Self.length)")
            try await proxy.base.waitUntilQuiet("/pod/head.mp3")
            #expect(try await !Self.isWhole(proxy, "/pod/head.mp3"))
            #expect(proxy.base.reader.fills.progress.isEmpty)
        }
    }

    /// What the policy leaves out is fetched only as far as the player read and the lead.
    @Test(arguments: ["video", "none", "metered"])
    func whatThePolicyLeavesOutIsNotFilled(_ leftOut: String) async throws {
        var reader = CachingReader.Configuration()
        if leftOut == "none" { reader.fillOnPlay = .none }
        try await ProxyHarness.with(reader: reader) { proxy in
            if leftOut == "metered" { proxy.base.reader.fills.isAllowed = false }
            var file = TestOrigin.Resource.generated(
                length: Self.length, seed: 11, mimeType: leftOut == "video" ? "video/mp4" : "audio/mpeg")
            file.faults.bytesPerSecond = 16 << 20
            proxy.origin.serve(file, at: "/pod/left.mp3")
            try await Self.play(proxy, proxy.url("/pod/left.mp3"), bytes: 256 << 10)
            try await proxy.base.waitUntilQuiet("/pod/left.mp3")
            #expect(try await !Self.isWhole(proxy, "/pod/left.mp3"), "\(leftOut)")
            #expect(proxy.base.reader.fills.progress.isEmpty)
        }
    }
}

extension FillOnPlayTests {
    /// The download queue's word on the network is the fill's: a metered or low-data network
    /// (the system's, or the user's over it) stops fills from starting.
    @Test func theQueuesNetworkRuleGovernsFills() async throws {
        try await ProxyHarness.with { proxy in
            let queue = try DownloadQueue(reader: proxy.base.reader)
            queue.start()
            #expect(proxy.base.reader.fills.isAllowed)
            queue.networkChanged(DownloadRules.NetworkConditions(isMetered: true))
            #expect(!proxy.base.reader.fills.isAllowed)
            queue.networkChanged(DownloadRules.NetworkConditions(isConstrained: true))
            #expect(!proxy.base.reader.fills.isAllowed)
            queue.networkChanged(.unknown)
            #expect(proxy.base.reader.fills.isAllowed)
            queue.networkOverride = .metered
            #expect(!proxy.base.reader.fills.isAllowed)
            await queue.shutDown()
        }
    }

    /// A fill under way when the network turns metered stops at its next chunk: with no player
    /// reading, its download ends, and what it stored stays (the origin sends slowly, 24 s for
    /// the file, so the fill is still under way when the test flips the network).
    @Test func aFillStopsWhenTheNetworkTurnsMetered() async throws {
        try await ProxyHarness.with { proxy in
            var episode = TestOrigin.Resource.generated(length: Self.length, seed: 11, mimeType: "audio/mpeg")
            episode.faults.bytesPerSecond = 256 << 10
            proxy.origin.serve(episode, at: "/pod/metered.mp3")
            try await Self.play(proxy, proxy.url("/pod/metered.mp3"), bytes: 64 << 10)
            #expect(proxy.base.reader.fills.progress.map(\.length) == [Self.length])
            proxy.base.reader.fills.isAllowed = false
            try await proxy.base.waitUntilQuiet("/pod/metered.mp3")
            #expect(proxy.base.reader.fills.progress.isEmpty)
            #expect(try await !Self.isWhole(proxy, "/pod/metered.mp3"))
            let key = proxy.base.store.key(for: proxy.origin.url("/pod/metered.mp3"))
            #expect(proxy.base.store.spans(for: key).byteCount >= 64 << 10, "what it stored stays")
        }
    }

    /// `count` MP3s of 4 MiB at `folder` (`0.mp3`, `1.mp3`, …), content seeds from `seed`, sent at
    /// 4 MiB/s: a fill takes a second, so it is still under way at the next song.
    static func serveSongs(_ count: Int, at folder: String, seed: UInt64, on proxy: ProxyHarness) {
        for index in 0..<count {
            var song = TestOrigin.Resource.generated(
                length: 4 << 20, seed: seed + UInt64(index), mimeType: "audio/mpeg")
            song.faults.bytesPerSecond = 4 << 20
            proxy.origin.serve(song, at: "\(folder)\(index).mp3")
        }
    }

    /// Issue 75, every flag at its default: a player that asks closed ranges of one song after
    /// another (as AVPlayer asks for audio, skipping through a playlist) is answered every time,
    /// with the origin's bytes. Each play starts a fill, at most ``CachingReader/Configuration``'s
    /// `concurrentFills` run, and none holds a connection the next song needs. (On e48a7a1 each
    /// fill kept its play's connection and waited for another: the seventeenth song, one past the
    /// host's sixteen connections, was never answered.)
    @Test func closedRangesOfOneSongAfterAnotherAreAllAnswered() async throws {
        try await ProxyHarness.with { proxy in
            let songs = 24
            Self.serveSongs(songs, at: "/songs/", seed: 200, on: proxy)
            for index in 0..<songs {
                let start = Int64(index) * 10_000
                let reply = try await proxy.get(
                    proxy.url("/songs/\(index).mp3"), headers: [("Range", "bytes=\(start)-\(start + 65_535)")])
                #expect(reply.status == 206 && reply.body.readableBytes == 65_536, "song \(index)")
                #expect(
                    DeterministicContent(seed: 200 + UInt64(index)).firstMismatch(in: reply.body, at: start) == nil,
                    "song \(index): the origin's bytes")
                #expect(proxy.base.reader.fills.progress.count <= 4, "song \(index): fills under way")
                // The player's own range took one origin request (the fill's are the cache's own).
                #expect(
                    proxy.origin.requests("/songs/\(index).mp3").first?.range == "bytes=\(start)-\(start + 65_535)")
            }
        }
    }

    /// The same with open ranges hung up after their first bytes (as ffmpeg and mpv seek): each
    /// play's answer goes on as a fill past its player, and lets its connection go to the next
    /// player that waits for one.
    @Test func openRangesHungUpOneSongAfterAnotherAreAllAnswered() async throws {
        try await ProxyHarness.with { proxy in
            let songs = 24
            Self.serveSongs(songs, at: "/open/", seed: 300, on: proxy)
            for index in 0..<songs {
                let start = Int64(index) * 10_000
                var request = HTTPClientRequest(url: proxy.url("/open/\(index).mp3"))
                request.headers.add(name: "Range", value: "bytes=\(start)-")
                let response = try await proxy.client.execute(request, timeout: .seconds(30))
                #expect(response.status == .partialContent, "song \(index)")
                var got = ByteBuffer()
                for try await chunk in response.body {
                    got.writeImmutableBuffer(chunk)
                    if got.readableBytes >= 1_000 { break }
                }
                #expect(got.readableBytes >= 1_000, "song \(index)")
                #expect(DeterministicContent(seed: 300 + UInt64(index)).firstMismatch(in: got, at: start) == nil)
            }
            #expect(proxy.base.reader.fills.progress.count <= 4)
        }
    }
}

/// The policy alone: which files it covers, and its words.
@Suite(.stallLimit) struct FillPolicyTests {
    @Test func theDefaultTakesAudioUpToItsSizeAndNeverAPlaylist() {
        let policy = FillPolicy.audio
        #expect(policy.covers(mimeType: "audio/mpeg", length: 60 << 20, path: "/e.mp3"))
        #expect(policy.covers(mimeType: "application/octet-stream", length: 1000, path: "/feed/e.M4A"))
        #expect(policy.covers(mimeType: nil, length: 1000, path: "/e.opus"))
        #expect(!policy.covers(mimeType: "audio/mpeg", length: (512 << 20) + 1, path: "/e.mp3"))
        #expect(!policy.covers(mimeType: "audio/mpeg", length: nil, path: "/e.mp3"))
        #expect(!policy.covers(mimeType: "video/mp4", length: 1000, path: "/e.mp3"))
        #expect(!policy.covers(mimeType: "application/octet-stream", length: 1000, path: "/film.mp4"))
        #expect(!policy.covers(mimeType: "audio/mpegurl", length: 1000, path: "/list.m3u"))
        #expect(!FillPolicy.none.covers(mimeType: "audio/mpeg", length: 1000, path: "/e.mp3"))
        #expect(FillPolicy.all.covers(mimeType: "video/mp4", length: 4 << 30, path: "/film.mp4"))
        #expect(!FillPolicy.all.covers(mimeType: "application/dash+xml", length: 1000, path: "/m.mpd"))
        #expect(FillPolicy.upTo(1000).covers(mimeType: "video/mp4", length: 1000, path: "/f.mp4"))
        #expect(!FillPolicy.upTo(1000).covers(mimeType: "video/mp4", length: 1001, path: "/f.mp4"))
    }

    /// A fill takes a file of an eighth of the store at most.
    @Test func aFillTakesAnEighthOfTheStoreAtMost() {
        #expect(FillPolicy.fits(16 << 20, storeLimit: 128 << 20))
        #expect(!FillPolicy.fits((16 << 20) + 1, storeLimit: 128 << 20))
    }

    /// Where a fill's play stands: proven by what its players read or by a quiet probation with
    /// no other play begun, skipped when another play began.
    @Test func aPlayProvesItselfByReadingOrQuietAndIsSkippedByAnother() {
        let proof: Int64 = 1 << 20
        func standing(played: Int64, of length: Int64 = 8 << 20, quiet: Bool, other: Bool) -> FillStanding {
            FillPolicy.standing(
                played: played, of: length, proofBytes: proof, quietEnough: quiet, otherPlayBegan: other)
        }
        #expect(standing(played: proof, quiet: false, other: true) == .proven, "read enough: at once")
        #expect(standing(played: proof - 1, quiet: false, other: true) == .pending)
        #expect(standing(played: 0, quiet: false, other: false) == .pending)
        #expect(standing(played: proof - 1, quiet: true, other: true) == .skipped)
        #expect(standing(played: 0, quiet: true, other: false) == .proven, "a moment's play, nothing after")
        #expect(standing(played: 100, of: 200, quiet: false, other: true) == .proven, "half of a short file")
        #expect(standing(played: 99, of: 200, quiet: true, other: true) == .skipped)
    }

    @Test func itsWordsReadBack() {
        for text in ["none", "audio", "all", "1048576"] {
            #expect(FillPolicy(text)?.description == text)
        }
        #expect(FillPolicy("0") == nil && FillPolicy("some") == nil && FillPolicy("-5") == nil)
    }
}
