// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// The scrub over pinned entries, against the test origin: a block that changed on disk after
/// this process checked it (so reads send it unchecked by `sendfile`) is found by the next
/// pass and fetched again with one ranged request under the same version; unpinned entries
/// are left to their reads; the pass keeps its rate by the pauses it asks for.
@Suite(.stallLimit, .endToEnd) struct PinScrubberTests {
    static let length: Int64 = 1 << 20

    /// A pause timer that returns at once and keeps what it was asked to wait.
    final class RecordingTimer: PauseTimer {
        let asked = Mutex<[Duration]>([])
        func sleep(for duration: Duration) async throws {
            asked.withLock { $0.append(duration) }
            try Task.checkCancellation()
        }
    }

    static func readAll(_ h: Harness, _ url: URL) async throws -> ByteBuffer {
        var bytes = ByteBuffer()
        for try await chunk in try await h.reader.read(url) { bytes.writeImmutableBuffer(chunk) }
        return bytes
    }

    @Test func aPassFindsAndRepairsABlockThatChangedAfterItWasChecked() async throws {
        let logs = LogRecorder()
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.logger = logs.logger()
        try await Harness.with(store: storeConfiguration) { h in
            let pinnedResource = TestOrigin.Resource.generated(length: Self.length, seed: 31)
            let streamedResource = TestOrigin.Resource.generated(length: Self.length, seed: 32)
            h.origin.serve(pinnedResource, at: "/pin.mp3")
            h.origin.serve(streamedResource, at: "/stream.mp3")
            let (pinURL, streamURL) = (h.origin.url("/pin.mp3"), h.origin.url("/stream.mp3"))
            let (pinKey, streamKey) = (h.store.key(for: pinURL), h.store.key(for: streamURL))
            #expect(pinnedResource.firstMismatch(in: try await Self.readAll(h, pinURL), at: 0) == nil)
            #expect(streamedResource.firstMismatch(in: try await Self.readAll(h, streamURL), at: 0) == nil)
            try await h.waitUntilQuiet("/pin.mp3")
            try await h.waitUntilQuiet("/stream.mp3")
            try await h.store.pin([pinKey])
            // Checked by this process when written: its next reads may go out unchecked.
            #expect(h.store.integrity(of: pinKey)?.verified.contains(ByteRange(0, Self.length)) == true)
            let block5 = BlockChecksums.range(ofBlock: 5)
            for key in [pinKey, streamKey] {
                try EncryptedStoreTests.modifyDataFile(h.store, key) { $0[Int(block5.lowerBound) + 99] ^= 0x01 }
            }
            h.origin.resetCounters()

            let timer = RecordingTimer()
            var configuration = PinScrubber.Configuration()
            configuration.bytesPerSecond = 256 << 10
            configuration.timer = timer
            let scrubber = PinScrubber(reader: h.reader, configuration: configuration)
            let reports = await scrubber.pass()

            #expect(reports.map(\.key) == [pinKey.rawValue], "only the pinned entry is scrubbed")
            #expect(reports.first?.found == [[block5.lowerBound, block5.upperBound]])
            #expect(reports.first?.isSound == true && reports.first?.repairTried == true)
            let requests = h.origin.requests("/pin.mp3")
            #expect(requests.count == 1, "\(requests)")
            #expect(requests.first?.range == "bytes=\(block5.lowerBound)-\(block5.upperBound - 1)")
            #expect(requests.first?.ifRange == pinnedResource.etag)
            #expect(h.origin.requests("/stream.mp3").isEmpty)
            #expect(
                logs.all.contains {
                    $0.level == .warning && $0.message.contains("failed their check")
                        && $0.metadata["url"] == pinURL.absoluteString
                })
            let progress = scrubber.progress
            #expect(
                progress.passes == 1 && !progress.isRunning && progress.entriesChecked == 1
                    && progress.entriesTotal == 1 && progress.bytesChecked == Self.length
                    && progress.bytesTotal == Self.length && progress.entriesDamaged == 1
                    && progress.entriesLeftDamaged == 0, "\(progress)")
            // It asked to pause for as long as its rate says the bytes take: 4 s at 256 KiB/s.
            let paused = timer.asked.withLock { $0.reduce(Duration.zero, +) }
            #expect(paused >= .seconds(4) && paused < .seconds(5), "\(paused)")
            // The pinned file reads right, from the store alone.
            h.origin.resetCounters()
            #expect(pinnedResource.firstMismatch(in: try await Self.readAll(h, pinURL), at: 0) == nil)
            #expect(h.origin.requests("/pin.mp3").isEmpty)
        }
    }

    /// The passes start after the first delay and repeat after the interval; shutting down
    /// ends them.
    @Test func passesRunOnTheirScheduleUntilShutDown() async throws {
        try await Harness.with { h in
            h.origin.serve(TestOrigin.Resource.generated(length: 200_000, seed: 33), at: "/p.mp3")
            let url = h.origin.url("/p.mp3")
            _ = try await Self.readAll(h, url)
            try await h.waitUntilQuiet("/p.mp3")
            try await h.store.pin([h.store.key(for: url)])
            let timer = RecordingTimer()
            var configuration = PinScrubber.Configuration()
            configuration.timer = timer
            configuration.firstDelay = .seconds(7)
            configuration.interval = .seconds(3600)
            let scrubber = PinScrubber(reader: h.reader, configuration: configuration)
            scrubber.start()
            try await waitUntil { scrubber.progress.passes >= 3 }
            await scrubber.shutDown()
            let asked = timer.asked.withLock { $0 }
            #expect(asked.first == .seconds(7))
            #expect(asked.filter { $0 == .seconds(3600) }.count >= 2, "\(asked)")
            let passes = scrubber.progress.passes
            #expect(scrubber.progress.entriesChecked == 1)
            await scrubber.shutDown()
            #expect(scrubber.progress.passes == passes)
        }
    }
}
