// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport
import NIOCore

/// A seek-heavy session over a simulated far link, over HTTPS and over HTTP: a player that
/// opens a new connection for each seek (as ffmpeg and AVPlayer do when they seek far) asks
/// for the start of a file and then for ranges at random offsets, going direct to the origin
/// behind the link and through `mediacache serve`, cold and hot. Going direct, each seek pays
/// the link's TCP handshake and, over HTTPS, a TLS handshake; through the proxy the player's
/// new connection is on loopback and the proxy's connection to the origin is already open.
struct SeekBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seeks",
        abstract:
            "A seek-heavy session over a simulated link, HTTPS and HTTP: direct vs through mediacache serve, cold and hot.",
        discussion: """
            The in-process test origin serves a generated file over HTTPS (a CA made for the run, HTTP/2 and HTTP/1.1 by ALPN) \
            and over HTTP, each behind a link relay (--rtt-ms round trip, one more round trip per new connection, --mbps each \
            way). Each session is --seeks + 1 ranges of --range-kib KiB, each fetched by its own curl (a new connection each); \
            every byte is checked. Direct, cold and hot run in the same round on new paths; the figures are medians over the \
            rounds of each round's session time and of its ratio to direct, with the lowest and highest ratio. Needs curl.
            """
    )

    @Option(help: "Rounds; the figures are medians over them.")
    var rounds = 5

    @Option(help: "Seeks per session, after the request for the file's start.")
    var seeks = 12

    @Option(name: .customLong("range-kib"), help: "Each request's range, in KiB.")
    var rangeKiB = 256

    @OptionGroup var link: LinkOptions

    @Flag(
        name: .customLong("http1-only"),
        help: "The proxy speaks HTTP/1.1 to the HTTPS origin (mediacache serve --http1-only).")
    var http1Only = false

    /// The file's size: 64 MiB, so random seeks rarely meet.
    static let fileLength: Int64 = 64 << 20

    func validate() throws {
        guard (1...100).contains(rounds), (1...200).contains(seeks), (1...4096).contains(rangeKiB) else {
            throw ValidationError("--rounds must be 1...100, --seeks 1...200 and --range-kib 1...4096.")
        }
        guard ChildProcess.toolExists("curl") else {
            throw ValidationError("curl is not installed (apt-get install curl).")
        }
    }

    /// One session's figures.
    struct Session {
        /// The sum of curl's own times (`time_total`), in milliseconds: process start-up is not in it.
        var total: Double
        /// curl's time to first byte of each request, in milliseconds.
        var firstBytes: [Double]
        var originRequests: Int
        /// Connections the origin accepted during the session.
        var originConnections: Int
        /// The HTTP versions of the session's origin requests.
        var versions: Set<String> = []
    }

    func run() async throws {
        try await withTemporaryDirectory { directory in
            let caFile = directory.appendingPathComponent("ca.pem")
            try TestCertificateAuthority.shared.certificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
            let shape = link.shape
            let secure = try await TestOrigin.start(tls: try .trusted())
            let plain = try await TestOrigin.start()
            let secureLink = try await LinkRelay.start(to: secure.port, shape: shape)
            let plainLink = try await LinkRelay.start(to: plain.port, shape: shape)
            let sides = [
                ("HTTPS", secure, "https://127.0.0.1:\(secureLink.port)"),
                ("HTTP", plain, "http://127.0.0.1:\(plainLink.port)"),
            ]
            var sessions: [String: [Session]] = [:]
            try await withServe(
                cacheDirectory: directory.appendingPathComponent("cache"),
                arguments: ["--ca-file", caFile.path] + (http1Only ? ["--http1-only"] : [])
            ) { port in
                for round in 0..<rounds {
                    let ranges = Self.ranges(round: round, seeks: seeks, length: Int64(rangeKiB) << 10)
                    for (scheme, origin, base) in sides {
                        let content = DeterministicContent(seed: UInt64(round + 1))
                        for path in ["/r\(round)/direct.bin", "/r\(round)/proxied.bin"] {
                            origin.serve(.generated(length: Self.fileLength, seed: content.seed), at: path)
                        }
                        let proxied =
                            "http://127.0.0.1:\(port)/?url=" + (base + "/r\(round)/proxied.bin").addingPercentEncoding(
                                withAllowedCharacters: .alphanumerics)!
                        for (kind, url, path) in [
                            ("direct", base + "/r\(round)/direct.bin", "/r\(round)/direct.bin"),
                            ("cold", proxied, "/r\(round)/proxied.bin"),
                            ("hot", proxied, "/r\(round)/proxied.bin"),
                        ] {
                            try await (scheme == "HTTPS" ? secureLink : plainLink).drain()
                            let requestsBefore = origin.requests(path).count
                            let connectionsBefore = origin.connectionsAccepted
                            var session = try await Self.play(
                                url: url, ranges: ranges, content: content,
                                caFile: kind == "direct" ? caFile.path : nil,
                                scratch: directory.appendingPathComponent("range"))
                            session.originRequests = origin.requests(path).count - requestsBefore
                            session.originConnections = origin.connectionsAccepted - connectionsBefore
                            session.versions = Set(origin.requests(path).dropFirst(requestsBefore).map(\.version))
                            sessions["\(scheme) \(kind)", default: []].append(session)
                        }
                    }
                }
            }
            await secureLink.stop()
            await plainLink.stop()
            try await secure.shutdown()
            try await plain.shutdown()
            report(sessions)
        }
    }

    private func report(_ sessions: [String: [Session]]) {
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        print(
            "A seek-heavy session over \(link.description): \(seeks + 1) ranges of \(rangeKiB) KiB, "
                + "a new connection each, \(rounds) rounds, medians (ratio: of each round's session to its direct one, lowest-highest):"
        )
        for scheme in ["HTTPS", "HTTP"] {
            print("  \(scheme):")
            let direct = sessions["\(scheme) direct"]!
            for kind in ["direct", "cold", "hot"] {
                let runs = sessions["\(scheme) \(kind)"]!
                let ratios = zip(runs, direct).map { $0.total / $1.total }
                var line =
                    "    " + kind.padding(toLength: 7, withPad: " ", startingAt: 0)
                    + String(
                        format: "session %6.0f ms   first byte p50 %6.1f ms", median(runs.map(\.total)),
                        median(runs.flatMap(\.firstBytes)))
                if kind != "direct" {
                    line += String(format: "   %.2fx (%.2f-%.2f)", median(ratios), ratios.min()!, ratios.max()!)
                }
                line +=
                    "   origin requests \(runs.map { String($0.originRequests) }.joined(separator: ","))"
                    + "   origin connections \(runs.map { String($0.originConnections) }.joined(separator: ","))"
                    + "   \(runs.reduce(into: Set<String>()) { $0.formUnion($1.versions) }.sorted().joined(separator: ","))"
                print(line)
            }
        }
    }

    /// The session's ranges: the file's start, then `seeks` at offsets drawn from the round.
    static func ranges(round: Int, seeks: Int, length: Int64) -> [ClosedRange<Int64>] {
        var state = UInt64(round + 1) &* 0x9e37_79b9_7f4a_7c15
        var ranges = [0...(length - 1)]
        for _ in 0..<seeks {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let start = Int64((state >> 17) % UInt64(fileLength - length))
            ranges.append(start...(start + length - 1))
        }
        return ranges
    }

    /// Fetches each range with its own curl and checks its bytes against `content`.
    static func play(
        url: String, ranges: [ClosedRange<Int64>], content: DeterministicContent, caFile: String?, scratch: URL
    ) async throws
        -> Session
    {
        var session = Session(total: 0, firstBytes: [], originRequests: 0, originConnections: 0)
        for range in ranges {
            var arguments = [
                "curl", "-s", "--fail", "-r", "\(range.lowerBound)-\(range.upperBound)", "-o", scratch.path,
                "-w", "%{http_code} %{time_starttransfer} %{time_total}",
            ]
            if let caFile { arguments += ["--cacert", caFile] }
            let result = try await ChildProcess.run(arguments + [url])
            let fields = String(decoding: result.output, as: UTF8.self).split(separator: " ")
            guard result.status == 0, fields.count == 3, fields[0] == "206", let firstByte = Double(fields[1]),
                let total = Double(fields[2])
            else {
                throw ValidationError("curl failed on \(url) for \(range) (\(result.status)): \(result.error)")
            }
            let body = try Data(contentsOf: scratch)
            var expected = [UInt8](repeating: 0, count: range.count)
            expected.withUnsafeMutableBytes { content.fill($0, from: range.lowerBound) }
            guard body.elementsEqual(expected) else { throw ValidationError("Wrong bytes from \(url) for \(range).") }
            session.firstBytes.append(firstByte * 1000)
            session.total += total * 1000
        }
        return session
    }
}
