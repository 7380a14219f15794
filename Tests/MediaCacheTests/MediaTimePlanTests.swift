// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// The time-to-bytes mapping against ffprobe's packet table, on files ffmpeg makes: both `moov`
/// positions, fragmented with and without `sidx`, audio-only MP4, MP3 (CBR and VBR), ADTS, WAV.
@Suite(
    .stallLimit,
    .enabled(
        if: ChildProcess.toolExists("ffmpeg") && ChildProcess.toolExists("ffprobe"), "ffmpeg is installed by .ci/run"))
struct MediaTimePlanTests {
    /// One packet as ffprobe lists it.
    struct Packet {
        var stream: Int
        var time: Double
        var range: ByteRange
    }

    static func packets(_ path: String) async throws -> [Packet] {
        let result = try await ChildProcess.run([
            "ffprobe", "-v", "error", "-show_entries", "packet=stream_index,pts_time,dts_time,pos,size", "-of",
            "compact=p=0", path,
        ])
        #expect(result.status == 0, "ffprobe: \(result.error)")
        return String(decoding: result.output, as: UTF8.self).split(separator: "\n").compactMap { line in
            var fields: [String: String] = [:]
            for pair in line.split(separator: "|") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
            }
            guard let stream = fields["stream_index"].flatMap({ Int($0) }),
                let pos = fields["pos"].flatMap({ Int64($0) }),
                let size = fields["size"].flatMap({ Int64($0) }),
                let time = Double(fields["pts_time"] ?? "") ?? Double(fields["dts_time"] ?? "")
            else { return nil }
            return Packet(stream: stream, time: time, range: ByteRange(offset: pos, length: size))
        }
    }

    static func ffmpeg(_ arguments: [String]) async throws {
        let result = try await ChildProcess.run(["ffmpeg", "-v", "error", "-y", "-threads", "1"] + arguments)
        #expect(result.status == 0, "ffmpeg \(arguments): \(result.error)")
    }

    /// Plans `seconds` of `data` reading from memory; returns the plan and the ranges read.
    static func plan(_ data: [UInt8], seconds: Double) async throws -> (MediaTimePlan, [ByteRange]) {
        let reads = Mutex<[ByteRange]>([])
        let plan = try await MediaTimePlanner.plan(seconds: seconds, length: Int64(data.count)) { range in
            reads.withLock { $0.append(range) }
            #expect(range.upperBound <= Int64(data.count), "read past the end: \(range)")
            return Array(data[Int(range.lowerBound)..<Int(range.upperBound)])
        }
        return (plan, reads.withLock { $0 })
    }

    /// Checks the plan of `seconds` of the file at `path`: it holds every packet shown before
    /// `seconds`, and no more than the packets before `seconds + slack` and the file's
    /// non-packet bytes (headers, index) need; returns the plan.
    @discardableResult
    static func check(_ path: String, seconds: Double, shape: MediaShape, slack: Double, maxReads: Int) async throws
        -> MediaTimePlan
    {
        let data = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let packets = try await packets(path)
        #expect(packets.count > 10, "\(path): ffprobe listed \(packets.count) packets")
        let (plan, reads) = try await plan(data, seconds: seconds)
        #expect(plan.shape == shape, "\(path)")
        #expect(reads.count <= maxReads, "\(path): \(reads.count) reads: \(reads)")
        let planned = SpanSet(plan.ranges)
        for packet in packets where packet.time < seconds {
            #expect(
                planned.contains(packet.range),
                "\(path): packet of stream \(packet.stream) at \(packet.time) s, \(packet.range), not planned")
        }
        let packetBytes = packets.reduce(Int64(0)) { $0 + $1.range.length }
        let neededLater = packets.filter { $0.time < seconds + slack }.reduce(Int64(0)) { $0 + $1.range.length }
        let allowance = neededLater + (Int64(data.count) - packetBytes) + MediaTimePlanner.bridgedGap
        #expect(
            plan.byteCount <= allowance,
            "\(path): planned \(plan.byteCount) of \(data.count) bytes, allowed \(allowance)")
        if seconds * 2 < packets.map(\.time).max() ?? 0 {
            #expect(
                plan.byteCount < Int64(data.count) * 6 / 10, "\(path): planned \(plan.byteCount) of \(data.count) bytes"
            )
        }
        return plan
    }

    static let video = [
        "-f", "lavfi", "-i", "testsrc=duration=20:size=320x240:rate=25", "-f", "lavfi", "-i",
        "sine=frequency=330:duration=20",
        "-c:v", "libx264", "-preset", "veryfast", "-g", "25", "-c:a", "aac", "-shortest",
    ]

    @Test func mp4WithItsMoovAtTheEndOrFirst() async throws {
        try await withTemporaryDirectory { folder in
            let end = folder.appendingPathComponent("end.mp4").path
            let fast = folder.appendingPathComponent("fast.mp4").path
            try await Self.ffmpeg(Self.video + [end])
            try await Self.ffmpeg(["-i", end, "-c", "copy", "-movflags", "+faststart", fast])
            // The head, the moov past mdat (with the rest of the file when small), nothing more.
            let atEnd = try await Self.check(end, seconds: 3, shape: .mp4, slack: 0.5, maxReads: 2)
            let first = try await Self.check(fast, seconds: 3, shape: .mp4, slack: 0.5, maxReads: 2)
            #expect(first.byteCount <= atEnd.byteCount + 4096)
            for seconds in [0.5, 7, 19.5] {
                try await Self.check(end, seconds: seconds, shape: .mp4, slack: 0.5, maxReads: 2)
            }
        }
    }

    @Test func fragmentedMP4WithAndWithoutASegmentIndex() async throws {
        try await withTemporaryDirectory { folder in
            let source = folder.appendingPathComponent("source.mp4").path
            let fragments = folder.appendingPathComponent("frag.mp4").path
            let indexed = folder.appendingPathComponent("sidx.mp4").path
            try await Self.ffmpeg(Self.video + [source])
            try await Self.ffmpeg([
                "-i", source, "-c", "copy", "-movflags", "frag_keyframe+empty_moov+default_base_moof", fragments,
            ])
            try await Self.ffmpeg([
                "-i", source, "-c", "copy", "-movflags", "frag_keyframe+empty_moov+global_sidx", indexed,
            ])
            // A fragment is a second (a keyframe each 25 frames): the plan ends on a fragment's end.
            try await Self.check(indexed, seconds: 3, shape: .fragmentedMP4, slack: 1.5, maxReads: 1)
            try await Self.check(fragments, seconds: 3, shape: .fragmentedMP4, slack: 1.5, maxReads: 6)
        }
    }

    @Test func audioFiles() async throws {
        try await withTemporaryDirectory { folder in
            let tone = ["-f", "lavfi", "-i", "sine=frequency=440:duration=60"]
            let cases: [(String, [String], MediaShape)] = [
                ("cbr.mp3", ["-c:a", "libmp3lame", "-b:a", "128k"], .mp3),
                ("vbr.mp3", ["-c:a", "libmp3lame", "-q:a", "4"], .mp3),
                (
                    "tagged.mp3",
                    ["-c:a", "libmp3lame", "-b:a", "96k", "-metadata", "title=\(String(repeating: "x", count: 3000))"],
                    .mp3
                ),
                ("tone.aac", ["-c:a", "aac", "-b:a", "96k"], .adts),
                ("tone.wav", ["-c:a", "pcm_s16le", "-ar", "22050"], .wave),
                ("tone.m4a", ["-c:a", "aac", "-b:a", "96k"], .mp4),
            ]
            for (name, codec, shape) in cases {
                let path = folder.appendingPathComponent(name).path
                try await Self.ffmpeg(tone + codec + [path])
                try await Self.check(path, seconds: 5, shape: shape, slack: 1, maxReads: 2)
            }
        }
    }

    @Test func aFileOfNoKnownShapeIsEstimatedFromItsStart() async throws {
        let data = [UInt8](repeating: 0x42, count: 4 << 20)
        let (plan, reads) = try await Self.plan(data, seconds: 5)
        #expect(plan.shape == .estimated)
        #expect(reads == [ByteRange(0, MediaTimePlanner.headSize)])
        #expect(
            plan.ranges == [ByteRange(0, MediaTimePlanner.bytes(5, perSecond: MediaTimePlanner.estimatedBitRate / 8))])
    }
}
