// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import CheckedAVFoundationAdapter
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Network
import Testing

extension CachingAVURLAssetTests {
    /// The system's path, as the Network stand-in delivers it: an expensive path holds a pin
    /// (no byte moves, the job says why), a path that is neither expensive nor constrained lets
    /// it finish with the origin's bytes.
    @Test func anExpensivePathHoldsAPinUntilTheNetworkIsFree() async throws {
        try await Harness.with { h in
            let size: Int64 = 2_000_000
            h.origin.serve(.generated(length: size, seed: 31), at: "/episode.mp3")
            let downloads = try DownloadQueue(reader: h.reader)
            let follower = SystemNetworkFollower(downloads)
            NWPathMonitor.simulatedUpdateAll(NWPath(simulatedExpensive: true, constrained: false))
            try await waitUntil { downloads.network.system.isMetered }
            downloads.start()
            let job = try await downloads.pin(h.origin.url("/episode.mp3"))
            try await waitUntil { downloads.job(matching: job.id)?.waiting == .network }
            #expect(h.origin.bodyBytesSent("/episode.mp3") == 0)
            NWPathMonitor.simulatedUpdateAll(NWPath(simulatedExpensive: false, constrained: true))
            try await waitUntil { downloads.network.system.isConstrained }
            #expect(downloads.job(matching: job.id)?.waiting == .network, "low-data mode holds it too")
            NWPathMonitor.simulatedUpdateAll(NWPath(simulatedExpensive: false, constrained: false))
            try await waitUntil { downloads.job(matching: job.id)?.state == .completed }
            let stored = try await collect(try await h.reader.read(h.origin.url("/episode.mp3")))
            #expect(
                stored.readableBytes == size && DeterministicContent(seed: 31).firstMismatch(in: stored, at: 0) == nil)
            #expect(h.origin.bodyBytesSent("/episode.mp3") == size, "read from the cache, fetched once")
            await downloads.shutDown()
            withExtendedLifetime(follower) {}
        }
    }
}
