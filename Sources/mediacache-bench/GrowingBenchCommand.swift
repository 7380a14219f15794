// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization

/// Players on one segment that grows while it is sent (a chunked CMAF segment of low-latency
/// DASH): through `mediacache serve`, which shares one origin request among them, and direct,
/// each with its own. Each piece the origin makes is timed from its making to its arrival at
/// each player; the direct players give the floor of the same round.
struct GrowingBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "growing",
        abstract:
            "Chunk latency on a growing segment: players through mediacache serve (one shared origin request) vs direct.",
        discussion: """
            Each round serves a new segment at the in-process test origin (loopback) of which the first piece exists, starts \
            --clients players through a `mediacache serve` process and as many direct, waits until each has the first piece, then \
            makes the rest piece by piece: each piece's latency runs from its making to its arrival at a player. Prints the median \
            and the 95th percentile of both paths and the origin requests the proxy made per segment.
            """
    )

    @Option(help: "Segments (rounds).")
    var rounds = 10

    @Option(help: "Players per path (through the proxy, and as many direct).")
    var clients = 4

    @Option(help: "Pieces per segment, after the first.")
    var pieces = 20

    @Option(help: "Each piece's size in KiB.")
    var size = 16

    func validate() throws {
        guard (1...1000).contains(rounds), (1...64).contains(clients), (1...1000).contains(pieces),
            (1...4096).contains(size)
        else {
            throw ValidationError(
                "--rounds must be 1...1000, --clients 1...64, --pieces 1...1000 and --size 1...4096 KiB.")
        }
    }

    func run() async throws {
        let origin = try await TestOrigin.start()
        let client = HTTPClient.forPlayers(2 * clients)
        let piece = Int64(size) << 10
        try await withTemporaryDirectory { directory in
            try await withServe(cacheDirectory: directory.appendingPathComponent("cache")) { port in
                var direct: [Double] = []
                var proxied: [Double] = []
                var originRequests: [Int] = []
                for round in 0..<rounds {
                    let path = "/grow/seg\(round).m4s"
                    let growth = TestOrigin.Growth(made: piece)
                    var segment = TestOrigin.Resource.generated(
                        length: piece * Int64(pieces + 1), seed: UInt64(round + 1), mimeType: "video/iso.segment")
                    segment.faults.growth = growth
                    origin.serve(segment, at: path)
                    let directURL = origin.url(path).absoluteString
                    let proxyURL =
                        "http://127.0.0.1:\(port)/seg.m4s?url=" + directURL.addingPercentEncoding(
                            withAllowedCharacters: .alphanumerics)!
                    let urls = Array(repeating: directURL, count: clients) + Array(repeating: proxyURL, count: clients)
                    // When each player had each piece (index 0: the first, which exists from the start).
                    let arrivals = Arrivals(players: urls.count, pieces: pieces + 1)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for (player, url) in urls.enumerated() {
                            group.addTask {
                                let response = try await client.execute(
                                    HTTPClientRequest(url: url), timeout: .seconds(60))
                                var received: Int64 = 0
                                for try await chunk in response.body {
                                    received += Int64(chunk.readableBytes)
                                    let now = ContinuousClock.now
                                    let had = min(pieces + 1, Int(received / piece))
                                    arrivals.table.withLock { table in
                                        for index in 0..<had where table[player][index] == nil {
                                            table[player][index] = now
                                        }
                                    }
                                }
                                guard received == piece * Int64(pieces + 1) else {
                                    throw ValidationError("\(url): \(received) bytes")
                                }
                            }
                        }
                        func everyoneHas(_ index: Int) async throws {
                            let deadline = ContinuousClock.now + .seconds(30)
                            while arrivals.table.withLock({ $0.contains { $0[index] == nil } }) {
                                guard ContinuousClock.now < deadline else {
                                    throw ValidationError("piece \(index) of \(path) did not reach every player")
                                }
                                try await Task.sleep(for: .milliseconds(1))
                            }
                        }
                        try await everyoneHas(0)
                        var made: [ContinuousClock.Instant] = []
                        for index in 1...pieces {
                            made.append(ContinuousClock.now)
                            growth.make(upTo: piece * Int64(index + 1))
                            try await everyoneHas(index)
                        }
                        growth.finish()
                        try await group.waitForAll()
                        let table = arrivals.table.withLock { $0 }
                        for (player, times) in table.enumerated() {
                            for index in 1...pieces {
                                let latency = (times[index]! - made[index - 1]).seconds * 1000
                                if player < clients { direct.append(latency) } else { proxied.append(latency) }
                            }
                        }
                    }
                    originRequests.append(origin.requests(path).count - clients)
                }
                func percentile(_ values: [Double], _ p: Double) -> Double {
                    let sorted = values.sorted()
                    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
                }
                print(
                    "growing segment: \(rounds) segments x \(pieces) pieces of \(size) KiB, \(clients) players per path"
                )
                print(
                    String(
                        format: "  direct:        median %.2f ms, p95 %.2f ms", percentile(direct, 0.5),
                        percentile(direct, 0.95)))
                print(
                    String(
                        format: "  through proxy: median %.2f ms, p95 %.2f ms", percentile(proxied, 0.5),
                        percentile(proxied, 0.95)))
                print(
                    "  origin requests by the proxy per segment: \(Set(originRequests).sorted().map(String.init).joined(separator: ", "))"
                )
            }
        }
        try await client.shutdown()
        try await origin.shutdown()
    }
}

/// When each player had each piece.
private final class Arrivals: Sendable {
    let table: Mutex<[[ContinuousClock.Instant?]]>

    init(players: Int, pieces: Int) {
        table = Mutex(Array(repeating: Array(repeating: nil, count: pieces), count: players))
    }
}
