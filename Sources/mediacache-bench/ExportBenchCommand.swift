// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport

/// A long fMP4 HLS asset (video and a separate audio rendition) served by nginx, pinned by
/// `mediacache pin`, then written as one file by the engine in this process: peak memory and
/// speed, beside copying the same segment files (the floor: the bytes read and written once).
struct ExportBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Peak memory and speed of `export --file` on a long fMP4 HLS asset with separate audio.",
        discussion: """
            The init sections come from ffmpeg (a 2 s clip); the segments are made here: video segments of \
            --segment MiB (25 frames a second, 2 s each) and audio segments of 64 KiB, until the asset \
            holds --size MiB. nginx serves them, `mediacache pin` (this build's) stores them, and the \
            export runs in this process, which reports its peak resident memory (VmHWM) before and \
            after. Needs ffmpeg and nginx.
            """
    )

    @Option(help: "The asset's size in MiB.")
    var size: Int = 2048

    @Option(help: "Each video segment's size in MiB.")
    var segment: Int = 8

    @Option(help: "A scratch folder (default: a new temporary folder, removed afterwards).")
    var directory: String?

    func validate() throws {
        guard size > 0, segment > 0, segment <= size else {
            throw ValidationError("--size and --segment: 0 < segment ≤ size.")
        }
    }

    func run() async throws {
        let root = URL(fileURLWithPath: directory ?? NSTemporaryDirectory()).appendingPathComponent(
            "mediacache-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let www = root.appendingPathComponent("origin/www/hls")
        try FileManager.default.createDirectory(at: www, withIntermediateDirectories: true)
        let count = max(1, size / segment)
        try await Self.makeAsset(in: www, segments: count, segmentBytes: segment << 20)
        let nginx = try await NginxOrigin.start(in: root.appendingPathComponent("origin"))
        defer { Task { await nginx.stop() } }
        let url = URL(string: "\(nginx.url)/hls/master.m3u8")!
        let cache = root.appendingPathComponent("cache")
        let mediacache = try ChildProcess.executable(named: "mediacache")
        // A server whose quotas hold the asset pins it; the export then opens the folder alone.
        let room = "\(size * 2 + 512)M"
        try await withServe(cacheDirectory: cache, arguments: ["--max-size", room, "--max-pinned-size", room]) { _ in
            let pinned = try await ChildProcess.run([
                mediacache.path, "pin", "--cache-dir", cache.path, url.absoluteString,
            ])
            guard pinned.status == 0 else { throw ValidationError("pin failed: \(pinned.error)") }
        }
        await nginx.stop()

        let before = ProcessMemory.peakResidentBytes() ?? 0
        let store = try await CacheStore.open(directory: cache)
        let fetcher = HTTPOriginFetcher()
        let reader = CachingReader(store: store, fetcher: fetcher)
        let output = root.appendingPathComponent("film.mp4")
        let start = ContinuousClock.now
        let summary = try await reader.exportFile(url, to: output)
        let seconds = (ContinuousClock.now - start).seconds
        let peak = ProcessMemory.peakResidentBytes() ?? 0
        try await store.close()
        try await fetcher.shutdown()

        // The floor: the same segment files read and written once, in 1 MiB pieces.
        let floorStart = ContinuousClock.now
        let copied = try Self.copyAll(www, to: root.appendingPathComponent("copy.bin"))
        let floorSeconds = (ContinuousClock.now - floorStart).seconds
        let mib = Double(summary.bytes) / 1_048_576
        print(
            String(format: "asset: %d video segments of %d MiB and their audio, %.0f MiB written", count, segment, mib))
        print(
            String(
                format:
                    "export --file: %.2f s, %.0f MiB/s; the floor (copying the segment files): %.2f s, %.0f MiB/s (%.2fx)",
                seconds, mib / seconds, floorSeconds, Double(copied) / 1_048_576 / floorSeconds,
                seconds / floorSeconds))
        print(
            String(
                format: "peak memory (VmHWM): %.1f MiB (%.1f MiB before the export)", Double(peak) / 1_048_576,
                Double(before) / 1_048_576))
    }

    /// The asset in `folder`: `master.m3u8`, video `v.m3u8` with `init_0.mp4` and `segments`
    /// segments of about `segmentBytes`, audio `a.m3u8` with `init_1.mp4` and a segment per video one.
    static func makeAsset(in folder: URL, segments: Int, segmentBytes: Int) async throws {
        let made = try await ChildProcess.run([
            "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi",
            "-i", "sine", "-t", "2", "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-c:a",
            "aac", "-f", "hls", "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4", "-var_stream_map",
            "v:0,agroup:aud a:0,agroup:aud,default:yes", "-master_pl_name", "clip.m3u8", "-hls_segment_filename",
            folder.path + "/clip%v_%d.m4s", folder.path + "/clip%v.m3u8",
        ])
        guard made.status == 0 else { throw ValidationError("ffmpeg failed: \(made.error)") }
        try """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="audio",DEFAULT=YES,URI="a.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=\(segmentBytes * 4),RESOLUTION=320x240,AUDIO="aud"
        v.m3u8

        """.write(to: folder.appendingPathComponent("master.m3u8"), atomically: true, encoding: .utf8)
        for (track, name, bytes, timescale, samples) in [
            (0, "v", segmentBytes, UInt32(12_800), 50), (1, "a", 64 << 10, UInt32(44_100), 86),
        ] {
            var playlist = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            playlist += "#EXT-X-MAP:URI=\"init_\(track).mp4\"\n"
            let each = UInt32(timescale * 2) / UInt32(samples)
            for index in 0..<segments {
                let file = folder.appendingPathComponent("\(name)\(index).m4s")
                try writeSegment(
                    file, sequence: UInt32(index + 1), time: UInt64(index) * UInt64(each) * UInt64(samples),
                    samples: samples, sampleDuration: each, bytes: bytes)
                playlist += "#EXTINF:2.0,\n\(name)\(index).m4s\n"
            }
            try (playlist + "#EXT-X-ENDLIST\n").write(
                to: folder.appendingPathComponent("\(name).m3u8"), atomically: true, encoding: .utf8)
        }
    }

    /// A fragment (`moof` with one `traf`, `mdat`) of `samples` samples filling about `bytes`,
    /// its data written in 1 MiB pieces.
    static func writeSegment(
        _ file: URL, sequence: UInt32, time: UInt64, samples: Int, sampleDuration: UInt32, bytes: Int
    ) throws {
        func u32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        func box(_ type: String, _ body: [UInt8]) -> [UInt8] { u32(UInt32(8 + body.count)) + Array(type.utf8) + body }
        let sampleSize = max(1, bytes / samples)
        var trun = u32(0x301) + u32(UInt32(samples)) + u32(0)
        for _ in 0..<samples { trun += u32(sampleDuration) + u32(UInt32(sampleSize)) }
        let tfdt = [1, 0, 0, 0] + u32(UInt32(time >> 32)) + u32(UInt32(time & 0xFFFF_FFFF))
        var moof = box(
            "moof",
            box("mfhd", u32(0) + u32(sequence))
                + box("traf", box("tfhd", u32(0x02_0000) + u32(1)) + box("tfdt", tfdt) + box("trun", trun)))
        // The run's data offset: from the moof's start to the mdat's body.
        let offset = moof.count + 8
        let at = moof.count - samples * 8 - 4
        moof.replaceSubrange(at..<(at + 4), with: u32(UInt32(offset)))
        FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        let data = sampleSize * samples
        try handle.write(contentsOf: moof + u32(UInt32(8 + data)) + Array("mdat".utf8))
        var piece = [UInt8](repeating: 0, count: 1 << 20)
        var left = data
        var seed = UInt64(sequence) &* 0x9E37_79B9_7F4A_7C15
        while left > 0 {
            let count = min(left, piece.count)
            for index in stride(from: 0, to: count, by: 8) {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1
                piece[index] = UInt8(truncatingIfNeeded: seed >> 56)
            }
            try handle.write(contentsOf: piece[..<count])
            left -= count
        }
    }

    /// Copies every `.m4s` of `folder` into `file` in 1 MiB pieces; returns the bytes copied.
    static func copyAll(_ folder: URL, to file: URL) throws -> Int64 {
        FileManager.default.createFile(atPath: file.path, contents: nil)
        let output = try FileHandle(forWritingTo: file)
        defer { try? output.close() }
        var total: Int64 = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        where name.hasSuffix(".m4s") {
            let input = try FileHandle(forReadingFrom: folder.appendingPathComponent(name))
            defer { try? input.close() }
            while let piece = try input.read(upToCount: 1 << 20), !piece.isEmpty {
                try output.write(contentsOf: piece)
                total += Int64(piece.count)
            }
        }
        try output.synchronize()
        return total
    }
}
