// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheTestSupport

/// What a cache keeps: household traces played through `mediacache serve` at given sizes,
/// beside libCacheSim's reference policies and the offline optimum on the same requests.
struct TraceBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Byte miss ratio and instant starts on household traces, beside the best replacement policies.",
        discussion: """
            Generates a seeded month of a household's plays (--trace songs, shows or household; see HouseholdTrace), \
            or reads one in the CSV form (--csv FILE; `play,kind,path,size,type,first,last`, a request a line, a \
            play's requests together, closed ranges), and plays it through `mediacache serve --max-size SIZE` with every \
            other flag at its default, nginx as the origin, one player at a time, every byte checked. With --pauses, \
            after each play that was not a skip the player waits until the cache's fills have ended (a real listen \
            lasts longer than a fill); without, the next play begins at once. Prints the byte miss ratio (origin \
            bytes from nginx's log / asked bytes), the origin requests and the instant starts (plays whose first \
            answer said `Cache-Status: …; hit`), beside libCacheSim's LRU, S3-FIFO, SIEVE, W-TinyLFU, GDSF, LFUDA, \
            ARC and the offline optimum run on the same requests cut into 256 KiB objects (scripts/trace-policies.py; \
            `pip install libcachesim`). --model runs the store's policy on the trace in this process instead of \
            serve, in a moment, to try settings.
            """
    )

    @Option(name: .customLong("trace"), parsing: .upToNextOption, help: "Traces to generate: songs, shows, household.")
    var traces: [String] = ["household"]

    @Option(help: "A trace in the CSV form to replay instead.")
    var csv: String?

    @Option(help: "Write the generated trace to this file (the CSV form) and go on.")
    var writeCSV: String?

    @Option(help: "The traces' seed.")
    var seed: UInt64 = 1

    @Option(name: .customLong("size"), parsing: .upToNextOption, help: "Cache sizes (K, M or G).")
    var sizes: [String] = ["128M", "512M"]

    @Flag(help: "Run the store's policy on the trace in this process, not through serve.")
    var model = false

    @Option(help: "Pauses after plays for fills to end: on, off or both.")
    var pauses = "both"

    @Option(
        help:
            "A variant of serve to run beside the defaults, NAME=FLAGS (repeatable), e.g. fill-off='--fill-on-play none'."
    )
    var also: [String] = []

    @Flag(help: "Leave out libCacheSim's policies.")
    var noReferences = false

    @Option(help: "The start's size the model keeps last (bytes).")
    var startBytes: Int64 = 256 << 10

    func validate() throws {
        for size in sizes { _ = try SoakBenchCommand.bytes(size) }
        guard ["on", "off", "both"].contains(pauses) else { throw ValidationError("--pauses takes on, off or both.") }
        guard also.allSatisfy({ $0.contains("=") && !$0.hasPrefix("=") }) else {
            throw ValidationError("--also takes NAME=FLAGS.")
        }
        if !model, !NginxOrigin.isInstalled {
            throw ValidationError("nginx is not installed (apt-get install nginx-light).")
        }
        guard (0...(64 << 20)).contains(startBytes) else { throw ValidationError("--start-bytes must be 0...64M.") }
    }

    func run() async throws {
        var named: [(String, [TraceRequest])] = []
        if let csv {
            named.append((csv, try HouseholdTrace.read(csv: String(contentsOfFile: csv, encoding: .utf8))))
        } else {
            for name in traces { named.append((name, try HouseholdTrace.make(name, seed: seed))) }
        }
        for (name, requests) in named {
            let unique = Self.uniqueBytes(requests)
            let asked = requests.reduce(Int64(0)) { $0 + $1.length }
            let plays = Set(requests.map(\.play)).count
            print(
                "trace \(name): \(plays) plays, \(requests.count) requests, \(ByteCountText.format(asked)) asked, "
                    + "\(ByteCountText.format(unique)) of it unique (floor \(String(format: "%.3f", Double(unique) / Double(asked))))"
            )
            // A trace read from a file is given to the references as it is.
            let file =
                writeCSV ?? csv
                ?? FileManager.default.temporaryDirectory.appendingPathComponent("trace-\(name).csv").path
            if file != csv { try HouseholdTrace.csv(requests).write(toFile: file, atomically: true, encoding: .utf8) }
            if !model { try await replay(requests) }
            for size in sizes {
                let bytes = try SoakBenchCommand.bytes(size)
                if model {
                    for fills in [false, true] {
                        var settings = EvictionPolicy.Settings()
                        settings.startBytes = startBytes
                        var simulation = TraceModel(limit: bytes, fills: fills, settings: settings)
                        simulation.run(requests)
                        print(
                            "\(size)\tmodel\(fills ? " fills" : "")\t"
                                + String(format: "%.4f", Double(simulation.originBytes) / Double(simulation.askedBytes))
                                + "\t\(simulation.instantStarts)\t\(simulation.plays) \(simulation.byKind.mapValues { $0 >> 20 })"
                        )
                    }
                }
            }
            if !noReferences { try await references(file, sizes: sizes.map(SoakBenchCommand.bytes)) }
        }
    }

    /// Plays `requests` through `serve` at each size, with and without pauses as asked.
    func replay(_ requests: [TraceRequest]) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "mediacache-trace-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let origin = try await TraceReplay.prepare(requests, in: folder.appendingPathComponent("origin"))
        defer { origin.process.terminate() }
        let replay = TraceReplay(requests: requests, origin: origin)
        print("size\tserve\tbyte_miss_ratio\tinstant_starts\tplays\torigin_requests\twrong")
        let variants =
            [("serve", [String]())]
            + also.map { variant in
                (
                    String(variant.prefix { $0 != "=" }),
                    variant.drop { $0 != "=" }.dropFirst().split(separator: " ").map(String.init)
                )
            }
        for size in sizes {
            for (name, flags) in variants {
                for paused in pauses == "both" ? [false, true] : [pauses == "on"] {
                    let cache = folder.appendingPathComponent("cache-\(size)-\(name)-\(paused)")
                    let figures = try await replay.run(size: size, pauses: paused, folder: cache, flags: flags)
                    try? FileManager.default.removeItem(at: cache)
                    print(
                        "\(try SoakBenchCommand.bytes(size))\t\(name)\(paused ? ", pauses" : "")\t"
                            + String(format: "%.4f", Double(figures.originBytes) / Double(figures.asked))
                            + "\t\(figures.instantStarts)\t\(figures.plays)\t\(figures.originRequests)\t\(figures.wrong)\t\(figures.kinds)"
                    )
                    fflush(nil)  // each figure as it comes: a run takes minutes
                }
            }
        }
    }

    /// The bytes of the trace's resources it asks at least once.
    static func uniqueBytes(_ requests: [TraceRequest]) -> Int64 {
        var asked: [String: SpanSet] = [:]
        for request in requests {
            asked[request.path, default: SpanSet()].insert(ByteRange(offset: request.first, length: request.length))
        }
        return asked.values.reduce(0) { $0 + $1.byteCount }
    }

    /// Runs scripts/trace-policies.py on `file` and prints what it prints.
    func references(_ file: String, sizes: [Int64]) async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../scripts/trace-policies.py").standardized.path
        let result = try await ChildProcess.run(["python3", script, file] + sizes.map(String.init))
        guard result.status == 0 else {
            throw ValidationError(
                "scripts/trace-policies.py failed (pip install libcachesim?): \(result.error.suffix(500))")
        }
        print(String(decoding: result.output, as: UTF8.self), terminator: "")
    }
}
