// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// One fragmented MP4 made of the init sections and fragments of several (an HLS variant and its
/// audio rendition, a DASH video and audio representation): the init sections' tracks in one
/// `moov`, renumbered 1, 2, … in the order given, with a `trex` each and durations filled in at the
/// end; each fragment (`moof`) rewritten in place (its track IDs, sequence number and any absolute
/// `base_data_offset`), so its size and its data offsets stay as they were; and an `mfra` naming
/// each fragment's time and place, for seeking. Pure: bytes in, bytes out. Everything is read from
/// outside and bounded as ``BoxReader`` bounds it.
struct MovieMerge {
    /// A track of the merged movie.
    struct Track: Equatable {
        /// Its ID in the merged movie.
        var id: UInt32
        /// Which init section it came from, and its ID there.
        var source: Int
        var originalID: UInt32
        var handler: UInt32
        var timescale: UInt32
        /// Its default sample duration (`trex`), for fragments that name none.
        var defaultDuration: UInt32
        /// The end of its last fragment, in its timescale.
        var end: UInt64 = 0
    }

    /// What a rewritten fragment holds of one track.
    struct Run: Equatable {
        var track: UInt32
        /// Its decode time (`tfdt`), in its track's timescale; `nil` when the fragment names none.
        var decodeTime: UInt64?
        /// The sum of its samples' durations.
        var ticks: UInt64
    }

    private(set) var tracks: [Track] = []
    private var ftyp: [UInt8]
    /// `mvhd` as version 1, its duration at bytes 24..<32 of its body.
    private var movieHeader: [UInt8]
    private var movieTimescale: UInt32
    /// Each track's `trak` as written, and where its two durations lie in it.
    private var trackBoxes: [(bytes: [UInt8], tkhdDuration: Int, mdhdDuration: Int)] = []
    private var trackExtends: [[UInt8]] = []
    /// Each fragment's place and its tracks' decode times, for `mfra`.
    private var index: [(offset: Int64, runs: [Run])] = []

    /// The sample entries of content protected by a DRM system (ISO/IEC 23001-7).
    static let protectedEntries: Set<UInt32> = [fourCC("encv"), fourCC("enca"), fourCC("encs"), fourCC("enct")]

    /// Merges `initSections` (each a whole init section: `ftyp` and `moov`, or `moov` alone).
    /// - Throws: ``MediaParseError`` for boxes that do not hold what they claim, an init
    ///   section without a `moov`, or content under DRM (`pssh`, an `enc*` sample entry).
    init(initSections: [ArraySlice<UInt8>]) throws(MediaParseError) {
        var ftyp: [UInt8]?
        var header: [UInt8]?
        var movieTimescale: UInt32 = 1000
        for (source, section) in initSections.enumerated() {
            let top = try MP4Box.children(of: section)
            if ftyp == nil, let box = top.first(where: { $0.type == fourCC("ftyp") }) {
                ftyp = Self.box(fourCC("ftyp"), box.body)
            }
            guard let moov = top.first(where: { $0.type == fourCC("moov") })?.body else {
                throw MediaParseError("An init section has no moov box.")
            }
            let movie = try MP4Movie(moov: moov)
            let children = try MP4Box.children(of: moov)
            if children.contains(where: { $0.type == fourCC("pssh") }) {
                throw MediaParseError("The content is protected by a DRM system (a pssh box).")
            }
            if header == nil, let mvhd = children.first(where: { $0.type == fourCC("mvhd") })?.body {
                header = try Self.versionOne(mvhd, widths: [4, 4, 4], durationAt: 3)
                movieTimescale = max(1, movie.timescale)
            }
            var extends: [UInt32: [UInt8]] = [:]
            for mvex in children where mvex.type == fourCC("mvex") {
                for trex in try MP4Box.children(of: mvex.body) where trex.type == fourCC("trex") {
                    var reader = BoxReader(trex.body)
                    try reader.skip(4)
                    extends[try reader.u32()] = Array(trex.body)
                }
            }
            for trak in children where trak.type == fourCC("trak") {
                let id = UInt32(tracks.count + 1)
                let written = try Self.track(
                    trak.body, id: id, scale: (from: max(1, movie.timescale), to: movieTimescale))
                guard let facts = movie.tracks.first(where: { $0.id == written.originalID }) else {
                    throw MediaParseError("A trak box has no tkhd.")
                }
                var trex =
                    extends[written.originalID] ?? [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
                    + [UInt8](repeating: 0, count: 12)
                trex.replaceSubrange(4..<8, with: Self.bytes(UInt64(id), width: 4))
                trackExtends.append(Self.box(fourCC("trex"), trex[...]))
                trackBoxes.append((written.bytes, written.tkhdDuration, written.mdhdDuration))
                tracks.append(
                    Track(
                        id: id, source: source, originalID: written.originalID, handler: facts.handler,
                        timescale: max(1, facts.timescale),
                        defaultDuration: movie.defaultDurations[written.originalID] ?? 0))
            }
        }
        guard let header, !tracks.isEmpty else { throw MediaParseError("The init sections hold no track.") }
        self.ftyp = ftyp ?? Self.box(fourCC("ftyp"), Array("isom\0\0\u{2}\0isomiso6mp41".utf8)[...])
        self.movieHeader = header
        self.movieTimescale = movieTimescale
        // next_track_ID, the last field of mvhd.
        movieHeader.replaceSubrange(
            (movieHeader.count - 4)..<movieHeader.count, with: Self.bytes(UInt64(tracks.count + 1), width: 4))
    }

    /// Whether every track is sound (an `.m4a`).
    var isAudioOnly: Bool { tracks.allSatisfy { $0.handler == fourCC("soun") } }

    /// `ftyp` and `moov` with the durations the fragments so far make; as long whatever they are.
    var header: [UInt8] {
        var movieDuration: UInt64 = 0
        var traks: [UInt8] = []
        for (track, written) in zip(tracks, trackBoxes) {
            let inMovie = Self.rescale(track.end, from: track.timescale, to: movieTimescale)
            movieDuration = max(movieDuration, inMovie)
            var bytes = written.bytes
            bytes.replaceSubrange(
                written.tkhdDuration..<(written.tkhdDuration + 8), with: Self.bytes(inMovie, width: 8))
            bytes.replaceSubrange(
                written.mdhdDuration..<(written.mdhdDuration + 8), with: Self.bytes(track.end, width: 8))
            traks += bytes
        }
        var mvhd = movieHeader
        mvhd.replaceSubrange(24..<32, with: Self.bytes(movieDuration, width: 8))
        let mehd = Self.box(fourCC("mehd"), ([1, 0, 0, 0] + Self.bytes(movieDuration, width: 8))[...])
        let mvex = Self.box(fourCC("mvex"), (mehd + trackExtends.flatMap { $0 })[...])
        return ftyp + Self.box(fourCC("moov"), (Self.box(fourCC("mvhd"), mvhd[...]) + traks + mvex)[...])
    }

    /// Rewrites `moof` (a whole `moof` box of init section `source`'s tracks, which was at
    /// `oldOffset` in its resource and is written at `newOffset`) in place as fragment
    /// `sequence` of the merged movie, and notes its runs for the durations and `mfra`.
    /// - Throws: ``MediaParseError`` for boxes that do not hold what they claim, or a track
    ///   its init section does not name.
    @discardableResult
    mutating func rewrite(
        fragment moof: inout [UInt8], source: Int, sequence: UInt32, oldOffset: Int64, newOffset: Int64
    ) throws(MediaParseError) -> [Run] {
        guard let box = try MP4Box.header(in: moof[...], at: 0, offset: 0), box.type == fourCC("moof"),
            box.size == Int64(moof.count)
        else { throw MediaParseError("A fragment does not start with a whole moof box.") }
        let body = moof[Int(box.headerSize)...]
        if let mfhd = try MP4Box.child(fourCC("mfhd"), of: body) {
            guard mfhd.count >= 8 else { throw MediaParseError("An mfhd box ends before its fields do.") }
            moof.replaceSubrange(
                (mfhd.startIndex + 4)..<(mfhd.startIndex + 8), with: Self.bytes(UInt64(sequence), width: 4))
        }
        var runs: [Run] = []
        for fragment in try MP4Fragments.trackFragments(
            of: body,
            defaultDuration: { id in
                self.tracks.first { $0.source == source && $0.originalID == id }?.defaultDuration
            })
        {
            guard let index = tracks.firstIndex(where: { $0.source == source && $0.originalID == fragment.trackID })
            else {
                throw MediaParseError("A fragment names track \(fragment.trackID), which its init section does not.")
            }
            let track = tracks[index]
            moof.replaceSubrange(
                fragment.trackIDAt..<(fragment.trackIDAt + 4), with: Self.bytes(UInt64(track.id), width: 4))
            if let at = fragment.baseDataOffsetAt {
                var reader = BoxReader(moof[at..<(at + 8)])
                let (moved, overflow) = try reader.u64().addingReportingOverflow(
                    UInt64(bitPattern: newOffset &- oldOffset))
                _ = overflow  // a smaller offset wraps back, as the subtraction's two's complement does
                moof.replaceSubrange(at..<(at + 8), with: Self.bytes(moved, width: 8))
            }
            let start = fragment.decodeTime ?? track.end
            let (end, overflow) = start.addingReportingOverflow(fragment.ticks)
            tracks[index].end = max(track.end, overflow ? .max : end)
            runs.append(Run(track: track.id, decodeTime: fragment.decodeTime ?? start, ticks: fragment.ticks))
        }
        index.append((newOffset, runs))
        return runs
    }

    /// The movie fragment random access box: per track, each fragment's decode time and place.
    var randomAccess: [UInt8] {
        var tables: [UInt8] = []
        for track in tracks {
            let entries = index.compactMap { entry in
                entry.runs.first { $0.track == track.id }.map { ($0.decodeTime ?? 0, entry.offset) }
            }
            var body: [UInt8] = [1, 0, 0, 0] + Self.bytes(UInt64(track.id), width: 4) + [0, 0, 0, 0]
            body += Self.bytes(UInt64(entries.count), width: 4)
            for (time, offset) in entries {
                body += Self.bytes(time, width: 8) + Self.bytes(UInt64(offset), width: 8) + [1, 1, 1]
            }
            tables += Self.box(fourCC("tfra"), body[...])
        }
        let size = 8 + tables.count + 16
        return Self.box(
            fourCC("mfra"),
            (tables + Self.box(fourCC("mfro"), ([0, 0, 0, 0] + Self.bytes(UInt64(size), width: 4))[...]))[...])
    }

    /// A `trak` body rewritten: `tkhd` and `mdhd` as version 1 (their durations zero, at the
    /// offsets returned), the track ID `id`, an `elst`'s durations in the merged movie's
    /// timescale; `tref` left out (it names IDs of the movie it came from).
    private static func track(_ trak: ArraySlice<UInt8>, id: UInt32, scale: (from: UInt32, to: UInt32))
        throws(MediaParseError) -> (bytes: [UInt8], originalID: UInt32, tkhdDuration: Int, mdhdDuration: Int)
    {
        var body: [UInt8] = []
        var originalID: UInt32?
        var tkhdDuration = 0
        var mdhdDuration = 0
        for (type, child) in try MP4Box.children(of: trak) {
            switch type {
            case fourCC("tkhd"):
                var header = try versionOne(child, widths: [4, 4, 4, 4], durationAt: 4)
                var reader = BoxReader(header[20..<24])
                originalID = try reader.u32()
                header.replaceSubrange(20..<24, with: bytes(UInt64(id), width: 4))
                tkhdDuration = 8 + body.count + 8 + 28
                body += box(fourCC("tkhd"), header[...])
            case fourCC("mdia"):
                var media: [UInt8] = []
                var at: Int?
                for (inner, part) in try MP4Box.children(of: child) {
                    if inner == fourCC("mdhd") {
                        at = media.count + 8 + 24
                        media += box(fourCC("mdhd"), try versionOne(part, widths: [4, 4, 4], durationAt: 3)[...])
                    } else {
                        if inner == fourCC("minf") { try refuseProtected(part) }
                        media += box(inner, part)
                    }
                }
                guard let at else { throw MediaParseError("An mdia box has no mdhd.") }
                mdhdDuration = 8 + body.count + 8 + at
                body += box(fourCC("mdia"), media[...])
            case fourCC("edts") where scale.from != scale.to:
                body += box(fourCC("edts"), try rescaledEdits(child, scale: scale)[...])
            case fourCC("tref"):
                continue
            default:
                body += box(type, child)
            }
        }
        guard let originalID, mdhdDuration > 0 else { throw MediaParseError("A trak box has no tkhd or mdhd.") }
        return (box(fourCC("trak"), body[...]), originalID, tkhdDuration, mdhdDuration)
    }

    /// Throws for a `minf` whose sample entries are protected (``protectedEntries``).
    private static func refuseProtected(_ minf: ArraySlice<UInt8>) throws(MediaParseError) {
        guard let stbl = try MP4Box.child(fourCC("stbl"), of: minf),
            let stsd = try MP4Box.child(fourCC("stsd"), of: stbl), stsd.count >= 8
        else { return }
        for entry in try MP4Box.children(of: stsd.dropFirst(8)) where protectedEntries.contains(entry.type) {
            throw MediaParseError("The content is protected by a DRM system (an encrypted sample entry).")
        }
    }

    /// An `edts` body whose `elst` segment durations are rescaled `from` one movie timescale `to` another.
    private static func rescaledEdits(_ edts: ArraySlice<UInt8>, scale: (from: UInt32, to: UInt32))
        throws(MediaParseError) -> [UInt8]
    {
        var result: [UInt8] = []
        for (type, child) in try MP4Box.children(of: edts) {
            guard type == fourCC("elst") else {
                result += box(type, child)
                continue
            }
            var reader = BoxReader(child)
            let version = try reader.u8()
            try reader.skip(3)
            let width = version == 1 ? 8 : 4
            let count = try reader.entryCount(of: width * 2 + 4)
            var list: [UInt8] = [1, 0, 0, 0] + bytes(UInt64(count), width: 4)
            for _ in 0..<count {
                let duration = try reader.uint(width)
                let mediaTime = try reader.uint(width)
                // A version 0 media time of -1 (an empty edit) stays -1 as 64 bits.
                let wide = width == 4 && mediaTime == 0xFFFF_FFFF ? UInt64.max : mediaTime
                list += bytes(rescale(duration, from: scale.from, to: scale.to), width: 8) + bytes(wide, width: 8)
                list += bytes(try reader.uint(4), width: 4)
            }
            result += box(fourCC("elst"), list[...])
        }
        return result
    }

    /// A full box body of version 0 or 1 as version 1: `widths` are version 0's field widths
    /// up to the duration (each 4; those before `durationAt` and the duration widen to 8).
    private static func versionOne(_ body: ArraySlice<UInt8>, widths: [Int], durationAt: Int) throws(MediaParseError)
        -> [UInt8]
    {
        var reader = BoxReader(body)
        let version = try reader.u8()
        let flags = try reader.u24()
        var result: [UInt8] = [1] + bytes(UInt64(flags), width: 3)
        for (index, width) in (widths + [4]).enumerated() {
            let wide = index < 2 || index == durationAt
            let value = try reader.uint(version == 1 && wide ? 8 : width)
            result += bytes(value, width: wide ? 8 : 4)
            if index == durationAt { break }
        }
        result += body[reader.position...]
        return result
    }

    /// `value` ticks of `from` in ticks of `to`, saturating.
    static func rescale(_ value: UInt64, from: UInt32, to: UInt32) -> UInt64 {
        guard from != to, from > 0 else { return value }
        let (high, low) = value.multipliedFullWidth(by: UInt64(to))
        guard high < UInt64(from) else { return .max }
        return UInt64(from).dividingFullWidth((high, low)).quotient
    }

    /// A box of `type` around `body` (a 64-bit size past 4 GiB).
    static func box(_ type: UInt32, _ body: ArraySlice<UInt8>) -> [UInt8] {
        let size = UInt64(body.count) + 8
        if size <= UInt64(UInt32.max) { return bytes(size, width: 4) + bytes(UInt64(type), width: 4) + body }
        return [0, 0, 0, 1] + bytes(UInt64(type), width: 4) + bytes(size + 8, width: 8) + body
    }

    /// `value`'s low `width` bytes, big-endian.
    static func bytes(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(width - 1 - $0))) }
    }
}
