// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The preload queue through the read path, against the test origin on loopback: what it
/// stores, what it asks the origin for, replacement, the budget, and players first.
@Suite(.stallLimit, .endToEnd) struct PreloadTests {
    static func done(_ reader: CachingReader, _ count: Int) -> Bool {
        let status = reader.preloadStatus
        return status.count == count && status.allSatisfy { $0.state != .queued && $0.state != .preloading }
    }

    @Test(
        .enabled(
            if: ChildProcess.toolExists("ffmpeg") && ChildProcess.toolExists("ffprobe"),
            "ffmpeg is installed by .ci/run"))
    func theFirstSecondsOfEachShapeAreStoredAndNothingMuchMore() async throws {
        try await withTemporaryDirectory { folder in
            let end = folder.appendingPathComponent("end.mp4").path
            let fast = folder.appendingPathComponent("fast.mp4").path
            let mp3 = folder.appendingPathComponent("tone.mp3").path
            try await MediaTimePlanTests.ffmpeg(
                [
                    "-f", "lavfi", "-i", "testsrc=duration=30:size=640x360:rate=25", "-f", "lavfi", "-i",
                    "sine=frequency=330:duration=30",
                ]
                    + [
                        "-c:v", "libx264", "-preset", "veryfast", "-g", "50", "-b:v", "800k", "-c:a", "aac",
                        "-shortest", end,
                    ])
            try await MediaTimePlanTests.ffmpeg(["-i", end, "-c", "copy", "-movflags", "+faststart", fast])
            try await MediaTimePlanTests.ffmpeg([
                "-f", "lavfi", "-i", "sine=frequency=440:duration=120", "-c:a", "libmp3lame", "-b:a", "128k", mp3,
            ])
            try await Harness.with { h in
                let files: [(path: String, local: String, type: String, share: Double)] = [
                    ("/end.mp4", end, "video/mp4", 0.4), ("/fast.mp4", fast, "video/mp4", 0.4),
                    ("/tone.mp3", mp3, "audio/mpeg", 0.15),
                ]
                var contents: [String: [UInt8]] = [:]
                for file in files {
                    contents[file.path] = Array(try Data(contentsOf: URL(fileURLWithPath: file.local)))
                    h.origin.serve(
                        TestOrigin.Resource(body: .bytes(contents[file.path]!), mimeType: file.type), at: file.path)
                }
                h.reader.preload(files.map { PreloadItem(h.origin.url($0.path), seconds: 5) })
                try await waitUntil { Self.done(h.reader, files.count) }
                #expect(h.reader.preloadStatus.map(\.state) == [.done, .done, .done])
                for file in files {
                    let data = contents[file.path]!
                    // Every packet shown in the first 5 s is stored, byte for byte as the origin has it.
                    for packet in try await MediaTimePlanTests.packets(file.local) where packet.time < 5 {
                        let stream = try #require(
                            h.reader.cachedRead(h.origin.url(file.path), range: packet.range),
                            "\(file.path) \(packet.range)")
                        let bytes = try await collect(stream)
                        #expect(
                            Array(bytes.readableBytesView)
                                == Array(data[Int(packet.range.lowerBound)..<Int(packet.range.upperBound)]))
                    }
                    // What a preload of 5 s fetches: within the issue's share of the file.
                    let sent = h.origin.bodyBytesSent(file.path)
                    #expect(
                        Double(sent) <= file.share * Double(data.count), "\(file.path): \(sent) of \(data.count) bytes")
                    let status = try #require(h.reader.preloadStatus.first { $0.url.path == file.path })
                    #expect(status.bytesFetched == sent)
                }
                // Preloading again fetches nothing.
                let requests = files.map { h.origin.requests($0.path).count }
                h.reader.preload(files.map { PreloadItem(h.origin.url($0.path), seconds: 5) })
                try await waitUntil { Self.done(h.reader, files.count) }
                #expect(files.map { h.origin.requests($0.path).count } == requests)
            }
        }
    }

    @Test func aNewQueueNeverFetchesWhatTheOldOneHadNotStarted() async throws {
        try await Harness.with { h in
            let gate = TestOrigin.Gate()
            var held = TestOrigin.Resource.generated(length: 4 << 20, seed: 1)
            held.faults.gate = gate
            h.origin.serve(held, at: "/a")
            for (index, path) in ["/b", "/c", "/d"].enumerated() {
                h.origin.serve(.generated(length: 2 << 20, seed: UInt64(index + 2)), at: path)
            }
            h.reader.preload(["/a", "/b", "/c"].map { PreloadItem(h.origin.url($0), seconds: 2) })
            try await waitUntil { h.origin.requests("/a").count == 1 }
            h.reader.preload([PreloadItem(h.origin.url("/d"), seconds: 2)])
            #expect(h.reader.preloadStatus.map(\.url.path) == ["/d"])
            gate.open()
            try await waitUntil { Self.done(h.reader, 1) }
            try await h.waitUntilQuiet("/a")
            #expect(h.origin.requests("/b").isEmpty)
            #expect(h.origin.requests("/c").isEmpty)
            #expect(h.reader.preloadStatus.first?.state == .done)
            // /a stopped at its first boundary: it fetched what its plan read (its head), no piece.
            #expect(h.origin.bodyBytesSent("/a") <= MediaTimePlanner.headSize, "\(h.origin.requests("/a"))")
            // /d: a file of no known shape, its estimate for 2 s from its start.
            let estimate = MediaTimePlanner.bytes(2, perSecond: MediaTimePlanner.estimatedBitRate / 8)
            #expect(h.origin.bodyBytesSent("/d") == estimate)
            let bytes = try await collect(
                try #require(h.reader.cachedRead(h.origin.url("/d"), range: ByteRange(0, estimate))))
            #expect(h.origin.resource(at: "/d")!.firstMismatch(in: bytes, at: 0) == nil)
        }
    }

    @Test func theBudgetStopsAQueueAndAFailureDoesNot() async throws {
        var configuration = CachingReader.Configuration()
        configuration.preloadBudget = 300_000
        try await Harness.with(reader: configuration) { h in
            var missing = TestOrigin.Resource.generated(length: 1000)
            missing.faults.status = 404
            h.origin.serve(missing, at: "/gone")
            h.origin.serve(.generated(length: 8 << 20, seed: 3), at: "/big")
            h.origin.serve(.generated(length: 8 << 20, seed: 4), at: "/after")
            h.reader.preload([
                PreloadItem(h.origin.url("/gone")), PreloadItem(h.origin.url("/big"), seconds: 10),
                PreloadItem(h.origin.url("/after")),
            ])
            try await waitUntil {
                h.reader.preloadStatus.map(\.state) == [.failed, .overBudget, .queued] && h.reader.activeDownloads == 0
            }
            #expect(h.reader.preloadStatus[0].error?.contains("404") == true)
            // The plan's head was read; its first 1 MiB piece did not fit in what was left.
            #expect(h.origin.bodyBytesSent("/big") <= MediaTimePlanner.headSize)
            #expect(h.origin.requests("/after").isEmpty)
        }
    }

    /// A harness whose quiet period is the test's timer, with a 1 MiB file at `held` whose
    /// answers wait for the gate, and `next` of `length` bytes.
    static func withHeldPlayer(
        _ held: String, next length: Int64, _ body: (Harness, TestOrigin.Gate, ManualPauseTimer) async throws -> Void
    ) async throws {
        let quiet = ManualPauseTimer()
        var configuration = CachingReader.Configuration()
        configuration.quietTimer = quiet
        try await Harness.with(reader: configuration) { h in
            let gate = TestOrigin.Gate()
            var resource = TestOrigin.Resource.generated(length: 1 << 20, seed: 7)
            resource.faults.gate = gate
            h.origin.serve(resource, at: held)
            h.origin.serve(.generated(length: length, seed: 8), at: "/next")
            try await body(h, gate, quiet)
        }
    }

    @Test func aPreloadWaitsWhileAPlayerWaitsOnTheOrigin() async throws {
        try await Self.withHeldPlayer("/movie", next: 2 << 20) { h, gate, quiet in
            let player = Task { try await collect(try await h.reader.read(h.origin.url("/movie"))) }
            try await waitUntil { h.origin.requests("/movie").count == 1 && h.reader.priority.playersWaiting == 1 }
            h.reader.preload([PreloadItem(h.origin.url("/next"), seconds: 2)])
            // The preload's first question waits for the player: not one request to the origin.
            try await waitUntil { h.reader.priority.parkedTransfers == 1 }
            #expect(h.origin.requests("/next").isEmpty)
            gate.open()
            let bytes = try await player.value
            #expect(
                h.origin.resource(at: "/movie")!.firstMismatch(in: bytes, at: 0) == nil
                    && bytes.readableBytes == 1 << 20)
            // The player is served; the preload waits for the quiet period, then goes on.
            try await waitUntil { quiet.sleeping == 1 }
            #expect(h.origin.requests("/next").isEmpty)
            quiet.fire()
            try await waitUntil { Self.done(h.reader, 1) }
            #expect(h.reader.preloadStatus.first?.state == .done)
            #expect(!h.origin.requests("/next").isEmpty)
        }
    }

    @Test func aPlayerThatJoinsAYieldingPreloadIsNotKeptWaiting() async throws {
        try await Self.withHeldPlayer("/other", next: 16 << 20) { h, gate, quiet in
            // The preload is under way; a player then waits on another file, and the preload yields.
            h.reader.preload([PreloadItem(h.origin.url("/next"), seconds: 60)])
            try await waitUntil { h.origin.requests("/next").count >= 2 }
            let player = Task { try await collect(try await h.reader.read(h.origin.url("/other"))) }
            try await waitUntil { h.reader.priority.parkedTransfers >= 1 }
            // A second player wants the bytes the yielding preload fetches: it gets them at once.
            let joined = try await collect(try await h.reader.read(h.origin.url("/next"), offset: 0, length: 8 << 20))
            #expect(
                h.origin.resource(at: "/next")!.firstMismatch(in: joined, at: 0) == nil
                    && joined.readableBytes == 8 << 20)
            gate.open()
            _ = try await player.value
            quiet.fire()
            h.reader.preload([])
        }
    }
}

extension PreloadTests {
    @Test func anHLSAssetIsPreloadedSegmentBySegmentUntilItsSeconds() async throws {
        try await Harness.with { h in
            h.origin.serveVODPlaylist(at: "/show/", segments: 10, length: 100_000, firstSeed: 20)
            h.reader.preload([PreloadItem(h.origin.url("/show/index.m3u8"), seconds: 5)])
            try await waitUntil { Self.done(h.reader, 1) }
            let status = try #require(h.reader.preloadStatus.first)
            #expect(status.state == .done, "\(status)")
            // 2 + 2 + 2 s reach 5 s: three segments, and no fourth.
            #expect((0..<10).map { h.origin.requests("/show/seg\($0).ts").count } == [1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
            #expect(status.bytesFetched >= 300_000)
            for index in 0..<3 {
                let bytes = try await collect(
                    try #require(
                        h.reader.cachedRead(h.origin.url("/show/seg\(index).ts"), range: ByteRange(0, 100_000))))
                #expect(h.origin.resource(at: "/show/seg\(index).ts")!.firstMismatch(in: bytes, at: 0) == nil)
            }
        }
    }
}

extension PreloadTests {
    @Test func anHLSPreloadTakesTheVariantThePlayerLastPlayed() async throws {
        try await Harness.with { h in
            let master =
                "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nlow/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=3000000\nhigh/index.m3u8\n"
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(master.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                at: "/a/master.m3u8")
            var media: [String: HLSPlaylist] = [:]
            for variant in ["low", "high"] {
                var text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n"
                for index in 0..<3 {
                    text += "#EXTINF:4.0,\ns\(index).ts\n"
                    h.origin.serve(
                        .generated(length: 50_000, seed: UInt64(index), mimeType: "video/mp2t"),
                        at: "/a/\(variant)/s\(index).ts")
                }
                text += "#EXT-X-ENDLIST\n"
                media[variant] = try HLSPlaylist(parsing: Array(text.utf8))
                h.origin.serve(
                    TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                    at: "/a/\(variant)/index.m3u8")
            }
            func preloaded() async throws -> [String] {
                try await waitUntil { Self.done(h.reader, 1) }
                return ["low", "high"].filter { !h.origin.requests("/a/\($0)/s0.ts").isEmpty }
            }
            // No play yet: the first variant, as a player starts.
            h.reader.preload([PreloadItem(h.origin.url("/a/master.m3u8"), seconds: 4)])
            #expect(try await preloaded() == ["low"])
            // The proxy served the master, then the player chose the high variant.
            let masterURL = h.origin.url("/a/master.m3u8")
            h.reader.learning.learnSegments(
                of: try HLSPlaylist(parsing: Array(master.utf8)), at: masterURL, base: masterURL)
            h.reader.learning.learnSegments(
                of: media["high"]!, at: h.origin.url("/a/high/index.m3u8"), base: h.origin.url("/a/high/index.m3u8"))
            h.reader.preload([])
            h.reader.preload([PreloadItem(masterURL, seconds: 4)])
            #expect(try await preloaded() == ["low", "high"])
            #expect(h.origin.requests("/a/high/s1.ts").isEmpty, "4 s is one segment")
        }
    }
}
