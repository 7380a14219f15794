// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The offline twin exports and held assets read through: one per reader, the store alone.
@Suite(.stallLimit) struct OfflineTwinTests {
    /// Asked for twice, the twin is the same reader; it serves what is stored without asking
    /// the origin; and it is shut down with its reader, leaving no task of its own behind.
    @Test func aReaderHasOneOfflineTwinShutDownWithIt() async throws {
        try await ScriptedHarness.with(answersWhole: true) { h in
            let url = URL(string: "https://scripted.example/song.mp3")!
            h.origin.serve(url, length: 100_000, seed: 3)
            _ = try await collect(try await h.reader.read(url))
            try await waitUntil { h.store.spans(for: h.store.key(for: url)).contains(ByteRange(0, 100_000)) }
            let twin = h.reader.offlineTwin
            #expect(twin === h.reader.offlineTwin && twin.configuration.isOffline && twin.offlineTwin === twin)
            let asked = h.origin.exchanges.count
            let held = try await collect(try await twin.read(url))
            #expect(
                held.readableBytes == 100_000 && DeterministicContent(seed: 3).firstMismatch(in: held, at: 0) == nil)
            #expect(h.origin.exchanges.count == asked)
            #expect(!twin.scheduler.hasShutDown)
            await h.reader.shutDown()
            #expect(twin.scheduler.hasShutDown)
        }
    }
}
