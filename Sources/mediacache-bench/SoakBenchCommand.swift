// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Synchronization

/// The player's path under load, every flag at its default: clients reading random ranges of
/// many files (MP3s, which a play fills by default, and files of a generic type) through a store
/// that keeps evicting, one read in five hung up after its first kilobyte, with nginx as the
/// origin; `mediacache serve` beside variants of it (`--also`), another build (`--baseline`, the
/// code before a change) and nginx's slice cache, alternated in one run.
struct SoakBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract:
            "Many clients, random ranges, hang-ups, eviction, nginx as the origin: answers, timeouts, wrong answers, open files, origin requests per request.",
        discussion: """
            nginx (Debian's, started on a free loopback port) serves --files files of 1 MiB, --types of them: `audio` as \
            .mp3 (audio/mpeg), `generic` as .bin (application/octet-stream), alternating. Each round runs every \
            candidate in turn with a fresh cache: `mediacache serve --max-size --max-size` with every other flag at its \
            default (this build's; again with each --also's flags; and --baseline's if given), and nginx's slice cache in \
            front of the same origin, its max_size the same. --clients clients each read a random range (1 B to 300 kB; closed `a-b` or open \
            `a-` as --ranges says; an open one read to the file's end) of a random file, one read in five hanging up \
            after 1,000 bytes, for --seconds, or until --requests were answered. A request not answered within --timeout \
            counts as timed out. Every byte kept is checked against the file. Prints, per candidate and client count, \
            the answers, the answers per second, p50 and p99 of a whole read, answers that were not the origin's bytes (a \
            wrong byte, a status other than 206), timeouts, 5xx, the server's open files (at its start, its most, its \
            end), origin requests per player request and the bytes the origin sent (from nginx's access log), the CPU time per answer of the server \
            (its processes) and of the clients (this process), and the share of the machine's time left idle (a closed \
            loop of clients on a busy machine waits on the server when cores idle); then medians over the rounds.
            """
    )

    @Option(parsing: .upToNextOption, help: "Client counts to run, each in every round.")
    var clients: [Int] = [8, 32]

    @Option(help: "Requests per run, when no --seconds is given.")
    var requests = 2_000

    @Option(help: "Seconds per run (a time, not a count: a server that stops answering is seen).")
    var seconds: Double?

    @Option(help: "Seconds a request may take before it counts as timed out.")
    var timeout: Int64 = 30

    @Option(help: "Files of 1 MiB the origin serves.")
    var files = 400

    @Option(help: "The files' types: audio (.mp3, audio/mpeg), generic (.bin), or audio,generic (alternating).")
    var types = "audio,generic"

    @Option(help: "The ranges asked for: closed (a-b, as AVPlayer asks), open (a-, as ffmpeg and mpv ask), or both.")
    var ranges = "both"

    @Option(help: "Seconds of max-age nginx gives the files (0: none, so every stored file is stale).")
    var maxAge = 86_400

    @Option(help: "Rounds; candidates alternate within each, each round starting with the next.")
    var rounds = 3

    @Option(
        name: .customLong("max-size"),
        help: "serve's --max-size, and nginx's max_size: small enough that eviction runs throughout (e.g. 64M).")
    var maxSize = "64M"

    /// `text` (digits and an optional K, M or G, binary) in bytes, for nginx's `max_size`.
    static func bytes(_ text: String) throws -> Int64 {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        let unit = text.last.flatMap { units[Character($0.uppercased())] }
        let digits = unit == nil ? Substring(text) : text.dropLast()
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int64(digits), number > 0,
            case (let bytes, false) = number.multipliedReportingOverflow(by: unit ?? 1)
        else { throw ValidationError("--max-size takes a number of bytes with K, M or G, such as 64M: not \(text).") }
        return bytes
    }

    @Option(help: "Another `mediacache` executable to run beside this build's (the code before a change).")
    var baseline: String?

    @Option(
        help:
            "A variant of this build's serve, NAME=FLAGS (repeatable), e.g. fill-off='--fill-on-play none'.")
    var also: [String] = []

    @Option(help: "Print this many of each run's slowest answers, with what they asked and when.")
    var slowest = 0

    @Flag(help: "Leave out nginx's slice cache.")
    var noNginxCache = false

    @Flag(help: "Add the floor: a bare SwiftNIO server sending the origin's files, opened once (no cache, no origin).")
    var floor = false

    @Flag(
        help:
            "Before each run, read every file whole through the candidate (each byte checked): the run then measures stored answers, without the fill."
    )
    var warm = false

    func validate() throws {
        _ = try Self.bytes(maxSize)
        guard clients.allSatisfy({ (1...256).contains($0) }), !clients.isEmpty else {
            throw ValidationError("--clients must be 1...256.")
        }
        guard (1...1_000_000).contains(requests), (1...10_000).contains(files), (1...50).contains(rounds) else {
            throw ValidationError(
                "--requests, --files and --rounds must be positive (at most 1,000,000, 10,000 and 50).")
        }
        if let seconds, !(1...3_600).contains(seconds) { throw ValidationError("--seconds must be 1...3600.") }
        guard (1...600).contains(timeout), (0...31_536_000).contains(maxAge) else {
            throw ValidationError("--timeout must be 1...600 and --max-age 0...31536000.")
        }
        guard !extensions.isEmpty else { throw ValidationError("--types takes audio, generic or audio,generic.") }
        guard ["closed", "open", "both"].contains(ranges) else {
            throw ValidationError("--ranges takes closed, open or both.")
        }
        guard also.allSatisfy({ $0.contains("=") && !$0.hasPrefix("=") }) else {
            throw ValidationError("--also takes NAME=FLAGS.")
        }
        guard NginxOrigin.isInstalled else {
            throw ValidationError("nginx is not installed (apt-get install nginx-light).")
        }
        if let baseline, !FileManager.default.isExecutableFile(atPath: baseline) {
            throw ValidationError("--baseline \(baseline) is not an executable.")
        }
    }

    static let fileSize = 1 << 20

    /// The files' extensions, in the order they alternate.
    var extensions: [String] {
        types.split(separator: ",").compactMap { ["audio": "mp3", "generic": "bin"][String($0)] }
    }

    /// A candidate: an executable's `serve` with extra flags, or nginx's slice cache (`nil`), or
    /// the floor (`floor-server --root`, every file already at hand).
    struct Candidate {
        var name: String
        var executable: URL?
        var flags: [String] = []
        var isFloor = false
    }

    /// One run's figures.
    struct Figures {
        var answered: Int
        var seconds: Double
        var p50: Double
        var p99: Double
        var wrong: Int
        var timedOut: Int
        var serverErrors: Int
        var originPerRequest: Double
        /// The server's open files at the run's start, at most, and at its end.
        var openFiles: Samples.Figures?
        /// The bytes its cache folder held (files' allocated sizes), at the start, at most, at the end.
        var held: Samples.Figures?
        /// The body bytes the origin sent for the run's files.
        var originBytes: Int64 = 0
        /// The server's CPU time per answer (its processes: nginx's master and workers), and this
        /// process's (the clients'), in microseconds; the share of the machine's time idle.
        var serverMicroseconds = 0.0
        var clientMicroseconds = 0.0
        var idle = 0.0
        var perSecond: Double { Double(answered) / max(seconds, 0.001) }
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "mediacache-soak-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // A day's max-age by default, as a CDN gives media: nginx's slice cache keeps what it
        // fetched for a day (`proxy_cache_valid`) whatever the origin says, and a cache that
        // honours the origin's freshness then does too (files written a moment ago are stale at
        // once without it).
        let origin = try await NginxOrigin.start(
            in: directory.appendingPathComponent("origin"), expires: maxAge > 0 ? ["/soak/": maxAge] : [:])
        defer { origin.process.terminate() }
        for index in 0..<files {
            let bytes = DeterministicContent(seed: UInt64(index) + 1).buffer(offset: 0, length: Self.fileSize)
            try origin.serve(Data(bytes.readableBytesView), at: path(index))
        }
        let serve = try ChildProcess.executable(named: "mediacache")
        var candidates = [Candidate(name: "serve", executable: serve)]
        for variant in also {
            let (name, flags) = (variant.prefix { $0 != "=" }, variant.drop { $0 != "=" }.dropFirst())
            candidates.append(
                Candidate(name: String(name), executable: serve, flags: flags.split(separator: " ").map(String.init)))
        }
        if let baseline { candidates.append(Candidate(name: "baseline", executable: URL(fileURLWithPath: baseline))) }
        if !noNginxCache { candidates.append(Candidate(name: "nginx slice", executable: nil)) }
        if floor { candidates.append(Candidate(name: "floor", executable: nil, isFloor: true)) }
        var figures: [String: [Figures]] = [:]
        var runs = 0
        for round in 1...rounds {
            // Each round starts with another candidate, so none always pays for being first.
            let order = candidates.indices.map { candidates[($0 + round - 1) % candidates.count] }
            for clientCount in clients {
                for candidate in order {
                    // A folder of its own per run: nginx's is opened to its workers (mode 777),
                    // which serve refuses.
                    runs += 1
                    let folder = directory.appendingPathComponent("run-\(runs)")
                    let result = try await measure(candidate, folder: folder, origin: origin, clients: clientCount)
                    figures["\(candidate.name) \(clientCount)", default: []].append(result)
                    print(
                        "round \(round), \(candidate.name), \(clientCount) clients: "
                            + String(
                                format:
                                    "%d answers in %.0f s (%.0f/s), p50 %.1f ms, p99 %.1f ms, wrong %d, timed out %d, 5xx %d, origin requests per request %.3f (%.0f MiB), CPU per answer: server %.0f us, clients %.0f us, machine idle %.0f %%",
                                result.answered, result.seconds, result.perSecond, result.p50 * 1000,
                                result.p99 * 1000, result.wrong, result.timedOut, result.serverErrors,
                                result.originPerRequest, Double(result.originBytes) / 1_048_576,
                                result.serverMicroseconds, result.clientMicroseconds,
                                result.idle * 100)
                            + (result.openFiles.map { ", open files \($0.start) / \($0.most) / \($0.end)" } ?? "")
                            + (result.held.map {
                                ", cache held at most \($0.most >> 20) MiB, \($0.end >> 20) MiB at the end"
                            } ?? ""))
                }
            }
        }
        report(figures, candidates: candidates)
    }

    /// The medians over the rounds, and each candidate's answers against this build's per round.
    func report(_ figures: [String: [Figures]], candidates: [Candidate]) {
        let bound = seconds.map { "\(Int($0)) s a run" } ?? "\(requests) requests a run"
        print(
            "\nMedians over \(rounds) rounds (\(bound), \(files) files of 1 MiB, \(types), \(ranges) ranges, one read in five hung up"
                + (warm ? ", every file read whole before each run" : "") + "):")
        print(
            "| candidate | clients | answers | answers/s | p50 ms | p99 ms | wrong | timed out | 5xx | open files (start/most/end) | cache held, MiB (most/end; bound \(maxSize)) | origin requests per request (MiB) | CPU per answer, µs: server / clients | machine idle |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for clientCount in clients {
            for candidate in candidates {
                let runs = figures["\(candidate.name) \(clientCount)"] ?? []
                let open = runs.compactMap(\.openFiles)
                let files =
                    open.isEmpty
                    ? "-"
                    : "\(Int(median(open.map { Double($0.start) }))) / \(open.map(\.most).max()!) / \(Int(median(open.map { Double($0.end) })))"
                let held = runs.compactMap(\.held)
                let heldText =
                    held.isEmpty
                    ? "-" : "\(held.map(\.most).max()! >> 20) / \(Int(median(held.map { Double($0.end) })) >> 20)"
                print(
                    String(
                        format:
                            "| %@ | %d | %.0f | %.0f | %.1f | %.1f | %d | %d | %d | %@ | %@ | %.3f (%.0f) | %.0f / %.0f | %.0f %% |",
                        candidate.name,
                        clientCount, median(runs.map { Double($0.answered) }), median(runs.map(\.perSecond)),
                        median(runs.map(\.p50)) * 1000, median(runs.map(\.p99)) * 1000, runs.map(\.wrong).reduce(0, +),
                        runs.map(\.timedOut).reduce(0, +), runs.map(\.serverErrors).reduce(0, +), files, heldText,
                        median(runs.map(\.originPerRequest)), median(runs.map { Double($0.originBytes) }) / 1_048_576,
                        median(runs.map(\.serverMicroseconds)),
                        median(runs.map(\.clientMicroseconds)), median(runs.map(\.idle)) * 100))
            }
            let ours = figures["serve \(clientCount)"] ?? []
            for other in candidates.dropFirst() {
                let theirs = figures["\(other.name) \(clientCount)"] ?? []
                let ratios = zip(ours, theirs).map { $0.perSecond / max($1.perSecond, 0.001) }
                print(
                    String(
                        format: "serve / %@ answers per second, %d clients: %.2fx (median of the rounds' ratios)",
                        other.name, clientCount, median(ratios)))
            }
        }
    }

    func path(_ index: Int) -> String {
        "/soak/\(index).\(extensions[index % extensions.count])"
    }

    /// One candidate's run.
    func measure(_ candidate: Candidate, folder: URL, origin: NginxOrigin, clients: Int) async throws -> Figures {
        let client = HTTPClient.forPlayers(clients)
        do {
            let figures = try await measure(candidate, folder: folder, origin: origin, clients: clients, client: client)
            try await client.shutdown()
            return figures
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    private func measure(
        _ candidate: Candidate, folder: URL, origin: NginxOrigin, clients: Int, client: HTTPClient
    ) async throws -> Figures {
        var figures: Figures
        if let executable = candidate.executable {
            // Its warnings (retries, refetches, refusals), shown when an answer was wrong or late.
            let log = folder.appendingPathExtension("log")
            let (process, line) = try await ChildProcess.startServer(
                executable,
                ["serve", "--port", "0", "--cache-dir", folder.path, "--max-size", maxSize, "--log-level", "warning"]
                    + candidate.flags,
                readyLinePrefix: "mediacache: serving on", errorFile: log)
            defer {
                process.terminate()
                process.waitUntilExit()
            }
            let port = try BenchServers.port(in: line)
            let (openFiles, held) = (Samples.openFiles(of: process.processIdentifier), Samples.bytes(in: folder))
            figures = try await Samples.during(openFiles, held) {
                try await timedLoad(
                    client: client, clients: clients, origin: origin, server: [process.processIdentifier]
                ) { path in
                    "http://127.0.0.1:\(port)/?url=" + "\(origin.url)\(path)".addingPercentEncoding(
                        withAllowedCharacters: .alphanumerics)!
                }
            }
            (figures.openFiles, figures.held) = (openFiles.figures, held.figures)
            if figures.wrong + figures.timedOut > 0, let text = try? String(contentsOf: log, encoding: .utf8) {
                let lines = text.split(separator: "\n")
                print("\(candidate.name)'s log, \(lines.count) lines; the last 20:")
                lines.suffix(20).forEach { print("  \($0.prefix(400))") }
            }
        } else if candidate.isFloor {
            let (process, line) = try await ChildProcess.startServer(
                try ChildProcess.executable(named: "mediacache-bench"), ["floor-server", "--root", origin.root.path],
                readyLinePrefix: "floor: listening on")
            defer {
                process.terminate()
                process.waitUntilExit()
            }
            let port = try BenchServers.port(in: line)
            figures = try await timedLoad(
                client: client, clients: clients, origin: origin, server: [process.processIdentifier]
            ) { "http://127.0.0.1:\(port)\($0)" }
        } else {
            let benchClient = BenchClient(http: client)
            // Bounded as ours is, so both evict alike.
            let (server, _) = try await BenchServers.startNginx(
                directory: folder, originPort: origin.port, client: benchClient, maxSize: try Self.bytes(maxSize))
            defer { server.stop() }
            // Its cache manager trims to max_size in passes: what the folder held is sampled.
            let held = Samples.bytes(in: folder.appendingPathComponent("cache"))
            let pid = server.process.processIdentifier
            figures = try await Samples.during(held) {
                try await timedLoad(
                    client: client, clients: clients, origin: origin, server: [pid] + ProcessMemory.children(of: pid)
                ) { path in
                    server.url(forOrigin: "\(origin.url)\(path)")
                }
            }
            figures.held = held.figures
        }
        return figures
    }

    func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    func median(_ values: [Double]) -> Double {
        percentile(values.sorted(), 0.5)
    }
}
