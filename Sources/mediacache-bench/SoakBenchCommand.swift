// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Synchronization

/// The player's path under load: clients reading random ranges of many files through a store
/// that keeps evicting, one read in five hung up after its first kilobyte, with nginx as the
/// origin; `mediacache serve` beside nginx's slice cache (and another build of `serve`, the
/// code before a change), alternated in one run.
struct SoakBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract:
            "Many clients, random ranges, hang-ups, eviction, nginx as the origin: answers per second, p50/p99, wrong answers, origin requests per request.",
        discussion: """
            nginx (Debian's, started on a free loopback port) serves --files files of 1 MiB, max-age a day. Each round runs every candidate in \
            turn with a fresh cache: `mediacache serve --max-size --max-size` (this build's, and --baseline's if given), and \
            nginx's slice cache in front of the same origin. --clients clients each read a random range (1 B to 300 kB) of a \
            random file, one read in five hanging up after 1,000 bytes, until --requests requests were answered. Every byte \
            kept is checked against the file. Prints, per candidate and client count, the medians over the rounds: answers per \
            second, p50 and p99 of a whole read, answers that were not the origin's bytes (a wrong byte, a status other than \
            206), and origin requests per player request (from nginx's access log).
            """
    )

    @Option(parsing: .upToNextOption, help: "Client counts to run, each in every round.")
    var clients: [Int] = [8, 32]

    @Option(help: "Requests per run (a bounded count, not a time).")
    var requests = 2_000

    @Option(help: "Files of 1 MiB the origin serves.")
    var files = 400

    @Option(help: "Rounds; candidates alternate within each.")
    var rounds = 3

    @Option(name: .customLong("max-size"), help: "serve's --max-size: small enough that eviction runs throughout.")
    var maxSize = "64M"

    @Option(help: "Another `mediacache` executable to run beside this build's (the code before a change).")
    var baseline: String?

    @Flag(help: "Leave out nginx's slice cache.")
    var noNginxCache = false

    func validate() throws {
        guard clients.allSatisfy({ (1...256).contains($0) }), !clients.isEmpty else {
            throw ValidationError("--clients must be 1...256.")
        }
        guard (1...1_000_000).contains(requests), (1...10_000).contains(files), (1...50).contains(rounds) else {
            throw ValidationError(
                "--requests, --files and --rounds must be positive (at most 1,000,000, 10,000 and 50).")
        }
        guard NginxOrigin.isInstalled else {
            throw ValidationError("nginx is not installed (apt-get install nginx-light).")
        }
        if let baseline, !FileManager.default.isExecutableFile(atPath: baseline) {
            throw ValidationError("--baseline \(baseline) is not an executable.")
        }
    }

    static let fileSize = 1 << 20

    /// One run's figures.
    struct Figures {
        var perSecond: Double
        var p50: Double
        var p99: Double
        var wrong: Int
        var serverErrors: Int
        var originPerRequest: Double
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "mediacache-soak-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // A day's max-age, as a CDN gives media: nginx's slice cache keeps what it fetched for a
        // day (`proxy_cache_valid`) whatever the origin says, and a cache that honours the
        // origin's freshness then does too (files written a moment ago are stale at once).
        let origin = try await NginxOrigin.start(
            in: directory.appendingPathComponent("origin"), expires: ["/soak/": 86_400])
        defer { origin.process.terminate() }
        for index in 0..<files {
            let bytes = DeterministicContent(seed: UInt64(index) + 1).buffer(offset: 0, length: Self.fileSize)
            try origin.serve(Data(bytes.readableBytesView), at: "/soak/\(index).bin")
        }
        var candidates: [(name: String, executable: URL?)] = [
            ("serve", try ChildProcess.executable(named: "mediacache"))
        ]
        if let baseline { candidates.append(("baseline", URL(fileURLWithPath: baseline))) }
        if !noNginxCache { candidates.append(("nginx slice", nil)) }
        var figures: [String: [Figures]] = [:]
        for round in 1...rounds {
            for clientCount in clients {
                for candidate in candidates {
                    let folder = directory.appendingPathComponent("r\(round)-\(clientCount)-\(figures.count)")
                    let result = try await measure(
                        candidate.executable, folder: folder, origin: origin, clients: clientCount)
                    figures["\(candidate.name) \(clientCount)", default: []].append(result)
                    print(
                        String(
                            format:
                                "round %d, %@, %d clients: %.0f/s, p50 %.1f ms, p99 %.1f ms, wrong %d, 5xx %d, origin requests per request %.3f",
                            round, candidate.name, clientCount, result.perSecond, result.p50 * 1000, result.p99 * 1000,
                            result.wrong, result.serverErrors,
                            result.originPerRequest))
                }
            }
        }
        print(
            "\nMedians over \(rounds) rounds (\(requests) requests a run, \(files) files of 1 MiB, one read in five hung up):"
        )
        print("| candidate | clients | answers/s | p50 ms | p99 ms | wrong | 5xx | origin requests per request |")
        print("|---|---|---|---|---|---|---|---|")
        for clientCount in clients {
            for candidate in candidates {
                let runs = figures["\(candidate.name) \(clientCount)"] ?? []
                print(
                    String(
                        format: "| %@ | %d | %.0f | %.1f | %.1f | %d | %d | %.3f |", candidate.name, clientCount,
                        median(runs.map(\.perSecond)),
                        median(runs.map(\.p50)) * 1000, median(runs.map(\.p99)) * 1000, runs.map(\.wrong).reduce(0, +),
                        runs.map(\.serverErrors).reduce(0, +),
                        median(runs.map(\.originPerRequest))))
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

    /// One candidate's run: `executable`'s `serve`, or nginx's slice cache when `nil`.
    func measure(_ executable: URL?, folder: URL, origin: NginxOrigin, clients: Int) async throws -> Figures {
        let client = HTTPClient.forPlayers(clients)
        do {
            let figures = try await measure(
                executable, folder: folder, origin: origin, clients: clients, client: client)
            try await client.shutdown()
            return figures
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    private func measure(_ executable: URL?, folder: URL, origin: NginxOrigin, clients: Int, client: HTTPClient)
        async throws -> Figures
    {
        let before = origin.requests().count
        let result: (Double, [Double], Int, Int, Int)
        if let executable {
            let (process, line) = try await ChildProcess.startServer(
                executable,
                ["serve", "--port", "0", "--cache-dir", folder.path, "--max-size", maxSize, "--log-level", "error"],
                readyLinePrefix: "mediacache: serving on")
            defer {
                process.terminate()
                process.waitUntilExit()
            }
            let port = try BenchServers.port(in: line)
            result = try await load(client: client, clients: clients) { path in
                "http://127.0.0.1:\(port)/?url=" + "\(origin.url)\(path)".addingPercentEncoding(
                    withAllowedCharacters: .alphanumerics)!
            }
        } else {
            let benchClient = BenchClient(http: client)
            let (server, _) = try await BenchServers.startNginx(
                directory: folder, originPort: origin.port, client: benchClient)
            defer { server.stop() }
            result = try await load(client: client, clients: clients) { path in
                server.url(forOrigin: "\(origin.url)\(path)")
            }
        }
        let (seconds, latencies, wrong, serverErrors, answered) = result
        let originRequests = origin.requests().dropFirst(before).filter { $0.target.hasPrefix("/soak/") }.count
        let sorted = latencies.sorted()
        return Figures(
            perSecond: Double(answered) / seconds, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99),
            wrong: wrong, serverErrors: serverErrors,
            originPerRequest: Double(originRequests) / Double(max(1, answered)))
    }

    /// `clients` clients read random ranges through `url(path)` until ``requests`` were
    /// answered: the seconds it took, each whole read's latency, the wrong answers, the 5xx,
    /// and how many were answered.
    func load(client: HTTPClient, clients: Int, url: @escaping @Sendable (String) -> String) async throws -> (
        Double, [Double], Int, Int, Int
    ) {
        let issued = IssuedCount()
        let (files, requests, size) = (self.files, self.requests, Self.fileSize)
        let start = ContinuousClock.now
        let outcomes = try await withThrowingTaskGroup(
            of: (latencies: [Double], wrong: Int, serverErrors: Int, answered: Int).self
        ) { group in
            for seed in 0..<clients {
                group.addTask {
                    var random = SplitMix(seed: UInt64(seed) &* 7_919 &+ 1)
                    var latencies: [Double] = []
                    var (wrong, serverErrors, answered) = (0, 0, 0)
                    while issued.count.add(1, ordering: .relaxed).newValue <= requests {
                        let index = Int.random(in: 0..<files, using: &random)
                        let length = Int.random(in: 1...300_000, using: &random)
                        let offset = Int.random(in: 0...(size - length), using: &random)
                        let hangsUp = Int.random(in: 0..<5, using: &random) == 0
                        let content = DeterministicContent(seed: UInt64(index) + 1)
                        var request = HTTPClientRequest(url: url("/soak/\(index).bin"))
                        request.headers.add(name: "Range", value: "bytes=\(offset)-\(offset + length - 1)")
                        let began = ContinuousClock.now
                        answered += 1
                        guard let response = try? await client.execute(request, timeout: .seconds(120)) else {
                            wrong += 1
                            continue
                        }
                        if response.status.code >= 500 { serverErrors += 1 }
                        guard response.status.code == 206 else {
                            wrong += 1
                            continue
                        }
                        let keep = hangsUp ? min(1_000, length) : length
                        var cursor = Int64(offset)
                        do {
                            for try await chunk in response.body where chunk.readableBytes > 0 {
                                let kept = chunk.getSlice(
                                    at: chunk.readerIndex, length: min(chunk.readableBytes, offset + keep - Int(cursor))
                                )!
                                if content.firstMismatch(in: kept, at: cursor) != nil { wrong += 1 }
                                cursor += Int64(kept.readableBytes)
                                if cursor >= offset + keep { break }
                            }
                        } catch {
                            wrong += 1
                            continue
                        }
                        if cursor != offset + keep { wrong += 1 }
                        if !hangsUp { latencies.append((ContinuousClock.now - began).seconds) }
                    }
                    return (latencies, wrong, serverErrors, answered)
                }
            }
            return try await group.reduce(into: (latencies: [Double](), wrong: 0, serverErrors: 0, answered: 0)) {
                $0.latencies += $1.latencies
                $0.wrong += $1.wrong
                $0.serverErrors += $1.serverErrors
                $0.answered += $1.answered
            }
        }
        return (
            (ContinuousClock.now - start).seconds, outcomes.latencies, outcomes.wrong, outcomes.serverErrors,
            outcomes.answered
        )
    }

    func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    func median(_ values: [Double]) -> Double {
        percentile(values.sorted(), 0.5)
    }
}

/// How many requests the clients of a run have issued, shared among them.
private final class IssuedCount: Sendable {
    let count = Atomic<Int>(0)
}
