// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport

@testable import MediaCache

/// A random, well-formed MP4 and the model of where each of its samples lies: one to three
/// tracks (video, sound, and sometimes a hint track no player reads), samples of random sizes
/// (one size for all, or a table) grouped in chunks of random counts, the chunks of all tracks
/// interleaved in time order in `mdat`, `moov` before or after it, `stco` or `co64`, an edit
/// list or none.
struct SyntheticMP4 {
    struct Track {
        var handler: String
        var timescale: UInt32
        var mediaStart: Int64
        var durations: [UInt32]
        var sizes: [UInt32]
        var constantSize: Bool
        var chunkCounts: [Int]
        /// Each sample's bytes in the file.
        var samples: [ByteRange] = []
    }

    var tracks: [Track]
    var moovFirst: Bool
    var wideOffsets: Bool
    var bytes: [UInt8] = []
    /// What a player reads besides samples: `ftyp`, `moov`, `mdat`'s header.
    var boxes: [ByteRange] = []

    var summary: String {
        "\(tracks.count) tracks (\(tracks.map { "\($0.handler) \($0.timescale)/\($0.durations.count)" })), moov \(moovFirst ? "first" : "last"), \(bytes.count) bytes"
    }

    init(_ random: inout SplitMix) {
        moovFirst = random.below(2) == 0
        wideOffsets = random.below(2) == 0
        tracks = (0...random.below(3)).map { index in
            let timescale: UInt32 = [1000, 25, 44100, 90000, 600, 1][random.below(6)]
            let count = 1 + random.below(150)
            let delta = UInt32(max(1, Int(timescale) / [25, 43, 1, 10][random.below(4)]))
            let constantSize = random.below(3) == 0
            let size = UInt32(1 + random.below(3000))
            var chunkCounts: [Int] = []
            var left = count
            while left > 0 {
                chunkCounts.append(min(left, 1 + random.below(5)))
                left -= chunkCounts.last!
            }
            return Track(
                handler: index == 2 ? "hint" : ["vide", "soun"][random.below(2)], timescale: timescale,
                mediaStart: random.below(3) == 0 ? Int64(delta) * Int64(random.below(3)) : 0,
                durations: (0..<count).map { _ in random.below(8) == 0 ? delta * 2 : delta },
                sizes: (0..<count).map { _ in constantSize ? size : UInt32(1 + random.below(3000)) },
                constantSize: constantSize,
                chunkCounts: chunkCounts)
        }
        layOut()
    }

    /// The decoding time of each sample, in its track's ticks.
    static func times(_ track: Track) -> [Int64] {
        var time: Int64 = 0
        return track.durations.map { duration in
            defer { time += Int64(duration) }
            return time
        }
    }

    private mutating func layOut() {
        // The chunks of every track, in the order of their first sample's time.
        var chunks: [(time: Double, track: Int, first: Int, count: Int)] = []
        for (index, track) in tracks.enumerated() {
            let times = Self.times(track)
            var first = 0
            for count in track.chunkCounts {
                chunks.append((Double(times[first]) / Double(track.timescale), index, first, count))
                first += count
            }
        }
        chunks.sort { ($0.time, $0.track) < ($1.time, $1.track) }
        var payload: [UInt8] = []
        var relative = tracks.map { [Int](repeating: 0, count: $0.chunkCounts.count) }
        var chunkIndex = tracks.map { _ in 0 }
        for chunk in chunks {
            relative[chunk.track][chunkIndex[chunk.track]] = payload.count
            chunkIndex[chunk.track] += 1
            for sample in chunk.first..<(chunk.first + chunk.count) {
                payload += [UInt8](
                    repeating: UInt8(truncatingIfNeeded: sample), count: Int(tracks[chunk.track].sizes[sample]))
            }
        }
        let ftyp = Self.box("ftyp", Array("isom".utf8) + [0, 0, 2, 0] + Array("isom".utf8))
        let moovSize = movie(relative, base: 0).count
        let mdatStart = ftyp.count + (moovFirst ? moovSize : 0)
        let base = mdatStart + 8
        let moov = movie(relative, base: base)
        let mdat = Self.box("mdat", payload)
        bytes = moovFirst ? ftyp + moov + mdat : ftyp + mdat + moov
        let moovStart = moovFirst ? ftyp.count : mdatStart + mdat.count
        boxes = [
            ByteRange(0, Int64(ftyp.count)), ByteRange(offset: Int64(mdatStart), length: 8),
            ByteRange(offset: Int64(moovStart), length: Int64(moov.count)),
        ]
        for index in tracks.indices {
            var samples: [ByteRange] = []
            var sample = 0
            for (chunk, count) in tracks[index].chunkCounts.enumerated() {
                var offset = Int64(base + relative[index][chunk])
                for _ in 0..<count {
                    samples.append(ByteRange(offset: offset, length: Int64(tracks[index].sizes[sample])))
                    offset += Int64(tracks[index].sizes[sample])
                    sample += 1
                }
            }
            tracks[index].samples = samples
        }
    }

    private func movie(_ relative: [[Int]], base: Int) -> [UInt8] {
        var body = Self.box(
            "mvhd",
            [0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + Self.u32(1000) + Self.u32(0)
                + [UInt8](repeating: 0, count: 80))
        for (index, track) in tracks.enumerated() {
            var stbl = Self.box(
                "stts",
                [0, 0, 0, 0] + Self.u32(UInt32(track.durations.count))
                    + track.durations.flatMap { Self.u32(1) + Self.u32($0) })
            // Runs of equal chunk counts, as a writer would compress them.
            var runs: [(first: Int, count: Int)] = []
            for (chunk, count) in track.chunkCounts.enumerated() where runs.last?.count != count {
                runs.append((chunk + 1, count))
            }
            stbl += Self.box(
                "stsc",
                [0, 0, 0, 0] + Self.u32(UInt32(runs.count))
                    + runs.flatMap { Self.u32(UInt32($0.first)) + Self.u32(UInt32($0.count)) + Self.u32(1) })
            if track.constantSize {
                stbl += Self.box("stsz", [0, 0, 0, 0] + Self.u32(track.sizes[0]) + Self.u32(UInt32(track.sizes.count)))
            } else {
                stbl += Self.box(
                    "stsz",
                    [0, 0, 0, 0] + Self.u32(0) + Self.u32(UInt32(track.sizes.count))
                        + track.sizes.flatMap { Self.u32($0) })
            }
            let offsets = relative[index].map { UInt64(base + $0) }
            stbl +=
                wideOffsets
                ? Self.box(
                    "co64",
                    [0, 0, 0, 0] + Self.u32(UInt32(offsets.count))
                        + offsets.flatMap { Self.u32(UInt32($0 >> 32)) + Self.u32(UInt32($0 & 0xFFFF_FFFF)) })
                : Self.box(
                    "stco", [0, 0, 0, 0] + Self.u32(UInt32(offsets.count)) + offsets.flatMap { Self.u32(UInt32($0)) })
            let mdhd = Self.box(
                "mdhd",
                [0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + Self.u32(track.timescale) + Self.u32(0) + [0, 0, 0, 0])
            let hdlr = Self.box(
                "hdlr", [0, 0, 0, 0] + Self.u32(0) + Array(track.handler.utf8) + [UInt8](repeating: 0, count: 13))
            let mdia = Self.box("mdia", mdhd + hdlr + Self.box("minf", Self.box("stbl", stbl)))
            let tkhd = Self.box(
                "tkhd",
                [0, 0, 0, 3] + [UInt8](repeating: 0, count: 8) + Self.u32(UInt32(index + 1))
                    + [UInt8](repeating: 0, count: 68))
            var trak = tkhd
            if track.mediaStart > 0 || index == 1 {
                let empty = Self.u32(500) + Self.u32(0xFFFF_FFFF) + Self.u32(0x0001_0000)
                let edit = Self.u32(1000) + Self.u32(UInt32(track.mediaStart)) + Self.u32(0x0001_0000)
                trak += Self.box(
                    "edts",
                    Self.box("elst", [0, 0, 0, 0] + Self.u32(index == 1 ? 2 : 1) + (index == 1 ? empty : []) + edit))
            }
            body += Self.box("trak", trak + mdia)
        }
        return Self.box("moov", body)
    }

    static func u32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }

    static func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
        u32(UInt32(8 + body.count)) + Array(type.utf8) + body
    }

    /// What is wrong with `plan` (made without bridging) for `seconds`, if anything: it must be
    /// exactly the boxes and, in each track a player reads, the samples decoded before `seconds`.
    func check(_ plan: MediaTimePlan, seconds: Double) -> String? {
        var wanted = SpanSet(boxes)
        for track in tracks where track.handler != "hint" {
            for (sample, time) in Self.times(track).enumerated()
            where Double(time - track.mediaStart) < seconds * Double(track.timescale) {
                wanted.insert(track.samples[sample])
            }
        }
        let planned = SpanSet(plan.ranges)
        return planned == wanted && plan.shape == .mp4
            ? nil : "planned \(planned) (\(plan.shape)), the model wants \(wanted)"
    }
}
