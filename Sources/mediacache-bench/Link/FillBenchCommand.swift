// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport

/// Fill on play over a simulated far link: a podcast episode (an MP3 ffmpeg makes) played
/// cold through `mediacache serve` with the fill (`--fill-on-play audio`) and without it
/// (`none`), and downloaded alone by curl, in the same round (the order turning each round).
/// Prints the first audio frame's time with the fill against without it, the first audio of
/// another file (one the policy does not fill) started while a fill runs against a play on the
/// idle link, and the time until the fill holds the whole file against curl's download.
struct FillBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fill",
        abstract: "Fill on play over a simulated link: first audio with and without the fill, whole file vs curl.")

    @Option(help: "Rounds; the figures are medians over them.")
    var rounds = 3

    @Option(help: "The episode's size, in megabytes (an MP3 at 320 kbit/s).")
    var megabytes = 60

    @OptionGroup var link: LinkOptions

    func validate() throws {
        guard (1...100).contains(rounds) else { throw ValidationError("--rounds must be 1...100.") }
        guard (1...1000).contains(megabytes) else { throw ValidationError("--megabytes must be 1...1000.") }
        for tool in ["ffmpeg", "curl"] where !ChildProcess.toolExists(tool) {
            throw ValidationError("\(tool) is not installed (apt-get install \(tool)).")
        }
    }

    func run() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("episode.mp3")
            let seconds = megabytes * 1_000_000 * 8 / 320_000
            let made = try await ChildProcess.run(
                [
                    "ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440", "-t",
                    "\(seconds)", "-c:a", "libmp3lame", "-b:a", "320k", file.path,
                ])
            guard made.status == 0 else { throw ValidationError("ffmpeg could not make the episode: \(made.error)") }
            let body = Array(try Data(contentsOf: file))
            let origin = try await TestOrigin.start()
            let relay = try await LinkRelay.start(to: origin.port, shape: link.shape)
            let fillFolder = directory.appendingPathComponent("fill")
            let plainFolder = directory.appendingPathComponent("plain")
            try await withServe(cacheDirectory: fillFolder, arguments: ["--fill-on-play", "audio"]) { fillPort in
                try await withServe(cacheDirectory: plainFolder, arguments: ["--fill-on-play", "none"]) { plainPort in
                    print(
                        "Fill on play over \(link.description), a \(body.count / 1_000_000) MB MP3, \(rounds) rounds, medians:"
                    )
                    try await measure(body, origin: origin, relay: relay, fillPort: fillPort, plainPort: plainPort)
                }
            }
            await relay.stop()
            try await origin.shutdown()
        }
    }

    private func measure(_ body: [UInt8], origin: TestOrigin, relay: LinkRelay, fillPort: Int, plainPort: Int)
        async throws
    {
        var times: [String: [Double]] = [:]
        var fillRequests: [Int] = []
        for round in 0..<rounds {
            let paths = [
                "fill": "/r\(round)f/episode.mp3", "plain": "/r\(round)n/episode.mp3", "curl": "/r\(round)d/e.mp3",
                "beside": "/r\(round)b/episode.mp3", "second": "/r\(round)s/video.mp4",
            ]
            for path in paths.values {
                // The second play is of a file the policy does not fill: only its own reads.
                let type = path.hasSuffix(".mp4") ? "video/mp4" : "audio/mpeg"
                var resource = TestOrigin.Resource(body: .bytes(body), mimeType: type)
                resource.etag = "\"\(path)\""
                origin.serve(resource, at: path)
            }
            func originURL(_ path: String) -> String { "http://127.0.0.1:\(relay.port)\(path)" }
            func proxied(_ port: Int, _ path: String) -> String {
                "http://127.0.0.1:\(port)/?url="
                    + originURL(path).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            }
            let order = ["curl", "plain", "fill", "beside"].rotated(by: round)
            /// Milliseconds until ffmpeg has decoded the first audio frame of `path` through `port`.
            func firstAudio(_ port: Int, _ path: String) async throws -> Double {
                let start = ContinuousClock.now
                let decoded = try await ChildProcess.run(
                    [
                        "ffmpeg", "-nostdin", "-v", "error", "-i", proxied(port, path), "-frames:a", "1", "-f", "null",
                        "-",
                    ])
                guard decoded.status == 0 else { throw ValidationError("ffmpeg failed: \(decoded.error)") }
                return (ContinuousClock.now - start).seconds * 1000
            }
            for kind in order {
                try await relay.drain()
                let start = ContinuousClock.now
                switch kind {
                case "curl":
                    let got = try await ChildProcess.run(["curl", "-sf", "-o", "/dev/null", originURL(paths["curl"]!)])
                    guard got.status == 0 else { throw ValidationError("curl failed: \(got.error)") }
                    times["curl whole", default: []].append((ContinuousClock.now - start).seconds * 1000)
                case "beside":
                    // A play while another's fill runs: its first audio against a play on the
                    // idle link (the play without the fill).
                    _ = try await firstAudio(fillPort, paths["beside"]!)
                    // Once the fill runs past its play's probation (a play followed at once by
                    // another would be a skip, whose fill ends), the other play begins.
                    try await Self.waitUntilFilling(originURL(paths["beside"]!), past: 2 << 20, port: fillPort)
                    times["second first audio", default: []].append(try await firstAudio(fillPort, paths["second"]!))
                    try await Self.waitUntilWhole(originURL(paths["beside"]!), length: body.count, port: fillPort)
                default:
                    let port = kind == "fill" ? fillPort : plainPort
                    times["\(kind) first audio", default: []].append(try await firstAudio(port, paths[kind]!))
                    guard kind == "fill" else { continue }
                    try await Self.waitUntilWhole(originURL(paths["fill"]!), length: body.count, port: fillPort)
                    times["fill whole", default: []].append((ContinuousClock.now - start).seconds * 1000)
                    fillRequests.append(origin.requests(paths["fill"]!).count)
                }
            }
        }
        func median(_ key: String) -> Double { times[key]!.sorted()[times[key]!.count / 2] }
        let linkFloor = Double(body.count) / Double(link.bytesPerSecond) * 1000 + 2 * Double(link.roundTrip)
        print(
            String(
                format: "  first audio: without the fill %.0f ms, with it %.0f ms (%.2fx)",
                median("plain first audio"), median("fill first audio"),
                median("fill first audio") / median("plain first audio")))
        print(
            String(
                format: "  another file's first audio while a fill runs: %.0f ms, on an idle link %.0f ms (%.2fx)",
                median("second first audio"), median("plain first audio"),
                median("second first audio") / median("plain first audio")))
        print(
            String(
                format:
                    "  whole file: the fill %.0f ms after the play began, curl alone %.0f ms (%.2fx); the link's floor %.0f ms",
                median("fill whole"), median("curl whole"), median("fill whole") / median("curl whole"), linkFloor))
        print("  origin requests of each filled play: \(fillRequests.map(String.init).joined(separator: ","))")
    }

    /// Waits until the server on `port` has filled `url` past `offset`, asking its status report.
    static func waitUntilFilling(_ url: String, past offset: Int, port: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < deadline {
            let status = try await ChildProcess.run(["curl", "-sf", "http://127.0.0.1:\(port)/status.json"])
            let report = try? JSONSerialization.jsonObject(with: status.output) as? [String: Any]
            let fills = report?["fills"] as? [[String: Any]] ?? []
            let entries = report?["entries"] as? [[String: Any]] ?? []
            if fills.contains(where: { $0["url"] as? String == url && ($0["position"] as? Int ?? 0) > offset })
                || entries.contains(where: { $0["url"] as? String == url && ($0["storedBytes"] as? Int ?? 0) > offset })
            {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ValidationError("The fill of \(url) did not pass byte \(offset) within 600 s.")
    }

    /// Waits until the server on `port` holds every byte of `url`, asking its status report.
    static func waitUntilWhole(_ url: String, length: Int, port: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < deadline {
            let status = try await ChildProcess.run(["curl", "-sf", "http://127.0.0.1:\(port)/status.json"])
            if let report = try? JSONSerialization.jsonObject(with: status.output) as? [String: Any],
                let entries = report["entries"] as? [[String: Any]],
                entries.contains(where: { $0["url"] as? String == url && ($0["storedBytes"] as? Int) == length })
            {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ValidationError("The fill of \(url) did not end within 600 s.")
    }
}

extension Array {
    /// The elements, the first `count` (modulo the length) moved to the end.
    func rotated(by count: Int) -> [Element] {
        guard !isEmpty else { return self }
        let shift = count % self.count
        return Array(self[shift...] + self[..<shift])
    }
}
