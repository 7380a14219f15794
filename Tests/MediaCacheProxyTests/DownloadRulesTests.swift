// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// Pinned downloads as guests: a job on a network its rule forbids stops and moves no byte
/// while another "anyway" goes on; a job that meets the disk's floor waits for space instead
/// of failing and resumes by itself when space returns; streaming goes on meanwhile. Each
/// job ends holding the origin's bytes, fetched once.
@Suite(.stallLimit, .endToEnd) struct DownloadRulesTests {
    /// A disk whose free space is `base` less what the store holds: space returns when the test
    /// raises `base`.
    final class FakeDisk: Sendable {
        let state = Mutex<(base: Int64, store: CacheStore?)>((0, nil))

        init(base: Int64) { state.withLock { $0.base = base } }

        var measure: @Sendable (String) -> DiskSpace? {
            { [self] _ in
                let (base, store) = state.withLock { ($0.base, $0.store) }
                return DiskSpace(free: base - (store?.totalBytes ?? 0), volume: 1 << 40)
            }
        }
    }

    @Test func aJobMeetingTheFloorWaitsForSpaceAndResumesByItself() async throws {
        let size: Int64 = 10_000_000
        let floor: Int64 = 8 << 20
        let disk = FakeDisk(base: floor + (6 << 20))
        var storeConfiguration = PinnedDownloadsTests.store(limit: 100_000_000, pinned: 50_000_000)
        storeConfiguration.minFreeDiskBytes = floor
        storeConfiguration.diskSpace = disk.measure
        try await Harness.with(store: storeConfiguration) { h in
            disk.state.withLock { $0.store = h.store }
            h.origin.serve(.generated(length: size, seed: 61), at: "/film.mp4")
            h.origin.serve(.generated(length: 2_000_000, seed: 62), at: "/song.mp3")
            var configuration = DownloadQueue.Configuration()
            configuration.checkInterval = .milliseconds(50)
            let queue = try DownloadQueue(reader: h.reader, configuration: configuration)
            let failed = Task {
                for await update in queue.updates() {
                    if case .changed(let job) = update, job.state == .failed { return job.failure }
                }
                return nil
            }
            queue.start()
            let job = try await queue.pin(h.origin.url("/film.mp4"))
            try await waitUntil {
                queue.job(matching: job.id).map { $0.waiting == .space && $0.state == .queued } == true
            }
            let waiting = try #require(queue.job(matching: job.id))
            #expect(waiting.state == .queued && waiting.waitingDetail?.contains("keeps free") == true, "\(waiting)")
            let heldSpans = h.store.spans(for: h.store.key(for: h.origin.url("/film.mp4")))
            let held = heldSpans.byteCount
            #expect(held > 0 && held <= 6 << 20, "stored \(held) bytes before the floor")
            let askedBeforeSpace = h.origin.requests("/film.mp4").count
            // Streaming plays meanwhile (its bytes pass through: there is no room to keep them).
            let song = try await collect(try await h.reader.read(h.origin.url("/song.mp3")))
            #expect(
                song.readableBytes == 2_000_000 && DeterministicContent(seed: 62).firstMismatch(in: song, at: 0) == nil)
            // Space returns: the job goes on by itself and completes with only what was missing.
            disk.state.withLock { $0.base += 64 << 20 }
            #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
            let stored = try await collect(
                try #require(h.reader.cachedRead(h.origin.url("/film.mp4"), range: ByteRange(0, size))))
            #expect(DeterministicContent(seed: 61).firstMismatch(in: stored, at: 0) == nil)
            // No stored byte is asked for again. (Not the bytes the origin sent: those of a
            // transfer stopped at the floor that were still in the socket buffers are a
            // matter of the machine's load, and were counted once in a run of the suite.)
            let resumed = h.origin.requests("/film.mp4").dropFirst(askedBeforeSpace)
            #expect(!resumed.isEmpty)
            for request in resumed {
                let first = request.range.flatMap { Int64($0.dropFirst("bytes=".count).prefix { $0 != "-" }) }
                #expect(
                    first.map { heldSpans.span(containing: $0) == nil } == true,
                    "asked again for stored bytes: \(request), \(heldSpans) were held")
            }
            await queue.shutDown()
            #expect(await failed.value == nil, "the job never failed")
        }
    }

    /// An engine whose origin serves `/film.mp4` (`length` bytes), its bytes from `heldFrom` on
    /// held until the test opens the gate `body` is given: what the test does to its download
    /// comes before the end, however loaded the machine.
    static func withHeldFilm(
        _ length: Int64, seed: UInt64, heldFrom: Int64, _ body: (Harness, TestOrigin.Gate) async throws -> Void
    ) async throws {
        try await Harness.with(store: PinnedDownloadsTests.store(limit: 100_000_000, pinned: 50_000_000)) { h in
            let gate = TestOrigin.Gate()
            var held = TestOrigin.Resource.generated(length: length, seed: seed)
            held.faults.bodyGate = gate
            held.faults.bodyGateOffset = heldFrom
            h.origin.serve(held, at: "/film.mp4")
            try await body(h, gate)
        }
    }

    @Test func aMeteredNetworkStopsAJobWhileOneAnywayGoesOn() async throws {
        let size: Int64 = 8_000_000
        // Held where a piece starts: the piece asked for there gets its head and no byte, and,
        // with a whole piece left in flight, the job asks for no next one. (Held within a piece,
        // the next piece's request could be on its way as the stop came, and reach the origin
        // after it: a CI run saw it.)
        let held = 8 * DownloadQueue.piece
        try await Self.withHeldFilm(size, seed: 63, heldFrom: held) { h, gate in
            h.origin.serve(.generated(length: 3_000_000, seed: 64), at: "/episode.mp3")
            var configuration = DownloadQueue.Configuration()
            configuration.maxConcurrent = 2
            let queue = try DownloadQueue(reader: h.reader, configuration: configuration)
            queue.start()
            let film = try await queue.pin(h.origin.url("/film.mp4"))
            // The network turns metered while the film's answer is held at the gate, in the
            // middle of a request: the one for the piece at the gate, answered and waiting.
            try await waitUntil { h.origin.bodyBytesSent("/film.mp4") == held }
            try await waitUntil {
                h.origin.responsesInProgress("/film.mp4") == 1
                    && h.origin.requests("/film.mp4").last?.range == "bytes=\(held)-\(held + DownloadQueue.piece - 1)"
            }
            queue.networkChanged(DownloadRules.NetworkConditions(isMetered: true))
            try await waitUntil {
                queue.job(matching: film.id)?.waiting == .network && queue.job(matching: film.id)?.state == .queued
            }
            #expect(queue.job(matching: film.id)?.waitingDetail?.contains("metered") == true)
            // The stopped job's transfers were cancelled: they end, and the origin sees their
            // connections close.
            try await waitUntil { h.reader.activeDownloads == 0 }
            try await waitUntil { h.origin.responsesInProgress("/film.mp4") == 0 }
            let (sentAtStop, requestsAtStop) = (
                h.origin.bodyBytesSent("/film.mp4"), h.origin.requests("/film.mp4").count
            )
            // "This one anyway": a job whose own rule allows any network downloads.
            let episode = try await queue.pin(
                h.origin.url("/episode.mp3"), renditions: RenditionChoice(), rules: DownloadRules(network: .any))
            #expect(try await PinnedDownloadsTests.settled(episode.id, in: queue).state == .completed)
            // No request and no byte after the stop.
            #expect(h.origin.requests("/film.mp4").count == requestsAtStop, "the waiting job asked again")
            #expect(
                h.origin.bodyBytesSent("/film.mp4") == sentAtStop,
                "the waiting job moved bytes: \(h.origin.bodyBytesSent("/film.mp4") - sentAtStop)")
            #expect(queue.job(matching: film.id)?.state == .queued)
            // The user says the network is not metered after all: it resumes.
            queue.networkOverride = .unmetered
            gate.open()
            #expect(try await PinnedDownloadsTests.settled(film.id, in: queue).state == .completed)
            for (seed, path, length) in [(63, "/film.mp4", size), (64, "/episode.mp3", 3_000_000)] {
                let stored = try await collect(
                    try #require(h.reader.cachedRead(h.origin.url(path), range: ByteRange(0, length))))
                #expect(DeterministicContent(seed: UInt64(seed)).firstMismatch(in: stored, at: 0) == nil, "\(path)")
                #expect(
                    h.origin.bodyBytesSent(path) <= length + 2 * DownloadQueue.piece,
                    "\(path): sent \(h.origin.bodyBytesSent(path)) for \(length)")
            }
            await queue.shutDown()
        }
    }

    /// A job cancelled while it downloads stops downloading: no transfer of it is left, and
    /// the origin sent a fraction of the file. (The planner once started a cancelled job's
    /// download again, unowned: it ran to the file's end.)
    @Test func aCancelledJobStopsDownloading() async throws {
        let size: Int64 = 20_000_000
        try await Self.withHeldFilm(size, seed: 67, heldFrom: size / 4) { h, _ in
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.pin(h.origin.url("/film.mp4"))
            try await waitUntil { (queue.job(matching: job.id)?.bytesDone ?? 0) >= 1_000_000 }
            try await queue.cancel(job.id)
            try await waitUntil { h.reader.activeDownloads == 0 }
            // The origin stops sending: a transfer left running unowned would not.
            try await waitUntil { h.origin.responsesInProgress("/film.mp4") == 0 }
            #expect(
                h.origin.bodyBytesSent("/film.mp4") < size / 2,
                "sent \(h.origin.bodyBytesSent("/film.mp4")) of \(size) after the cancel")
            #expect(queue.jobs.isEmpty)
            await queue.shutDown()
        }
    }

    /// The job moved to the front runs now; the one it displaced waits for a slot and
    /// resumes after it, fetching only what it lacked.
    @Test func aJobMovedFirstRunsNowAndTheOtherWaits() async throws {
        let size: Int64 = 6_000_000
        try await Harness.with(store: PinnedDownloadsTests.store(limit: 100_000_000, pinned: 50_000_000)) { h in
            // The second halves wait until the move is seen, however loaded the machine.
            let gate = TestOrigin.Gate()
            for (seed, path) in [(65, "/a.mp4"), (66, "/b.mp4")] {
                var resource = TestOrigin.Resource.generated(length: size, seed: UInt64(seed))
                resource.faults.bodyGate = gate
                resource.faults.bodyGateOffset = size / 2
                h.origin.serve(resource, at: path)
            }
            var configuration = DownloadQueue.Configuration()
            configuration.maxConcurrent = 1
            let queue = try DownloadQueue(reader: h.reader, configuration: configuration)
            queue.start()
            let a = try await queue.pin(h.origin.url("/a.mp4"))
            let b = try await queue.pin(h.origin.url("/b.mp4"))
            try await waitUntil { (queue.job(matching: a.id)?.bytesDone ?? 0) >= 1_000_000 }
            #expect(queue.job(matching: b.id)?.state == .queued)
            _ = try await queue.move(b.id)
            try await waitUntil {
                queue.job(matching: b.id)?.state == .downloading && queue.job(matching: a.id)?.state == .queued
            }
            #expect(queue.job(matching: a.id)?.waiting == nil, "waits for a slot, not for a rule")
            #expect(queue.jobs.map(\.id) == [b.id, a.id])
            gate.open()
            #expect(try await PinnedDownloadsTests.settled(b.id, in: queue).state == .completed)
            #expect(try await PinnedDownloadsTests.settled(a.id, in: queue).state == .completed)
            for (seed, path) in [(65, "/a.mp4"), (66, "/b.mp4")] {
                let stored = try await collect(
                    try #require(h.reader.cachedRead(h.origin.url(path), range: ByteRange(0, size))))
                #expect(DeterministicContent(seed: UInt64(seed)).firstMismatch(in: stored, at: 0) == nil, "\(path)")
                #expect(
                    h.origin.bodyBytesSent(path) <= size + 2 * DownloadQueue.piece,
                    "\(path): sent \(h.origin.bodyBytesSent(path)) for \(size)")
            }
            await queue.shutDown()
        }
    }
}
