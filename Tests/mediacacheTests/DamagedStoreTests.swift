// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// `mediacache serve` whose data files changed while it was stopped, as a user finds it: a
/// streamed MP3, a stored range of an MP4 and a pinned file, each with one byte flipped on
/// disk. Restarted with the origin up, curl gets the origin's bytes, each damaged block run
/// costs one ranged request under the same version, and the log names the URL; with the origin
/// down, the pinned file's read stops before the damaged block: no wrong byte goes out.
@Suite(.stallLimit, .endToEnd, .enabled(if: ChildProcess.toolExists("curl")))
struct DamagedStoreTests {
    static let blockSize = 64 << 10

    /// Flips one bit at `offset` of the data file under `folder` that holds `expected` there.
    static func flip(in folder: String, at offset: Int, holding expected: [UInt8]) throws {
        let enumerator = FileManager.default.enumerator(atPath: folder)
        var flipped = 0
        while let name = enumerator?.nextObject() as? String {
            let path = folder + "/" + name
            guard let handle = FileHandle(forUpdatingAtPath: path) else { continue }
            defer { try? handle.close() }
            guard (try? handle.seekToEnd()) ?? 0 >= UInt64(offset + expected.count) else { continue }
            try handle.seek(toOffset: UInt64(offset))
            guard let found = try handle.read(upToCount: expected.count), Array(found) == expected else { continue }
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: [expected[0] ^ 0x20] + expected.dropFirst())
            flipped += 1
        }
        #expect(flipped == 1, "data files holding the bytes at \(offset): \(flipped)")
    }

    static func curl(_ info: ServerInfo, _ url: URL, range: String? = nil) async throws -> [UInt8] {
        let text = url.absoluteString
        let target =
            info.baseURL + "/?url=" + (text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text)
        let run = try await ChildProcess.run(["curl", "-s"] + (range.map { ["-r", $0] } ?? []) + [target])
        return Array(run.output)
    }

    static func startServer(_ folder: String, log: URL) async throws -> (SpawnedProcess, ServerInfo) {
        let (server, _) = try await ChildProcess.startServer(
            try ChildProcess.executable(named: "mediacache"), ["serve", "--port", "0", "--cache-dir", folder],
            readyLinePrefix: "mediacache: serving on", errorFile: log)
        let info = try CacheCommandTests.decoder.decode(
            ServerInfo.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/server.json")))
        return (server, info)
    }

    @Test func aFlippedByteOnDiskIsFetchedAgainOrNeverServed() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let length = 3_000_000
        let paths = ["/song.mp3", "/movie.mp4", "/pinned.mp3"]
        for (index, path) in paths.enumerated() {
            var resource = TestOrigin.Resource(
                body: .generated(DeterministicContent(seed: UInt64(31 + index)), length: Int64(length)),
                mimeType: path.hasSuffix(".mp4") ? "video/mp4" : "audio/mpeg")
            resource.cacheControl = "max-age=3600"
            origin.serve(resource, at: path)
        }
        func bytes(_ path: String, _ range: Range<Int>) -> [UInt8] {
            Array(origin.resource(at: path)!.bytes(Int64(range.lowerBound)..<Int64(range.upperBound)).readableBytesView)
        }
        // Where a bit flips: block 10 of the song, block 18 of the movie's stored range, block 5 of the pin.
        let flips = [
            ("/song.mp3", 10 * Self.blockSize + 100), ("/movie.mp4", 1_200_000),
            ("/pinned.mp3", 5 * Self.blockSize + 7),
        ]
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let log = directory.appendingPathComponent("serve.log")
            let pin = try await CacheCommandTests.mediacache([
                "pin", "--cache-dir", folder, origin.url("/pinned.mp3").absoluteString,
            ])
            #expect(pin.status == 0, "\(pin.error)")
            var (server, info) = try await Self.startServer(folder, log: log)
            #expect(try await Self.curl(info, origin.url("/song.mp3")) == bytes("/song.mp3", 0..<length))
            #expect(
                try await Self.curl(info, origin.url("/movie.mp4"), range: "1000000-1999999")
                    == bytes("/movie.mp4", 1_000_000..<2_000_000))
            try await waitUntil { paths.allSatisfy { origin.responsesInProgress($0) == 0 } }
            await server.stop()
            for (path, offset) in flips {
                try Self.flip(in: folder, at: offset, holding: bytes(path, offset..<offset + 64))
            }

            (server, info) = try await Self.startServer(folder, log: log)
            origin.resetCounters()
            // Short ranges first, one that opens the data file and then one of the damaged block:
            // the store's fast road (a region of the open data file, sent as it is) takes only
            // blocks this process checked.
            let block10 = 10 * Self.blockSize
            #expect(
                try await Self.curl(info, origin.url("/song.mp3"), range: "0-65535") == bytes("/song.mp3", 0..<65_536))
            #expect(
                try await Self.curl(info, origin.url("/song.mp3"), range: "\(block10)-\(block10 + 65_535)")
                    == bytes("/song.mp3", block10..<block10 + 65_536))
            #expect(try await Self.curl(info, origin.url("/song.mp3")) == bytes("/song.mp3", 0..<length))
            #expect(
                try await Self.curl(info, origin.url("/movie.mp4"), range: "1000000-1999999")
                    == bytes("/movie.mp4", 1_000_000..<2_000_000))
            for (path, offset) in flips.prefix(2) {
                let block = offset / Self.blockSize * Self.blockSize
                let requests = origin.requests(path)
                #expect(
                    requests.map(\.range) == ["bytes=\(block)-\(block + Self.blockSize - 1)"], "\(path): \(requests)")
                #expect(requests.first?.ifRange == origin.resource(at: path)?.etag)
            }
            // A byte flipped while the server runs (its block already checked by this process):
            // `verify` finds it and fetches the block again.
            let running = 20 * Self.blockSize + 5
            try Self.flip(in: folder, at: running, holding: bytes("/song.mp3", running..<running + 64))
            origin.resetCounters()
            let verified = try await CacheCommandTests.mediacache(
                ["verify", "--cache-dir", folder, "--json", origin.url("/song.mp3").absoluteString])
            #expect(verified.status == 0, "\(verified.error)")
            let reports = try JSONDecoder().decode([VerifyReport].self, from: Data(verified.output.utf8))
            let song = reports.first { $0.url == origin.url("/song.mp3").absoluteString }
            #expect(song?.found == [[Int64(20 * Self.blockSize), Int64(21 * Self.blockSize)]], "\(reports)")
            #expect(reports.count == 1 && song?.damaged == [] && song?.isSound == true, "\(reports)")
            #expect(
                origin.requests("/song.mp3").map(\.range) == ["bytes=\(20 * Self.blockSize)-\(21 * Self.blockSize - 1)"]
            )
            #expect(try await Self.curl(info, origin.url("/song.mp3")) == bytes("/song.mp3", 0..<length))
            // With the origin down, the pinned file's read stops before its damaged block.
            origin.update("/pinned.mp3") { $0.faults.status = 503 }
            let pinned = try await Self.curl(info, origin.url("/pinned.mp3"))
            #expect(pinned.count <= 5 * Self.blockSize)
            #expect(pinned == bytes("/pinned.mp3", 0..<pinned.count))
            let report = try await CacheCommandTests.mediacache(
                ["verify", "--cache-dir", folder, "--no-repair", origin.url("/pinned.mp3").absoluteString])
            #expect(report.status == 1)
            #expect(
                report.output.contains(
                    "damaged  \(origin.url("/pinned.mp3").absoluteString)  bytes \(5 * Self.blockSize)-\(6 * Self.blockSize - 1)"
                ), "\(report.output)")
            await server.stop()
            let text = try String(contentsOf: log, encoding: .utf8)
            for path in paths {
                #expect(
                    text.split(separator: "\n").contains {
                        $0.contains("failed their check") && $0.contains(origin.url(path).absoluteString)
                    }, "\(path): \(text.suffix(3_000))")
            }
        }
    }
}
