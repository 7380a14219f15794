// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport
import NIOCore

/// Start-up of a real decoder over a simulated far link: ffmpeg opens a file and decodes its
/// first frame, its first 10 s, or all of it, going direct to the origin behind the link, through
/// `mediacache serve` cold (nothing cached) and hot (all cached). The three paths run in the
/// same round, so noise falls on all.
struct StartupBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "startup",
        abstract:
            "ffmpeg's first frame, first 10 s and whole play over a simulated link: direct vs through mediacache serve, cold and hot.",
        discussion: """
            The same decode of the file on disk is timed beside them: the floor, what a hot play cannot go under. \
            The in-process test origin serves what ffmpeg makes at the start (an MP4 with its moov at the end, an MP4 made \
            with +faststart, an MP3, HLS and DASH streams of 2 s segments) behind a link relay (--rtt-ms round trip, one more round trip per new connection, --mbps \
            each way). Each round serves the files at new paths, so every cold play is cold. Prints the median of each figure \
            and the ratios to direct, the link floor (the bytes the link delivered to the direct play at its bandwidth, after two \
            round trips), and the origin requests (404s included) and connections of a direct and a cold play.
            """
    )

    @Option(help: "Rounds; the figures are medians over them.")
    var rounds = 3

    @OptionGroup var link: LinkOptions

    @Option(
        name: .customLong("serve-argument"),
        help: "An argument for mediacache serve (repeat; e.g. --serve-argument=--read-ahead-segments=0).")
    var serveArguments: [String] = []

    func validate() throws {
        guard (1...100).contains(rounds) else { throw ValidationError("--rounds must be 1...100.") }
        guard ChildProcess.toolExists("ffmpeg") else {
            throw ValidationError("ffmpeg is not installed (apt-get install ffmpeg).")
        }
    }

    struct Shape {
        var name: String
        /// The folder ffmpeg writes the shape's files into, and the round's path prefix serves.
        var folder: String
        /// The file ffmpeg opens: the media file, or an HLS stream's playlist or a DASH
        /// manifest (its segments are written beside it).
        var file: String
        var make: [String]
        var firstFrame: [String]
    }

    static let shapes = [
        Shape(
            name: "MP4, moov at the end", folder: "end", file: "end.mp4",
            make: [
                "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440", "-t",
                "20",
                "-c:v", "libx264", "-preset", "veryfast", "-b:v", "3M", "-c:a", "aac",
            ],
            firstFrame: ["-frames:v", "1"]),
        Shape(
            name: "MP4, faststart", folder: "fast", file: "fast.mp4",
            make: [
                "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440", "-t",
                "20",
                "-c:v", "libx264", "-preset", "veryfast", "-b:v", "3M", "-c:a", "aac", "-movflags", "+faststart",
            ],
            firstFrame: ["-frames:v", "1"]),
        Shape(
            name: "MP3", folder: "mp3", file: "song.mp3",
            make: ["-f", "lavfi", "-i", "sine=frequency=440", "-t", "30", "-c:a", "libmp3lame", "-b:a", "192k"],
            firstFrame: ["-frames:a", "1"]),
        Shape(
            name: "HLS, 2 s segments", folder: "hls", file: "index.m3u8",
            make: streamEncoding + ["-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod"],
            firstFrame: ["-frames:v", "1"]),
        Shape(
            name: "DASH, 2 s segments", folder: "dash", file: "m.mpd",
            make: streamEncoding + ["-f", "dash", "-seg_duration", "2", "-use_timeline", "0"],
            firstFrame: ["-frames:v", "1"]),
    ]

    /// The streams' 20 s of 720p video and a tone, a key frame every 2 s (where segments cut).
    static let streamEncoding = [
        "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440", "-t", "20",
        "-c:v", "libx264", "-preset", "veryfast", "-b:v", "3M", "-g", "60", "-c:a", "aac",
    ]

    /// What each play of a shape decodes: its first frame, its first 10 s, all of it (with the
    /// tag that keeps each workload's paths apart).
    static func workloads(_ shape: Shape) -> [(name: String, limit: [String], tag: String)] {
        [("first frame", shape.firstFrame, "f"), ("first 10 s", ["-t", "10"], "t"), ("whole play", [], "w")]
    }

    /// The media type the origin gives a file of the shapes.
    static func mediaType(of name: String) -> String {
        switch (name as NSString).pathExtension {
        case "mp4": "video/mp4"
        case "mp3": "audio/mpeg"
        case "m3u8": "application/vnd.apple.mpegurl"
        case "ts": "video/mp2t"
        case "mpd": "application/dash+xml"
        case "m4s": "video/iso.segment"
        default: "application/octet-stream"
        }
    }

    /// Has ffmpeg make each shape in a folder of its own under `directory`; each shape's files
    /// by name (a media file, or a playlist and its segments).
    static func make(_ shapes: [Shape], in directory: URL) async throws -> [String: [String: [UInt8]]] {
        var files: [String: [String: [UInt8]]] = [:]
        for shape in shapes {
            let folder = directory.appendingPathComponent(shape.folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let made = try await ChildProcess.run(
                ["ffmpeg", "-nostdin", "-v", "error", "-y"] + shape.make + [
                    folder.appendingPathComponent(shape.file).path
                ])
            guard made.status == 0 else { throw ValidationError("ffmpeg could not make \(shape.file): \(made.error)") }
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
                files[shape.folder, default: [:]][name] = Array(
                    try Data(contentsOf: folder.appendingPathComponent(name)))
            }
        }
        return files
    }

    /// Serves `files` under `folder` (each with its type and an `ETag`).
    static func serve(_ files: [String: [UInt8]], at folder: String, on origin: TestOrigin) {
        for (name, body) in files {
            var resource = TestOrigin.Resource(body: .bytes(body), mimeType: mediaType(of: name))
            resource.etag = "\"\(name)\""
            origin.serve(resource, at: folder + name)
        }
    }

    func run() async throws {
        try await withTemporaryDirectory { directory in
            let files = try await Self.make(Self.shapes, in: directory)
            let origin = try await TestOrigin.start()
            let relay = try await LinkRelay.start(
                to: origin.port, shape: link.shape)
            try await withServe(cacheDirectory: directory.appendingPathComponent("cache"), arguments: serveArguments) {
                port in
                print("Start-up over \(link.description), \(rounds) rounds, medians (ffmpeg decoding to null):")
                for shape in Self.shapes {
                    try await measure(
                        shape, files: files[shape.folder]!,
                        local: directory.appendingPathComponent(shape.folder).appendingPathComponent(shape.file).path,
                        origin: origin, relay: relay, proxyPort: port)
                }
            }
            await relay.stop()
            try await origin.shutdown()
        }
    }

    /// One shape's rounds: each workload direct, cold and hot.
    /// - Parameter local: the file on disk, decoded too: the floor, what decoding alone costs.
    private func measure(
        _ shape: Shape, files: [String: [UInt8]], local: String, origin: TestOrigin, relay: LinkRelay, proxyPort: Int
    ) async throws {
        let relayPort = relay.port
        var times: [String: [Double]] = [:]
        var requests: [String: [Int]] = [:]
        var connections: [String: [Int]] = [:]
        for round in 0..<rounds {
            for (workload, limit, tag) in Self.workloads(shape) {
                let directFolder = "/r\(round)\(tag)d/"
                let coldFolder = "/r\(round)\(tag)c/"
                for folder in [directFolder, coldFolder] { Self.serve(files, at: folder, on: origin) }
                /// The origin requests under `folder` so far: for the shape's files, and for
                /// paths the origin does not have (a player, or a read-ahead, asking past a
                /// stream's last segment).
                func originRequests(_ folder: String) -> Int {
                    files.keys.map { origin.requests(folder + $0).count }.reduce(0, +)
                        + origin.notFoundPaths.filter { $0.hasPrefix(folder) }.count
                }
                var coldConnections = 0
                let direct = "http://127.0.0.1:\(relayPort)\(directFolder)\(shape.file)"
                let proxied =
                    "http://127.0.0.1:\(proxyPort)/?url="
                    + "http://127.0.0.1:\(relayPort)\(coldFolder)\(shape.file)".addingPercentEncoding(
                        withAllowedCharacters: .alphanumerics)!
                for (path, url) in [("direct", direct), ("cold", proxied), ("hot", proxied), ("file", local)] {
                    try await relay.drain()
                    let carried = relay.bytesToClients
                    let connectionsBefore = origin.connectionsAccepted
                    let start = ContinuousClock.now
                    let decoded = try await ChildProcess.run(
                        ["ffmpeg", "-nostdin", "-v", "error", "-i", url] + limit + ["-f", "null", "-"])
                    let elapsed = (ContinuousClock.now - start).seconds * 1000
                    guard decoded.status == 0 else {
                        throw ValidationError("ffmpeg failed on \(url): \(decoded.error)")
                    }
                    times["\(workload) \(path)", default: []].append(elapsed)
                    // The link's floor: the bytes the link delivered to the direct play
                    // before it hung up, at the link's bandwidth, after a handshake and a
                    // request (two round trips). A proxy on the player's side of the link that
                    // had to fetch the same bytes could not deliver them sooner.
                    if path == "direct" {
                        let bytes = Double(relay.bytesToClients - carried)
                        times["\(workload) floor", default: []].append(
                            bytes / Double(link.bytesPerSecond) * 1000 + 2 * Double(link.roundTrip))
                    }
                    // The cold play's own requests, before the hot play (which may read
                    // further than the cold one stored) adds any.
                    if path == "cold" { requests["\(workload) cold", default: []].append(originRequests(coldFolder)) }
                    // The origin connections the play opened (each through the relay, so each
                    // paid the link's handshake). A hot play may revalidate on one more.
                    let opened = origin.connectionsAccepted - connectionsBefore
                    if path == "direct" { connections["\(workload) direct", default: []].append(opened) }
                    if path == "cold" { coldConnections = opened }
                }
                requests["\(workload) direct", default: []].append(originRequests(directFolder))
                connections["\(workload) cold", default: []].append(coldConnections)
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        print("  \(shape.name) (\(files.values.map(\.count).reduce(0, +) / 1024) KiB in \(files.count) files):")
        for (workload, _, _) in Self.workloads(shape) {
            let direct = median(times["\(workload) direct"]!)
            let cold = median(times["\(workload) cold"]!)
            let hot = median(times["\(workload) hot"]!)
            let file = median(times["\(workload) file"]!)
            let floor = median(times["\(workload) floor"]!)
            func list(_ counts: [String: [Int]], _ path: String) -> String {
                counts["\(workload) \(path)"]!.map(String.init).joined(separator: ",")
            }
            let origins =
                "origin requests direct/cold \(list(requests, "direct")) / \(list(requests, "cold"))"
                + "   connections \(list(connections, "direct")) / \(list(connections, "cold"))"
            print(
                "    " + workload.padding(toLength: 12, withPad: " ", startingAt: 0)
                    + String(
                        format: "direct %7.0f ms   cold %.2fx   hot %.2fx   local file %.2fx   link floor %.2fx   ",
                        direct, cold / direct, hot / direct,
                        file / direct, floor / direct)
                    + origins)
        }
    }
}
