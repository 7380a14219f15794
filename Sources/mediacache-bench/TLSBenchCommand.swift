// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport

/// Cold time to first byte from an HTTPS origin, for a host's first file (a new TLS
/// connection) and its second (a connection already open), through `mediacache serve` and
/// with curl straight from the origin, in the same run.
struct TLSBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "Cold first byte over HTTPS, first and second file of a host: mediacache vs a direct curl.",
        discussion: """
            The test origin serves HTTPS on loopback (HTTP/2 and HTTP/1.1 by ALPN) with a certificate from a CA made for the run. \
            Each round starts a new `mediacache serve --ca-file` with an empty cache, then curl fetches two new files through it on one \
            connection; the direct figures are curl fetching two other new files from the origin on one connection. Needs curl.
            """
    )

    @Option(help: "Rounds; the figures are medians.")
    var rounds = 15

    @Option(help: "Each file's size in KiB.")
    var size = 1024

    func validate() throws {
        guard (1...1000).contains(rounds), (1...1_048_576).contains(size) else {
            throw ValidationError("--rounds must be 1...1000 and --size 1...1048576 KiB.")
        }
    }

    /// One round's figures, in milliseconds (time to first byte of each file).
    struct Round {
        var first: Double
        var second: Double
        /// Whether the second file's first request came on a new connection (through the
        /// proxy; curl's own reuse is curl's).
        var secondOpenedConnection: Bool?
    }

    func run() async throws {
        guard ChildProcess.toolExists("curl") else {
            throw ValidationError("curl is not installed (Debian: apt-get install curl).")
        }
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let caFile = directory.appendingPathComponent("ca.pem")
            try TestCertificateAuthority.shared.certificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
            let origin = try await TestOrigin.start(tls: try .trusted())
            // A plain-HTTP origin for one warm-up request per new proxy, so the first file's
            // figure is the TLS connection's and not the new process's first request.
            let warmUp = try await TestOrigin.start()
            warmUp.serve(.generated(length: 1000), at: "/warm-up")
            let length = Int64(size) << 10
            // curl trusting the system's roots too, as the proxy does (it loads them all when
            // it makes its TLS context, before its first handshake).
            let systemBundle = [
                "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem",
            ]
            .first { FileManager.default.fileExists(atPath: $0) }
            let bundleFile = directory.appendingPathComponent("bundle.pem")
            if let systemBundle {
                let system = try String(contentsOfFile: systemBundle, encoding: .utf8)
                try (system + "\n" + TestCertificateAuthority.shared.certificatePEM + "\n").write(
                    to: bundleFile, atomically: true, encoding: .utf8)
            }
            var direct: [Round] = []
            var directWithSystemRoots: [Round] = []
            var ours: [String: [Round]] = ["HTTP/2": [], "HTTP/1.1": []]
            for round in 0..<rounds {
                let paths = (0..<8).map { "/r\(round)/\($0).bin" }
                for (index, path) in paths.enumerated() {
                    origin.serve(.generated(length: length, seed: UInt64(round * 10 + index + 1)), at: path)
                }
                direct.append(
                    try await Self.curl(
                        urls: paths[0...1].map { origin.url($0).absoluteString }, caFile: caFile.path, length: length))
                if systemBundle != nil {
                    directWithSystemRoots.append(
                        try await Self.curl(
                            urls: paths[6...7].map { origin.url($0).absoluteString }, caFile: bundleFile.path,
                            length: length))
                }
                for (index, version) in ["HTTP/2", "HTTP/1.1"].enumerated() {
                    let files = Array(paths[(2 + 2 * index)...(3 + 2 * index)])
                    let cache = directory.appendingPathComponent("cache-\(round)-\(index)")
                    var arguments = [
                        "serve", "--port", "0", "--cache-dir", cache.path, "--ca-file", caFile.path, "--log-level",
                        "warning",
                    ]
                    if version == "HTTP/1.1" { arguments.append("--http1-only") }
                    let (process, line) = try await ChildProcess.startServer(
                        executable, arguments, readyLinePrefix: "mediacache: serving on")
                    defer {
                        process.terminate()
                        process.waitUntilExit()
                    }
                    guard let match = line.firstMatch(of: /127\.0\.0\.1:(\d+)/), let port = Int(match.1) else {
                        throw ValidationError("No port in: \(line)")
                    }
                    let urls = files.map { path in
                        "http://127.0.0.1:\(port)/?url=" + origin.url(path).absoluteString.addingPercentEncoding(
                            withAllowedCharacters: .alphanumerics)!
                    }
                    let warmUpURL =
                        "http://127.0.0.1:\(port)/?url=" + warmUp.url("/warm-up").absoluteString.addingPercentEncoding(
                            withAllowedCharacters: .alphanumerics)!
                    _ = try await Self.curl(urls: [warmUpURL], caFile: nil, length: 1000)
                    var figures = try await Self.curl(urls: urls, caFile: nil, length: length)
                    let firstFileConnections = origin.requests(files[0]).map(\.connection)
                    let secondFileFirst = origin.requests(files[1]).first?.connection ?? .max
                    figures.secondOpenedConnection = secondFileFirst > firstFileConnections.max() ?? 0
                    let versions = Set((origin.requests(files[0]) + origin.requests(files[1])).map(\.version))
                    guard versions == [version == "HTTP/2" ? "HTTP/2.0" : "HTTP/1.1"] else {
                        throw ValidationError("Expected \(version) to the origin, saw \(versions.sorted())")
                    }
                    ours[version]!.append(figures)
                }
            }
            try await origin.shutdown()
            try await warmUp.shutdown()
            func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
            let directFirst = median(direct.map(\.first))
            let directSecond = median(direct.map(\.second))
            print("Cold time to first byte over HTTPS (loopback), median of \(rounds) rounds, \(size) KiB files:")
            func label(_ text: String) -> String { "  " + text.padding(toLength: 34, withPad: " ", startingAt: 0) }
            print(
                label("direct curl, --cacert CA")
                    + String(format: "first file %7.2f ms   second file %7.2f ms", directFirst, directSecond))
            if !directWithSystemRoots.isEmpty {
                print(
                    label("direct curl, system roots + CA")
                        + String(
                            format: "first file %7.2f ms   second file %7.2f ms",
                            median(directWithSystemRoots.map(\.first)), median(directWithSystemRoots.map(\.second))))
            }
            for version in ["HTTP/2", "HTTP/1.1"] {
                let runs = ours[version]!
                let first = median(runs.map(\.first))
                let second = median(runs.map(\.second))
                var line =
                    label("mediacache, \(version) to origin")
                    + String(
                        format: "first file %7.2f ms   second file %7.2f ms   ours/direct %.2f and %.2f",
                        first, second, first / directFirst, second / directSecond)
                if !directWithSystemRoots.isEmpty {
                    line += String(
                        format: " (vs system roots: %.2f and %.2f)",
                        first / median(directWithSystemRoots.map(\.first)),
                        second / median(directWithSystemRoots.map(\.second)))
                }
                print(line)
                let newForSecond = runs.filter { $0.secondOpenedConnection == true }.count
                print(
                    "    new origin connections for the second file's first request: \(newForSecond) in \(runs.count) rounds"
                )
            }
        }
    }

    /// Fetches `urls` with one curl on one connection, checks each length, and returns the
    /// time to first byte of the first two in milliseconds.
    static func curl(urls: [String], caFile: String?, length: Int64) async throws -> Round {
        var arguments = ["curl", "-s", "--fail", "-w", "%{time_starttransfer} %{size_download}\\n"]
        if let caFile { arguments += ["--cacert", caFile] }
        for url in urls { arguments += ["-o", "/dev/null", url] }
        let result = try await ChildProcess.run(arguments)
        let lines = String(decoding: result.output, as: UTF8.self).split(separator: "\n")
        guard result.status == 0, lines.count == urls.count, urls.count >= 1 else {
            throw ValidationError("curl failed (\(result.status)): \(result.error)")
        }
        let figures = try lines.map { line -> Double in
            let fields = line.split(separator: " ")
            guard fields.count == 2, let seconds = Double(fields[0]), Int64(fields[1]) == length else {
                throw ValidationError("curl got an unexpected answer: \(line)")
            }
            return seconds * 1000
        }
        return Round(first: figures[0], second: figures.count > 1 ? figures[1] : .nan)
    }
}
