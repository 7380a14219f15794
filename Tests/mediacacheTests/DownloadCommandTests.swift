// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Testing

/// `pin`, `unpin`, `downloads`, `pause`, `resume`, `cancel` and `export`, with and without a
/// server, and pinned downloads that survive `kill -9` of the server.
@Suite(.stallLimit, .endToEnd) struct DownloadCommandTests {
    static func mediacache(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        try await CacheCommandTests.mediacache(arguments)
    }

    /// Without a server: `pin` downloads in the foreground, `downloads` and `ls` show it,
    /// `export` writes the origin's bytes, `unpin` gives it back to the streaming cache.
    /// A cache folder whose index was damaged (200 bytes of garbage over its head) still
    /// opens: the command says, once, that it rebuilt the index, and the pin, the job and
    /// the bytes are all there.
    @Test func aDamagedIndexIsRebuiltAndThePinKept() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        CacheCommandTests.serveFiles(on: origin)
        let film = origin.url("/b/film.mp4").absoluteString
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let pinned = try await Self.mediacache(["pin", "--cache-dir", folder, film])
            #expect(pinned.status == 0, "\(pinned.error)")
            let handle = try #require(FileHandle(forUpdatingAtPath: folder + "/index.sqlite"))
            try handle.write(contentsOf: Data((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }))
            try handle.close()
            let listed = try await Self.mediacache(["ls", "--cache-dir", folder])
            #expect(listed.status == 0, "\(listed.error)")
            #expect(
                listed.error.components(separatedBy: "rebuilt it from the entry records").count == 2,
                "said once: \(listed.error)")
            #expect(
                listed.output.split(separator: "\n").contains { $0.hasSuffix(film) && $0.contains(" yes ") },
                "\(listed.output)")
            let jobs = try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder])
            #expect(jobs.map(\.state) == [.completed] && jobs.first?.bytesDone == 2_000_000)
            let output = directory.appendingPathComponent("film.mp4")
            let exported = try await Self.mediacache(["export", "--cache-dir", folder, film, "--output", output.path])
            #expect(exported.status == 0, "\(exported.error)")
            #expect(
                DeterministicContent(seed: 2).firstMismatch(in: ByteBuffer(bytes: try Data(contentsOf: output)), at: 0)
                    == nil)
            #expect(origin.bodyBytesSent("/b/film.mp4") == 2_000_000, "nothing fetched again")
        }
    }

    /// The ways a cache folder gets hurt, each after a `serve` that pinned a file stopped
    /// (killed with `kill -9` when its journal is what is lost).
    enum Harm: String, CaseIterable, Sendable {
        /// 200 bytes of garbage over the index's head.
        case indexHead
        /// 64 bytes of garbage at 20 places spread over the index.
        case indexScattered
        /// The index, its `-wal` and `-shm` deleted.
        case indexDeleted
        /// The `-wal` deleted (with it, the commits the killed server made since its last checkpoint).
        case walDeleted
        /// The pinned file's data file cut to a third.
        case dataTruncated
    }

    /// After each harm `serve` starts, serves every
    /// byte of the pinned file right (what a cut data file lost is fetched again, nothing else),
    /// and the job and its pin are there (a job whose bytes vanished says so, and resumes).
    @Test(arguments: Harm.allCases) func aHurtCacheFolderStillServesEveryByteRightAndKeepsThePin(_ harm: Harm)
        async throws
    {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        CacheCommandTests.serveFiles(on: origin)
        let film = origin.url("/b/film.mp4")
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            var (server, info) = try await Self.startServer(folder)
            let pin = try await Self.post(info, "pin", ["target": film.absoluteString])
            #expect(pin.status == .ok, "\(String(buffer: pin.body))")
            let job = try CacheCommandTests.decoder.decode(DownloadJob.self, from: Data(buffer: pin.body))
            try await waitUntil { try await Self.job(job.id, on: info)?.state == .completed }
            if harm == .walDeleted {
                kill(server.processIdentifier, SIGKILL)
                await server.exited()
            } else {
                await server.stop()
            }
            let index = folder + "/index.sqlite"
            switch harm {
            case .indexHead, .indexScattered:
                let handle = try #require(FileHandle(forUpdatingAtPath: index))
                let size = try handle.seekToEnd()
                for place in 0..<(harm == .indexHead ? 1 : 20) {
                    try handle.seek(toOffset: harm == .indexHead ? 0 : UInt64(place) * size / 20 + 37)
                    try handle.write(
                        contentsOf: Data(
                            (0..<(harm == .indexHead ? 200 : 64)).map {
                                UInt8(truncatingIfNeeded: $0 &* 53 &+ place &* 7 &+ 11)
                            }))
                }
                try handle.close()
            case .indexDeleted:
                for suffix in ["", "-wal", "-shm"] { unlink(index + suffix) }
            case .walDeleted:
                for suffix in ["-wal", "-shm"] { unlink(index + suffix) }
            case .dataTruncated:
                let data = folder + "/data/"
                let files = try FileManager.default.contentsOfDirectory(atPath: data)
                func size(_ name: String) -> Int64 {
                    ((try? FileManager.default.attributesOfItem(atPath: data + name))?[.size] as? Int64) ?? 0
                }
                let largest = try #require(files.max { size($0) < size($1) })
                #expect(truncate(data + largest, off_t(size(largest) / 3)) == 0)
            }
            origin.resetCounters()
            (server, info) = try await Self.startServer(folder)
            try await runThenTearDown(
                server,
                { _ in
                    let url = info.baseURL + ProxyURL.path(for: film, token: nil)
                    let response = try await HTTPClient.shared.execute(
                        HTTPClientRequest(url: url), timeout: .seconds(30))
                    let body = try await response.body.collect(upTo: 8 << 20)
                    #expect(
                        response.status == .ok && body.readableBytes == 2_000_000
                            && DeterministicContent(seed: 2).firstMismatch(in: body, at: 0) == nil)
                    let kept = try await Self.job(job.id, on: info)
                    // Bytes gone from a completed job's files (a cut data file; a deleted WAL, when it
                    // held the last commits): it says so, and a resume completes it.
                    if harm == .dataTruncated || (harm == .walDeleted && kept?.state == .failed) {
                        #expect(
                            kept?.state == .failed && kept?.failure?.contains("vanished") == true,
                            "\(String(describing: kept))")
                        let resumed = try await Self.post(info, "resume", ["job": job.id])
                        #expect(resumed.status == .ok, "\(String(buffer: resumed.body))")
                        try await waitUntil { try await Self.job(job.id, on: info)?.state == .completed }
                    } else {
                        #expect(kept?.state == .completed, "\(String(describing: kept))")
                    }
                    let listed = try await Self.mediacache(["ls", "--cache-dir", folder])
                    #expect(
                        listed.output.split(separator: "\n").contains {
                            $0.hasSuffix(film.absoluteString) && $0.contains(" yes ")
                        }, "pinned: \(listed.output)")
                    let sent = origin.bodyBytesSent("/b/film.mp4")
                    // Killed, the server may have committed rows whose records it had not yet
                    // written: what the records cannot prove is fetched again.
                    switch harm {
                    case .dataTruncated, .walDeleted:
                        #expect(
                            sent <= 2_000_000 && (harm == .walDeleted || sent > 0),
                            "the origin sent \(sent) bytes again")
                    case .indexHead, .indexScattered, .indexDeleted:
                        #expect(sent == 0, "the origin sent \(sent) bytes again")
                    }
                }, tearDown: { await $0.stop() })
        }
    }

    @Test func pinDownloadsExportsAndUnpinsWithoutAServer() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        CacheCommandTests.serveFiles(on: origin)
        let film = origin.url("/b/film.mp4").absoluteString
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let pinned = try await Self.mediacache(["pin", "--cache-dir", folder, film])
            #expect(pinned.status == 0, "\(pinned.error)")
            #expect(pinned.output.contains("completed: 1.9 MiB of 1.9 MiB, 1/1 resources  \(film)"), "\(pinned.output)")
            let jobs = try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder])
            #expect(jobs.map(\.state) == [.completed] && jobs.first?.bytesDone == 2_000_000)
            let listed = try await Self.mediacache(["ls", "--cache-dir", folder])
            #expect(
                listed.output.split(separator: "\n").contains { $0.hasSuffix(film) && $0.contains(" yes ") },
                "\(listed.output)")

            let output = directory.appendingPathComponent("film.mp4")
            let exported = try await Self.mediacache(["export", "--cache-dir", folder, film, "--output", output.path])
            #expect(exported.status == 0, "\(exported.error)")
            let bytes = try Data(contentsOf: output)
            #expect(bytes.count == 2_000_000)
            #expect(DeterministicContent(seed: 2).firstMismatch(in: ByteBuffer(bytes: bytes), at: 0) == nil)
            let again = try await Self.mediacache(["export", "--cache-dir", folder, film, "--output", output.path])
            #expect(again.status == 1 && again.error.contains("exists already"), "\(again.error)")
            let song = origin.url("/a/song.mp3").absoluteString
            let notCached = try await Self.mediacache([
                "export", "--cache-dir", folder, song, "--output", directory.appendingPathComponent("song.mp3").path,
            ])
            #expect(notCached.status == 1 && notCached.error.contains("Offline"), "\(notCached.error)")
            #expect(origin.requests("/a/song.mp3").isEmpty, "export contacted the origin")

            let unpinned = try await Self.mediacache(["unpin", "--cache-dir", folder, film])
            #expect(
                unpinned.status == 0 && unpinned.output.contains("unpinned \(film)"),
                "\(unpinned.output) \(unpinned.error)")
            #expect(try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder]).isEmpty)
            let entry = try await CacheCommandTests.json(CacheEntrySummary.self, ["info", "--cache-dir", folder, film])
            #expect(!entry.isPinned && entry.storedBytes == 2_000_000)
        }
    }

    /// With a server: a pin over the quota exits 1 with the numbers before any byte is asked
    /// for; one that fits is downloaded by the server; pause, resume and cancel reach it.
    @Test func theServerRefusesAPinOverTheQuotaAndControlsTheRest() async throws {
        try await RunningServer.with(["--max-size", "20M", "--max-pinned-size", "1M"]) { server in
            let folder = server.folder
            let film = server.origin.url("/b/film.mp4").absoluteString
            let refused = try await Self.mediacache(["pin", "--cache-dir", folder, film])
            #expect(refused.status == 1, "\(refused.output)")
            #expect(
                refused.error.contains("needs 1.9 MiB (2000000 bytes)") && refused.error.contains("1048576 bytes")
                    && refused.error.contains("raise --max-pinned-size"), "\(refused.error)")
            #expect(server.origin.bodyBytesSent("/b/film.mp4") == 0)

            let song = server.origin.url("/a/song.mp3").absoluteString
            let pinned = try await Self.mediacache(["pin", "--cache-dir", folder, song])
            #expect(pinned.status == 0 && pinned.output.contains("completed"), "\(pinned.output) \(pinned.error)")
            let jobs = try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder])
            #expect(jobs.count == 1 && jobs[0].state == .completed)
            let text = try await Self.mediacache(["downloads", "--cache-dir", folder])
            #expect(
                text.output.contains(jobs[0].id) && text.output.contains("completed") && text.output.contains("100%"),
                "\(text.output)")
            let status = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: server.info.baseURL + "/status.json"), timeout: .seconds(30))
            let report = try CacheCommandTests.decoder.decode(
                StatusReport.self, from: Data(buffer: try await status.body.collect(upTo: 4 << 20)))
            #expect(
                report.pinned.map(\.id) == [jobs[0].id] && report.entries.contains { $0.url == song && $0.isPinned })
            // The scrub of pinned entries waits ten minutes after a start: none ran yet, none runs.
            #expect(
                report.scrub?.passes == 0 && report.scrub?.isRunning == false && report.scrub?.lastPassEnded == nil,
                "\(String(describing: report.scrub))")
            let page = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: server.info.baseURL + "/status"), timeout: .seconds(30))
            let html = String(buffer: try await page.body.collect(upTo: 4 << 20))
            #expect(
                html.contains("<h2>Pinned downloads</h2>") && html.contains("<b>completed</b>")
                    && html.contains("<b>pinned</b>") && html.contains("Stored bytes check: 0 passes done"))
            let paused = try await Self.mediacache(["pause", "--cache-dir", folder, jobs[0].id])
            #expect(
                paused.status == 0 && paused.output.contains("completed"),
                "a completed job stays completed: \(paused.output) \(paused.error)")
            let missing = try await Self.mediacache(["resume", "--cache-dir", folder, "nothing"])
            #expect(missing.status == 1 && missing.error.contains("No download job is nothing"), "\(missing.error)")
            let cancelled = try await Self.mediacache(["cancel", "--cache-dir", folder, song])
            #expect(
                cancelled.status == 0 && cancelled.output.contains("cancelled \(song)"),
                "\(cancelled.output) \(cancelled.error)")
            #expect(try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder]).isEmpty)
            let stats = try await CacheCommandTests.json(AdminStats.self, ["stats", "--cache-dir", folder])
            #expect(stats.store.pinnedBytes == 0 && stats.store.pinnedLimit == 1 << 20)
        }
    }

    /// `serve --offline` says so when it starts, and answers 504 for what it does not hold
    /// without asking the origin.
    @Test func serveOfflineNeverAsksTheOrigin() async throws {
        try await RunningServer.with(["--offline"]) { server in
            #expect(server.line.contains("offline: no origin is contacted"), "\(server.line)")
            let url = server.info.baseURL + ProxyURL.path(for: server.origin.url("/a/song.mp3"), token: nil)
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
            #expect(response.status == .gatewayTimeout && body.contains("Offline"), "\(response.status) \(body)")
            #expect(server.origin.connectionsAccepted == 0)
        }
    }

    enum Asset: String, CaseIterable, Sendable {
        case file, hls
        /// The HLS asset behind signed cookies: the master playlist's answer sets them, every
        /// other resource is refused without them. After a restart the stored playlists are
        /// fresh, so only the cookies kept with the job open the segments.
        case hlsBehindSignedCookies
    }

    /// `kill -9` of the server at 30 % and at 70 % of a pinned download: after each restart
    /// the job resumes, it completes with the origin's bytes, and the origin sent at most the
    /// asset's size plus what each kill lost: the bytes it had sent that the store had not
    /// committed (read from the restarted server before the origin answers it again). What a
    /// kill loses is not bounded here: besides what was not committed, it is what sat unread in
    /// the killed server's socket, which on a loaded machine was more than a fixed allowance.
    @Test(arguments: Asset.allCases) func aPinnedDownloadSurvivesKillDashNine(_ asset: Asset) async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let (target, paths, size) = Self.serve(asset, on: origin)
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            var (server, info) = try await Self.startServer(folder)
            let pin = try await Self.post(info, "pin", ["target": target.absoluteString])
            #expect(pin.status == .ok, "\(String(buffer: pin.body))")
            let job = try CacheCommandTests.decoder.decode(DownloadJob.self, from: Data(buffer: pin.body))
            var lost: Int64 = 0
            for (round, threshold) in [0.3, 0.7].enumerated() {
                try await waitUntil { (try await Self.job(job.id, on: info)?.fraction ?? 0) >= threshold }
                kill(server.processIdentifier, SIGKILL)
                await server.exited()
                #expect(server.terminationReason == .signalled(SIGKILL))
                try await waitUntil { paths.allSatisfy { origin.responsesInProgress($0) == 0 } }
                let sent = paths.reduce(Int64(0)) { $0 + origin.bodyBytesSent($1) }
                // The origin holds its answers until the restarted job's committed bytes are read.
                let gate = TestOrigin.Gate()
                for path in paths {
                    origin.update(path) {
                        $0.faults.gate = gate
                        if round == 1 { $0.faults.bytesPerSecond = nil }
                    }
                }
                (server, info) = try await Self.startServer(folder)
                let committed = try await Self.stored(paths.map { origin.url($0).absoluteString }, on: info)
                lost = max(0, sent - committed)  // every byte sent is committed or lost
                gate.open()
            }
            try await runThenTearDown(
                server,
                { _ in
                    try await waitUntil { try await Self.job(job.id, on: info)?.state == .completed }
                    for path in paths {
                        let url = info.baseURL + ProxyURL.path(for: origin.url(path), token: nil)
                        let response = try await HTTPClient.shared.execute(
                            HTTPClientRequest(url: url), timeout: .seconds(30))
                        let body = try await response.body.collect(upTo: 128 << 20)
                        let resource = try #require(origin.resource(at: path))
                        #expect(body == resource.bytes(0..<resource.length), "\(path)")
                    }
                    let sent = paths.reduce(Int64(0)) { $0 + origin.bodyBytesSent($1) }
                    let refused = (paths + ["/pinned/v/index.m3u8"]).flatMap { origin.requests($0) }.filter {
                        $0.status == 403
                    }
                    #expect(refused.isEmpty, "requests without the cookie: \(refused)")
                    print(
                        "kill -9 \(asset): the origin sent \(sent) bytes for \(size) (\(sent - size) more, \(lost) lost)"
                    )
                    #expect(sent <= size + lost, "sent \(sent) for \(size), \(lost) lost in the kills")
                }, tearDown: { await $0.stop() })
        }
    }

    /// The asset the kill test pins: its URL, the paths of its media bytes and their size.
    static func serve(_ asset: Asset, on origin: TestOrigin) -> (URL, [String], Int64) {
        // About 5 s a pass: long enough to stop at 30 % and 70 %, whatever the machine's load.
        let rate: Int64 = 12 << 20
        switch asset {
        case .file:
            var film = TestOrigin.Resource.generated(length: 64 << 20, seed: 90)
            film.faults.bytesPerSecond = rate
            origin.serve(film, at: "/pinned/film.mp4")
            return (origin.url("/pinned/film.mp4"), ["/pinned/film.mp4"], 64 << 20)
        case .hls, .hlsBehindSignedCookies:
            // 16 segments of 2 MiB, 4 s each: BANDWIDTH tells the size before it is known.
            var playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            var paths: [String] = []
            for index in 0..<16 {
                playlist += "#EXTINF:4.0,\nseg\(index).ts\n"
                var segment = TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: UInt64(200 + index)), length: 2 << 20),
                    mimeType: "video/mp2t")
                segment.faults.bytesPerSecond = rate / 2
                origin.serve(segment, at: "/pinned/v/seg\(index).ts")
                paths.append("/pinned/v/seg\(index).ts")
            }
            playlist += "#EXT-X-ENDLIST\n"
            let type = "application/vnd.apple.mpegurl"
            origin.serve(
                TestOrigin.Resource(body: .bytes(Array(playlist.utf8)), mimeType: type), at: "/pinned/v/index.m3u8")
            origin.serve(
                TestOrigin.Resource(
                    body: .bytes(Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=4194304\nv/index.m3u8\n".utf8)),
                    mimeType: type),
                at: "/pinned/master.m3u8")
            if asset == .hlsBehindSignedCookies {
                origin.update("/pinned/master.m3u8") {
                    $0.extraHeaders.append((name: "Set-Cookie", value: "CloudFront-Signature=s1g; Path=/pinned"))
                }
                for path in paths + ["/pinned/v/index.m3u8"] {
                    origin.update(path) { $0.faults.requiredCookie = (name: "CloudFront-Signature", value: "s1g") }
                }
            }
            return (origin.url("/pinned/master.m3u8"), paths, 32 << 20)
        }
    }

    static func startServer(_ folder: String, _ arguments: [String] = []) async throws -> (SpawnedProcess, ServerInfo) {
        let executable = try ChildProcess.executable(named: "mediacache")
        let (server, _) = try await ChildProcess.startServer(
            executable, ["serve", "--port", "0", "--cache-dir", folder] + arguments,
            readyLinePrefix: "mediacache: serving on")
        let info = try CacheCommandTests.decoder.decode(
            ServerInfo.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/server.json")))
        return (server, info)
    }

    static func post(_ info: ServerInfo, _ name: String, _ query: [String: String]) async throws -> (
        status: HTTPResponseStatus, body: ByteBuffer
    ) {
        let text = query.map { $0.key + "=" + HLSPlaylist.percentEncoded($0.value) }.joined(separator: "&")
        var request = HTTPClientRequest(url: info.baseURL + "/_mediacache/" + name + "?" + text)
        request.method = .POST
        request.headers.add(name: "X-MediaCache-Admin", value: "1")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        return (response.status, try await response.body.collect(upTo: 1 << 20))
    }

    /// The job `id` as the server says now.
    /// How many bytes of the resources at `urls` the server's store holds.
    static func stored(_ urls: [String], on info: ServerInfo) async throws -> Int64 {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: info.baseURL + "/_mediacache/entries"), timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 16 << 20)
        let entries = try CacheCommandTests.decoder.decode([CacheEntrySummary].self, from: Data(buffer: body))
        return entries.filter { $0.url.map(urls.contains) ?? false }.reduce(0) { $0 + $1.storedBytes }
    }

    static func job(_ id: String, on info: ServerInfo) async throws -> DownloadJob? {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: info.baseURL + "/_mediacache/downloads"), timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return try CacheCommandTests.decoder.decode([DownloadJob].self, from: Data(buffer: body)).first { $0.id == id }
    }
}
