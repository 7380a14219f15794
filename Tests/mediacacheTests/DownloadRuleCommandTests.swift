// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// The download rules against the real binary: a window and a network rule hold a job (no
/// byte moves) and say why in `downloads`, `--json`, `/metrics` and the status page, and
/// `downloads set` and `network` change them on the running server; a rate cap holds the
/// downloads below it; a disk at its free-space floor makes a pin wait, streaming still
/// plays, and the pin resumes by itself when space returns.
@Suite(.stallLimit, .endToEnd) struct DownloadRuleCommandTests {
    static func mediacache(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        try await CacheCommandTests.mediacache(arguments)
    }

    static func get(_ info: ServerInfo, _ path: String) async throws -> String {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: info.baseURL + path), timeout: .seconds(30))
        return String(buffer: try await response.body.collect(upTo: 8 << 20))
    }

    /// Every byte of `path` through the proxy equals the origin's.
    static func playsRight(_ path: String, seed: UInt64, length: Int, on server: RunningServer) async throws {
        let url = server.info.baseURL + ProxyURL.path(for: server.origin.url(path), token: nil)
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 64 << 20)
        #expect(
            response.status == .ok && body.readableBytes == length
                && DeterministicContent(seed: seed).firstMismatch(in: body, at: 0) == nil, "\(path)")
    }

    @Test func aWindowAndANetworkRuleHoldAJobAndSayWhy() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let size = 3_000_000
        origin.serve(.generated(length: Int64(size), seed: 71), at: "/w/film.mp4")
        let closed = Self.closedWindow()
        try await RunningServer.with(["--download-window", closed.description], origin: origin) { server in
            let folder = server.folder
            let film = origin.url("/w/film.mp4").absoluteString
            let pinned = try await Self.mediacache(["pin", "--cache-dir", folder, film])
            #expect(
                pinned.status == 0 && pinned.output.contains("queued")
                    && pinned.output.contains("waits: outside its window \(closed)"), "\(pinned)")
            let listed = try await Self.mediacache(["downloads", "--cache-dir", folder])
            #expect(
                listed.output.contains("queued (waits: window)") && listed.output.contains("resumes at"),
                "\(listed.output)")
            let jobs = try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder])
            let job = try #require(jobs.first)
            #expect(job.waiting == .window && job.state == .queued)
            #expect(
                try await Self.get(server.info, "/metrics").contains(
                    "mediacache_pinned_downloads_waiting{reason=\"window\"} 1") == true)
            #expect(try await Self.get(server.info, "/status").contains("waits: outside its window") == true)
            // "I am on a hotspot", and the job's own window opened: now its network rule holds it.
            let said = try await Self.mediacache(["network", "--cache-dir", folder, "metered"])
            #expect(said.status == 0 && said.output.contains("metered (as you said: metered)"), "\(said)")
            let opened = try await Self.mediacache([
                "downloads", "set", job.id, "--window", "any", "--cache-dir", folder,
            ])
            #expect(opened.status == 0 && opened.output.contains("waits: the network is metered"), "\(opened)")
            let metrics = try await Self.get(server.info, "/metrics")
            #expect(
                metrics.contains("mediacache_pinned_downloads_waiting{reason=\"network\"} 1")
                    && metrics.contains("{reason=\"window\"} 0"), "\(metrics)")
            #expect(origin.bodyBytesSent("/w/film.mp4") == 0, "a waiting job moved bytes")
            // "This one anyway".
            let anyway = try await Self.mediacache([
                "downloads", "set", film, "--network", "any", "--cache-dir", folder,
            ])
            #expect(anyway.status == 0 && anyway.output.contains("network any"), "\(anyway)")
            try await waitUntil { try await DownloadCommandTests.job(job.id, on: server.info)?.state == .completed }
            #expect(origin.bodyBytesSent("/w/film.mp4") == Int64(size))
            try await Self.playsRight("/w/film.mp4", seed: 71, length: size, on: server)
            let auto = try await Self.mediacache(["network", "--cache-dir", folder, "auto"])
            #expect(auto.output.contains("as the system says"), "\(auto)")
            let wrong = try await Self.mediacache([
                "downloads", "set", job.id, "--window", "25:00-02:00", "--cache-dir", folder,
            ])
            #expect(wrong.status != 0 && wrong.error.contains("is not a window"), "\(wrong)")
        }
    }

    /// The queue's cap and a job's own: at every look, the bytes each holds are at most its
    /// cap times the time since it began, plus a second's burst and a piece in flight (a
    /// bound a slow machine cannot break).
    @Test func rateCapsHoldTheDownloadsBelowThem() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let size: Int64 = 3_000_000
        origin.serve(.generated(length: size, seed: 72), at: "/r/a.mp4")
        origin.serve(.generated(length: size, seed: 73), at: "/r/b.mp4")
        let queueRate: Int64 = 1 << 20
        let ownRate: Int64 = 512 << 10
        try await RunningServer.with(["--download-rate", "1M"], origin: origin) { server in
            let start = ContinuousClock.now
            let a = try await DownloadCommandTests.post(
                server.info, "pin", ["target": origin.url("/r/a.mp4").absoluteString])
            let b = try await DownloadCommandTests.post(
                server.info, "pin", ["target": origin.url("/r/b.mp4").absoluteString, "rate": String(ownRate)])
            #expect(a.status == .ok && b.status == .ok)
            let ids = try [a, b].map {
                try CacheCommandTests.decoder.decode(DownloadJob.self, from: Data(buffer: $0.body)).id
            }
            var looks = 0
            try await waitUntil {
                let jobs = try await ids.asyncMap { try await DownloadCommandTests.job($0, on: server.info) }
                let elapsed = (ContinuousClock.now - start) / .seconds(1)
                let done = jobs.map { $0?.bytesDone ?? 0 }
                let slack = Double(Self.piece)
                #expect(
                    Double(done[0] + done[1]) <= Double(queueRate) * (elapsed + 1) + 2 * slack,
                    "together \(done) at \(elapsed) s")
                #expect(
                    Double(done[1]) <= Double(ownRate) * (elapsed + 1) + slack, "own cap: \(done[1]) at \(elapsed) s")
                looks += 1
                return jobs.allSatisfy { $0?.state == .completed }
            }
            #expect(looks > 1)
            for (seed, path) in [(UInt64(72), "/r/a.mp4"), (73, "/r/b.mp4")] {
                #expect(origin.bodyBytesSent(path) == size)
                try await Self.playsRight(path, seed: seed, length: Int(size), on: server)
            }
        }
    }

    /// `downloads move JOB --first` on a server running one download at a time: the moved job
    /// downloads now, the other waits for the slot (no reason: a slot, not a rule), then both
    /// complete with the origin's bytes, each fetched once and what was in flight.
    @Test func aJobMovedFirstDownloadsNow() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let size = 4_000_000
        // The origin sends no body byte until the move is seen: the first job cannot end before
        // the move comes, however loaded the machine (a rate only made that likely).
        let gate = TestOrigin.Gate()
        for (seed, path) in [(UInt64(76), "/m/a.mp4"), (77, "/m/b.mp4")] {
            var held = TestOrigin.Resource.generated(length: Int64(size), seed: seed)
            held.faults.bodyGate = gate
            origin.serve(held, at: path)
        }
        try await RunningServer.with(["--max-downloads", "1"], origin: origin) { server in
            let pins = try await ["/m/a.mp4", "/m/b.mp4"].asyncMap { path in
                try await DownloadCommandTests.post(server.info, "pin", ["target": origin.url(path).absoluteString])
            }
            let ids = try pins.map {
                try CacheCommandTests.decoder.decode(DownloadJob.self, from: Data(buffer: $0.body)).id
            }
            let (a, b) = (ids[0], ids[1])
            try await waitUntil { try await DownloadCommandTests.job(a, on: server.info)?.state == .downloading }
            let moved = try await Self.mediacache(["downloads", "move", b, "--first", "--cache-dir", server.folder])
            #expect(moved.status == 0 && moved.output.contains("moved to the front"), "\(moved)")
            try await waitUntil {
                let (first, second) = (
                    try await DownloadCommandTests.job(b, on: server.info),
                    try await DownloadCommandTests.job(a, on: server.info)
                )
                return first?.state == .downloading && second?.state == .queued && second?.waiting == nil
            }
            let jobs = try await CacheCommandTests.json(
                [DownloadJob].self, ["downloads", "--cache-dir", server.folder])
            #expect(jobs.map(\.id) == [b, a], "the list follows the queue's order")
            gate.open()
            try await waitUntil {
                try await [a, b].asyncMap { try await DownloadCommandTests.job($0, on: server.info)?.state } == [
                    .completed, .completed,
                ]
            }
            for (seed, path) in [(UInt64(76), "/m/a.mp4"), (77, "/m/b.mp4")] {
                #expect(
                    origin.bodyBytesSent(path) <= Int64(size) + Self.piece,
                    "\(path): sent \(origin.bodyBytesSent(path))")
                try await Self.playsRight(path, seed: seed, length: size, on: server)
            }
        }
    }

    @Test(.enabled(if: SmallDisk.canMount, "needs root to mount a small tmpfs"))
    func aDiskAtItsFloorMakesAPinWaitAndStreamingStillPlays() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let size = 16_000_000
        origin.serve(.generated(length: Int64(size), seed: 74), at: "/d/film.mp4")
        origin.serve(.generated(length: 3_000_000, seed: 75), at: "/d/song.mp3")
        try await withTemporaryDirectory { directory in
            try await SmallDisk.with("48m", at: directory) {
                // 12 MiB taken by another file: about 12 MiB free above the 24 MiB floor.
                let filler = directory.appendingPathComponent("filler")
                #expect(
                    FileManager.default.createFile(atPath: filler.path, contents: Data(repeating: 1, count: 12 << 20)))
                let folder = directory.appendingPathComponent("cache").path
                let (server, info) = try await DownloadCommandTests.startServer(folder, ["--min-free-disk", "24M"])
                try await runThenTearDown(
                    server,
                    { _ in
                        let pin = try await DownloadCommandTests.post(
                            info, "pin", ["target": origin.url("/d/film.mp4").absoluteString])
                        #expect(pin.status == .ok, "\(String(buffer: pin.body))")
                        let id = try CacheCommandTests.decoder.decode(DownloadJob.self, from: Data(buffer: pin.body)).id
                        try await waitUntil {
                            try await DownloadCommandTests.job(id, on: info).map {
                                $0.waiting == .space && $0.state == .queued
                            } == true
                        }
                        let listed = try await Self.mediacache(["downloads", "--cache-dir", folder])
                        #expect(
                            listed.output.contains("queued (waits: space)") && listed.output.contains("keeps free"),
                            "\(listed.output)")
                        #expect(
                            try await Self.get(info, "/metrics").contains(
                                "mediacache_pinned_downloads_waiting{reason=\"space\"} 1") == true)
                        let running = RunningServer(origin: origin, folder: folder, info: info, line: "")
                        try await Self.playsRight("/d/song.mp3", seed: 75, length: 3_000_000, on: running)
                        // Space returns: the job resumes by itself.
                        try FileManager.default.removeItem(at: filler)
                        try await waitUntil { try await DownloadCommandTests.job(id, on: info)?.state == .completed }
                        #expect(
                            origin.bodyBytesSent("/d/film.mp4") <= Int64(size) + Self.piece,
                            "sent \(origin.bodyBytesSent("/d/film.mp4"))")
                        try await Self.playsRight("/d/film.mp4", seed: 74, length: size, on: running)
                    }, tearDown: { await $0.stop() })
            }
        }
    }

    /// What a stopped job may have had in flight: two pieces of a pinned file (512 KiB each).
    static let piece: Int64 = 1 << 20

    /// An hour-long window two hours from now, local time: closed for the whole test.
    static func closedWindow() -> DownloadRules.Window {
        let parts = Calendar.current.dateComponents([.hour], from: Date())
        let start = ((parts.hour ?? 0) + 2) % 24 * 60
        return DownloadRules.Window(start: start, end: (start + 60) % 1440)
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
