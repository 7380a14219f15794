// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheTestSupport

/// Preload over a simulated far link: what `POST /_mediacache/preload` fetches for the first
/// seconds of each shape, how a preloaded item then starts in ffmpeg, what a replaced queue
/// never fetches, and how a cold play fares beside a queue of preloads on the same link.
struct PreloadBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preload",
        abstract:
            "Preload's bytes and a preloaded item's start-up over a simulated link; a cold play beside five preloads.",
        discussion: """
            Per shape (a 30 s MP4 with its moov at the end and with +faststart, a 120 s MP3, HLS of 2 s segments), each \
            round: ffmpeg's first frame direct over the link; a preload of --seconds through mediacache serve, its origin \
            bytes and requests; then ffmpeg's first frame and first 2 s of the preloaded item through the proxy, with the \
            origin requests they cost. Then a queue of five items replaced by another after its first started: the \
            requests for the four that never started. Then a cold play of another file through the proxy alone and with \
            five preloads under way on the same link: first frame and first 10 s.
            """
    )

    @Option(help: "Rounds; the figures are medians over them.")
    var rounds = 3

    @Option(help: "Seconds each preload stores.")
    var seconds = 5.0

    @OptionGroup var link: LinkOptions

    @Option(
        name: .customLong("serve-argument"),
        help: "An argument for mediacache serve (repeat; e.g. --serve-argument=--read-ahead-segments=0).")
    var serveArguments: [String] = []

    @Flag(help: "Only a cold play alone and beside a running pinned download of a 120 MiB file (issue 53's goal).")
    var besidePin = false

    func validate() throws {
        guard (1...100).contains(rounds) else { throw ValidationError("--rounds must be 1...100.") }
        guard seconds > 0, seconds <= 60 else { throw ValidationError("--seconds must be above 0, at most 60.") }
        guard ChildProcess.toolExists("ffmpeg"), ChildProcess.toolExists("curl") else {
            throw ValidationError("ffmpeg and curl are needed (apt-get install ffmpeg curl).")
        }
    }

    static let video = [
        "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440", "-t", "30",
        "-c:v", "libx264", "-preset", "veryfast", "-b:v", "3M", "-g", "60", "-c:a", "aac",
    ]

    static let shapes = [
        StartupBenchCommand.Shape(
            name: "MP4, moov at the end, 30 s", folder: "end", file: "end.mp4", make: video,
            firstFrame: ["-frames:v", "1"]),
        StartupBenchCommand.Shape(
            name: "MP4, faststart, 30 s", folder: "fast", file: "fast.mp4", make: video + ["-movflags", "+faststart"],
            firstFrame: ["-frames:v", "1"]),
        StartupBenchCommand.Shape(
            name: "MP3, 120 s", folder: "mp3", file: "song.mp3",
            make: ["-f", "lavfi", "-i", "sine=frequency=440", "-t", "120", "-c:a", "libmp3lame", "-b:a", "192k"],
            firstFrame: ["-frames:a", "1"]),
        StartupBenchCommand.Shape(
            name: "HLS, 2 s segments, 20 s", folder: "hls", file: "index.m3u8",
            make: StartupBenchCommand.streamEncoding + ["-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod"],
            firstFrame: ["-frames:v", "1"]),
    ]

    func run() async throws {
        try await withTemporaryDirectory { directory in
            let files = try await StartupBenchCommand.make(Self.shapes, in: directory)
            let origin = try await TestOrigin.start()
            let relay = try await LinkRelay.start(to: origin.port, shape: link.shape)
            try await withServe(cacheDirectory: directory.appendingPathComponent("cache"), arguments: serveArguments) {
                port in
                let bench = Bench(origin: origin, relay: relay, proxyPort: port, files: files, directory: directory)
                if besidePin { return try await besideAPin(bench) }
                print(
                    "Preload over \(link.description), \(rounds) rounds, medians (ffmpeg decoding to null), preloads of \(seconds) s:"
                )
                for shape in Self.shapes { try await preloaded(shape, bench) }
                try await replaced(bench)
                try await beside(bench)
            }
            await relay.stop()
            try await origin.shutdown()
        }
    }

    /// One shape: direct first frame, the preload's bytes, the preloaded item's start.
    private func preloaded(_ shape: StartupBenchCommand.Shape, _ bench: Bench) async throws {
        var figures: [String: [Double]] = [:]
        var asked = ""
        let size = bench.files[shape.folder]!.values.map(\.count).reduce(0, +)
        for round in 0..<rounds {
            let direct = bench.serve(shape.folder, at: "/p\(round)d/")
            let preloaded = bench.serve(shape.folder, at: "/p\(round)p/")
            figures["direct", default: []].append(
                try await bench.play(bench.relayURL(direct, shape.file), shape.firstFrame))
            let started = ContinuousClock.now
            try await bench.preload([bench.relayURL(preloaded, shape.file)], seconds: seconds)
            figures["preload ms", default: []].append((ContinuousClock.now - started).seconds * 1000)
            figures["preload bytes", default: []].append(Double(bench.bodyBytes(preloaded, shape.folder)))
            figures["preload requests", default: []].append(Double(bench.requests(preloaded, shape.folder)))
            figures["segments", default: []].append(Double(bench.requests(preloaded, shape.folder, suffix: ".ts")))
            let before = bench.requestLog(preloaded, shape.folder)
            let bytesBefore = bench.bodyBytes(preloaded, shape.folder)
            let proxied = bench.proxyURL(preloaded, shape.file)
            figures["first frame", default: []].append(try await bench.play(proxied, shape.firstFrame))
            figures["first 2 s", default: []].append(try await bench.play(proxied, ["-t", "2"]))
            figures["file", default: []].append(try await bench.play(bench.localFile(shape), shape.firstFrame))
            // What the two plays asked the origin for (the preload's own requests left out).
            let played = bench.requestLog(preloaded, shape.folder).filter { !before.contains($0) }
            figures["play requests", default: []].append(Double(played.count))
            figures["play bytes", default: []].append(Double(bench.bodyBytes(preloaded, shape.folder) - bytesBefore))
            if round == 0, !played.isEmpty { asked = played.joined(separator: ", ") }
        }
        let direct = median(figures["direct"]!)
        print("  \(shape.name) (\(size / 1024) KiB in \(bench.files[shape.folder]!.count) files):")
        print(
            String(
                format: "    preload: %.0f ms, %.0f KiB = %.1f %% of the bytes, %.0f origin requests%@",
                median(figures["preload ms"]!),
                median(figures["preload bytes"]!) / 1024, median(figures["preload bytes"]!) / Double(size) * 100,
                median(figures["preload requests"]!),
                shape.folder == "hls" ? String(format: " (%.0f segments)", median(figures["segments"]!)) : ""))
        print(
            String(
                format:
                    "    then through the proxy: first frame %.2fx direct (%.0f ms direct; decoding the file on disk %.2fx), first 2 s %.0f ms; origin requests of both plays: %@",
                median(figures["first frame"]!) / direct, direct, median(figures["file"]!) / direct,
                median(figures["first 2 s"]!),
                figures["play requests"]!.map { String(Int($0)) }.joined(separator: ",")))
        if !asked.isEmpty {
            print(
                String(
                    format: "    the plays' origin requests, round 1: %@; their body bytes (median) %.0f KiB", asked,
                    median(figures["play bytes"]!) / 1024))
        }
    }

    /// A queue of five replaced by a queue of one after its first item started.
    private func replaced(_ bench: Bench) async throws {
        var untouched: [Int] = []
        for round in 0..<rounds {
            let folders = (0..<6).map { bench.serve("end", at: "/q\(round)i\($0)/") }
            let first = folders.prefix(5).map { bench.relayURL($0, "end.mp4") }
            try await bench.preload(first, seconds: 20, waiting: false)
            try await bench.waitFor { bench.requests(folders[0], "end") > 0 }
            try await bench.preload([bench.relayURL(folders[5], "end.mp4")], seconds: seconds)
            untouched.append(folders[1..<5].map { bench.requests($0, "end") }.reduce(0, +))
        }
        print(
            "  A queue of five replaced after its first item started: origin requests for the four that had not started: \(untouched)"
        )
    }

    /// A cold play alone, and beside a queue of five preloads of other files.
    private func beside(_ bench: Bench) async throws {
        var figures: [String: [Double]] = [:]
        for round in 0..<rounds {
            for (workload, limit) in [("first frame", ["-frames:v", "1"]), ("first 10 s", ["-t", "10"])] {
                let alone = bench.serve("end", at: "/b\(round)\(workload.prefix(7).filter(\.isLetter))a/")
                figures["\(workload) alone", default: []].append(
                    try await bench.play(bench.proxyURL(alone, "end.mp4"), limit))
                let queue = (0..<5).map {
                    bench.serve("fast", at: "/b\(round)\(workload.prefix(7).filter(\.isLetter))q\($0)/")
                }
                try await bench.preload(queue.map { bench.relayURL($0, "fast.mp4") }, seconds: 30, waiting: false)
                try await bench.waitFor { bench.requests(queue[0], "fast") > 0 }
                let played = bench.serve("end", at: "/b\(round)\(workload.prefix(7).filter(\.isLetter))p/")
                figures["\(workload) beside", default: []].append(
                    try await bench.play(bench.proxyURL(played, "end.mp4"), limit))
                try await bench.preload([], seconds: seconds, waiting: false)
                // The emptied queue's items stop at their next boundary: the next round starts after.
                try await bench.waitFor { try await bench.downloadsInFlight() == 0 }
                try await bench.relay.drain()
            }
        }
        print(
            "  A cold play of a 30 s MP4 (moov at the end) through the proxy, alone and beside five preloads of other files on the same link:"
        )
        for workload in ["first frame", "first 10 s"] {
            let alone = median(figures["\(workload) alone"]!)
            let beside = median(figures["\(workload) beside"]!)
            print(
                String(format: "    %@: alone %.0f ms, beside %.0f ms: %.2fx", workload, alone, beside, beside / alone))
        }
    }

    /// A cold play alone, and beside a running pinned download of a 120 MiB file (cancelled after).
    private func besideAPin(_ bench: Bench) async throws {
        print("Over \(link.description), \(rounds) rounds, medians (ffmpeg decoding to null):")
        var figures: [String: [Double]] = [:]
        for round in 0..<rounds {
            for (workload, limit) in [("first frame", ["-frames:v", "1"]), ("first 10 s", ["-t", "10"])] {
                let tag = "/p\(round)\(workload.prefix(7).filter(\.isLetter))"
                let alone = bench.serve("end", at: tag + "a/")
                figures["\(workload) alone", default: []].append(
                    try await bench.play(bench.proxyURL(alone, "end.mp4"), limit))
                bench.origin.serve(.generated(length: 120 << 20, seed: UInt64(round + 7)), at: tag + "/big.bin")
                let big = "http://127.0.0.1:\(bench.relay.port)\(tag)/big.bin"
                try await bench.admin(
                    "pin", ["target=" + big.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!])
                try await bench.waitFor { bench.origin.bodyBytesSent(tag + "/big.bin") > 1 << 20 }
                let played = bench.serve("end", at: tag + "p/")
                figures["\(workload) beside", default: []].append(
                    try await bench.play(bench.proxyURL(played, "end.mp4"), limit))
                try await bench.admin(
                    "cancel", ["job=" + big.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!])
                try await bench.waitFor { try await bench.downloadsInFlight() == 0 }
                try await bench.relay.drain()
                // The floors: curl reading another big file over the link, stopped the instant
                // the play starts (killed: only its bytes already on the link go on; or
                // stopped from reading, as a paused transfer is: the origin goes on sending
                // until the receiver's socket buffer is full).
                for (floor, signal) in [("killed", SIGKILL), ("stopped", SIGSTOP)] {
                    let path = tag + floor + "/big.bin"
                    bench.origin.serve(.generated(length: 120 << 20, seed: UInt64(round + 7)), at: path)
                    let curl = try SpawnedProcess(
                        "curl", ["-s", "-o", "/dev/null", "http://127.0.0.1:\(bench.relay.port)\(path)"],
                        searchingPath: true)
                    try await bench.waitFor { bench.origin.bodyBytesSent(path) > 1 << 20 }
                    let play = bench.serve("end", at: tag + floor.prefix(1) + "/")
                    kill(curl.processIdentifier, signal)
                    figures["\(workload) \(floor)", default: []].append(
                        try await bench.play(bench.proxyURL(play, "end.mp4"), limit, draining: false))
                    kill(curl.processIdentifier, SIGKILL)
                    await curl.exited()
                    try await bench.relay.drain()
                }
            }
        }
        print(
            "  A cold play of a 30 s MP4 (moov at the end) through the proxy, alone and beside a pinned download on the same link:"
        )
        for workload in ["first frame", "first 10 s"] {
            let alone = median(figures["\(workload) alone"]!)
            let beside = median(figures["\(workload) beside"]!)
            let killed = median(figures["\(workload) killed"]!)
            let stopped = median(figures["\(workload) stopped"]!)
            print(
                String(
                    format:
                        "    %@: alone %.0f ms, beside %.0f ms: %.2fx; beside a download killed as the play starts %.2fx, stopped from reading %.2fx",
                    workload, alone, beside, beside / alone, killed / alone, stopped / alone))
        }
        try await pinSpeed(bench)
    }

    /// What fetching a pinned file in pieces costs its own speed: a 24 MiB pin alone through the
    /// server against curl reading the same bytes over the link in one request (the floor),
    /// taking turns which goes first.
    private func pinSpeed(_ bench: Bench) async throws {
        let size: Int64 = 24 << 20
        var pinned: [Double] = []
        var direct: [Double] = []
        for round in 0..<rounds {
            bench.origin.serve(.generated(length: size, seed: UInt64(round + 40)), at: "/s\(round)/pin.bin")
            bench.origin.serve(.generated(length: size, seed: UInt64(round + 40)), at: "/s\(round)/direct.bin")
            for pinFirst in round % 2 == 0 ? [true, false] : [false, true] {
                try await bench.relay.drain()
                let start = ContinuousClock.now
                if pinFirst {
                    let url = "http://127.0.0.1:\(bench.relay.port)/s\(round)/pin.bin"
                    try await bench.admin(
                        "pin", ["target=" + url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!])
                    try await bench.waitFor {
                        guard bench.origin.bodyBytesSent("/s\(round)/pin.bin") >= size else { return false }
                        return try await bench.downloadsInFlight() == 0
                    }
                    pinned.append((ContinuousClock.now - start).seconds * 1000)
                } else {
                    let read = try await ChildProcess.run([
                        "curl", "-s", "-f", "-o", "/dev/null", bench.relayURL("/s\(round)/", "direct.bin"),
                    ])
                    guard read.status == 0 else { throw ValidationError("curl failed: \(read.error)") }
                    direct.append((ContinuousClock.now - start).seconds * 1000)
                }
            }
        }
        let (pin, floor) = (median(pinned), median(direct))
        let what = "  A 24 MiB pin alone, in pieces of 512 KiB (the next asked for 384 KiB before the end)"
        print(
            String(
                format: "%@: %.0f ms; curl over the link in one request: %.0f ms: %.2fx", what, pin, floor, pin / floor)
        )
    }

    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    /// The origin, the link and the server one run shares.
    struct Bench {
        let origin: TestOrigin
        let relay: LinkRelay
        let proxyPort: Int
        let files: [String: [String: [UInt8]]]
        /// The run's folder, where ffmpeg made each shape's files.
        let directory: URL

        /// Serves the files of `shape` under `folder`; returns it.
        func serve(_ shape: String, at folder: String) -> String {
            StartupBenchCommand.serve(files[shape]!, at: folder, on: origin)
            return folder
        }

        func relayURL(_ folder: String, _ file: String) -> String { "http://127.0.0.1:\(relay.port)\(folder)\(file)" }

        func proxyURL(_ folder: String, _ file: String) -> String {
            "http://127.0.0.1:\(proxyPort)/?url=" + relayURL(folder, file).addingPercentEncoding(
                withAllowedCharacters: .alphanumerics)!
        }

        func requests(_ folder: String, _ shape: String, suffix: String = "") -> Int {
            files[shape]!.keys.filter { $0.hasSuffix(suffix) }.map { origin.requests(folder + $0).count }.reduce(0, +)
        }

        /// Every request for the files of `shape` under `folder`, as "METHOD name range #n" (n
        /// counts requests alike, so a repeated one stays apart).
        func requestLog(_ folder: String, _ shape: String) -> [String] {
            files[shape]!.keys.sorted().flatMap { name in
                var seen: [String: Int] = [:]
                return origin.requests(folder + name).map { request in
                    let text = "\(request.method) \(name) \(request.range ?? "whole")"
                    seen[text, default: 0] += 1
                    return text + " #\(seen[text]!)"
                }
            }
        }

        /// The shape's file on disk, where ffmpeg made it.
        func localFile(_ shape: StartupBenchCommand.Shape) -> String {
            directory.appendingPathComponent(shape.folder).appendingPathComponent(shape.file).path
        }

        func bodyBytes(_ folder: String, _ shape: String) -> Int64 {
            files[shape]!.keys.map { origin.bodyBytesSent(folder + $0) }.reduce(0, +)
        }

        /// ffmpeg decoding `url` with `limit`, in milliseconds, once the link is idle (if `draining`).
        func play(_ url: String, _ limit: [String], draining: Bool = true) async throws -> Double {
            if draining { try await relay.drain() }
            let start = ContinuousClock.now
            let decoded = try await ChildProcess.run(
                ["ffmpeg", "-nostdin", "-v", "error", "-i", url] + limit + ["-f", "null", "-"])
            guard decoded.status == 0 else { throw ValidationError("ffmpeg failed on \(url): \(decoded.error)") }
            return (ContinuousClock.now - start).seconds * 1000
        }

        /// Replaces the server's preload queue; waits until every item ended, unless not `waiting`.
        func preload(_ urls: [String], seconds: Double, waiting: Bool = true) async throws {
            let query =
                urls.map { "target=" + $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! } + [
                    "seconds=\(seconds)"
                ]
            let method = urls.isEmpty ? "DELETE" : "POST"
            let sent = try await ChildProcess.run([
                "curl", "-s", "-f", "-X", method, "-H", "X-MediaCache-Admin: 1",
                "http://127.0.0.1:\(proxyPort)/_mediacache/preload?" + query.joined(separator: "&"),
            ])
            guard sent.status == 0 else { throw ValidationError("The preload was refused: \(sent.error)") }
            if waiting {
                try await waitFor { try await queue().allSatisfy { $0.state != .queued && $0.state != .preloading } }
            }
        }

        /// `POST /_mediacache/<name>?<query>` as an admin.
        func admin(_ name: String, _ query: [String]) async throws {
            let sent = try await ChildProcess.run([
                "curl", "-s", "-f", "-X", "POST", "-H", "X-MediaCache-Admin: 1",
                "http://127.0.0.1:\(proxyPort)/_mediacache/\(name)?" + query.joined(separator: "&"),
            ])
            guard sent.status == 0 else {
                throw ValidationError("POST /_mediacache/\(name) was refused: \(sent.error)")
            }
        }

        /// The server's origin downloads under way.
        func downloadsInFlight() async throws -> Int {
            let answer = try await ChildProcess.run([
                "curl", "-s", "-f", "http://127.0.0.1:\(proxyPort)/_mediacache/stats",
            ])
            let object = try JSONSerialization.jsonObject(with: answer.output) as? [String: Any]
            guard let count = object?["downloadsInFlight"] as? Int else {
                throw ValidationError("The server's stats name no downloadsInFlight.")
            }
            return count
        }

        func queue() async throws -> [PreloadItem.Status] {
            let answer = try await ChildProcess.run([
                "curl", "-s", "-f", "http://127.0.0.1:\(proxyPort)/_mediacache/preload",
            ])
            return try JSONDecoder().decode([PreloadItem.Status].self, from: answer.output)
        }

        /// Looks every 10 ms until `condition` holds (a minute at most).
        func waitFor(_ condition: () async throws -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while try await !condition() {
                guard ContinuousClock.now < deadline else {
                    throw ValidationError("Waited a minute for the preload queue.")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }
}
