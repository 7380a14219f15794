// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// An MP4's `moov` box, read for one question: which bytes of the file hold the samples a
/// player decodes in the first seconds. Read from the sample tables of every track a player
/// reads (video, audio, subtitles): `stts` (durations), `stsc` (samples per chunk), `stsz`/`stz2`
/// (sizes), `stco`/`co64` (chunk offsets), and the first edit of `elst`. Everything is bounded:
/// a table's entry count must fit in its box, and the walk from samples to bytes stops at the
/// tables' ends, so a hostile box costs at most its own size in work.
struct MP4Movie: Sendable {
    struct Track: Sendable {
        var id: UInt32 = 0
        var handler: UInt32 = 0
        var timescale: UInt32 = 0
        /// The media time the presentation starts at (the first edit's `media_time`).
        var mediaStart: Int64 = 0
        /// `stts`: runs of samples of one duration.
        var durations: [(count: UInt32, delta: UInt32)] = []
        /// `stsc`: from which chunk (1-based) on, how many samples each chunk holds.
        var chunkRuns: [(firstChunk: UInt32, samples: UInt32)] = []
        /// `stsz`: one size for every sample (non-zero), else `sizes`.
        var constantSize: UInt32 = 0
        var sampleCount = 0
        var sizes: [UInt32] = []
        var chunkOffsets: [Int64] = []
    }

    /// `mvhd`'s timescale and duration (0 when unknown, as in a fragmented file's `moov`).
    var timescale: UInt32 = 0
    var duration: UInt64 = 0
    var tracks: [Track] = []
    /// Whether the file is fragmented (`mvex`): its samples are in `moof` boxes, not these tables.
    var isFragmented = false
    /// `trex`: each track's default sample duration, for fragments that name none.
    var defaultDurations: [UInt32: UInt32] = [:]

    /// The handlers of the tracks a player reads.
    static let playedHandlers: Set<UInt32> = [
        fourCC("vide"), fourCC("soun"), fourCC("subt"), fourCC("text"), fourCC("sbtl"),
    ]

    /// Reads a `moov` box's body.
    /// - Throws: ``MediaParseError`` for a box or table that does not hold what it claims.
    init(moov body: ArraySlice<UInt8>) throws(MediaParseError) {
        for (type, child) in try MP4Box.children(of: body) {
            switch type {
            case fourCC("mvhd"):
                var reader = BoxReader(child)
                let version = try reader.u8()
                try reader.skip(3)
                if version == 1 {
                    try reader.skip(16)
                    timescale = try reader.u32()
                    duration = try reader.u64()
                } else {
                    try reader.skip(8)
                    timescale = try reader.u32()
                    duration = UInt64(try reader.u32())
                }
            case fourCC("mvex"):
                isFragmented = true
                for (inner, trex) in try MP4Box.children(of: child) where inner == fourCC("trex") {
                    var reader = BoxReader(trex)
                    try reader.skip(4)
                    let id = try reader.u32()
                    try reader.skip(4)
                    defaultDurations[id] = try reader.u32()
                }
            case fourCC("trak"):
                tracks.append(try Self.track(child))
            default: break
            }
        }
    }

    private static func track(_ body: ArraySlice<UInt8>) throws(MediaParseError) -> Track {
        var track = Track()
        if let tkhd = try MP4Box.child(fourCC("tkhd"), of: body) {
            var reader = BoxReader(tkhd)
            let version = try reader.u8()
            try reader.skip(3 + (version == 1 ? 16 : 8))
            track.id = try reader.u32()
        }
        if let edts = try MP4Box.child(fourCC("edts"), of: body), let elst = try MP4Box.child(fourCC("elst"), of: edts)
        {
            var reader = BoxReader(elst)
            let version = try reader.u8()
            try reader.skip(3)
            let count = try reader.entryCount(of: version == 1 ? 20 : 12)
            for _ in 0..<count {
                let segmentDuration = try reader.uint(version == 1 ? 8 : 4)
                let mediaTime =
                    version == 1 ? Int64(bitPattern: try reader.u64()) : Int64(Int32(bitPattern: try reader.u32()))
                try reader.skip(4)
                // An empty edit (-1) delays the start; the first edit with media is where it begins.
                if mediaTime >= 0 {
                    track.mediaStart = mediaTime
                    break
                }
                _ = segmentDuration
            }
        }
        guard let mdia = try MP4Box.child(fourCC("mdia"), of: body) else { return track }
        if let mdhd = try MP4Box.child(fourCC("mdhd"), of: mdia) {
            var reader = BoxReader(mdhd)
            let version = try reader.u8()
            try reader.skip(3 + (version == 1 ? 16 : 8))
            track.timescale = try reader.u32()
        }
        if let hdlr = try MP4Box.child(fourCC("hdlr"), of: mdia) {
            var reader = BoxReader(hdlr)
            try reader.skip(8)
            track.handler = try reader.u32()
        }
        guard let minf = try MP4Box.child(fourCC("minf"), of: mdia),
            let stbl = try MP4Box.child(fourCC("stbl"), of: minf)
        else { return track }
        for (type, table) in try MP4Box.children(of: stbl) {
            var reader = BoxReader(table)
            try reader.skip(4)  // version and flags
            switch type {
            case fourCC("stts"):
                let count = try reader.entryCount(of: 8)
                track.durations.reserveCapacity(count)
                for _ in 0..<count { track.durations.append((try reader.u32(), try reader.u32())) }
            case fourCC("stsc"):
                let count = try reader.entryCount(of: 12)
                track.chunkRuns.reserveCapacity(count)
                for _ in 0..<count {
                    track.chunkRuns.append((try reader.u32(), try reader.u32()))
                    try reader.skip(4)
                }
            case fourCC("stsz"):
                track.constantSize = try reader.u32()
                if track.constantSize == 0 {
                    let count = try reader.entryCount(of: 4)
                    track.sampleCount = count
                    track.sizes.reserveCapacity(count)
                    for _ in 0..<count { track.sizes.append(try reader.u32()) }
                } else {
                    track.sampleCount = Int(try reader.u32())
                }
            case fourCC("stz2"):
                try reader.skip(3)
                let fieldSize = Int(try reader.u8())
                guard [4, 8, 16].contains(fieldSize) else {
                    throw MediaParseError("stz2 has a field size of \(fieldSize) bits.")
                }
                let count = Int(try reader.u32())
                guard count <= reader.remaining * 8 / fieldSize else {
                    throw MediaParseError("A table claims more entries than its box holds.")
                }
                track.sampleCount = count
                track.sizes.reserveCapacity(count)
                var index = 0
                while index < count {
                    if fieldSize == 4 {
                        let byte = try reader.u8()
                        track.sizes.append(UInt32(byte >> 4))
                        if index + 1 < count { track.sizes.append(UInt32(byte & 0x0F)) }
                        index += 2
                    } else {
                        track.sizes.append(UInt32(try reader.uint(fieldSize / 8)))
                        index += 1
                    }
                }
            case fourCC("stco"):
                let count = try reader.entryCount(of: 4)
                track.chunkOffsets.reserveCapacity(count)
                for _ in 0..<count { track.chunkOffsets.append(Int64(try reader.u32())) }
            case fourCC("co64"):
                let count = try reader.entryCount(of: 8)
                track.chunkOffsets.reserveCapacity(count)
                for _ in 0..<count { track.chunkOffsets.append(try reader.length64()) }
            default: break
            }
        }
        return track
    }

    /// The movie's duration in seconds, when `mvhd` gives one.
    var seconds: Double? {
        timescale > 0 && duration > 0 && duration < UInt64(Int64.max) ? Double(duration) / Double(timescale) : nil
    }

    /// The byte ranges of the samples a player decodes to play the first `seconds`: in each
    /// played track, every sample whose decoding time (from the first edit's start) is before
    /// `seconds`. Samples decode before they are shown, so every frame shown before `seconds`
    /// is among them, with the frames it is predicted from.
    func sampleRanges(firstSeconds seconds: Double) -> SpanSet {
        var ranges: [ByteRange] = []
        for track in tracks where Self.playedHandlers.contains(track.handler) && track.timescale > 0 {
            let limit = Self.ticks(seconds, timescale: track.timescale).addingReportingOverflow(
                max(0, track.mediaStart))
            let count = Self.samplesBefore(limit.overflow ? .max : limit.partialValue, durations: track.durations)
            Self.appendRanges(of: track, sampleCount: min(count, track.sampleCount), to: &ranges)
        }
        // Sorted first: a set grows at its end in constant time, in its middle in linear time.
        return SpanSet(ranges.sorted { $0.lowerBound < $1.lowerBound })
    }

    /// `seconds` in `timescale` ticks, within `0 ... 2^62`.
    static func ticks(_ seconds: Double, timescale: UInt32) -> Int64 {
        let value = (seconds * Double(timescale)).rounded(.up)
        return value.isFinite ? Int64(min(max(0, value), 0x1p62)) : 0
    }

    /// How many samples (from the first) decode before `limit` ticks.
    static func samplesBefore(_ limit: Int64, durations: [(count: UInt32, delta: UInt32)]) -> Int {
        var time: Int64 = 0
        var count = 0
        for run in durations {
            guard time < limit else { break }
            if run.delta == 0 {
                count += Int(run.count)
                continue
            }
            let needed = (limit - time - 1) / Int64(run.delta) + 1
            let taken = min(Int64(run.count), needed)
            count += Int(taken)
            let (advance, overflow) = taken.multipliedReportingOverflow(by: Int64(run.delta))
            let (next, overflowAgain) = time.addingReportingOverflow(advance)
            time = overflow || overflowAgain ? .max : next
            if taken < run.count { break }
        }
        return count
    }

    /// Appends the byte ranges of `track`'s first `sampleCount` samples, a range per chunk.
    static func appendRanges(of track: Track, sampleCount: Int, to ranges: inout [ByteRange]) {
        var sample = 0
        var run = -1
        for (chunkIndex, chunkOffset) in track.chunkOffsets.enumerated() where sample < sampleCount {
            // `stsc` runs are in chunk order: the run in force is the last one begun.
            while run + 1 < track.chunkRuns.count, Int64(track.chunkRuns[run + 1].firstChunk) <= Int64(chunkIndex) + 1 {
                run += 1
            }
            guard run >= 0 else { return }
            let inChunk = min(Int(track.chunkRuns[run].samples), sampleCount - sample)
            var length: Int64 = 0
            if track.constantSize > 0 {
                let (product, overflow) = Int64(inChunk).multipliedReportingOverflow(by: Int64(track.constantSize))
                guard !overflow else { return }
                length = product
            } else {
                guard sample + inChunk <= track.sizes.count else { return }
                for index in sample..<(sample + inChunk) { length += Int64(track.sizes[index]) }
            }
            if length > 0, length <= ByteRange.maximumOffset, chunkOffset <= ByteRange.maximumOffset - length {
                ranges.append(ByteRange(offset: chunkOffset, length: length))
            }
            sample += inChunk
        }
    }
}
