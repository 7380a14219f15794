// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// What a media file is, as far as finding its first seconds goes.
package enum MediaShape: String, Sendable, Equatable, Codable {
    /// An MP4 with its samples indexed in `moov` (`moov` first or last).
    case mp4
    /// A fragmented MP4 (`moof` boxes, with or without a `sidx`).
    case fragmentedMP4
    case mp3
    /// AAC in ADTS frames.
    case adts
    case wave
    /// A file whose layout is not known: its first seconds estimated from a typical bit rate.
    case estimated
    /// An HLS asset or a DASH presentation, planned from its playlists or manifest.
    case hls
    case dash
}

/// The byte ranges of a file that a player reads to play its first seconds.
package struct MediaTimePlan: Sendable, Equatable {
    package var shape: MediaShape
    /// Sorted, disjoint: the headers and index a player reads first, and the samples.
    package var ranges: [ByteRange]
    package var byteCount: Int64 { ranges.reduce(0) { $0 + $1.length } }
}

/// Finds where the first seconds of a media file lie, reading what it must of the file
/// through `read` (the cache, so what it reads is stored as a player's read would store it).
///
/// An MP4 is walked box by box from its start: a `moov` after `mdat` is found past `mdat`'s
/// end; its sample tables give the samples' bytes (``MP4Movie``). A fragmented MP4 uses its
/// `sidx`, else each fragment's `moof`. MP3, ADTS and WAV give a byte rate from their first
/// frames (``AudioFrames``); anything else is estimated at ``estimatedBitRate``. Every length
/// the file states is bounded before anything of that size is read.
package enum MediaTimePlanner {
    /// Reads a range of the file; a range past the end is never asked for.
    package typealias Read = @Sendable (ByteRange) async throws -> [UInt8]

    /// How much of the file is read first to see what it is.
    static let headSize: Int64 = 64 << 10
    /// The largest `moov` read (a two-hour film's is a few MiB).
    static let maximumMovieSize: Int64 = 64 << 20
    /// The largest `moof` or `sidx` read.
    static let maximumFragmentIndexSize: Int64 = 16 << 20
    /// A gap this small between two ranges is read too: a player reads straight through it,
    /// and one request costs less than two.
    static let bridgedGap: Int64 = 256 << 10
    /// The bit rate assumed for a file whose own rate cannot be read.
    static let estimatedBitRate = 2_000_000.0
    /// How many top-level boxes or fragments are walked at most.
    static let maximumSteps = 4096

    /// The plan for the first `seconds` of a file of `length` bytes; gaps of at most `bridging`
    /// bytes between what a player reads in order are read too.
    /// - Throws: what `read` throws; ``MediaParseError`` for an MP4 whose boxes contradict themselves.
    package static func plan(seconds: Double, length: Int64, bridging: Int64 = bridgedGap, read: @escaping Read)
        async throws -> MediaTimePlan
    {
        guard length > 0 else { return MediaTimePlan(shape: .estimated, ranges: []) }
        let head = try await read(ByteRange(0, min(length, headSize)))
        if looksLikeMP4(head) {
            var walk = MP4Walk(length: length, bridging: bridging, read: read, window: (0, head))
            return try await walk.plan(seconds: seconds)
        }
        if let rate = AudioFrames.rate(head: head, length: length) {
            return plan(
                .init(rate.start, rate.start + bytes(seconds, perSecond: rate.bytesPerSecond)), shape: rate.shape,
                length: length)
        }
        return plan(
            .init(0, max(Int64(head.count), bytes(seconds, perSecond: estimatedBitRate / 8))), shape: .estimated,
            length: length)
    }

    /// A margin over the rate (frames vary): a tenth more, and 16 KiB.
    static func bytes(_ seconds: Double, perSecond rate: Double) -> Int64 {
        let value = seconds * rate * 1.1 + 16_384
        return value.isFinite && value > 0 ? Int64(min(value, Double(ByteRange.maximumOffset))) : 0
    }

    /// The file's start up to `range`'s end: an audio file is read from its first byte.
    private static func plan(_ range: ByteRange, shape: MediaShape, length: Int64) -> MediaTimePlan {
        MediaTimePlan(shape: shape, ranges: [ByteRange(0, min(length, range.upperBound))])
    }

    /// Whether the file starts with an ISO BMFF box a player would expect first.
    static func looksLikeMP4(_ head: [UInt8]) -> Bool {
        guard head.count >= 8 else { return false }
        let type = head[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return [
            fourCC("ftyp"), fourCC("styp"), fourCC("moov"), fourCC("mdat"), fourCC("free"), fourCC("wide"),
            fourCC("skip"),
        ].contains(type)
    }

    /// `ranges` within the file, sorted, with gaps of at most `gap` bytes filled.
    static func bridged(_ ranges: [ByteRange], length: Int64, gap: Int64) -> [ByteRange] {
        var merged: [ByteRange] = []
        for range in SpanSet(ranges.sorted { $0.lowerBound < $1.lowerBound }).spans {
            guard let range = range.clamped(to: ByteRange(0, length)) else { continue }
            if let last = merged.last, range.lowerBound - last.upperBound <= gap {
                merged[merged.count - 1] = ByteRange(last.lowerBound, max(last.upperBound, range.upperBound))
            } else {
                merged.append(range)
            }
        }
        return merged
    }
}

/// One walk through an MP4's top-level boxes, reading windows of the file as it goes.
private struct MP4Walk {
    let length: Int64
    let bridging: Int64
    let read: MediaTimePlanner.Read
    /// The bytes last read, and where they start.
    var window: (offset: Int64, bytes: [UInt8])
    /// What a player reads in order: every small top-level box, the header of `mdat`, the
    /// samples (gaps between them are bridged).
    var kept: [ByteRange] = []
    /// `moov` and `sidx`, which a player jumps to (never bridged to: a `moov` at the end is
    /// no reason to read what lies between the first seconds and it).
    var index: [ByteRange] = []

    init(length: Int64, bridging: Int64, read: @escaping MediaTimePlanner.Read, window: (Int64, [UInt8])) {
        self.length = length
        self.bridging = bridging
        self.read = read
        self.window = window
    }

    mutating func plan(seconds: Double) async throws -> MediaTimePlan {
        var offset: Int64 = 0
        var movie: MP4Movie?
        var references: [MP4Fragments.Reference]?
        var firstFragment: Int64?
        var passedMediaData = false
        for _ in 0..<MediaTimePlanner.maximumSteps {
            guard offset < length, let box = try await box(at: offset, passedMediaData: passedMediaData && movie == nil)
            else { break }
            let end = min(length, box.end ?? length)
            switch box.type {
            case fourCC("moov"):
                movie = try MP4Movie(moov: try await body(of: box, end: end, limit: MediaTimePlanner.maximumMovieSize))
                self.index.append(ByteRange(box.offset, end))
            case fourCC("sidx"):
                if references == nil {
                    references = try MP4Fragments.segmentIndex(
                        try await body(of: box, end: end, limit: MediaTimePlanner.maximumFragmentIndexSize), boxEnd: end
                    )
                }
                self.index.append(ByteRange(box.offset, end))
            case fourCC("mdat"):
                passedMediaData = true
                kept.append(ByteRange(box.offset, min(end, box.offset + box.headerSize)))
            case fourCC("moof"):
                firstFragment = box.offset
            default:
                if end - box.offset <= MediaTimePlanner.headSize { kept.append(ByteRange(box.offset, end)) }
            }
            if firstFragment != nil || (movie != nil && passedMediaData && movie?.isFragmented != true) { break }
            offset = end
        }
        guard let movie else {
            throw MediaParseError("The MP4 has no moov box within its first \(MediaTimePlanner.maximumSteps) boxes.")
        }
        guard movie.isFragmented else {
            kept += movie.sampleRanges(firstSeconds: seconds).spans
            return MediaTimePlan(shape: .mp4, ranges: ranges)
        }
        if let references {
            var time = 0.0
            for reference in references where time < seconds {
                kept.append(reference.range)
                time += reference.seconds
            }
        } else if var fragment = firstFragment {
            var time = 0.0
            for _ in 0..<MediaTimePlanner.maximumSteps where time < seconds && fragment < length {
                guard let moof = try await box(at: fragment, passedMediaData: false), moof.type == fourCC("moof"),
                    let moofEnd = moof.end
                else { break }
                time += try MP4Fragments.duration(
                    ofFragment: try await body(
                        of: moof, end: min(length, moofEnd), limit: MediaTimePlanner.maximumFragmentIndexSize),
                    movie: movie)
                var end = moofEnd
                if end < length, let data = try await box(at: end, passedMediaData: false), data.type == fourCC("mdat")
                {
                    end = data.end ?? length
                }
                kept.append(ByteRange(fragment, min(length, end)))
                fragment = end
            }
        }
        return MediaTimePlan(shape: .fragmentedMP4, ranges: ranges)
    }

    /// What the walk found: the ranges read in order, bridged, and the index boxes.
    private var ranges: [ByteRange] {
        SpanSet(
            MediaTimePlanner.bridged(kept, length: length, gap: bridging)
                + index.compactMap { $0.clamped(to: ByteRange(0, length)) }
        ).spans
    }

    /// The header of the box at `offset`, reading a new window when the last one does not hold
    /// it: past `mdat` with no `moov` yet, the rest of the file when it is small (a `moov` at the
    /// end is read in the same request), else ``MediaTimePlanner/headSize``.
    mutating func box(at offset: Int64, passedMediaData: Bool) async throws -> MP4Box? {
        let windowEnd = window.offset + Int64(window.bytes.count)
        if offset < window.offset || offset + 32 > windowEnd, windowEnd < length || offset < window.offset {
            let size =
                passedMediaData && length - offset <= MediaTimePlanner.maximumFragmentIndexSize
                ? length - offset : MediaTimePlanner.headSize
            window = (offset, try await read(ByteRange(offset, min(length, offset + size))))
        }
        let index = Int(offset - window.offset)
        guard index >= 0, index < window.bytes.count else { return nil }
        return try MP4Box.header(in: window.bytes[...], at: index, offset: offset)
    }

    /// The body of `box` (which ends at `end`), from the window or read; refused past `limit`.
    mutating func body(of box: MP4Box, end: Int64, limit: Int64) async throws -> ArraySlice<UInt8> {
        let start = box.offset + box.headerSize
        guard end - box.offset <= limit, start <= end else {
            throw MediaParseError("A \(end - box.offset)-byte index box is larger than \(limit) bytes, or cut short.")
        }
        let windowEnd = window.offset + Int64(window.bytes.count)
        if start >= window.offset, end <= windowEnd {
            return window.bytes[Int(start - window.offset)..<Int(end - window.offset)]
        }
        // A little past the end too, so the next box's header comes in the same request.
        window = (box.offset, try await read(ByteRange(box.offset, min(length, end + 4096))))
        guard Int64(window.bytes.count) >= end - box.offset else {
            throw MediaParseError("The file ended inside a box.")
        }
        return window.bytes[Int(box.headerSize)..<Int(end - box.offset)]
    }
}
