// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// Pins and the download queue in the engine: pinned entries survive streaming, the pinned
/// quota refuses a pin before its bytes are asked for, jobs are kept with the store and
/// resume fetching only what is missing, and pause, resume and cancel do what they say.
@Suite(.stallLimit, .endToEnd) struct PinnedDownloadsTests {
    /// A store of `limit` bytes with `pinned` of them for pins.
    static func store(limit: Int64, pinned: Int64) -> CacheStore.Configuration {
        var configuration = CacheStore.Configuration()
        configuration.maxBytes = limit
        configuration.maxPinnedBytes = pinned
        return configuration
    }

    /// Whether the store holds exactly `content`'s `length` bytes for `url`.
    static func holds(_ url: URL, _ content: DeterministicContent, length: Int64, in h: Harness) async throws -> Bool {
        guard let stream = h.reader.cachedRead(url, range: ByteRange(0, length)) else { return false }
        let bytes = try await collect(stream)
        return bytes.readableBytes == length && content.firstMismatch(in: bytes, at: 0) == nil
    }

    /// The job `id` once it has settled.
    static func settled(_ id: String, in queue: DownloadQueue) async throws -> DownloadJob {
        var job: DownloadJob?
        try await waitUntil {
            job = queue.job(matching: id)
            return job?.state.isSettled == true
        }
        return job!
    }

    /// Reads all of `url` through the reader and checks its bytes.
    static func stream(_ url: URL, _ content: DeterministicContent, in h: Harness) async throws {
        let bytes = try await collect(try await h.reader.read(url))
        #expect(content.firstMismatch(in: bytes, at: 0) == nil, "\(url)")
    }

    @Test func aPinnedFileAndHLSAssetSurviveStreamingThreeTimesTheLimitThenGoAsLRUEntries() async throws {
        let limit: Int64 = 3_000_000
        try await Harness.with(store: Self.store(limit: limit, pinned: 1_500_000)) { h in
            let files = HLSPrefetchTests.serveAsset(on: h.origin)
            let film = DeterministicContent(seed: 70)
            h.origin.serve(.generated(length: 600_000, seed: 70), at: "/film.mp4")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let filmJob = try await queue.pin(h.origin.url("/film.mp4"))
            let assetJob = try await queue.pin(h.origin.url("/p/master.m3u8"), variant: .lowestBandwidth)
            #expect(try await Self.settled(filmJob.id, in: queue).state == .completed)
            let asset = try await Self.settled(assetJob.id, in: queue)
            #expect(asset.state == .completed, "\(asset.failure ?? "")")
            #expect(asset.resourcesDone == asset.resourcesTotal && asset.resourcesTotal == 10)
            let pinnedBytes = h.store.pinnedBytes
            #expect(pinnedBytes > 600_000)

            // Stream three times what the streaming cache has (the limit less the pinned bytes).
            let streamed: [(URL, DeterministicContent)] = (0..<30).map { index in
                let path = "/stream/\(index).mp4"
                h.origin.serve(.generated(length: 300_000, seed: UInt64(100 + index)), at: path)
                return (h.origin.url(path), DeterministicContent(seed: UInt64(100 + index)))
            }
            #expect(Int64(streamed.count) * 300_000 >= 3 * (limit - pinnedBytes))
            for (url, content) in streamed { try await Self.stream(url, content, in: h) }
            #expect(h.store.totalBytes <= limit)
            #expect(try await Self.holds(h.origin.url("/film.mp4"), film, length: 600_000, in: h))
            let lowSegments = files.filter { $0.key.hasPrefix("/p/lo/") || $0.key.hasPrefix("/p/audio/en-") }
            #expect(lowSegments.count == 10)
            for (path, (content, length)) in lowSegments {
                #expect(try await Self.holds(h.origin.url(path), content, length: length, in: h), "\(path)")
            }
            // The first streamed files were evicted: the cache did evict around the pins.
            #expect(h.reader.cachedRead(streamed[0].0, range: ByteRange(0, 300_000)) == nil)

            // Unpinned, they are least-recently-used entries like any other.
            #expect(try await queue.unpin(h.origin.url("/film.mp4")))
            #expect(try await queue.unpin(h.origin.url("/p/master.m3u8")))
            #expect(h.store.pinnedBytes == 0)
            #expect(queue.jobs.isEmpty)
            for (url, content) in streamed { try await Self.stream(url, content, in: h) }
            #expect(h.reader.cachedRead(h.origin.url("/film.mp4"), range: ByteRange(0, 600_000)) == nil)
            #expect(lowSegments.allSatisfy { h.store.spans(for: h.store.key(for: h.origin.url($0.key))).isEmpty })
            await queue.shutDown()
        }
    }

    @Test func aPinOverTheQuotaIsRefusedBeforeItsBytesAreAskedFor() async throws {
        try await Harness.with(store: Self.store(limit: 4_000_000, pinned: 1_000_000)) { h in
            h.origin.serve(.generated(length: 1_500_000, seed: 71), at: "/big.mp4")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let error = await #expect(throws: CacheError.self) { try await queue.pin(h.origin.url("/big.mp4")) }
            #expect(error?.code == .capacityExceeded && error?.remedy == CacheError.Remedy(.raisePinnedQuota))
            #expect(error?.message.contains("1500000 bytes") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("1000000 bytes") == true, "\(error?.message ?? "")")
            #expect(h.origin.requests("/big.mp4").allSatisfy { $0.method == "HEAD" })
            #expect(h.origin.bodyBytesSent("/big.mp4") == 0)
            #expect(queue.jobs.isEmpty)
            #expect(!h.store.isPinned(h.store.key(for: h.origin.url("/big.mp4"))))

            // An HLS asset is measured by its variant's bandwidth and duration: 8 s at 2 Mbit/s.
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            """
                            #EXTM3U
                            #EXT-X-STREAM-INF:BANDWIDTH=2000000
                            v/index.m3u8

                            """.utf8)), mimeType: HLSPrefetchTests.playlistType), at: "/q/master.m3u8")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:4.0,\na.ts\n#EXTINF:4.0,\nb.ts\n#EXT-X-ENDLIST\n"
                                .utf8)),
                    mimeType: HLSPrefetchTests.playlistType), at: "/q/v/index.m3u8")
            h.origin.serve(.generated(length: 1_000, seed: 72), at: "/q/v/a.ts")
            h.origin.serve(.generated(length: 1_000, seed: 73), at: "/q/v/b.ts")
            let hls = await #expect(throws: CacheError.self) { try await queue.pin(h.origin.url("/q/master.m3u8")) }
            #expect(hls?.message.contains("about 1.9 MiB (2000000 bytes)") == true, "\(hls?.message ?? "")")
            #expect(h.origin.requests("/q/v/a.ts").isEmpty && h.origin.requests("/q/v/b.ts").isEmpty)
            await queue.shutDown()
        }
    }

    @Test func jobsAreKeptWithTheStoreAndResumeFetchingOnlyWhatIsMissing() async throws {
        let size: Int64 = 8_000_000
        let content = DeterministicContent(seed: 74)
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            defer { Task { try? await origin.shutdown() } }
            var resource = TestOrigin.Resource.generated(length: size, seed: 74)
            // The second half waits for the gate, opened for the second run: the stop comes
            // before the end however loaded the machine (a rate only made that likely).
            let gate = TestOrigin.Gate()
            resource.faults.bodyGate = gate
            resource.faults.bodyGateOffset = size / 2
            origin.serve(resource, at: "/film.mp4")
            let url = origin.url("/film.mp4")
            let folder = directory.appendingPathComponent("store")
            var configuration = DownloadQueue.Configuration()
            configuration.commitInterval = 256 << 10

            // First run: stopped (as a shutdown does) once about a third has arrived.
            let id = try await Self.withEngine(folder) { store, reader in
                let queue = try DownloadQueue(reader: reader, configuration: configuration)
                queue.start()
                let job = try await queue.pin(url)
                try await waitUntil { (queue.job(matching: job.id)?.bytesDone ?? 0) >= size / 3 }
                await queue.shutDown()
                return job.id
            }
            let sentBefore = origin.bodyBytesSent("/film.mp4")
            #expect(sentBefore < size)

            // Second run: the job is there, queued, and completes.
            gate.open()
            try await Self.withEngine(folder) { store, reader in
                let queue = try DownloadQueue(reader: reader, configuration: configuration)
                let kept = try #require(queue.job(matching: id))
                #expect(kept.state == .queued)
                #expect(store.isPinned(store.key(for: url)))
                let storedBefore = store.spans(for: store.key(for: url)).byteCount
                #expect(storedBefore > 0)
                queue.start()
                let done = try await Self.settled(id, in: queue)
                #expect(done.state == .completed, "\(done.failure ?? "")")
                #expect(done.bytesDone == size)
                let bytes = try await collect(try #require(reader.cachedRead(url, range: ByteRange(0, size))))
                #expect(content.firstMismatch(in: bytes, at: 0) == nil)
                // Only the missing bytes came again, and what the first run held in flight.
                let sent = origin.bodyBytesSent("/film.mp4")
                #expect(
                    sent - sentBefore <= size - storedBefore + reader.configuration.downloadLead,
                    "sent \(sent), before \(sentBefore), stored \(storedBefore)")
                await queue.shutDown()
            }
            // Third run: completed, still pinned.
            try await Self.withEngine(folder) { store, reader in
                let queue = try DownloadQueue(reader: reader)
                #expect(queue.job(matching: id)?.state == .completed)
                #expect(store.isPinned(store.key(for: url)))
            }
        }
    }

    /// A job's settled state is in the index before it is published, so a client that sees a
    /// job complete and stops the queue at once (`mediacache pin` without a server does so)
    /// finds it completed when the store is opened again. It was once published first and
    /// written after, and a store closed in between kept the job downloading (seen under load
    /// in `pinDownloadsExportsAndUnpinsWithoutAServer`). Ten jobs, each stopped on its update.
    @Test func aJobSeenToCompleteIsStoredCompletedWhenTheQueueStopsAtOnce() async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            defer { Task { try? await origin.shutdown() } }
            let folder = directory.appendingPathComponent("store")
            var ids: [String] = []
            for index in 0..<10 {
                origin.serve(.generated(length: 50_000, seed: UInt64(80 + index)), at: "/clip\(index).mp4")
                let id = try await Self.withEngine(folder) { _, reader in
                    let queue = try DownloadQueue(reader: reader)
                    let updates = queue.updates()
                    let job = try await queue.pin(origin.url("/clip\(index).mp4"))
                    queue.start()
                    for await update in updates {
                        guard case .changed(let changed) = update, changed.id == job.id, changed.state.isSettled else {
                            continue
                        }
                        let stored = try reader.store.loadJobs().first { $0.id == job.id }.map {
                            try JSONDecoder().decode(DownloadJob.self, from: $0.body)
                        }
                        #expect(
                            stored?.state == .completed,
                            "published \(changed.state), stored \(String(describing: stored?.state))")
                        break
                    }
                    await queue.shutDown()
                    return job.id
                }
                ids.append(id)
            }
            try await Self.withEngine(folder) { _, reader in
                let queue = try DownloadQueue(reader: reader)
                for id in ids {
                    let job = try #require(queue.job(matching: id))
                    #expect(job.state == .completed && job.bytesDone == 50_000, "\(job.state) \(job.bytesDone)")
                }
            }
        }
    }

    /// Opens the store in `folder` with a read path, runs `body`, then shuts both down.
    static func withEngine<T>(_ folder: URL, _ body: (CacheStore, CachingReader) async throws -> T) async throws -> T {
        let store = try await CacheStore.open(directory: folder)
        let fetcher = HTTPOriginFetcher()
        let reader = CachingReader(store: store, fetcher: fetcher)
        return try await runThenTearDown(
            (store, reader), { try await body($0.0, $0.1) },
            tearDown: { store, reader in
                await reader.shutDown()
                try await store.close()
                try await fetcher.shutdown()
            })
    }

    @Test func pauseResumeAndCancelDoWhatTheySay() async throws {
        // Slow enough that the pause comes long before the end, however loaded the machine.
        let size: Int64 = 40_000_000
        try await Harness.with(store: Self.store(limit: 100_000_000, pinned: 50_000_000)) { h in
            var resource = TestOrigin.Resource.generated(length: size, seed: 75)
            resource.faults.bytesPerSecond = 2_000_000
            h.origin.serve(resource, at: "/film.mp4")
            let url = h.origin.url("/film.mp4")
            var configuration = DownloadQueue.Configuration()
            configuration.maxConcurrent = 1
            let queue = try DownloadQueue(reader: h.reader, configuration: configuration)
            let updates = queue.updates()
            let seen = Task {
                var states: [DownloadJob.State] = []
                for await update in updates {
                    if case .changed(let changed) = update, changed.url.path == "/film.mp4",
                        states.last != changed.state
                    {
                        states.append(changed.state)
                    }
                    if case .removed = update, states.count >= 6 { break }
                }
                return states
            }
            queue.start()
            let job = try await queue.pin(url)
            try await waitUntil { (queue.job(matching: job.id)?.bytesDone ?? 0) > 500_000 }
            // One at a time: a second pin waits, queued.
            h.origin.serve(.generated(length: 100_000, seed: 78), at: "/second.mp4")
            let second = try await queue.pin(h.origin.url("/second.mp4"))
            #expect(second.state == .queued && queue.job(matching: second.id)?.state == .queued)
            // A pinned resource plays while it downloads: an ordinary read.
            let early = try await collect(try await h.reader.read(url, offset: 0, length: 200_000))
            #expect(
                early.readableBytes == 200_000 && DeterministicContent(seed: 75).firstMismatch(in: early, at: 0) == nil)
            let paused = try await queue.pause(job.id)
            #expect(paused.state == .paused)
            #expect(h.store.isPinned(h.store.key(for: url)))
            h.origin.update("/film.mp4") { $0.faults.bytesPerSecond = nil }
            let resumed = try await queue.resume(job.id)
            #expect(resumed.state == .queued || resumed.state == .downloading)
            let done = try await Self.settled(job.id, in: queue)
            #expect(done.state == .completed)
            #expect(done.bytesDone == size)
            #expect(try await Self.settled(second.id, in: queue).state == .completed)
            try await queue.cancel(second.id)
            try await queue.cancel(job.id)
            #expect(queue.jobs.isEmpty)
            #expect(!h.store.isPinned(h.store.key(for: url)))
            // Its bytes stay, as a streaming-cache entry.
            #expect(h.store.spans(for: h.store.key(for: url)).byteCount == size)
            #expect(await seen.value == [.queued, .downloading, .paused, .queued, .downloading, .completed])
            let missing = await #expect(throws: CacheError.self) { try await queue.pause("nothing") }
            #expect(missing?.code == .notCached)
            await queue.shutDown()
        }
    }

    /// In an encrypted store a job is sealed like an entry: its URL appears nowhere in the
    /// folder, and the job reads back after a reopen with the key.
    @Test func anEncryptedStoreSealsItsJobs() async throws {
        var configuration = Self.store(limit: 10_000_000, pinned: 5_000_000)
        configuration.encryptionKey = TestSetup.encryptionKey
        try await Harness.with(store: configuration) { h in
            h.origin.serve(.generated(length: 100_000, seed: 77), at: "/secret-film-name.mp4")
            let queue = try DownloadQueue(reader: h.reader)
            queue.start()
            let job = try await queue.pin(h.origin.url("/secret-film-name.mp4"))
            #expect(try await Self.settled(job.id, in: queue).state == .completed)
            await queue.shutDown()
            try await h.store.flush()
            #expect(try HLSProxyTests.filesUnder(h.directory, contain: Array("secret-film-name".utf8)) == [])
            let again = try DownloadQueue(reader: h.reader)
            #expect(again.job(matching: job.id)?.url == h.origin.url("/secret-film-name.mp4"))
        }
    }

    @Test func aFileOfUnknownLengthOrNoStoreIsNotPinned() async throws {
        try await Harness.with { h in
            var noStore = TestOrigin.Resource.generated(length: 10_000, seed: 76)
            noStore.cacheControl = "no-store"
            h.origin.serve(noStore, at: "/private.mp4")
            let queue = try DownloadQueue(reader: h.reader)
            let error = await #expect(throws: CacheError.self) { try await queue.pin(h.origin.url("/private.mp4")) }
            #expect(error?.message.contains("no-store") == true)
            #expect(queue.jobs.isEmpty)
            await queue.shutDown()
        }
    }
}
