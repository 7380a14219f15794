// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport

/// What the serving process pays for a miss, a cold file, a hot file and a cold HLS play: CPU
/// time and context switches, for this build, another build, nginx's slice cache and the floor
/// (`floor-proxy`: what SwiftNIO and AsyncHTTPClient alone cost to forward the request and
/// write its body, on the loop and, as this project's rule on blocking calls asks, on a pool), in
/// front of one nginx serving files from the page cache. On a phone each is battery; on this shared
/// machine they are the figures wall time blurs least.
struct CostBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cost",
        abstract: "CPU time and context switches per miss, per cold MiB, per hot file and per HLS segment.",
        discussion:
            "Starts nginx as the origin (files from the page cache), `mediacache serve` of this build (and of --baseline), nginx's slice cache and the floors (a bare SwiftNIO and AsyncHTTPClient proxy that caches nothing, its body written on its loop or on NIO's thread pool) in front of it, runs each workload on each server in turn in every round, and prints medians with the ratios. Counts with `perf stat` when it is installed, else from /proc."
    )

    @Option(help: "Rounds; the servers take turns in each.")
    var rounds = 3

    @Option(help: "Cold misses of 64 KiB files per round, one after another.")
    var misses = 200

    @Option(help: "The cold (then hot) whole file's size in MiB.")
    var coldSize = 256

    @Option(help: "Segments of the cold HLS play (2 s of 2 Mbit/s each: 512 KiB).")
    var segments = 30

    @Option(help: "Another build's `mediacache` executable, measured beside this one.")
    var baseline: String?

    @Flag(
        inversion: .prefixedNo,
        help:
            "Measure the floors too: a bare SwiftNIO and AsyncHTTPClient proxy (no cache), writing on its loop and on NIO's thread pool."
    )
    var floor = true

    @Option(
        name: .customLong("serve-option"), parsing: .unconditionalSingleValue,
        help: "An option for both `mediacache serve`s (repeat it).")
    var serveOptions: [String] = []

    func validate() throws {
        guard rounds > 0, misses > 0, coldSize > 0, segments > 0 else {
            throw ValidationError("--rounds, --misses, --cold-size and --segments must be positive.")
        }
        if let baseline, !FileManager.default.isExecutableFile(atPath: baseline) {
            throw ValidationError("--baseline \(baseline) is not an executable file.")
        }
    }

    func run() async throws {
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
            "mediacache-cost-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(decompression: .disabled))
        let client = BenchClient(http: http)
        var started: [BenchServer] = []
        func cleanUp() async {
            started.reversed().forEach { $0.stop() }
            try? await http.shutdown()
            try? FileManager.default.removeItem(at: root)
        }
        do {
            // The origin: an nginx of its own, so the slice cache's figures are its own work.
            let (originServer, origin) = try await BenchServers.startNginx(
                directory: root.appendingPathComponent("origin"), originPort: 9, client: client)
            started.append(originServer)
            var servers = [
                try await BenchServers.startOurs(
                    try ChildProcess.executable(named: "mediacache"), directory: root.appendingPathComponent("ours"),
                    originPort: origin.port, arguments: serveOptions)
            ]
            started += servers
            if let baseline {
                let other = try await BenchServers.startOurs(
                    URL(fileURLWithPath: baseline), directory: root.appendingPathComponent("baseline"),
                    originPort: origin.port, name: "baseline", prefix: "/base", arguments: serveOptions)
                servers.append(other)
                started.append(other)
            }
            let (nginx, _) = try await BenchServers.startNginx(
                directory: root.appendingPathComponent("nginx"), originPort: 9, client: client,
                staticUpstream: origin.port)
            servers.append(nginx)
            started.append(nginx)
            if floor {
                for writesOnPool in [false, true] {
                    let proxy = try await BenchServers.startFloorProxy(
                        originPort: origin.port, writesOnPool: writesOnPool)
                    servers.append(proxy)
                    started.append(proxy)
                }
            }
            let work = CostWorkloads(client: client, origin: origin, rounds: rounds)
            print(
                "Cost of the serving process — \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ChildProcess.toolExists("perf") ? "perf stat" : "/proc"), \(rounds) rounds, medians"
            )
            var table = CostTable(servers: servers.map(\.name))
            try await work.misses(misses, on: servers, into: &table)
            try await work.coldAndHot(sizeMiB: coldSize, on: servers, into: &table)
            try await work.hlsPlay(segments: segments, on: servers, into: &table)
            print(table.render())
        } catch {
            await cleanUp()
            throw error
        }
        await cleanUp()
    }
}
