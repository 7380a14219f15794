// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheTestSupport

/// Parsing and rewriting a long HLS playlist, as the proxy does for each playlist it serves.
struct HLSBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hls",
        abstract: "Parse and rewrite an HLS media playlist of many segments; prints ms per playlist and peak memory."
    )

    @Option(help: "How many segments the playlist names.")
    var segments: Int = 10_000

    @Option(help: "How many times to parse and rewrite it (the median is reported).")
    var rounds: Int = 21

    func validate() throws {
        guard (1...1_000_000).contains(segments), (1...1000).contains(rounds) else {
            throw ValidationError("--segments must be 1...1000000 and --rounds 1...1000.")
        }
    }

    func run() throws {
        // Relative, root-relative, `../` and absolute URIs, a key every 100 segments, as a
        // packager writes them.
        var text =
            "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-MAP:URI=\"init.mp4\"\n"
        for index in 0..<segments {
            if index % 100 == 0 {
                text +=
                    "#EXT-X-KEY:METHOD=AES-128,URI=\"../keys/\(index / 100).key\",IV=0x\(String(repeating: "0", count: 24))\(String(format: "%08X", index))\n"
            }
            text += "#EXTINF:6.006,\n"
            switch index % 4 {
            case 0: text += "seg\(index).m4s\n"
            case 1: text += "/video/720p/seg\(index).m4s?token=abc\n"
            case 2: text += "../720p/seg\(index).m4s\n"
            default: text += "https://cdn.example/video/720p/seg\(index).m4s\n"
            }
        }
        text += "#EXT-X-ENDLIST\n"
        let bytes = Array(text.utf8)
        let base = URL(string: "https://cdn.example/video/720p/index.m3u8?token=abc")!
        let proxy = "http://127.0.0.1:8080"
        var times: [Double] = []
        var outputBytes = 0
        for _ in 0..<rounds {
            let start = ContinuousClock.now
            let playlist = try HLSPlaylist(parsing: bytes)
            let output = playlist.rewritten(base: base) { url, _ in
                proxy + "/" + url.lastPathComponent + "?url=" + HLSPlaylist.percentEncoded(url.absoluteString)
            }
            times.append((ContinuousClock.now - start).seconds * 1000)
            outputBytes = output.utf8.count
            guard playlist.segments.count == segments else {
                throw ValidationError("parsed \(playlist.segments.count) segments of \(segments)")
            }
        }
        times.sort()
        print(
            String(
                format:
                    "%d segments, %.0f KiB in, %.0f KiB out: parse + rewrite median %.1f ms (min %.1f, max %.1f) over %d rounds",
                segments, Double(bytes.count) / 1024, Double(outputBytes) / 1024, times[times.count / 2], times[0],
                times[times.count - 1], rounds))
        if let peak = ProcessMemory.peakResidentBytes() {
            print(String(format: "peak memory (VmHWM): %.1f MiB", Double(peak) / 1_048_576))
        }
    }
}
