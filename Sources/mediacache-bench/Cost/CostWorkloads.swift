// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport

/// The workloads of `mediacache-bench cost`: each reads through every server in turn, on names
/// no server has seen (a miss is a miss), every byte checked against the origin's.
struct CostWorkloads {
    let client: BenchClient
    let origin: StaticOrigin
    let rounds: Int

    /// What `server`'s processes spend while `work` runs (nginx: its master and workers).
    private func cost(of server: BenchServer, _ work: () async throws -> Void) async throws -> ProcessCost {
        let pid = server.process.processIdentifier
        return try await ProcessCost.measure([pid] + ProcessMemory.children(of: pid), work)
    }

    /// `files` names for one file of `content`, linked under the origin's static folder.
    private func link(_ source: URL, as names: [String]) throws {
        for name in names {
            let file = origin.file(name)
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.linkItem(at: source, to: file)
        }
    }

    /// Cold misses of 64 KiB files, one after another on one kept-alive connection.
    func misses(_ count: Int, on servers: [BenchServer], into table: inout CostTable) async throws {
        let (content, length) = (DeterministicContent(seed: 64), Int64(64 << 10))
        let source = origin.file("small.bin")
        try Workloads.writeFile(source, content: content, length: length)
        var cpu = [[Double]](repeating: [], count: servers.count)
        var switches = cpu
        for round in 0..<rounds {
            for (index, server) in servers.enumerated() {
                let names = (0..<count).map { "m-\(round)-\(server.name)/\($0).bin" }
                try link(source, as: names)
                let spent = try await cost(of: server) {
                    for name in names {
                        try await client.read(server.url(forOrigin: origin.url(name)), content: content, length: length)
                    }
                }
                cpu[index].append(spent.cpuMilliseconds / Double(count))
                switches[index].append(spent.switches / Double(count))
            }
        }
        table.add("cold 64 KiB miss: CPU ms each", cpu, format: "%.2f")
        table.add("cold 64 KiB miss: switches each", switches, format: "%.1f")
    }

    /// A cold file read whole, then the same file again, hot.
    func coldAndHot(sizeMiB: Int, on servers: [BenchServer], into table: inout CostTable) async throws {
        let (content, length) = (DeterministicContent(seed: 256), Int64(sizeMiB) << 20)
        let source = origin.file("cold.bin")
        try Workloads.writeFile(source, content: content, length: length)
        var cold = [[Double]](repeating: [], count: servers.count)
        var coldSwitches = cold
        var hot = cold
        var hotSwitches = cold
        for round in 0..<rounds {
            for (index, server) in servers.enumerated() {
                let name = "c-\(round)-\(server.name).bin"
                try link(source, as: [name])
                let url = server.url(forOrigin: origin.url(name))
                let first = try await cost(of: server) { try await client.read(url, content: content, length: length) }
                cold[index].append(first.cpuMilliseconds / Double(sizeMiB))
                coldSwitches[index].append(first.switches / Double(sizeMiB))
                let again = try await cost(of: server) { try await client.read(url, content: content, length: length) }
                hot[index].append(again.cpuMilliseconds)
                hotSwitches[index].append(again.switches)
            }
        }
        table.add("cold \(sizeMiB) MiB file: CPU ms per MiB", cold, format: "%.2f")
        table.add("cold \(sizeMiB) MiB file: switches per MiB", coldSwitches, format: "%.1f")
        table.add("the same file hot: CPU ms in all", hot, format: "%.0f")
        table.add("the same file hot: switches in all", hotSwitches, format: "%.0f")
    }

    /// A cold HLS play: the media playlist, then each 2 s segment of 512 KiB in turn, as a
    /// player asks (the playlist's URIs as the server gave them: ours rewrites them).
    func hlsPlay(segments: Int, on servers: [BenchServer], into table: inout CostTable) async throws {
        let (content, length) = (DeterministicContent(seed: 512), Int64(512 << 10))
        let source = origin.file("segment.ts")
        try Workloads.writeFile(source, content: content, length: length)
        var cpu = [[Double]](repeating: [], count: servers.count)
        var switches = cpu
        for round in 0..<rounds {
            for (index, server) in servers.enumerated() {
                let folder = "h-\(round)-\(server.name)"
                try link(source, as: (0..<segments).map { "\(folder)/s\($0).ts" })
                let playlist =
                    "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
                    + (0..<segments).map { "#EXTINF:2.000,\ns\($0).ts\n" }.joined() + "#EXT-X-ENDLIST\n"
                try playlist.write(to: origin.file("\(folder)/index.m3u8"), atomically: true, encoding: .utf8)
                let playlistURL = server.url(forOrigin: origin.url("\(folder)/index.m3u8"))
                let spent = try await cost(of: server) {
                    let text = try await client.text(playlistURL)
                    let uris = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                    guard uris.count == segments else {
                        throw ValidationError("\(server.name)'s playlist lists \(uris.count) segments:\n\(text)")
                    }
                    for uri in uris {
                        guard let url = URL(string: String(uri), relativeTo: URL(string: playlistURL)) else {
                            throw ValidationError("\(server.name)'s playlist names a malformed URI: \(uri)")
                        }
                        try await client.read(url.absoluteString, content: content, length: length)
                    }
                }
                cpu[index].append(spent.cpuMilliseconds / Double(segments))
                switches[index].append(spent.switches / Double(segments))
            }
        }
        table.add("cold HLS play: CPU ms per 2 s segment", cpu, format: "%.2f")
        table.add("cold HLS play: switches per segment", switches, format: "%.1f")
    }
}

/// Rows of per-round figures, one column per server, printed with their medians and the
/// median of the per-round ratios of the first server to each other (so a busy moment of the
/// machine, which falls on every server of a round, moves no ratio).
struct CostTable {
    let servers: [String]
    private var rows: [(name: String, rounds: [[Double]], format: String)] = []

    init(servers: [String]) {
        self.servers = servers
    }

    mutating func add(_ name: String, _ rounds: [[Double]], format: String) {
        rows.append((name, rounds, format))
        print(
            "  \(name): "
                + zip(servers, rounds).map { "\($0) \($1.map { String(format: format, $0) })" }.joined(separator: ", "))
    }

    func render() -> String {
        let others = servers.dropFirst()
        let header = ["work"] + servers + others.map { "\(servers[0]) / \($0)" }
        var lines = [header]
        for row in rows {
            let medians = row.rounds.map { String(format: row.format, ResultTable.median($0)) }
            let ratios = row.rounds.dropFirst().map { other in
                ResultTable.spread(zip(row.rounds[0], other).map { $1 == 0 ? .nan : $0 / $1 })
            }
            lines.append([row.name] + medians + ratios)
        }
        let widths = header.indices.map { column in lines.map { $0[column].count }.max()! }
        return lines.enumerated().map { index, line in
            let text = zip(line, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                .joined(separator: " | ")
            return index == 0
                ? text + "\n" + widths.map { String(repeating: "-", count: $0) }.joined(separator: "-|-") : text
        }.joined(separator: "\n")
    }
}
