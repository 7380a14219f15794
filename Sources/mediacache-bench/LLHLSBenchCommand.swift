// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport

/// What the proxy adds to a Low-Latency HLS part at the live edge: players wait on a hinted
/// part before it exists (the origin holds their requests), the part is made, and each player's
/// wait ends when it has the whole part. Players through `mediacache serve` and players going
/// direct wait on the same part in the same round, so noise falls on both.
struct LLHLSBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "llhls",
        abstract:
            "Added latency per LL-HLS part: players on a hinted part through mediacache serve vs direct, the part made while they wait.",
        discussion: """
            Each round serves a new part behind a gate at the in-process test origin (loopback), starts --clients requests for it \
            through a `mediacache serve` process and as many direct, waits until the origin holds them all (and 20 ms more, for the \
            proxy's players to join its one download), then opens the gate: each player's latency runs from the gate's opening to its \
            last byte. Also counts the origin requests the proxy made per part.
            """
    )

    @Option(help: "Parts (rounds); the figures are percentiles over all players of all rounds.")
    var rounds = 40

    @Option(help: "Players per path (through the proxy, and as many direct).")
    var clients = 4

    @Option(help: "Each part's size in KiB.")
    var size = 64

    func validate() throws {
        guard (1...10_000).contains(rounds), (1...64).contains(clients), (1...65_536).contains(size) else {
            throw ValidationError("--rounds must be 1...10000, --clients 1...64 and --size 1...65536 KiB.")
        }
    }

    func run() async throws {
        let origin = try await TestOrigin.start()
        let client = HTTPClient.forPlayers(2 * clients)
        try await withTemporaryDirectory { directory in
            try await withServe(cacheDirectory: directory.appendingPathComponent("cache")) { port in
                let length = Int64(size) << 10
                var direct: [Double] = []
                var proxied: [Double] = []
                var extraRequests = 0
                for round in 0..<rounds {
                    let path = "/ll/seg\(round).part1.mp4"
                    let gate = TestOrigin.Gate()
                    var part = TestOrigin.Resource.generated(
                        length: length, seed: UInt64(round + 1), mimeType: "video/iso.segment")
                    part.cacheControl = "max-age=60"
                    part.faults.gate = gate
                    origin.serve(part, at: path)
                    let directURL = origin.url(path).absoluteString
                    let proxyURL =
                        "http://127.0.0.1:\(port)/part.mp4?url=" + directURL.addingPercentEncoding(
                            withAllowedCharacters: .alphanumerics)!
                    let urls = Array(repeating: directURL, count: clients) + Array(repeating: proxyURL, count: clients)
                    let (start, ends) = try await withThrowingTaskGroup(
                        of: (isDirect: Bool, end: ContinuousClock.Instant).self
                    ) { group in
                        for url in urls {
                            group.addTask {
                                let response = try await client.execute(
                                    HTTPClientRequest(url: url), timeout: .seconds(30))
                                let body = try await response.body.collect(upTo: Int(length) + 1)
                                let end = ContinuousClock.now
                                guard response.status == .ok, body.readableBytes == Int(length) else {
                                    throw ValidationError("\(url): \(response.status), \(body.readableBytes) bytes")
                                }
                                return (url == directURL, end)
                            }
                        }
                        // Every player waits: the direct ones at the origin, the proxy's behind its one request.
                        let deadline = ContinuousClock.now + .seconds(20)
                        while origin.requests(path).count < clients + 1 {
                            guard ContinuousClock.now < deadline else {
                                throw ValidationError("The players of \(path) did not all arrive.")
                            }
                            try await Task.sleep(for: .milliseconds(1))
                        }
                        try await Task.sleep(for: .milliseconds(20))
                        let start = ContinuousClock.now
                        gate.open()
                        var ends: [(Bool, ContinuousClock.Instant)] = []
                        for try await end in group { ends.append(end) }
                        return (start, ends)
                    }
                    let latencies = ends.map { ($0.0, ($0.1 - start).seconds * 1000) }
                    for (isDirect, milliseconds) in latencies {
                        if isDirect { direct.append(milliseconds) } else { proxied.append(milliseconds) }
                    }
                    extraRequests += origin.requests(path).count - clients - 1
                }
                func percentile(_ values: [Double], _ fraction: Double) -> Double {
                    let sorted = values.sorted()
                    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
                }
                print(
                    "LL-HLS part latency (loopback), \(rounds) parts of \(size) KiB, \(clients) players through the proxy and \(clients) direct on each:"
                )
                for (name, values) in [("direct", direct), ("through mediacache", proxied)] {
                    print(
                        "  " + name.padding(toLength: 20, withPad: " ", startingAt: 0)
                            + String(
                                format: "p50 %6.2f ms   p95 %6.2f ms   max %6.2f ms", percentile(values, 0.5),
                                percentile(values, 0.95), values.max() ?? 0))
                }
                print(
                    String(
                        format: "  added by the proxy   p50 %6.2f ms   p95 %6.2f ms",
                        percentile(proxied, 0.5) - percentile(direct, 0.5),
                        percentile(proxied, 0.95) - percentile(direct, 0.95)))
                print("  origin requests for the proxy's players: \(rounds + extraRequests) for \(rounds) parts")
            }
        }
        try await client.shutdown()
        try await origin.shutdown()
    }
}
