// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// The cache commands (`prefetch`, `ls`, `info`, `rm`, `clear`, `stats`, `url`) on a folder
/// they open themselves and on one a running `mediacache serve` holds, in text and JSON,
/// against the test origin; bad input exits non-zero with a one-line reason.
@Suite(.stallLimit, .endToEnd) struct CacheCommandTests {
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    /// Arguments added to every command ``mediacache(_:)`` runs (the key of an encrypted folder).
    @TaskLocal static var extraArguments: [String] = []

    /// Runs `mediacache` with `arguments`; its exit status, standard output and standard error.
    static func mediacache(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        let executable = try ChildProcess.executable(named: "mediacache")
        let result = try await ChildProcess.run([executable.path] + arguments + extraArguments)
        return (result.status, String(decoding: result.output, as: UTF8.self), result.error)
    }

    static func json<T: Decodable>(_ type: T.Type, _ arguments: [String]) async throws -> T {
        let result = try await mediacache(arguments + ["--json"])
        #expect(result.status == 0, "\(arguments): \(result.error)")
        return try decoder.decode(T.self, from: Data(result.output.utf8))
    }

    /// Two files on the origin: `/a/song.mp3` (300,000 bytes) and `/b/film.mp4` (2,000,000).
    static func serveFiles(on origin: TestOrigin) {
        origin.serve(
            TestOrigin.Resource(
                body: .generated(DeterministicContent(seed: 1), length: 300_000), mimeType: "audio/mpeg"),
            at: "/a/song.mp3")
        origin.serve(
            TestOrigin.Resource(
                body: .generated(DeterministicContent(seed: 2), length: 2_000_000), mimeType: "video/mp4"),
            at: "/b/film.mp4")
    }

    /// The same checks whether the commands open the folder or reach the server holding it:
    /// a whole file and a range prefetched, listed, described, removed, cleared.
    static func exerciseCommands(_ folder: String, origin: TestOrigin) async throws {
        let song = origin.url("/a/song.mp3").absoluteString
        let film = origin.url("/b/film.mp4").absoluteString
        let fetched = try await mediacache(["prefetch", "--cache-dir", folder, song])
        #expect(
            fetched.status == 0 && fetched.output.contains("\(song): 1/1 file, 293.0 KiB"),
            "\(fetched.output) \(fetched.error)")
        let ranged = try await json(
            [PrefetchProgress].self, ["prefetch", "--cache-dir", folder, "--range", "0-999", film])
        #expect(ranged.map(\.bytesDone) == [1000] && ranged.first?.isComplete == true)

        let entries = try await json([CacheEntrySummary].self, ["ls", "--cache-dir", folder, "--sort", "url"])
        #expect(entries.map(\.url) == [song, film])
        #expect(entries.map(\.length) == [300_000, 2_000_000] && entries.map(\.storedBytes) == [300_000, 1000])
        #expect(entries.map(\.mimeType) == ["audio/mpeg", "video/mp4"])
        let text = try await mediacache(["ls", "--cache-dir", folder, "--sort", "size"])
        let lines = text.output.split(separator: "\n")
        #expect(
            lines.count == 3 && lines[0].hasPrefix("SIZE") && lines[1].hasSuffix(film) && lines[1].contains("0%")
                && lines[2].hasSuffix(song) && lines[2].contains("100%"),
            "\(text.output)")

        let info = try await json(CacheEntrySummary.self, ["info", "--cache-dir", folder, film])
        #expect(info.spans == [[0, 1000]] && info.storedBytes == 1000 && info.etag == "\"v1\"")
        let described = try await mediacache(["info", "--cache-dir", folder, film])
        #expect(
            described.output.contains("Cached:        1000 bytes, 0% in 1 span") && described.output.contains("[▒░░░"),
            "\(described.output)")

        let stats = try await json(AdminStats.self, ["stats", "--cache-dir", folder])
        #expect(stats.store.entries == 2 && stats.store.bytes == 301_000 && stats.store.limit == 1 << 30)

        let removed = try await mediacache([
            "rm", "--cache-dir", folder, song, origin.url("/not/cached").absoluteString,
        ])
        #expect(
            removed.status == 0
                && removed.output == "removed \(song)\nnot cached: \(origin.url("/not/cached").absoluteString)\n",
            "\(removed.output)")
        #expect(try await json([CacheEntrySummary].self, ["ls", "--cache-dir", folder]).map(\.url) == [film])
        let missing = try await mediacache(["info", "--cache-dir", folder, song])
        #expect(
            missing.status == 1 && missing.error == "mediacache: Nothing is cached for \(song).\n", "\(missing.error)")

        let cleared = try await mediacache(["clear", "--cache-dir", folder])
        #expect(cleared.status == 0 && cleared.output.hasPrefix("Removed 1 entry"), "\(cleared.output)")
        #expect(try await json([CacheEntrySummary].self, ["ls", "--cache-dir", folder]).isEmpty)
    }

    @Test func commandsOnAFolderTheyOpen() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        Self.serveFiles(on: origin)
        try await withTemporaryDirectory { directory in
            try await Self.exerciseCommands(directory.appendingPathComponent("cache").path, origin: origin)
        }
    }

    /// The same on an encrypted folder, with its key: then without the key the folder is
    /// refused with the reason, with another key nothing shows but a count, and no file in
    /// the folder names what was cached.
    @Test func commandsOnAnEncryptedFolder() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        Self.serveFiles(on: origin)
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let keyFile = directory.appendingPathComponent("key").path
            let otherKeyFile = directory.appendingPathComponent("other-key").path
            try (String(repeating: "5a", count: 32) + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
            try String(repeating: "a5", count: 32).write(toFile: otherKeyFile, atomically: true, encoding: .utf8)
            chmod(keyFile, 0o600)
            chmod(otherKeyFile, 0o600)
            try await Self.$extraArguments.withValue(["--encryption-key-file", keyFile]) {
                try await Self.exerciseCommands(folder, origin: origin)
                let song = origin.url("/a/song.mp3").absoluteString
                #expect(try await Self.mediacache(["prefetch", "--cache-dir", folder, song]).status == 0)
                let stats = try await Self.mediacache(["stats", "--cache-dir", folder])
                #expect(stats.output.contains("Encrypted:   yes; 0 blocks failed the check"), "\(stats.output)")
            }
            let withoutKey = try await Self.mediacache(["ls", "--cache-dir", folder])
            #expect(
                withoutKey.status == 1
                    && withoutKey.error.contains(
                        "is encrypted: open it with its key. Give its key with --encryption-key-file."),
                "\(withoutKey.error)")
            let otherKey = try await Self.mediacache([
                "ls", "--cache-dir", folder, "--encryption-key-file", otherKeyFile,
            ])
            #expect(
                otherKey.status == 0 && otherKey.output.contains("Nothing is cached")
                    && otherKey.output.contains("(1 more entry is sealed with another key"),
                "\(otherKey.output)")
            let listed = try await Self.mediacache(["ls", "--cache-dir", folder, "--encryption-key-file", keyFile])
            #expect(listed.output.contains(origin.url("/a/song.mp3").absoluteString), "\(listed.output)")
            let badKey = try await Self.mediacache([
                "ls", "--cache-dir", folder, "--encryption-key-file", folder + "/index.sqlite",
            ])
            #expect(
                badKey.status != 0 && badKey.error.contains("--encryption-key-file: The key file holds"),
                "\(badKey.error)")
            let grep = try await ChildProcess.run(["grep", "-rlE", "song|film|127\\.0\\.0\\.1|audio/mpeg", folder])
            #expect(
                grep.status == 1 && grep.output.isEmpty,
                "files naming what was cached: \(String(decoding: grep.output, as: UTF8.self))")
        }
    }

    /// A running server on the folder: the commands go through it (its lock keeps them from
    /// opening the folder), and `stats` shows what it served.
    @Test func commandsThroughTheServerThatHoldsTheFolder() async throws {
        try await RunningServer.with(["--token", "t0ken"]) { server in
            let (origin, folder, info, line) = (server.origin, server.folder, server.info, server.line)
            #expect(line.contains("127.0.0.1:\(info.port)") && info.token == "t0ken")
            try await Self.exerciseCommands(folder, origin: origin)

            // Two plays through the proxy, then the server's counts.
            let player = "\(info.baseURL)\(ProxyURL.path(for: origin.url("/a/song.mp3"), token: "t0ken"))"
            for _ in 0..<2 {
                let response = try await HTTPClient.shared.execute(
                    HTTPClientRequest(url: player), timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 1 << 20)
                #expect(
                    response.status == .ok && DeterministicContent(seed: 1).firstMismatch(in: body, at: 0) == nil
                        && body.readableBytes == 300_000)
            }
            let stats = try await Self.json(AdminStats.self, ["stats", "--cache-dir", folder])
            #expect(stats.proxy.requests["miss"] == 1 && stats.proxy.requests["hit"] == 1, "\(stats.proxy.requests)")
            #expect(
                stats.proxy.bytesFromOrigin == 300_000 && stats.proxy.bytesFromCache == 300_000
                    && stats.proxy.byteHitRatio == 0.5)
            // The store's life too (kept in its index across restarts).
            #expect(
                stats.usage?.fromCache == 300_000 && stats.usage?.fromOrigin == 300_000,
                "\(String(describing: stats.usage))")
            let text = try await Self.mediacache(["stats", "--cache-dir", folder])
            #expect(
                text.output.contains("Requests:    hit 1, partial 0, miss 1")
                    && text.output.contains("Hit ratio:   50% of bytes"), "\(text.output)")

            // Without the token, the admin endpoints refuse.
            let refused = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: info.baseURL + "/_mediacache/entries"), timeout: .seconds(10))
            #expect(refused.status == .forbidden)
            var post = HTTPClientRequest(url: info.baseURL + "/_mediacache/clear?token=t0ken")
            post.method = .POST
            #expect(
                try await HTTPClient.shared.execute(post, timeout: .seconds(10)).status == .forbidden,
                "a change needs X-MediaCache-Admin")
        }
    }

    /// Removing an entry while a player streams it through the server: the stream finishes
    /// or ends early, every byte it got is right, and the other entry is untouched.
    @Test func removingWhileAPlayerStreamsLosesNothingElse() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        Self.serveFiles(on: origin)
        var slow = TestOrigin.Resource(
            body: .generated(DeterministicContent(seed: 9), length: 4_000_000), mimeType: "video/mp4")
        slow.faults.bytesPerSecond = 2_000_000
        origin.serve(slow, at: "/slow.mp4")
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let executable = try ChildProcess.executable(named: "mediacache")
            _ = try await Self.mediacache(["prefetch", "--cache-dir", folder, origin.url("/a/song.mp3").absoluteString])
            let (server, _) = try await ChildProcess.startServer(
                executable, ["serve", "--port", "0", "--cache-dir", folder], readyLinePrefix: "mediacache: serving on")
            try await runThenTearDown(
                server, { _ in try await Self.removeWhileStreaming(origin: origin, folder: folder) },
                tearDown: { await $0.stop() })
        }
    }

    /// Streams the slow file through the server on `folder`, and removes it (`rm`, then
    /// `clear`) after 500,000 bytes.
    static func removeWhileStreaming(origin: TestOrigin, folder: String) async throws {
        let info = try Self.decoder.decode(
            ServerInfo.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/server.json")))
        for command in ["rm", "clear"] {
            let response = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: info.baseURL + ProxyURL.path(for: origin.url("/slow.mp4"), token: nil)),
                timeout: .seconds(30))
            var received = ByteBuffer()
            var removedAt: Int?
            do {
                for try await var chunk in response.body {
                    received.writeBuffer(&chunk)
                    if removedAt == nil, received.readableBytes > 500_000 {
                        removedAt = received.readableBytes
                        let arguments =
                            command == "rm"
                            ? ["rm", "--cache-dir", folder, origin.url("/slow.mp4").absoluteString]
                            : ["clear", "--cache-dir", folder]
                        let result = try await Self.mediacache(arguments)
                        #expect(result.status == 0, "\(command): \(result.error)")
                    }
                }
            } catch {
                // Ending early is allowed; a wrong byte is not.
            }
            #expect(removedAt != nil && received.readableBytes > 500_000)
            #expect(
                DeterministicContent(seed: 9).firstMismatch(in: received, at: 0) == nil,
                "\(command): a wrong byte after \(removedAt ?? -1)")
            if command == "rm" {
                let song = try await Self.json(
                    CacheEntrySummary.self, ["info", "--cache-dir", folder, origin.url("/a/song.mp3").absoluteString])
                #expect(song.storedBytes == 300_000, "the other entry is untouched")
            }
        }
    }

    @Test func badInputIsAOneLineReasonAndANonZeroExit() async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.path
            let cases: [([String], String)] = [
                (["info", "--cache-dir", folder, "not a url"], "is not an http or https URL"),
                (["rm", "--cache-dir", folder, "ftp://x/y"], "is not an http or https URL"),
                (["prefetch", "--cache-dir", folder, "--range", "9-1", "http://127.0.0.1:1/x"], "--range takes a-b"),
                (
                    ["prefetch", "--cache-dir", folder, "--seconds=-3", "http://127.0.0.1:1/x"],
                    "--seconds takes a positive number"
                ),
                (
                    ["prefetch", "--cache-dir", folder, "--variant", "best", "http://127.0.0.1:1/x"],
                    "--variant takes first, lowest, highest"
                ),
                (["prefetch", "--cache-dir", folder, "http://127.0.0.1:1/x"], "Cannot reach 127.0.0.1:1"),
                (["ls", "--cache-dir", folder, "--sort", "colour"], "colour"),
                (["url", "http://x/y", "--port", "70000"], "--port must be 1...65535"),
            ]
            for (arguments, reason) in cases {
                let result = try await Self.mediacache(arguments)
                #expect(
                    result.status != 0 && result.error.contains(reason),
                    "\(arguments): \(result.status) \(result.error)")
            }
            let url = try await Self.mediacache([
                "url", "https://cdn.example/show/a b.mp3?x=1&y=2", "--port", "9000", "--token", "k",
            ])
            #expect(
                url.output
                    == "http://127.0.0.1:9000/a%20b.mp3?url=https%3A%2F%2Fcdn.example%2Fshow%2Fa%2520b.mp3%3Fx%3D1%26y%3D2&token=k\n",
                "\(url.output)")
        }
    }
}

/// `mediacache prefetch` of an HLS asset and of a file, with its progress: one line per URL
/// when not on a terminal, a bar redrawn in place on one (run under `script`, which gives it
/// a terminal).
@Suite(.stallLimit, .endToEnd) struct PrefetchCommandTests {
    static func serveAsset(on origin: TestOrigin) {
        let type = "application/vnd.apple.mpegurl"
        origin.serve(
            TestOrigin.Resource(
                body: .bytes(
                    Array(
                        "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=900000\nhi.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=300000\nlo.m3u8\n"
                            .utf8)),
                mimeType: type), at: "/hls/master.m3u8")
        for variant in ["hi", "lo"] {
            var text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n"
            for index in 0..<3 {
                text += "#EXTINF:4,\n\(variant)\(index).ts\n"
                origin.serve(
                    TestOrigin.Resource(
                        body: .generated(DeterministicContent(seed: UInt64(index + 1)), length: 50_000),
                        mimeType: "video/mp2t"),
                    at: "/hls/\(variant)\(index).ts")
            }
            origin.serve(
                TestOrigin.Resource(body: .bytes(Array((text + "#EXT-X-ENDLIST\n").utf8)), mimeType: type),
                at: "/hls/\(variant).m3u8")
        }
    }

    @Test func anHLSAssetIsPrefetchedWithTheChosenVariant() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        Self.serveAsset(on: origin)
        try await withTemporaryDirectory { directory in
            let folder = directory.path
            let master = origin.url("/hls/master.m3u8").absoluteString
            let text = try await CacheCommandTests.mediacache([
                "prefetch", "--cache-dir", folder, "--variant", "lowest", "--seconds", "5", master,
            ])
            #expect(
                text.status == 0 && text.output.hasPrefix("\(master): 2/2 segments, 97.7 KiB in "),
                "\(text.output) \(text.error)")
            #expect(["/hls/lo0.ts", "/hls/lo1.ts"].allSatisfy { origin.requests($0).count == 1 })
            #expect(["/hls/lo2.ts", "/hls/hi0.ts"].allSatisfy { origin.requests($0).isEmpty })
            let all = try await CacheCommandTests.json(
                [PrefetchProgress].self, ["prefetch", "--cache-dir", folder, "--variant", "lowest", master])
            let first = try #require(all.first)
            #expect(
                first.resourcesTotal == 3 && first.bytesDone == 150_000 && first.bytesAlreadyCached == 100_000
                    && first.playlists.map(\.path) == ["/hls/lo.m3u8"])
        }
    }

    /// A test origin serving `/slow.mp4` (`length` bytes of seed `seed`, sent at `rate` bytes a
    /// second), a folder, and the `mediacache` executable.
    static func withSlowFile(
        length: Int64, rate: Int64, seed: UInt64, _ body: (TestOrigin, URL, URL) async throws -> Void
    ) async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        var slow = TestOrigin.Resource(
            body: .generated(DeterministicContent(seed: seed), length: length), mimeType: "video/mp4")
        slow.faults.bytesPerSecond = rate
        origin.serve(slow, at: "/slow.mp4")
        try await withTemporaryDirectory { directory in
            try await body(origin, directory, try ChildProcess.executable(named: "mediacache"))
        }
    }

    /// Ctrl-C stops a prefetch: exit 130, a line that says so, and what arrived is kept (and right).
    @Test func ctrlCStopsAndKeepsWhatArrived() async throws {
        try await Self.withSlowFile(length: 8_000_000, rate: 1_000_000, seed: 6) { origin, directory, executable in
            let url = origin.url("/slow.mp4").absoluteString
            let (process, pipe) = try ChildProcess.start(executable, ["prefetch", "--cache-dir", directory.path, url])
            // Ctrl-C once a megabyte has left the origin: an event, however loaded the machine.
            try await waitUntil { origin.bodyBytesSent("/slow.mp4") >= 1_000_000 }
            kill(process.processIdentifier, SIGINT)
            await process.exited()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(
                process.terminationStatus == 130 && output.contains("\(url): stopped after ")
                    && output.contains("what arrived stays cached"),
                "\(process.terminationStatus) \(output)")
            let kept = try await CacheCommandTests.json(
                CacheEntrySummary.self, ["info", "--cache-dir", directory.path, url])
            #expect(
                kept.storedBytes > 200_000 && kept.storedBytes < 8_000_000 && kept.spans.first?.first == 0,
                "\(kept.spans)")
            // The kept bytes are stored (a prefetch of them fetches nothing) and are the origin's.
            origin.resetCounters()
            let again = try await CacheCommandTests.json(
                [PrefetchProgress].self,
                ["prefetch", "--cache-dir", directory.path, "--range", "0-\(kept.storedBytes - 1)", url])
            #expect(again.first?.bytesAlreadyCached == kept.storedBytes && origin.requests("/slow.mp4").isEmpty)
            let store = try await CacheStore.open(directory: directory)
            let handle = try store.openEntry(store.key(for: origin.url("/slow.mp4")))
            let bytes = try await handle.read(ByteRange(0, kept.storedBytes))
            handle.close()
            try await store.close()
            #expect(DeterministicContent(seed: 6).firstMismatch(in: bytes, at: 0) == nil)
        }
    }

    @Test(.enabled(if: ChildProcess.toolExists("script"), "script (bsdutils) gives the command a terminal"))
    func onATerminalTheProgressBarIsRedrawnInPlace() async throws {
        try await Self.withSlowFile(length: 3_000_000, rate: 3_000_000, seed: 4) { origin, directory, executable in
            let command =
                "\(executable.path) prefetch --cache-dir \(directory.path) \(origin.url("/slow.mp4").absoluteString)"
            let result = try await ChildProcess.run(["script", "-qec", command, "/dev/null"])
            let output = String(decoding: result.output, as: UTF8.self)
            let redraws = output.components(separatedBy: "\r[").count - 1
            #expect(
                result.status == 0 && redraws >= 3 && output.contains(" of 2.9 MiB") && output.contains("ETA")
                    && output.contains("/s"), "\(output.debugDescription)")
            #expect(output.contains("slow.mp4: 1/1 file, 2.9 MiB in "), "\(output.debugDescription)")
        }
    }
}

extension CacheCommandTests {
    /// `ls` marks an entry a running server is filling on to its end (a played episode), and
    /// the server's admin table answers what it fills.
    @Test func lsMarksAPlayedFileBeingFilled() async throws {
        try await RunningServer.with([]) { server in
            var slow = TestOrigin.Faults()
            slow.bytesPerSecond = 256 << 10
            server.origin.serve(
                .generated(length: 8 << 20, seed: 21, mimeType: "audio/mpeg", faults: slow), at: "/pod/slow.mp3")
            let song = server.origin.url("/pod/slow.mp3")
            let player = "\(server.info.baseURL)\(ProxyURL.path(for: song, token: nil))"
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: player), timeout: .seconds(30))
            var got = 0
            for try await chunk in response.body {
                got += chunk.readableBytes
                if got >= 64 << 10 { break }
            }
            // The player hung up; the server goes on (8 MiB at 256 KiB/s: half a minute).
            let listed = try await Self.mediacache(["ls", "--cache-dir", server.folder])
            let line = listed.output.split(separator: "\n").first { $0.hasSuffix(song.absoluteString) }
            #expect(line?.contains("filling") == true, "\(listed.output) \(listed.error)")
        }
    }
}
