// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport
import NIOCore
import Testing

/// Jobs outlive a restart and their index: after a stop (the index kept, or deleted and rebuilt
/// from the entry and job records), an unfinished pin resumes, a paused one stays paused
/// until resumed and one waiting for its window still waits, with its rules, until they let it
/// run, each fetching only what is missing. (A pause was once not written at all: the
/// job's own task, cancelled to pause it, could not write to the index.)
@Suite(.stallLimit, .endToEnd) struct JobRecordsTests {
    @Test(arguments: [true, false])
    func unfinishedPausedAndWaitingJobsResumeAfterARestart(deletingTheIndex: Bool) async throws {
        let size: Int64 = 8_000_000
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            defer { Task { try? await origin.shutdown() } }
            // The second halves wait for the gate, opened after the restart: the stop comes
            // before the end however loaded the machine (a rate only made that likely).
            let gate = TestOrigin.Gate()
            for (seed, path) in [(91, "/running.mp4"), (92, "/paused.mp4")] {
                var resource = TestOrigin.Resource.generated(length: size, seed: UInt64(seed))
                resource.faults.bodyGate = gate
                resource.faults.bodyGateOffset = size / 2
                origin.serve(resource, at: path)
            }
            origin.serve(.generated(length: size, seed: 93), at: "/waiting.mp4")
            let folder = directory.appendingPathComponent("store")
            var configuration = DownloadQueue.Configuration()
            configuration.commitInterval = 256 << 10
            let closed = Self.closedWindow()
            let (running, paused, waiting) = try await PinnedDownloadsTests.withEngine(folder) { _, reader in
                let queue = try DownloadQueue(reader: reader, configuration: configuration)
                queue.start()
                let running = try await queue.pin(origin.url("/running.mp4"))
                let paused = try await queue.pin(origin.url("/paused.mp4"))
                let waiting = try await queue.pin(
                    origin.url("/waiting.mp4"), renditions: RenditionChoice(), rules: DownloadRules(window: closed))
                #expect(
                    queue.job(matching: waiting.id)?.waiting == .window,
                    "\(String(describing: queue.job(matching: waiting.id)))")
                try await waitUntil {
                    [running.id, paused.id].allSatisfy { (queue.job(matching: $0)?.bytesDone ?? 0) >= size / 4 }
                }
                _ = try await queue.pause(paused.id)
                await queue.shutDown()
                return (running.id, paused.id, waiting.id)
            }
            #expect(origin.bodyBytesSent("/waiting.mp4") == 0, "a job outside its window moves no byte")
            let sent = ["/running.mp4", "/paused.mp4"].map { origin.bodyBytesSent($0) }
            #expect(sent.allSatisfy { $0 < size })
            let record =
                (try? String(contentsOf: folder.appendingPathComponent("jobs/\(paused)"), encoding: .utf8)) ?? "none"
            #expect(record.contains("\"state\":\"paused\""), "\(record)")
            if deletingTheIndex {
                for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
                    try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
                }
                #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("index.sqlite").path))
            }
            gate.open()

            try await PinnedDownloadsTests.withEngine(folder) { store, reader in
                let queue = try DownloadQueue(reader: reader, configuration: configuration)
                #expect(queue.job(matching: running)?.state == .queued, "a job that was downloading is queued again")
                #expect(queue.job(matching: paused)?.state == .paused)
                #expect(queue.job(matching: waiting)?.rules == DownloadRules(window: closed), "its rules were kept")
                for path in ["/running.mp4", "/paused.mp4"] {
                    #expect(store.isPinned(store.key(for: origin.url(path))), "\(path) lost its pin")
                    #expect(
                        store.spans(for: store.key(for: origin.url(path))).byteCount >= size / 4 - (1 << 20),
                        "\(path) lost its bytes")
                }
                queue.start()
                #expect(try await PinnedDownloadsTests.settled(running, in: queue).state == .completed)
                #expect(queue.job(matching: paused)?.state == .paused, "a paused job waits for the user")
                let stillWaiting = queue.job(matching: waiting)
                #expect(
                    stillWaiting?.state == .queued && stillWaiting?.waiting == .window,
                    "\(String(describing: stillWaiting))")
                #expect(origin.bodyBytesSent("/waiting.mp4") == 0)
                _ = try await queue.resume(paused)
                #expect(try await PinnedDownloadsTests.settled(paused, in: queue).state == .completed)
                _ = try await queue.setRules(waiting, DownloadRules(window: .anyTime))
                #expect(try await PinnedDownloadsTests.settled(waiting, in: queue).state == .completed)
                for (seed, path) in [(91, "/running.mp4"), (92, "/paused.mp4"), (93, "/waiting.mp4")] {
                    let bytes = try await collect(
                        try #require(reader.cachedRead(origin.url(path), range: ByteRange(0, size))))
                    #expect(DeterministicContent(seed: UInt64(seed)).firstMismatch(in: bytes, at: 0) == nil, "\(path)")
                    // Only what was missing: the file once, and at most what was in flight at the stop.
                    #expect(
                        origin.bodyBytesSent(path) <= size + (2 << 20),
                        "\(path): \(origin.bodyBytesSent(path)) bytes for \(size)")
                }
                await queue.shutDown()
            }
        }
    }

    /// An hour-long window two hours from now, local time: closed for the whole test.
    static func closedWindow() -> DownloadRules.Window {
        let parts = Calendar.current.dateComponents([.hour, .minute], from: Date())
        let start = ((parts.hour ?? 0) + 2) % 24 * 60
        return DownloadRules.Window(start: start, end: (start + 60) % 1440)
    }

    /// A pinned download whose signed URL expired (the origin now answers `403`) finishes from a
    /// new URL, given by hand (`replaceURL`) or by the app when the queue asks (`freshURL`),
    /// fetching only what is missing: the key rule leaves the signature out of keys.
    @Test func aJobWhoseURLExpiredFinishesFromANewOne() async throws {
        let size: Int64 = 8_000_000
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            defer { Task { try? await origin.shutdown() } }
            for (seed, path) in [(93, "/a/film.mp4"), (94, "/b/film.mp4")] {
                var resource = TestOrigin.Resource.generated(length: size, seed: UInt64(seed))
                resource.faults.bytesPerSecond = 1_000_000
                resource.faults.requiredQuery = "sig=1"
                origin.serve(resource, at: path)
            }
            var storeConfiguration = CacheStore.Configuration()
            storeConfiguration.keyRule = CacheKeyRule(ignoredQueryParameters: ["sig"])
            let store = try await CacheStore.open(
                directory: directory.appendingPathComponent("store"), configuration: storeConfiguration)
            let fetcher = HTTPOriginFetcher()
            let reader = CachingReader(store: store, fetcher: fetcher)
            var configuration = DownloadQueue.Configuration()
            configuration.commitInterval = 256 << 10
            // The app's answer when the queue asks: the same file under today's signature.
            configuration.freshURL = { job in
                var components = URLComponents(url: job.url, resolvingAgainstBaseURL: false)
                components?.query = "sig=2"
                return components?.url
            }
            let queue = try DownloadQueue(reader: reader, configuration: configuration)
            queue.start()
            var ids: [String] = []
            for path in ["/a/film.mp4", "/b/film.mp4"] {
                ids.append(try await queue.pin(origin.url(path + "?sig=1")).id)
            }
            try await waitUntil { ids.allSatisfy { (queue.job(matching: $0)?.bytesDone ?? 0) >= size / 4 } }
            for id in ids { _ = try await queue.pause(id) }
            // The signature expires.
            for path in ["/a/film.mp4", "/b/film.mp4"] {
                origin.update(path) { resource in
                    resource.faults.requiredQuery = "sig=2"
                    resource.faults.bytesPerSecond = nil
                }
            }
            // By hand: the first job gets its new URL and finishes.
            let replaced = try await queue.replaceURL(ids[0], with: origin.url("/a/film.mp4?sig=2"))
            #expect(replaced.url == origin.url("/a/film.mp4?sig=2") && replaced.state != .failed)
            // By the app: the second, resumed, is refused (403), asks for a new URL, and finishes.
            _ = try await queue.resume(ids[1])
            for (index, id) in ids.enumerated() {
                try await waitUntil { queue.job(matching: id)?.state == .completed }
                let path = ["/a/film.mp4", "/b/film.mp4"][index]
                let bytes = try await collect(
                    try #require(reader.cachedRead(origin.url(path + "?sig=2"), range: ByteRange(0, size))))
                #expect(
                    DeterministicContent(seed: UInt64(93 + index)).firstMismatch(in: bytes, at: 0) == nil, "\(path)")
                #expect(
                    origin.bodyBytesSent(path) <= size + (2 << 20),
                    "\(path): \(origin.bodyBytesSent(path)) bytes for \(size)")
            }
            #expect(queue.job(matching: ids[1])?.url.query == "sig=2")
            await queue.shutDown()
            await reader.shutDown()
            try await store.close()
            try await fetcher.shutdown()
        }
    }
}
