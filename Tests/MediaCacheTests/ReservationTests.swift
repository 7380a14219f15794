// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// Who a held probe download serves once a read takes it, without I/O: the scheduler and the
/// download only.
@Suite(.stallLimit) struct ReservationTests {
    static let url = URL(string: "http://origin.test/song.mp3")!
    static let key = CacheKey("song")

    static func download(_ scheduler: DownloadScheduler, start: Int64, end: Int64) -> SharedDownload {
        scheduler.makeDownload(
            url: url, key: key, start: start, end: end, isFullBody: false, stores: true, headers: [],
            startedBy: .player)
    }

    /// Found by the soak bench (closed ranges of MP3s, eight clients): a probe's download held for
    /// its read became a fill, so its end moved to the file's; a later read of the same song from
    /// further on took what the first read's probe had left held. Its reader kept the first read's
    /// end, which the download had passed: the download counted as serving no player, gave way to
    /// players, and the later read's player waited on it for good (one request in each run of the
    /// bench timed out). The reader is the taker's now, with the taker's end.
    @Test func aHeldDownloadTakenByALaterReadServesThatReadsPlayer() {
        let scheduler = DownloadScheduler(configuration: CachingReader.Configuration())
        let probed = Self.download(scheduler, start: 100_000, end: 200_000)
        scheduler.reserve(probed, for: .player)
        #expect(probed.servesPlayer, "held for its player")
        #expect(probed.fill(to: 1_000_000))
        probed.responseReceived()
        probed.deliver(ByteBuffer(repeating: 1, count: 100_000), storage: .stored)
        #expect(probed.position == 200_000)
        // The first read's range is all delivered: only a read that wants more is served.
        let taken = scheduler.takeReservation(Self.key, at: 250_000, until: 400_000, for: .player)
        #expect(taken?.download === probed)
        #expect(probed.servesPlayer, "the later read's player wants bytes the download has not delivered")
        // Taken by the cache's own read, the same reader is no player's.
        let own = Self.download(scheduler, start: 0, end: 50_000)
        scheduler.reserve(own, for: .player)
        _ = scheduler.takeReservation(Self.key, at: 0, until: 50_000, for: .own(.preload))
        #expect(!own.servesPlayer)
    }

    /// Found by strace of a cold 64 KiB miss of an `application/octet-stream` file (a type a
    /// playlist may come with): the look at the body's start joined no download, waited for the
    /// probe's bytes to be written, and read them back; the answer then left after the write
    /// (open, `pwrite`, a hop back), by `sendfile` from the new file. The look now takes the
    /// probe's bytes from memory, as they arrive, and leaves the reservation to the read that
    /// answers.
    @Test func aLookAtTheStartTakesTheHeldDownloadsBytesWithoutWaitingForTheStore() async {
        let scheduler = DownloadScheduler(configuration: CachingReader.Configuration())
        let probed = Self.download(scheduler, start: 0, end: 65_536)
        scheduler.reserve(probed, for: .player)
        probed.responseReceived()
        let bytes = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        // Half of the look's bytes have come, and are being written (a write that never ends here).
        probed.deliver(ByteBuffer(bytes: bytes[..<512]), storage: .writing)
        let waits = ScriptedReadPathTests.Taken()
        async let look = scheduler.reservedStart(of: Self.key, length: 1_024) { wait in
            waits.set(waits.value + 1)
            await wait()
        }
        while waits.value == 0 { await Task.yield() }
        probed.deliver(ByteBuffer(bytes: bytes[512...]), storage: .writing)
        #expect(await look == Array(bytes[..<1_024]))
        #expect(waits.value == 1)
        // The reservation is still the answering read's.
        #expect(scheduler.takeReservation(Self.key, at: 0, until: 65_536, for: .player)?.download === probed)
        // Without a held download from byte 0 that reaches the look's end, the look reads as before.
        let past = Self.download(scheduler, start: 10, end: 65_536)
        scheduler.reserve(past, for: .player)
        #expect(await scheduler.reservedStart(of: Self.key, length: 1_024) { await $0() } == nil)
        let short = Self.download(scheduler, start: 0, end: 100)
        scheduler.reserve(short, for: .player)
        #expect(await scheduler.reservedStart(of: Self.key, length: 1_024) { await $0() } == nil)
        // One that ended before the look's bytes came gives nothing either.
        let cut = Self.download(scheduler, start: 0, end: 65_536)
        scheduler.reserve(cut, for: .player)
        cut.responseReceived()
        cut.deliver(ByteBuffer(bytes: bytes[..<100]), storage: .writing)
        cut.fail(CacheError(.originUnavailable, "cut"))
        #expect(await scheduler.reservedStart(of: Self.key, length: 1_024) { await $0() } == nil)
    }
}
