// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTP
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The host's time: it keeps a version at its resolved URL for ten minutes, or (the second
/// mode) one. The cache, the fetcher and the origin share one manual clock the test moves
/// (``ProxyHarness/withClock(reader:_:)``).
extension OneVersionPerPlayTests {
    /// The second mode: a minute after the play began, the host serves another version even at
    /// the URL the trackers led to, and the stored one is stale. The fill has stored the play's
    /// version whole: the play's seeks and its reading to the end come from it, and the origin
    /// is not asked.
    @Test func aFilledPlayOutlastsAHostThatChangesItsVersion() async throws {
        try await ProxyHarness.withClock { proxy, clock in
            let host = AdStitchingHost(proxy.origin, clock: clock, keeps: AdStitchingHost.oneMinute)
            let length = AdStitchingHost.length(of: 1)
            _ = try await Self.read(proxy, from: 0, bytes: 128 << 10)
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty }
            try await proxy.base.waitUntilQuiet("/host/ep-1.mp3")
            host.advance(by: 61)
            #expect(proxy.origin.resource(at: "/host/ep-1.mp3")?.etag == "\"ad-1-b\"")
            proxy.origin.resetCounters()
            _ = try await Self.read(proxy, from: length * 8 / 10, bytes: 256 << 10)
            #expect(try await Self.read(proxy, from: length / 10) == Int(length - length / 10))
            #expect(host.requests().values.allSatisfy { $0 == 0 }, "\(host.requests())")
        }
    }

    /// Ten minutes after the last read the play is over: a new play goes through the trackers
    /// again and gets the host's version of now, whole and alone.
    @Test func aPlayOverAfterTheWindowGetsTheHostsNewVersion() async throws {
        try await ProxyHarness.withClock { proxy, clock in
            let host = AdStitchingHost(proxy.origin, clock: clock)
            _ = try await Self.read(proxy, from: 0, bytes: 128 << 10)
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty }
            try await proxy.base.waitUntilQuiet("/host/ep-1.mp3")
            host.advance(by: 601)
            let again = try await proxy.get(proxy.url(host.entry), headers: [("Range", "bytes=0-")])
            let version = AdStitchingHost.version(2)
            #expect(again.status == 206 && again.headers.first(name: "ETag") == "\"ad-2\"", "\(again.status)")
            #expect(
                Int64(again.body.readableBytes) == version.length && version.firstMismatch(in: again.body, at: 0) == nil
            )
            #expect(host.visits.load(ordering: .relaxed) == 2)
        }
    }

    /// The second mode with the fill cut half-way: the connection is down for over a minute,
    /// and the resumed request finds another version at the resolved URL. The fill stops and
    /// the stored version goes; the play's seek gets `502` (bytes of two versions never reach
    /// it, docs/http.md), and a play from byte 0 gets the version there is now, whole.
    @Test func aVersionChangedUnderACutFillIsNeverSpliced() async throws {
        try await ProxyHarness.withClock { proxy, clock in
            let host = AdStitchingHost(proxy.origin, clock: clock, keeps: AdStitchingHost.oneMinute)
            let length = AdStitchingHost.length(of: 1)
            proxy.origin.update(host.prefix + "/host/ep-1.mp3") {
                $0.faults.dropAfterBytes = length / 2
                $0.faults.dropCount = 1
                $0.faults.onDrop = { host.advance(by: 61) }
            }
            _ = try await Self.read(proxy, from: 0, bytes: 128 << 10)
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty }
            try await proxy.base.waitUntilQuiet("/host/ep-1.mp3")
            let changed = try #require(proxy.origin.resource(at: "/host/ep-1.mp3"))
            #expect(changed.etag == "\"ad-1-b\"", "the host changed the version during the cut")
            let seek = try await proxy.get(proxy.url(host.entry), headers: [("Range", "bytes=\(length * 8 / 10)-")])
            #expect(seek.status == 502, "\(seek.status) \(String(buffer: seek.body))")
            let again = try await proxy.get(proxy.url(host.entry), headers: [("Range", "bytes=0-")])
            #expect(again.status == 206 && again.headers.first(name: "ETag") == changed.etag, "\(again.status)")
            #expect(
                Int64(again.body.readableBytes) == changed.length && changed.firstMismatch(in: again.body, at: 0) == nil
            )
            // Then the new play seeks: its version, from the store and the resolved URL.
            let later = try await proxy.get(proxy.url(host.entry), headers: [("Range", "bytes=\(length / 2)-")])
            #expect(later.status == 206 && changed.firstMismatch(in: later.body, at: length / 2) == nil)
        }
    }

    /// mpv, one process as an app's player: opens an episode of the second-mode host, paused;
    /// once the fill holds it the host changes the version; mpv seeks to 80 %, plays, seeks
    /// back to 10 %, plays, and quits: no error, and the origin is not asked again.
    @Test(.enabled(if: toolExists("mpv") && toolExists("ffmpeg"), "needs mpv and ffmpeg"))
    func mpvFinishesAFilledPlayWhenTheHostChangesTheVersion() async throws {
        let bodies = try await Self.episodes(count: 2)
        try await ProxyHarness.withClock { proxy, clock in
            let host = AdStitchingHost(
                proxy.origin, prefix: "/mpv", bodies: bodies, clock: clock, keeps: AdStitchingHost.oneMinute)
            try await withTemporaryDirectory { directory in
                let mpv = try MPVControl(
                    proxy.url(host.entry), in: directory, arguments: ["--demuxer-lavf-o=fflags=+fastseek"])
                defer { mpv.process.terminate() }
                try await waitUntil { mpv.isListening && proxy.base.reader.fills.progress.isEmpty }
                try await waitUntil { try await mpv.number("duration") != nil }
                try await proxy.base.waitUntilQuiet(host.prefix + "/host/ep-1.mp3")
                host.advance(by: 61)
                proxy.origin.resetCounters()
                for percent in [80.0, 10.0] {
                    try await mpv.send(["seek", percent, "absolute-percent+exact"])
                    try await mpv.send(["set_property", "pause", false])
                    let duration = try #require(try await mpv.number("duration"))
                    let target = duration * percent / 100 + 1
                    try await waitUntil { (try await mpv.number("time-pos")).map { $0 >= target } ?? false }
                    try await mpv.send(["set_property", "pause", true])
                }
                try await mpv.send(["quit"])
                await mpv.process.exited()
                let errors = (try? String(contentsOf: mpv.errors, encoding: .utf8)) ?? ""
                #expect(mpv.process.terminationStatus == 0 && errors.isEmpty, "\(errors)")
            }
            #expect(host.requests().values.allSatisfy { $0 == 0 }, "\(host.requests())")
            let key = proxy.base.store.key(for: proxy.origin.url(host.entry))
            #expect(
                proxy.base.store.metadata(for: key)?.etag == "\"ad-1\"", "the play's version is still the one stored")
        }
    }
}

extension OneVersionPerPlayTests {
    /// A preload of a tracker URL (the next episode of a feed) follows the chain once; the play
    /// that comes after it keeps the version the preload stored: its start is local, and the
    /// rest and a seek are asked of the URL the trackers led to, not through them again.
    @Test func aPlayAfterAPreloadKeepsThePreloadsVersion() async throws {
        try await ProxyHarness.with { proxy in
            let host = AdStitchingHost(proxy.origin)
            let length = AdStitchingHost.length(of: 1)
            proxy.base.reader.preload([PreloadItem(proxy.origin.url(host.entry), seconds: 5)])
            try await waitUntil { [.done, .failed].contains(proxy.base.reader.preloadStatus.first?.state) }
            #expect(proxy.base.reader.preloadStatus.first?.state == .done, "\(proxy.base.reader.preloadStatus)")
            #expect(host.visits.load(ordering: .relaxed) == 1)
            _ = try await Self.read(proxy, from: 0, bytes: 256 << 10)
            _ = try await Self.read(proxy, from: length * 8 / 10, bytes: 256 << 10)
            #expect(host.visits.load(ordering: .relaxed) == 1, "\(host.requests())")
            let requests = host.requests()
            #expect(requests["/t1/ep.mp3"] == 1 && requests["/host/ep-2.mp3"] == nil, "\(requests)")
        }
    }
}

extension OneVersionPerPlayTests {
    /// Pins the host's episode and checks the pin followed the trackers once (with the play
    /// before it, if any) and holds version 1 whole, pinned.
    static func pinOnce(_ proxy: ProxyHarness, _ host: AdStitchingHost) async throws {
        let queue = try DownloadQueue(reader: proxy.base.reader)
        queue.start()
        let job = try await queue.pin(proxy.origin.url(host.entry))
        let settled = try await PinnedDownloadsTests.settled(job.id, in: queue)
        #expect(settled.state == .completed, "\(settled)")
        #expect(host.visits.load(ordering: .relaxed) == 1, "\(host.requests())")
        let key = proxy.base.store.key(for: proxy.origin.url(host.entry))
        #expect(proxy.base.store.isPinned(key))
        #expect(proxy.base.store.spans(for: key).contains(ByteRange(0, AdStitchingHost.length(of: 1))))
        #expect(proxy.base.store.metadata(for: key)?.etag == "\"ad-1\"")
        await queue.shutDown()
    }

    /// A pin of a tracker URL nobody played follows the chain once: every request of the
    /// download goes to the URL the trackers led to, and the pin completes with one version.
    @Test func aPinOfATrackerURLKeepsOneVersion() async throws {
        var reader = CachingReader.Configuration()
        reader.fillOnPlay = .none
        try await ProxyHarness.with(reader: reader) { proxy in
            try await Self.pinOnce(proxy, AdStitchingHost(proxy.origin))
        }
    }
}
