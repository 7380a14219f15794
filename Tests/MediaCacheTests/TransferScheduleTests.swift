// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// The transfer model: the product's own executor over random schedules, the read path as it
/// ships (``OriginTransfer`` and its ``TransferPolicy``, the connection budget, fill on play at
/// its default with its probation, prefetches of the cache's own, a network that turns metered,
/// a host asked in pieces in every other schedule) in front of a ``ScriptedOrigin`` that sends a
/// body's bytes, ends it or drops it only when the schedule says so, on a manual clock and a
/// manual quiet timer. No copy of the executor: the code that runs is the code walked.
///
/// After every step: no host has more requests open than it has connections (a budget hold is
/// one origin request, a piece asked ahead included). After the drain: every player that did not
/// hang up got the bytes it asked for, each the origin's; a player that hung up ended; every
/// transfer and every fill ended; every connection taken was returned.
/// `MEDIACACHE_SCHEDULES` sets how many schedules run (100 by default).
@Suite(.stallLimit) struct TransferScheduleTests {
    static let schedules: UInt64 =
        ProcessInfo.processInfo.environment["MEDIACACHE_SCHEDULES"].flatMap { UInt64($0) } ?? 100
    static let steps = 70
    static let hosts = ["a.example", "b.example"]
    static let connections = 2

    struct File: Sendable {
        let url: URL
        let seed: UInt64
        let length: Int64
    }

    struct Player {
        let file: File
        let range: ByteRange
        let task: Task<ByteBuffer, any Error>
        var hungUp = false
    }

    /// The players whose reads ended, as they end.
    final class Ended: Sendable {
        private let numbers = Mutex<Set<Int>>([])
        func insert(_ number: Int) { _ = numbers.withLock { $0.insert(number) } }
        func contains(_ number: Int) -> Bool { numbers.withLock { $0.contains(number) } }
        var count: Int { numbers.withLock { $0.count } }
    }

    /// What the schedules did, so that the test shows it reached what it is for.
    struct Reached {
        var served = 0
        var hungUp = 0
        var refused = 0
        var requests = 0
        var cancelled = 0
        var fills = 0
        var metered = 0
        var pieced = 0
    }

    @Test func theProductsTransfersServePlayersAndReturnEveryConnection() async throws {
        var reached = Reached()
        for seed in 0..<Self.schedules {
            // The first schedule that breaks a rule is the one reported.
            guard try await Self.run(seed: seed, reached: &reached) else { return }
        }
        print("transfer schedules: \(reached)")
        // The schedules reach what they are for: players served and hung up, requests the
        // read path let go of, fills of the cache's own.
        #expect(reached.served > Int(Self.schedules) * 4 && reached.hungUp > 0, "\(reached)")
        #expect(reached.cancelled > 0 && reached.fills > 0 && reached.metered > 0, "\(reached)")
        #expect(reached.pieced > 0, "pieces asked ahead: \(reached)")
    }

    /// Runs the schedule of `seed`; whether it kept every rule.
    static func run(seed: UInt64, reached: inout Reached) async throws -> Bool {
        var random = SplitMix(seed: seed)
        let clock = ManualClock()
        let timer = ManualPauseTimer()
        var configuration = CachingReader.Configuration()
        configuration.originConnectionsPerHost = connections
        configuration.quietTimer = timer
        if seed % 2 == 1 { configuration.originPieces = [hosts[1]: 64 << 10] }
        return try await ScriptedHarness.with(clock: clock, reader: configuration) { h in
            var files: [File] = []
            for (hostIndex, host) in hosts.enumerated() {
                for index in 0..<3 {
                    let audio = random.next() % 2 == 0
                    let file = File(
                        url: URL(string: "https://\(host)/f\(index).\(audio ? "mp3" : "mp4")")!,
                        seed: seed &* 8 &+ UInt64(hostIndex * 3 + index),
                        length: 40_000 + Int64(random.next() % 400_000))
                    h.origin.serve(
                        file.url, length: file.length, seed: file.seed, mimeType: audio ? "audio/mpeg" : "video/mp4")
                    files.append(file)
                }
            }
            let (ended, ownEnded) = (Ended(), Ended())
            var players: [Player] = []
            var own: [Task<Void, Never>] = []
            var schedule: [String] = []
            var drops: [URL: Int] = [:]
            func live() -> [ScriptedOrigin.Exchange] { h.origin.exchanges.filter { !$0.isEnded } }
            func failure(_ what: String) -> String {
                "seed \(seed): \(what)\n" + schedule.suffix(30).joined(separator: "\n")
            }
            for _ in 0..<steps {
                let file = files[Int(random.next() % UInt64(files.count))]
                switch random.next() % 13 {
                case 0, 1:
                    // A player asks a closed range as AVPlayer does, or in one of three an open one.
                    let start = Int64(random.next() % UInt64(file.length))
                    let rest = file.length - start
                    let length = random.next() % 3 == 0 ? nil : min(rest, 1 + Int64(random.next() % 200_000))
                    let range = ByteRange(start, start + (length ?? rest))
                    let number = players.count
                    let task = Task {
                        defer { ended.insert(number) }
                        return try await collect(try await h.reader.read(file.url, offset: start, length: length))
                    }
                    players.append(Player(file: file, range: range, task: task))
                    let form = length == nil ? "open" : "closed"
                    schedule.append("player \(number) asks \(file.url.path) \(range) (\(form))")
                case 2:
                    let waiting = players.indices.filter { !players[$0].hungUp && !ended.contains($0) }
                    guard let number = waiting.randomElement(using: &random) else { continue }
                    players[number].hungUp = true
                    players[number].task.cancel()
                    schedule.append("player \(number) hangs up")
                case 3, 4:
                    let start = Int64(random.next() % UInt64(file.length))
                    let range = ByteRange(start, min(file.length, start + 1 + Int64(random.next() % 300_000)))
                    let number = own.count
                    own.append(
                        Task {
                            defer { ownEnded.insert(number) }
                            _ = try? await h.reader.prefetch(file.url, range: range, as: .own(.prefetch))
                        })
                    schedule.append("a prefetch of \(file.url.path) \(range)")
                case 5, 6, 7, 8:
                    guard let exchange = live().randomElement(using: &random) else { continue }
                    let count = 8_192 + Int64(random.next() % 120_000)
                    exchange.send(count)
                    schedule.append("\(exchange.url.path) \(exchange.bodyRange) sends \(count)")
                case 9:
                    guard let exchange = live().randomElement(using: &random) else { continue }
                    exchange.finish()
                    schedule.append("\(exchange.url.path) \(exchange.bodyRange) ends")
                case 10:
                    guard let exchange = live().randomElement(using: &random) else { continue }
                    exchange.fail()
                    drops[exchange.url, default: 0] += 1
                    schedule.append("\(exchange.url.path) \(exchange.bodyRange) drops")
                case 11:
                    // The network turns metered (fills stop) or unmetered again.
                    h.reader.fills.isAllowed.toggle()
                    if !h.reader.fills.isAllowed { reached.metered += 1 }
                    schedule.append("the network turns \(h.reader.fills.isAllowed ? "unmetered" : "metered")")
                default:
                    clock.advance(by: 1)
                    timer.fire()
                    schedule.append("a tick")
                }
                for _ in 0..<20 { await Task.yield() }
                // A budget hold is one origin request: a request let go of ends its body soon
                // after its hold, so an excess that does not pass is a connection used twice.
                for host in hosts {
                    do {
                        try await waitUntil { live().filter { $0.url.host == host }.count <= connections }
                    } catch {
                        Issue.record(Comment(rawValue: failure("\(host) keeps more requests open than connections")))
                        return false
                    }
                }
            }
            // The drain: the origins send everything asked until every player ended, with no
            // quiet period over (the cache's own work never makes a player wait), then until the
            // cache's own work ended too.
            do {
                try await waitUntil {
                    for exchange in live() { exchange.finish() }
                    return ended.count == players.count
                }
                try await waitUntil {
                    for exchange in live() { exchange.finish() }
                    timer.fire()
                    return ownEnded.count == own.count && h.reader.activeDownloads == 0
                }
            } catch {
                let waiting = players.indices.filter { !ended.contains($0) }
                let budgets = hosts.map { "\($0) \(h.reader.fetcher.budget.usage(of: URL(string: "https://\($0)/")!))" }
                let downloads = h.reader.activeDownloadSummaries.map { "\($0)" }
                let stalled = "players \(waiting) and \(own.count - ownEnded.count) prefetches never ended"
                Issue.record(Comment(rawValue: failure(([stalled] + budgets + downloads).joined(separator: "; "))))
                for player in players { player.task.cancel() }
                for task in own { task.cancel() }
                return false
            }
            for task in own { await task.value }
            var broken: [String] = []
            for (number, player) in players.enumerated() {
                do {
                    let bytes = try await player.task.value
                    let whole = DeterministicContent(seed: player.file.seed)
                    if bytes.readableBytes != Int(player.range.length)
                        || whole.firstMismatch(in: bytes, at: player.range.lowerBound) != nil
                    {
                        broken.append("player \(number) got \(bytes.readableBytes) bytes, not the origin's")
                    }
                    reached.served += 1
                } catch let error as CacheError where error.code == .originUnavailable {
                    // An origin that drops a body more often in a row than the policy retries is
                    // a failure the player hears of; never wrong bytes.
                    let dropped = drops[player.file.url, default: 0]
                    if dropped <= configuration.maxRetries {
                        broken.append("player \(number) failed after \(dropped) drops of its file: \(error)")
                    }
                    reached.refused += 1
                } catch {
                    if !player.hungUp { broken.append("player \(number) failed: \(error)") }
                    reached.hungUp += 1
                }
            }
            for host in hosts {
                let usage = h.reader.fetcher.budget.usage(of: URL(string: "https://\(host)/")!)
                if usage != (0, 0) { broken.append("\(host) still counts \(usage)") }
            }
            if !live().isEmpty { broken.append("requests left open") }
            if !h.reader.fills.progress.isEmpty { broken.append("fills left under way: \(h.reader.fills.progress)") }
            // Pieces: requests on the pieced host that begin where another of its file ended.
            if seed % 2 == 1 {
                let asked = h.origin.exchanges.filter { $0.url.host == hosts[1] }
                reached.pieced +=
                    asked.filter { piece in
                        asked.contains { $0.url == piece.url && $0.bodyRange.upperBound == piece.bodyRange.lowerBound }
                    }.count
            }
            reached.requests += h.origin.exchanges.count
            reached.cancelled += h.origin.exchanges.filter(\.isCancelled).count
            reached.fills += Int(h.reader.fills.begun)
            guard let first = broken.first else { return true }
            Issue.record(Comment(rawValue: failure(first)))
            return false
        }
    }
}
