// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The timing of a fragmented MP4: a segment index (`sidx`) where the file has one, else each
/// movie fragment's (`moof`) own sample durations.
enum MP4Fragments {
    /// One subsegment a `sidx` names: its bytes and its duration.
    struct Reference: Equatable {
        var range: ByteRange
        var seconds: Double
    }

    /// The references of a `sidx` box whose body is `body` and which ends at `boxEnd` in the
    /// file (its offsets count from there).
    /// - Throws: ``MediaParseError`` for a box that does not hold what it claims.
    static func segmentIndex(_ body: ArraySlice<UInt8>, boxEnd: Int64) throws(MediaParseError) -> [Reference] {
        var reader = BoxReader(body)
        let version = try reader.u8()
        try reader.skip(3 + 4)
        let timescale = try reader.u32()
        guard timescale > 0 else { throw MediaParseError("sidx has a timescale of 0.") }
        try reader.skip(version == 0 ? 4 : 8)
        let firstOffset = version == 0 ? Int64(try reader.u32()) : try reader.length64()
        try reader.skip(2)
        let count = Int(try reader.u16())
        guard count <= reader.remaining / 12 else {
            throw MediaParseError("sidx claims more references than it holds.")
        }
        var offset = boxEnd + firstOffset  // both at most 2^60
        var references: [Reference] = []
        for _ in 0..<count {
            let size = Int64(try reader.u32() & 0x7FFF_FFFF)
            let duration = try reader.u32()
            try reader.skip(4)
            guard offset <= ByteRange.maximumOffset - size else {
                throw MediaParseError("sidx names bytes beyond any file.")
            }
            references.append(
                Reference(range: ByteRange(offset: offset, length: size), seconds: Double(duration) / Double(timescale))
            )
            offset += size
        }
        return references
    }

    /// The longest track run in the fragment whose `moof` body is `body`, in seconds: the sum
    /// of its samples' durations (each `trun`'s own, else `tfhd`'s default, else the movie's
    /// `trex` default), in its track's timescale.
    /// - Throws: ``MediaParseError`` for a box that does not hold what it claims.
    static func duration(ofFragment body: ArraySlice<UInt8>, movie: MP4Movie) throws(MediaParseError) -> Double {
        var longest = 0.0
        for fragment in try trackFragments(of: body, defaultDuration: { movie.defaultDurations[$0] }) {
            guard let track = movie.tracks.first(where: { $0.id == fragment.trackID }), track.timescale > 0 else {
                continue
            }
            longest = max(longest, Double(fragment.ticks) / Double(track.timescale))
        }
        return longest
    }

    /// What a track fragment (`traf`) says, and where its fields lie in the bytes it was read from.
    struct TrackFragment: Equatable {
        var trackID: UInt32
        /// The index of `tfhd`'s track ID, and of its `base_data_offset` when present.
        var trackIDAt: Int
        var baseDataOffsetAt: Int?
        /// `tfdt`'s base media decode time, when present.
        var decodeTime: UInt64?
        /// The sum of its samples' durations (saturating).
        var ticks: UInt64
    }

    /// The track fragments of the `moof` whose body is `body`: each sample's duration its
    /// `trun`'s own, else `tfhd`'s default, else `defaultDuration` of its track (`trex`'s).
    /// - Throws: ``MediaParseError`` for a box that does not hold what it claims.
    static func trackFragments(of body: ArraySlice<UInt8>, defaultDuration: (UInt32) -> UInt32?)
        throws(MediaParseError) -> [TrackFragment]
    {
        var result: [TrackFragment] = []
        for (type, traf) in try MP4Box.children(of: body) where type == fourCC("traf") {
            var fragment = TrackFragment(trackID: 0, trackIDAt: -1, ticks: 0)
            var fragmentDefault: UInt32?
            for (inner, box) in try MP4Box.children(of: traf) {
                var reader = BoxReader(box)
                let version = try reader.u8()
                let flags = try reader.u24()
                if inner == fourCC("tfhd") {
                    fragment.trackIDAt = reader.position
                    fragment.trackID = try reader.u32()
                    if flags & 0x01 != 0 {
                        fragment.baseDataOffsetAt = reader.position
                        try reader.skip(8)
                    }
                    if flags & 0x02 != 0 { try reader.skip(4) }
                    if flags & 0x08 != 0 { fragmentDefault = try reader.u32() }
                } else if inner == fourCC("tfdt") {
                    fragment.decodeTime = version == 1 ? try reader.u64() : UInt64(try reader.u32())
                } else if inner == fourCC("trun") {
                    let count = Int(try reader.u32())
                    if flags & 0x01 != 0 { try reader.skip(4) }
                    if flags & 0x04 != 0 { try reader.skip(4) }
                    let fields = [0x100, 0x200, 0x400, 0x800].filter { flags & UInt32($0) != 0 }.count
                    if flags & 0x100 != 0 {
                        guard count <= reader.remaining / (4 * fields) else {
                            throw MediaParseError("trun claims more samples than it holds.")
                        }
                        for _ in 0..<count {
                            fragment.ticks = saturatingSum(fragment.ticks, UInt64(try reader.u32()))
                            try reader.skip(4 * (fields - 1))
                        }
                    } else {
                        let each = fragmentDefault ?? defaultDuration(fragment.trackID) ?? 0
                        // 2^32 · 2^32 fits.
                        fragment.ticks = saturatingSum(fragment.ticks, UInt64(count) * UInt64(each))
                    }
                }
            }
            // A traf without a tfhd names no track: nothing of it is read.
            if fragment.trackIDAt >= 0 { result.append(fragment) }
        }
        return result
    }

    /// `a + b`, or `UInt64.max` where it would overflow (a hostile fragment's durations).
    private static func saturatingSum(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }
}
