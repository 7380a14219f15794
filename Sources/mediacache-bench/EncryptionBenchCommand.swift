// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport

/// Encryption at rest against none, through the product: two `mediacache serve` processes in
/// front of the same test origin, one with `--encryption-key-file`, each asked for the same
/// whole file cold (origin → store → client; a new file each round) and hot (store → client)
/// with curl, the two servers taking turns (and which goes first alternating); the best of the
/// rounds, ratios from this one run, and each server's peak memory.
struct EncryptionBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encryption",
        abstract:
            "Cold and hot whole-file reads through mediacache serve with and without --encryption-key-file; ratios and peak memory."
    )

    @Option(help: "The file's size in MiB.")
    var size: Int = 256

    @Option(help: "How many cold and hot reads per server (the best of each is reported).")
    var rounds: Int = 3

    func validate() throws {
        guard size > 0, rounds > 0 else { throw ValidationError("--size and --rounds must be positive.") }
    }

    func run() async throws {
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let executable = try ChildProcess.executable(named: "mediacache")
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
            "mediacache-encryption-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let keyFile = root.appendingPathComponent("key")
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: keyFile)
        chmod(keyFile.path, 0o600)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(decompression: .disabled))
        let client = BenchClient(http: http)
        var started: [SpawnedProcess] = []
        defer {
            for process in started.reversed() where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: root)
        }
        let (originProcess, originPort) = try await BenchServers.startOrigin(bench)
        started.append(originProcess)
        let origin = OriginControl(port: originPort, client: client)
        let plain = try await BenchServers.startOurs(
            executable, directory: root.appendingPathComponent("plain"), originPort: originPort,
            name: "unencrypted", prefix: "/plain")
        started.append(plain.process)
        let sealed = try await BenchServers.startOurs(
            executable, directory: root.appendingPathComponent("sealed"), originPort: originPort,
            name: "encrypted", prefix: "/sealed", arguments: ["--encryption-key-file", keyFile.path])
        started.append(sealed.process)
        let servers = [plain, sealed]
        let length = Int64(size) << 20
        let content = DeterministicContent(seed: 77)
        print(
            "mediacache serve, unencrypted vs --encryption-key-file — \(size) MiB file, \(ProcessInfo.processInfo.activeProcessorCount) cores, origin, servers and curl on one machine"
        )
        var cold = [Double](repeating: .infinity, count: servers.count)
        var coldCPU = [Double](repeating: .infinity, count: servers.count)
        var hot = [Double](repeating: .infinity, count: servers.count)
        var hotCPU = [Double](repeating: .infinity, count: servers.count)
        for round in 0..<rounds {
            let turns = round % 2 == 0 ? Array(servers.indices) : servers.indices.reversed()
            for index in turns {
                let path = "\(servers[index].prefix)/cold-\(round).mp4"
                try await origin.serve(path, length: length, seed: content.seed)
                let cpu = Self.cpuSeconds(servers[index].process.processIdentifier)
                cold[index] = min(
                    cold[index],
                    try await client.curl([servers[index].url(path)], parallel: 1, expectedBytes: length)[0].total)
                coldCPU[index] = min(coldCPU[index], Self.cpuSeconds(servers[index].process.processIdentifier) - cpu)
                let fetched = try await origin.stats(path).bytes
                guard fetched == length else {
                    throw ValidationError(
                        "\(servers[index].name): the origin sent \(fetched) bytes for a \(length)-byte file.")
                }
            }
            for index in turns {
                let cpu = Self.cpuSeconds(servers[index].process.processIdentifier)
                hot[index] = min(
                    hot[index],
                    try await client.curl(
                        [servers[index].url("\(servers[index].prefix)/cold-0.mp4")], parallel: 1, expectedBytes: length)[
                            0
                        ].total)
                hotCPU[index] = min(hotCPU[index], Self.cpuSeconds(servers[index].process.processIdentifier) - cpu)
            }
        }
        // Every byte of a hot read, checked (not timed).
        for server in servers {
            try await client.read(server.url("\(server.prefix)/cold-0.mp4"), content: content, length: length)
        }
        let mib = Double(size)
        func row(_ name: String, _ values: [Double], _ format: String, ratio: Double) {
            print(
                name.padding(toLength: 34, withPad: " ", startingAt: 0)
                    + values.map { String(format: format, $0).padding(toLength: 14, withPad: " ", startingAt: 0) }
                    .joined()
                    + String(format: "%.2f×", ratio))
        }
        print(
            "".padding(toLength: 34, withPad: " ", startingAt: 0)
                + "unencrypted   encrypted     encrypted / unencrypted")
        row("cold whole file, MiB/s (best of \(rounds))", cold.map { mib / $0 }, "%.0f", ratio: cold[0] / cold[1])
        row("  server CPU seconds per GiB", coldCPU.map { $0 * 1024 / mib }, "%.2f", ratio: coldCPU[1] / coldCPU[0])
        row("hot whole file, MiB/s (best of \(rounds))", hot.map { mib / $0 }, "%.0f", ratio: hot[0] / hot[1])
        row("  server CPU seconds per GiB", hotCPU.map { $0 * 1024 / mib }, "%.2f", ratio: hotCPU[1] / hotCPU[0])
        let peaks = servers.map { Double($0.peakMemory) / 1_048_576 }
        row("server peak memory, MiB", peaks, "%.1f", ratio: peaks[1] / peaks[0])
        try await http.shutdown()
    }

    /// The user and system CPU time `pid` has used so far, in seconds (Linux `/proc`).
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After "pid (name) ": fields 3 on; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
