// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization

extension SoakBenchCommand {
    /// The load through `url` (after reading every file whole through it, with ``warm``), with
    /// the origin requests it made and what the server (`pids`), the clients (this process) and
    /// the machine spent while it ran.
    func timedLoad(
        client: HTTPClient, clients: Int, origin: NginxOrigin, server pids: [pid_t],
        url: @escaping @Sendable (String) -> String
    ) async throws -> Figures {
        if warm {
            let reader = BenchClient(http: client)
            for index in 0..<files {
                try await reader.read(
                    url(path(index)), content: DeterministicContent(seed: UInt64(index) + 1),
                    length: Int64(Self.fileSize))
            }
        }
        let originBefore = origin.requests().count
        let before = MachineCost.now(server: pids)
        var figures = try await load(client: client, clients: clients, url: url)
        let spent = MachineCost.now(server: pids) - before
        let originRequests = origin.requests().dropFirst(originBefore).filter { $0.target.hasPrefix("/soak/") }
        let answers = Double(max(1, figures.answered))
        figures.originPerRequest = Double(originRequests.count) / answers
        figures.originBytes = originRequests.reduce(0) { $0 + $1.bytes }
        figures.serverMicroseconds = spent.serverMilliseconds * 1000 / answers
        figures.clientMicroseconds = spent.clientMilliseconds * 1000 / answers
        figures.idle = spent.idleTicks / max(1, spent.totalTicks)
        return figures
    }

    /// `clients` clients read random ranges through `url(path)` for ``seconds`` (or until
    /// ``requests`` were issued).
    func load(client: HTTPClient, clients: Int, url: @escaping @Sendable (String) -> String) async throws -> Figures {
        let issued = IssuedCount()
        let (files, requests, size, timeout, slowest) = (
            self.files, self.requests, Self.fileSize, self.timeout, SlowestAnswers(limit: self.slowest)
        )
        let ranges = self.ranges
        let paths = (0..<files).map(path)
        let start = ContinuousClock.now
        let deadline = seconds.map { start + .milliseconds(Int64($0 * 1000)) }
        struct Outcome {
            var latencies: [Double] = []
            var slowest: SlowestAnswers
            var wrong = 0
            var timedOut = 0
            var serverErrors = 0
            var answered = 0
        }
        let outcome = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for seed in 0..<clients {
                group.addTask {
                    var random = SplitMix(seed: UInt64(seed) &* 7_919 &+ 1)
                    var outcome = Outcome(slowest: slowest)
                    while deadline.map({ ContinuousClock.now < $0 })
                        ?? (issued.count.add(1, ordering: .relaxed).newValue <= requests)
                    {
                        let index = Int.random(in: 0..<files, using: &random)
                        let length = Int.random(in: 1...300_000, using: &random)
                        let offset = Int.random(in: 0...(size - length), using: &random)
                        let isOpen = ranges == "open" || (ranges == "both" && Bool.random(using: &random))
                        let hangsUp = Int.random(in: 0..<5, using: &random) == 0
                        let content = DeterministicContent(seed: UInt64(index) + 1)
                        var request = HTTPClientRequest(url: url(paths[index]))
                        request.headers.add(
                            name: "Range", value: "bytes=\(offset)-" + (isOpen ? "" : "\(offset + length - 1)"))
                        let began = ContinuousClock.now
                        let end = isOpen ? size : offset + length
                        let keep = hangsUp ? min(1_000, end - offset) : end - offset
                        // The whole answer, head and body, within the timeout.
                        let asked = request
                        let read = await withDeadline(.seconds(timeout)) { () async throws -> Read in
                            let response = try await client.execute(asked, timeout: .seconds(timeout))
                            guard response.status.code == 206 else { return .status(Int(response.status.code)) }
                            var cursor = Int64(offset)
                            var mismatches = 0
                            for try await chunk in response.body where chunk.readableBytes > 0 {
                                let kept = chunk.getSlice(
                                    at: chunk.readerIndex, length: min(chunk.readableBytes, offset + keep - Int(cursor))
                                )!
                                if content.firstMismatch(in: kept, at: cursor) != nil { mismatches += 1 }
                                cursor += Int64(kept.readableBytes)
                                if cursor >= offset + keep { break }
                            }
                            guard cursor == offset + keep else {
                                return .wrong("the body ended at \(cursor), before \(offset + keep)")
                            }
                            return mismatches == 0 ? .right : .wrong("\(mismatches) parts with wrong bytes")
                        }
                        let described =
                            "\(paths[index]) bytes=\(offset)-\(isOpen ? "" : "\(offset + length - 1)"), "
                            + "\(hangsUp ? "hanging up" : "read whole"), after \((began - start).seconds) s"
                        switch read {
                        case .right:
                            outcome.answered += 1
                            let took = (ContinuousClock.now - began).seconds
                            if !hangsUp { outcome.latencies.append(took) }
                            outcome.slowest.add(took, described)
                        case .status(let status):
                            if status >= 500 { outcome.serverErrors += 1 }
                            outcome.wrong += 1
                            print("wrong: \(described): status \(status)")
                        case .wrong(let what):
                            outcome.wrong += 1
                            print("wrong: \(described): \(what)")
                        case .timedOut:
                            outcome.timedOut += 1
                            print("timed out: \(described)")
                        }
                    }
                    return outcome
                }
            }
            return try await group.reduce(into: Outcome(slowest: slowest)) {
                $0.latencies += $1.latencies
                $0.slowest.merge($1.slowest)
                $0.wrong += $1.wrong
                $0.timedOut += $1.timedOut
                $0.serverErrors += $1.serverErrors
                $0.answered += $1.answered
            }
        }
        outcome.slowest.print()
        let sorted = outcome.latencies.sorted()
        return Figures(
            answered: outcome.answered, seconds: (ContinuousClock.now - start).seconds, p50: percentile(sorted, 0.5),
            p99: percentile(sorted, 0.99), wrong: outcome.wrong, timedOut: outcome.timedOut,
            serverErrors: outcome.serverErrors, originPerRequest: 0)
    }

}

/// The slowest answers of a soak run, at most `limit` of them (none when it is 0), with what
/// each asked and when: where a long tail comes from.
struct SlowestAnswers: Sendable {
    let limit: Int
    private var answers: [(seconds: Double, what: String)] = []

    init(limit: Int) {
        self.limit = limit
    }

    mutating func add(_ seconds: Double, _ what: @autoclosure () -> String) {
        guard limit > 0 else { return }
        answers.append((seconds, what()))
        if answers.count > 4 * limit { keepSlowest() }
    }

    mutating func merge(_ other: SlowestAnswers) {
        answers += other.answers
        keepSlowest()
    }

    private mutating func keepSlowest() {
        answers = Array(answers.sorted { $0.seconds > $1.seconds }.prefix(limit))
    }

    func print() {
        for (seconds, what) in answers.sorted(by: { $0.seconds > $1.seconds }).prefix(limit) {
            Swift.print(String(format: "  slow: %.1f ms, ", seconds * 1000) + what)
        }
    }
}

/// How one request of the load went.
enum Read: Sendable {
    /// A `206` with every byte kept right.
    case right
    /// Another status.
    case status(Int)
    /// A wrong or missing byte, or a failure: what it was.
    case wrong(String)
    /// No whole answer within the timeout.
    case timedOut
}

/// `body`'s result, `.timedOut` when it takes longer than `limit` (it is then cancelled), `.wrong`
/// with the error when it throws.
func withDeadline(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Read) async -> Read {
    await withTaskGroup(of: Read?.self) { group in
        group.addTask {
            do { return try await body() } catch { return .wrong("\(error)") }
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return Task.isCancelled ? nil : .timedOut
        }
        let first = await group.next() ?? .timedOut
        group.cancelAll()
        return first ?? .timedOut
    }
}

/// CPU time so far: a server's processes', this process's (the load's clients) and the
/// machine's, idle and in all (`/proc/stat`'s clock ticks, every core).
struct MachineCost {
    var serverMilliseconds: Double
    var clientMilliseconds: Double
    var idleTicks: Double
    var totalTicks: Double

    static func now(server pids: [pid_t]) -> MachineCost {
        // The first line: "cpu  user nice system idle iowait irq softirq steal guest guest_nice"; a
        // guest's time is counted in user and nice already, so the sum stops at steal.
        let line = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8))?.split(separator: "\n").first ?? ""
        let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { Double($0) }
        return MachineCost(
            serverMilliseconds: ProcessCost.fromProc(pids).cpuMilliseconds,
            clientMilliseconds: ProcessCost.rusageMilliseconds(RUSAGE_SELF.rawValue),
            idleTicks: ticks.count > 4 ? ticks[3] + ticks[4] : 0, totalTicks: ticks.reduce(0, +))
    }

    static func - (after: MachineCost, before: MachineCost) -> MachineCost {
        MachineCost(
            serverMilliseconds: after.serverMilliseconds - before.serverMilliseconds,
            clientMilliseconds: after.clientMilliseconds - before.clientMilliseconds,
            idleTicks: after.idleTicks - before.idleTicks, totalTicks: after.totalTicks - before.totalTicks)
    }
}

/// How many requests the clients of a run have issued, shared among them.
final class IssuedCount: Sendable {
    let count = Atomic<Int>(0)
}
