// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

@_spi(Adapter) import CheckedAVFoundationAdapter
import Foundation
@_spi(Adapter) import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

extension CachingAVURLAssetTests {
    /// The system's words on the power, as the follower reads them from UIKit and Low Power
    /// Mode, told to a queue: a battery at 15 % and unplugged holds a pin (no byte moves, the
    /// job waits for power), Low Power Mode holds it while charging, and charging without it
    /// lets the pin finish with the origin's bytes. The test tells the queue what the
    /// engine's mapping of the system's words gives for each state: the follower itself reads UIKit on the main
    /// actor, and under this Linux runner a test that awaited the main actor never resumed.
    @Test func aLowBatteryHoldsAPinUntilChargingBegins() async throws {
        try await Harness.with { h in
            let size: Int64 = 2_000_000
            h.origin.serve(.generated(length: size, seed: 32), at: "/episode.mp3")
            let downloads = try DownloadQueue(reader: h.reader)
            downloads.powerChanged(
                DownloadRules.PowerConditions(systemLevel: 0.15, battery: .unplugged, lowPowerMode: false))
            downloads.start()
            let job = try await downloads.pin(h.origin.url("/episode.mp3"))
            try await waitUntil { downloads.job(matching: job.id)?.waiting == .power }
            #expect(downloads.job(matching: job.id)?.waitingDetail?.hasPrefix("waiting for power") == true)
            #expect(h.origin.bodyBytesSent("/episode.mp3") == 0)
            downloads.powerChanged(
                DownloadRules.PowerConditions(systemLevel: 0.16, battery: .charging, lowPowerMode: true))
            try await waitUntil { downloads.power.isCharging && downloads.power.isLowPowerMode }
            #expect(downloads.job(matching: job.id)?.waiting == .power, "Low Power Mode holds it while charging")
            downloads.powerChanged(
                DownloadRules.PowerConditions(systemLevel: 0.16, battery: .charging, lowPowerMode: false))
            try await waitUntil { downloads.job(matching: job.id)?.state == .completed }
            let stored = try await collect(try await h.reader.read(h.origin.url("/episode.mp3")))
            #expect(
                stored.readableBytes == size && DeterministicContent(seed: 32).firstMismatch(in: stored, at: 0) == nil)
            #expect(h.origin.bodyBytesSent("/episode.mp3") == size)
            await downloads.shutDown()
        }
    }
}
