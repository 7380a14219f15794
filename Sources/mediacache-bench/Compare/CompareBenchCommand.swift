// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport

/// mediacache against nginx's slice cache, side by side in one run, in front of the same
/// standalone test origin, with the page cache (`dd`) as the physical reference.
struct CompareBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "mediacache vs nginx (slice cache) on ten workloads; prints a table with ratios.",
        discussion:
            "Starts the test origin, `mediacache serve` and nginx on loopback, runs the workloads against both and stops everything. Installs Debian's nginx-light if nginx is missing (as root)."
    )

    @Option(help: "The hot file's size in MiB (workload 1), and the cold one's (workload 9).")
    var hotSize: Int = 256

    @Option(help: "How many clients read cached 8 MiB files at once (workload 2).")
    var clients: Int = 64

    @Option(help: "The throttled origin's rate in KiB/s (workload 3).")
    var throttle: Int = 1024

    @Option(
        help:
            "Rounds of the timed workloads (2 takes the best of at least 5; 1, 8, 9 and 10 give medians and the median of per-round ratios)."
    )
    var rounds: Int = 3

    @Option(
        name: .customLong("only"), parsing: .upToNextOption,
        help: "Run only these workloads (1 to 10; 6 replays 4's session).")
    var only: [Int] = Array(1...10)

    @Option(
        name: .customLong("serve-option"), parsing: .unconditionalSingleValue,
        help: "An option for `mediacache serve` (repeat it: --serve-option --threads --serve-option 2).")
    var serveOptions: [String] = []

    func validate() throws {
        guard hotSize > 0, clients > 0, throttle > 0, rounds > 0 else {
            throw ValidationError("--hot-size, --clients, --throttle and --rounds must be positive.")
        }
        guard !only.isEmpty, only.allSatisfy((1...10).contains) else {
            throw ValidationError("--only takes workload numbers from 1 to 10.")
        }
        if only.contains(6), !only.contains(4) {
            throw ValidationError("Workload 6 replays workload 4's session: add 4.")
        }
    }

    func run() async throws {
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let executable = try ChildProcess.executable(named: "mediacache")
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
            "mediacache-compare-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(decompression: .disabled))
        let client = BenchClient(http: http)
        var started: [SpawnedProcess] = []
        func cleanUp() async {
            started.reversed().forEach(Self.stop)
            try? await http.shutdown()
            try? FileManager.default.removeItem(at: root)
        }
        do {
            let (originProcess, originPort) = try await BenchServers.startOrigin(bench)
            started.append(originProcess)
            let origin = OriginControl(port: originPort, client: client)
            let ourFolder = root.appendingPathComponent("mediacache")
            let ours = try await BenchServers.startOurs(
                executable, directory: ourFolder, originPort: originPort, arguments: serveOptions)
            started.append(ours.process)
            let (nginx, staticOrigin) = try await BenchServers.startNginx(
                directory: root.appendingPathComponent("nginx"), originPort: originPort, client: client)
            started.append(nginx.process)
            let workloads = Workloads(client: client, origin: origin, servers: [ours, nginx], rounds: rounds)
            print(
                "mediacache vs nginx slice cache — \(ProcessInfo.processInfo.activeProcessorCount) cores, origin, both servers and the clients on one machine"
            )
            var table = ResultTable(servers: [ours.name, nginx.name])
            if only.contains(1) {
                try await workloads.hotThroughput(sizeMiB: hotSize, cacheFolder: ourFolder, into: &table)
            }
            if only.contains(2) { try await workloads.hotConcurrency(clients: clients, into: &table) }
            if only.contains(3) {
                try await workloads.coldFirstByte(bytesPerSecond: Int64(throttle) << 10, bench: bench, into: &table)
            }
            if only.contains(4) { try await workloads.seekSession(into: &table) }
            if only.contains(5) { try await workloads.coalescing(into: &table) }
            if only.contains(7) {
                table.add(
                    "7. peak memory, MiB (after the workloads above)",
                    values: [ours, nginx].map { Double($0.peakMemory) / 1_048_576 }, format: "%.1f",
                    note: "nginx: master + workers + cache processes")
            }
            if only.contains(6) { try await workloads.replay(into: &table) }
            if only.contains(8) || only.contains(10) {
                try await workloads.hotRangeLatency(
                    newConnections: only.contains(10), floor: (bench, root), into: &table)
            }
            if only.contains(9) {
                try await workloads.coldWholeFile(sizeMiB: hotSize, from: staticOrigin, into: &table)
            }
            print(table.render())
        } catch {
            await cleanUp()
            throw error
        }
        await cleanUp()
    }

    private static func stop(_ process: SpawnedProcess) {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// Rows of figures per server, printed as a table with the ratio ours / nginx.
struct ResultTable {
    struct Row {
        var name: String
        var values: [Double]
        var format: String
        /// Ours / nginx in each round, when the row was measured in interleaved rounds: the
        /// ratio shown is their median, with the lowest and highest.
        var ratios: [Double]
        var reference: String
        var note: String
    }

    let servers: [String]
    private(set) var rows: [Row] = []

    init(servers: [String]) {
        self.servers = servers
    }

    mutating func add(_ name: String, values: [Double], format: String, reference: String = "", note: String = "") {
        rows.append(Row(name: name, values: values, format: format, ratios: [], reference: reference, note: note))
        print(
            "  " + name + ": "
                + zip(servers, values).map { "\($0) " + String(format: format, $1) }.joined(separator: ", ")
                + (reference.isEmpty ? "" : "; " + reference))
    }

    /// A row measured in interleaved rounds: `rounds[server][round]`. Shows each server's
    /// median and the median of the per-round ratios ours / nginx, with their spread, so a
    /// busy moment of the machine, which falls on both servers of a round, does not move it.
    mutating func add(_ name: String, rounds: [[Double]], format: String, reference: String = "", note: String = "") {
        let values = rounds.map(Self.median)
        let ratios = rounds.count == 2 ? zip(rounds[0], rounds[1]).map { $0 / $1 } : []
        rows.append(Row(name: name, values: values, format: format, ratios: ratios, reference: reference, note: note))
        print(
            "  " + name + ": "
                + zip(servers, values).map { "\($0) " + String(format: format, $1) }.joined(separator: ", ")
                + (ratios.isEmpty
                    ? ""
                    : ", per round ours / nginx " + ratios.map { String(format: "%.2f", $0) }.joined(separator: " "))
                + (reference.isEmpty ? "" : "; " + reference))
    }

    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// The median of `ratios` with their lowest and highest, as "0.98 (0.91-1.04)".
    static func spread(_ ratios: [Double]) -> String {
        String(format: "%.2f (%.2f-%.2f)", median(ratios), ratios.min() ?? .nan, ratios.max() ?? .nan)
    }

    func render() -> String {
        let header = ["workload"] + servers + ["ratio", "reference / note"]
        var lines = [header]
        for row in rows {
            let ratio =
                !row.ratios.isEmpty
                ? Self.spread(row.ratios)
                : row.values.count == 2 && row.values[1] != 0
                    ? String(format: "%.2f", row.values[0] / row.values[1]) : "—"
            let extra = [row.reference, row.note].filter { !$0.isEmpty }.joined(separator: "; ")
            lines.append([row.name] + row.values.map { String(format: row.format, $0) } + [ratio, extra])
        }
        let widths = (0..<header.count).map { column in lines.map { $0[column].count }.max()! }
        return lines.enumerated().map { index, line in
            let text = zip(line, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(
                separator: " | ")
            return index == 0
                ? text + "\n" + widths.map { String(repeating: "-", count: $0) }.joined(separator: "-|-") : text
        }.joined(separator: "\n")
    }
}
