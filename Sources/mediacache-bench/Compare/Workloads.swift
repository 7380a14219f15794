// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheTestSupport

/// The workloads of the comparison, each run against every server in turn.
struct Workloads {
    let client: BenchClient
    let origin: OriginControl
    let servers: [BenchServer]
    let rounds: Int
    var verbose = true

    /// Serves the same deterministic bytes under every server's prefix; returns the content.
    private func serve(_ path: String, length: Int64, seed: UInt64, bytesPerSecond: Int64? = nil) async throws
        -> DeterministicContent
    {
        for server in servers {
            try await origin.serve(server.prefix + path, length: length, seed: seed, bytesPerSecond: bytesPerSecond)
        }
        return DeterministicContent(seed: seed)
    }

    /// 1. One client reads a cached file whole; `dd` of our cached data file is the limit.
    func hotThroughput(sizeMiB: Int, cacheFolder: URL, into table: inout ResultTable) async throws {
        let length = Int64(sizeMiB) << 20
        let content = try await serve("/hot.bin", length: length, seed: 1)
        for server in servers {
            try await client.read(server.url(server.prefix + "/hot.bin"), content: content, length: length)
        }
        // The servers take turns in each round, so a busy moment of the machine falls on both.
        var speeds = [[Double]](repeating: [], count: servers.count)
        for _ in 0..<rounds {
            for (index, server) in servers.enumerated() {
                let run = try await client.curl(
                    [server.url(server.prefix + "/hot.bin")], parallel: 1, expectedBytes: length)
                speeds[index].append(Double(sizeMiB) / run[0].total)
            }
        }
        var reference = ""
        if let file = Self.largestFile(in: cacheFolder) {
            var fastest = Double.infinity
            for _ in 0..<rounds {
                fastest = min(fastest, try await Self.dd(from: file, to: "/dev/null"))
            }
            reference = String(format: "dd of the cached file: %.0f MiB/s", Double(sizeMiB) / fastest)
        }
        table.add("1. hot, 1 client, \(sizeMiB) MiB file, MiB/s", rounds: speeds, format: "%.0f", reference: reference)
    }

    /// 2. Many clients read cached 8 MiB files at once. The aggregate is bound by the one curl
    /// that receives them all, beside the server on two cores; on loopback part of the TCP
    /// work lands on the sender or the receiver as their timing falls, so its best round swings
    /// with the machine. The median round, and what the server and curl spent per round, are
    /// the figures to compare builds by.
    func hotConcurrency(clients: Int, into table: inout ResultTable) async throws {
        let length: Int64 = 8 << 20
        for index in 0..<clients {
            _ = try await serve("/many-\(index).bin", length: length, seed: 1000 + UInt64(index))
        }
        var aggregate = [[Double]](repeating: [], count: servers.count)
        var firstBytes = aggregate
        var cpu = aggregate
        var switches = aggregate
        var clientCPU = aggregate
        for server in servers {
            let urls = (0..<clients).map { server.url(server.prefix + "/many-\($0).bin") }
            // Warm the cache (and check one file's bytes).
            try await client.read(urls[0], content: DeterministicContent(seed: 1000), length: length)
            _ = try await client.curl(urls, parallel: 8, expectedBytes: length)
        }
        // At least five rounds, so the 99th percentile is not one slow connection.
        for _ in 0..<max(rounds, 5) {
            for (index, server) in servers.enumerated() {
                let urls = (0..<clients).map { server.url(server.prefix + "/many-\($0).bin") }
                var run: [BenchClient.Transfer] = []
                let pid = server.process.processIdentifier
                var curlCPU = 0.0
                let cost = try await ProcessCost.measure([pid] + ProcessMemory.children(of: pid)) {
                    let before = ProcessCost.rusageMilliseconds(RUSAGE_CHILDREN.rawValue)
                    run = try await client.curl(urls, parallel: clients, expectedBytes: length)
                    curlCPU = ProcessCost.rusageMilliseconds(RUSAGE_CHILDREN.rawValue) - before
                }
                clientCPU[index].append(curlCPU)
                // The transfers start together: the slowest one's time is the run's.
                aggregate[index].append(Double(clients * 8) / run.map(\.total).max()!)
                firstBytes[index] += run.map(\.firstByte)
                cpu[index].append(cost.cpuMilliseconds)
                switches[index].append(cost.switches)
            }
        }
        let name = "2. hot, \(clients) clients"
        table.add("\(name) × 8 MiB, aggregate MiB/s, best round", values: aggregate.map { $0.max()! }, format: "%.0f")
        table.add("\(name) × 8 MiB, aggregate MiB/s", rounds: aggregate, format: "%.0f")
        table.add("\(name), server CPU ms per round", rounds: cpu, format: "%.0f")
        table.add("\(name), server switches per round", rounds: switches, format: "%.0f")
        table.add("\(name), curl's CPU ms per round", rounds: clientCPU, format: "%.0f")
        table.add(
            "\(name), p50 first byte, ms", values: firstBytes.map { Self.percentile(0.5, $0) * 1000 }, format: "%.1f")
        table.add(
            "\(name), p99 first byte, ms", values: firstBytes.map { Self.percentile(0.99, $0) * 1000 }, format: "%.1f")
    }

    /// 3. Time to first byte of a file nobody read yet, on an origin sending slowly. Beside
    /// it, the origin read directly and the floor: `floor-proxy` (run from `bench`), which
    /// forwards the request with SwiftNIO and AsyncHTTPClient and caches nothing.
    func coldFirstByte(bytesPerSecond: Int64, bench: URL, into table: inout ResultTable) async throws {
        let samples = 7
        var times = [[Double]](repeating: [], count: servers.count)
        var direct: [Double] = []
        var floor: [Double] = []
        let (floorProcess, line) = try await ChildProcess.startServer(
            bench, ["floor-proxy", "--origin-port", "\(origin.port)"], readyLinePrefix: "floor-proxy: listening on")
        defer {
            floorProcess.terminate()
            floorProcess.waitUntilExit()
        }
        let floorBase = "http://127.0.0.1:\(try BenchServers.port(in: line))"
        for sample in 0..<samples {
            let path = "/slow-\(sample).bin"
            let content = try await serve(
                path, length: 64 << 20, seed: 2000 + UInt64(sample), bytesPerSecond: bytesPerSecond)
            try await origin.serve(path, length: 64 << 20, seed: 2000 + UInt64(sample), bytesPerSecond: bytesPerSecond)
            direct.append(try await client.firstByte(origin.url(path), content: content))
            floor.append(try await client.firstByte(floorBase + path, content: content))
            for (index, server) in servers.enumerated() {
                times[index].append(try await client.firstByte(server.url(server.prefix + path), content: content))
            }
        }
        table.add(
            "3. cold first byte, origin at \(bytesPerSecond >> 10) KiB/s, median ms",
            values: times.map { Self.percentile(0.5, $0) * 1000 }, format: "%.1f",
            reference: String(
                format: "origin direct %.1f ms; floor (SwiftNIO and AsyncHTTPClient, no cache) %.1f ms",
                Self.percentile(0.5, direct) * 1000, Self.percentile(0.5, floor) * 1000))
    }

    /// The MP4 AVPlayer trace (``AVPlayerTrace``, moov at the end) and 200 random 64 KiB windows.
    static let movieLength = AVPlayerTrace.mp4Length
    static let windowsLength: Int64 = 256 << 20

    /// Plays the seek-heavy session through `server`; returns the unique bytes the client
    /// kept and the unique bytes its requests asked for (to the end for an open range).
    private func session(_ server: BenchServer) async throws -> (kept: Int64, asked: Int64) {
        let movie = DeterministicContent(seed: 62)
        let movieURL = server.url(server.prefix + "/movie.mp4")
        var kept = SpanSet()
        var asked = SpanSet()
        func read(_ offset: Int64, length: Int64? = nil, take: Int64? = nil) async throws {
            kept.insert(
                try await client.read(movieURL, content: movie, offset: offset, length: length, take: take).range)
            asked.insert(ByteRange(offset, length.map { offset + $0 } ?? Self.movieLength))
        }
        try await read(0, length: 2)
        // Start of playback: to-end requests cancelled as playback moves on, then a seek.
        try await read(0, take: 700 << 10)
        try await read(700 << 10, take: 800 << 10)
        try await read(1500 << 10, take: 500 << 10)
        try await read(5000 << 10, take: 1 << 20)
        // The tail (moov), then the trace, long requests taken in part and cancelled.
        try await read(Self.movieLength - (256 << 10), length: 256 << 10)
        for (offset, length) in AVPlayerTrace.mp4 {
            try await read(offset, length: length, take: length > 1 << 20 ? 1 << 20 : nil)
        }
        let windows = DeterministicContent(seed: 63)
        let windowsURL = server.url(server.prefix + "/windows.bin")
        var random = SplitMix(seed: 64)
        var keptWindows = SpanSet()
        for _ in 0..<200 {
            let offset = Int64(random.next() % UInt64(Self.windowsLength - (64 << 10)))
            keptWindows.insert(
                try await client.read(windowsURL, content: windows, offset: offset, length: 64 << 10).range)
        }
        return (kept.byteCount + keptWindows.byteCount, asked.byteCount + keptWindows.byteCount)
    }

    private func sessionOriginTraffic(_ server: BenchServer) async throws -> (requests: Int, bytes: Int64) {
        let movie = try await origin.stats(server.prefix + "/movie.mp4")
        let windows = try await origin.stats(server.prefix + "/windows.bin")
        return (movie.requests + windows.requests, movie.bytes + windows.bytes)
    }

    /// 4. Origin bytes for the seek-heavy session over the unique bytes the client kept.
    func seekSession(into table: inout ResultTable) async throws {
        _ = try await serve("/movie.mp4", length: Self.movieLength, seed: 62)
        _ = try await serve("/windows.bin", length: Self.windowsLength, seed: 63)
        var overKept: [Double] = []
        var overAsked: [Double] = []
        var unique: (kept: Int64, asked: Int64) = (0, 0)
        for server in servers {
            unique = try await session(server)
            // Let downloads cut short by hang-ups finish or stop before counting.
            try await Task.sleep(for: .milliseconds(500))
            let bytes = Double(try await sessionOriginTraffic(server).bytes)
            overKept.append(bytes / Double(unique.kept))
            overAsked.append(bytes / Double(unique.asked))
        }
        table.add(
            "4. seek session, origin bytes / unique bytes asked for", values: overAsked, format: "%.3f",
            reference: String(format: "asked for %.1f MiB (open ranges to the end)", Double(unique.asked) / 1_048_576))
        table.add(
            "4. seek session, origin bytes / unique bytes kept", values: overKept, format: "%.2f",
            reference: String(format: "client kept %.1f MiB before hanging up", Double(unique.kept) / 1_048_576))
    }

    /// 5. Sixteen clients read one cold file at once.
    func coalescing(into table: inout ResultTable) async throws {
        let length: Int64 = 32 << 20
        _ = try await serve("/shared.bin", length: length, seed: 65)
        var ratios: [Double] = []
        for server in servers {
            let url = server.url(server.prefix + "/shared.bin")
            _ = try await client.curl(Array(repeating: url, count: 16), parallel: 16, expectedBytes: length)
            ratios.append(Double(try await origin.stats(server.prefix + "/shared.bin").bytes) / Double(length))
        }
        table.add("5. 16 clients on one cold 32 MiB file, origin bytes / size", values: ratios, format: "%.3f")
    }

    /// 6. The session of workload 4 again: what it costs at the origin.
    func replay(into table: inout ResultTable) async throws {
        var requests: [Double] = []
        let paths = ["/movie.mp4", "/windows.bin"]
        for server in servers {
            var before: [Int] = []
            for path in paths { before.append(try await origin.requests(server.prefix + path).count) }
            _ = try await session(server)
            try await Task.sleep(for: .milliseconds(500))
            var made: [String] = []
            for (path, count) in zip(paths, before) {
                made += try await origin.requests(server.prefix + path).dropFirst(count)
            }
            requests.append(Double(made.count))
            if verbose, !made.isEmpty { print("    \(server.name) replay: " + made.joined(separator: "; ")) }
        }
        table.add("6. replay of session 4, origin requests", values: requests, format: "%.0f")
    }

    /// 8. Cached 64 KiB ranges at random offsets, one after another on one keep-alive
    /// connection: the latency of each, as a player seeking or scrubbing sees it. 10 (with
    /// `newConnections`): the same ranges, each on a new connection, as ffmpeg and mpv seek;
    /// the time to the first byte includes the connection's set-up. Beside them in each
    /// round, the floor: the same ranges from a bare SwiftNIO server (`floor-server`, run
    /// from `floor.bench` on a copy of the file in `floor.folder`).
    func hotRangeLatency(newConnections: Bool, floor: (bench: URL, folder: URL), into table: inout ResultTable)
        async throws
    {
        let length: Int64 = 64 << 20
        let content = try await serve("/ranges.bin", length: length, seed: 66)
        var random = SplitMix(seed: 67)
        let ranges = (0..<500).map { _ in
            let offset = Int64(random.next() % UInt64(length - (64 << 10)))
            return ByteRange(offset, offset + (64 << 10))
        }
        let floorFile = floor.folder.appendingPathComponent("floor-ranges.bin")
        try Self.writeFile(floorFile, content: content, length: length)
        let (floorProcess, line) = try await ChildProcess.startServer(
            floor.bench, ["floor-server", "--file", floorFile.path], readyLinePrefix: "floor: listening on")
        defer {
            floorProcess.terminate()
            floorProcess.waitUntilExit()
        }
        let floorURL = "http://127.0.0.1:\(try BenchServers.port(in: line))/ranges.bin"
        try await client.read(floorURL, content: content, offset: ranges[0].lowerBound, length: ranges[0].length)
        for server in servers {
            let url = server.url(server.prefix + "/ranges.bin")
            // Cache the whole file, and check the bytes of one range.
            try await client.read(url, content: content, length: length)
            try await client.read(url, content: content, offset: ranges[0].lowerBound, length: ranges[0].length)
        }
        // The servers take turns in each round, so a busy moment of the machine falls on both;
        // each round's percentiles are one sample of each server (`p50[server][round]`), the
        // floor's the last.
        let urls = servers.map { $0.url($0.prefix + "/ranges.bin") } + [floorURL]
        var p50 = [[Double]](repeating: [], count: urls.count)
        var p99 = p50
        var newP50 = p50
        var newP99 = p50
        for _ in 0..<max(rounds, 2) {
            for (index, url) in urls.enumerated() {
                let totals = try await client.curlRanges(url, ranges).map(\.total)
                p50[index].append(Self.percentile(0.5, totals) * 1000)
                p99[index].append(Self.percentile(0.99, totals) * 1000)
                if newConnections {
                    let firstBytes = try await client.curlRanges(url, ranges, newConnections: true).map(\.firstByte)
                    newP50[index].append(Self.percentile(0.5, firstBytes) * 1000)
                    newP99[index].append(Self.percentile(0.99, firstBytes) * 1000)
                }
            }
        }
        func add(_ name: String, _ rounds: [[Double]]) {
            let floor = rounds[servers.count]
            let ratios = { (server: Int) in ResultTable.spread(zip(rounds[server], floor).map { $1 / $0 }) }
            let reference =
                String(format: "bare SwiftNIO %.3f ms: ", ResultTable.median(floor))
                + "floor / nginx \(ratios(1)), floor / ours \(ratios(0))"
            table.add(name, rounds: Array(rounds.prefix(servers.count)), format: "%.3f", reference: reference)
        }
        add("8. hot 64 KiB range, one connection, p50 ms", p50)
        add("8. hot 64 KiB range, one connection, p99 ms", p99)
        guard newConnections else { return }
        add("10. hot 64 KiB range, new connection each, first byte p50 ms", newP50)
        add("10. hot 64 KiB range, new connection each, first byte p99 ms", newP99)
    }

    /// 9. A file nobody read yet, read whole through an empty cache, from an origin as fast
    /// as the machine allows (nginx serving it from the page cache), next to the direct read.
    /// Each round reads a new name (hard links of one file, so the page cache holds it once).
    func coldWholeFile(sizeMiB: Int, from staticOrigin: StaticOrigin, into table: inout ResultTable) async throws {
        let length = Int64(sizeMiB) << 20
        let content = DeterministicContent(seed: 90)
        let source = staticOrigin.file("cold.bin")
        try Self.writeFile(source, content: content, length: length)
        // Check the bytes once, through each server, on names the timed rounds do not use.
        try await client.read(staticOrigin.url("cold.bin"), content: content, length: length)
        for server in servers {
            try FileManager.default.linkItem(at: source, to: staticOrigin.file("cold-check-\(server.name).bin"))
            try await client.read(
                server.url(forOrigin: staticOrigin.url("cold-check-\(server.name).bin")), content: content,
                length: length)
        }
        // Each round: the direct read, the write floor (the same bytes copied to a new file
        // with 1 MiB writes, no sync: what storing costs on this machine at that moment), then
        // each server; every ratio is taken within its round.
        var speeds = [[Double]](repeating: [], count: servers.count)
        var direct: [Double] = []
        var floor: [Double] = []
        for round in 0..<rounds {
            direct.append(
                Double(sizeMiB)
                    / (try await client.curl([staticOrigin.url("cold.bin")], parallel: 1, expectedBytes: length))[0]
                    .total)
            let copied = staticOrigin.file("copy-\(round).bin")
            floor.append(Double(sizeMiB) / (try await Self.dd(from: source, to: copied.path)))
            try FileManager.default.removeItem(at: copied)
            for (index, server) in servers.enumerated() {
                let name = "cold-\(round)-\(server.name).bin"
                try FileManager.default.linkItem(at: source, to: staticOrigin.file(name))
                let run = try await client.curl(
                    [server.url(forOrigin: staticOrigin.url(name))], parallel: 1, expectedBytes: length)
                speeds[index].append(Double(sizeMiB) / run[0].total)
            }
        }
        let ours = speeds[0]
        table.add(
            "9. cold whole file, \(sizeMiB) MiB, fast origin, MiB/s", rounds: speeds, format: "%.0f",
            reference: String(
                format: "direct %.0f MiB/s, write floor (dd, 1 MiB writes) %.0f MiB/s", ResultTable.median(direct),
                ResultTable.median(floor))
                + "; per round ours / direct \(ResultTable.spread(zip(ours, direct).map { $0 / $1 }))"
                + ", ours / floor \(ResultTable.spread(zip(ours, floor).map { $0 / $1 }))"
                + ", ours / the lower of the two \(ResultTable.spread(zip(ours, zip(direct, floor)).map { $0 / min($1.0, $1.1) }))"
        )
    }

    /// Copies `source` to `destination` with dd, 1 MiB at a time; returns dd's own time.
    static func dd(from source: URL, to destination: String) async throws -> Double {
        // dd's own figure: "N bytes (…) copied, S s, R GB/s".
        let result = try await ChildProcess.run(["dd", "if=\(source.path)", "of=\(destination)", "bs=1M"])
        guard result.status == 0, let match = result.error.firstMatch(of: /copied, ([0-9.]+) s/),
            let seconds = Double(match.1)
        else {
            throw ValidationError("dd failed: \(result.error)")
        }
        return seconds
    }

    /// Writes `length` bytes of `content` to `file`, 1 MiB at a time.
    static func writeFile(_ file: URL, content: DeterministicContent, length: Int64) throws {
        FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        var offset: Int64 = 0
        while offset < length {
            let count = Int(min(1 << 20, length - offset))
            let buffer = content.buffer(offset: offset, length: count)
            try handle.write(contentsOf: Data(buffer.readableBytesView))
            offset += Int64(count)
        }
    }

    static func percentile(_ fraction: Double, _ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
    }

    static func largestFile(in folder: URL) -> URL? {
        let files =
            FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey])?.compactMap {
                $0 as? URL
            } ?? []
        return files.max { $0.fileSize < $1.fileSize }
    }
}

extension URL {
    fileprivate var fileSize: Int { (try? resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0 }
}
