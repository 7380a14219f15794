// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Writes renditions of fragmented MP4 (CMAF) segments as one fragmented MP4 (``MovieMerge``):
/// the init sections' tracks in one `moov`, then every fragment of every rendition in decode-time
/// order, each `mdat` copied as it is read, then an `mfra`; the `moov`'s durations are filled in
/// last. Holds one `moof` per rendition and a piece of the store's read, however long the asset.
struct MovieWriter {
    /// The most bytes a `moov` or `moof` box, or the boxes between a `moof` and its `mdat`, may take.
    static let maximumHeaderBox = 32 << 20

    /// A box's type and its body's length (`nil`: to the end of its resource), its header read.
    private struct BoxHead {
        var type: UInt32
        var header: [UInt8]
        var bodyLength: Int64?
        /// Where the box starts in its resource's file.
        var offset: Int64
    }

    /// A fragment read up to its `mdat`'s body.
    private struct Fragment {
        var moof: [UInt8]
        var offset: Int64
        /// The boxes between the `moof` and the `mdat`, and the `mdat`'s header.
        var between: [UInt8]
        var dataLength: Int64?
        var seconds: Double
    }

    /// Writes `renditions` to `output`; returns the first fragment's decode time in milliseconds
    /// (the time a player shows as 0). Each rendition's first resource must hold its init section.
    /// - Throws: ``MediaParseError`` for boxes that cannot be read (or content under DRM),
    ///   ``CacheError`` for bytes that are not held or a file that cannot be written.
    static func write(_ renditions: [ResourceCursor], to output: ExportOutput) async throws -> Int64 {
        var sections: [ArraySlice<UInt8>] = []
        for cursor in renditions {
            guard let section = try await initSection(cursor) else {
                throw MediaParseError("A rendition has no init section (moov) before its first fragment.")
            }
            sections.append(section[...])
        }
        var merge = try MovieMerge(initSections: sections)
        try await output.write(merge.header)
        var pending: [Fragment?] = Array(repeating: nil, count: renditions.count)
        var done = Array(repeating: false, count: renditions.count)
        var sequence: UInt32 = 0
        var zero: Double?
        while true {
            for index in renditions.indices where pending[index] == nil && !done[index] {
                pending[index] = try await nextFragment(
                    renditions[index], source: index, merge: merge, init: sections[index])
                done[index] = pending[index] == nil
            }
            let ready = pending.enumerated().compactMap { item in item.element.map { (item.offset, $0) } }
            guard let (index, fragment) = ready.min(by: { $0.1.seconds < $1.1.seconds }) else { break }
            pending[index] = nil
            zero = zero ?? fragment.seconds
            sequence &+= 1
            var moof = fragment.moof
            try merge.rewrite(
                fragment: &moof, source: index, sequence: sequence, oldOffset: fragment.offset, newOffset: output.offset
            )
            try await output.write(moof)
            try await output.write(fragment.between)
            try await renditions[index].pass(fragment.dataLength, to: output)
        }
        try await output.write(merge.randomAccess)
        try await output.write(merge.header, at: 0)
        return Int64(min(max(0, (zero ?? 0) * 1000), 1e15))
    }

    /// The first rendition resource's `ftyp` and `moov`, the cursor left after them.
    private static func initSection(_ cursor: ResourceCursor) async throws -> [UInt8]? {
        guard try await cursor.advance() else { return nil }
        var section: [UInt8] = []
        while let head = try await nextBox(cursor) {
            if head.type == fourCC("moov") || head.type == fourCC("ftyp") {
                section += head.header + (try await body(head, cursor))
                if head.type == fourCC("moov") { return section }
            } else if head.type == fourCC("moof") {
                return nil
            } else {
                try await cursor.pass(head.bodyLength)
            }
        }
        return nil
    }

    /// The rendition's next fragment, up to its `mdat`'s body; `nil` after its last. A `moov`
    /// met again must be the rendition's own (an init section repeated per segment).
    private static func nextFragment(
        _ cursor: ResourceCursor, source: Int, merge: MovieMerge, init section: ArraySlice<UInt8>
    )
        async throws -> Fragment?
    {
        while true {
            guard let head = try await nextBox(cursor) else {
                guard try await cursor.advance() else { return nil }
                continue
            }
            switch head.type {
            case fourCC("moov"), fourCC("ftyp"):
                let bytes = head.header + (try await body(head, cursor))
                guard
                    head.type == fourCC("ftyp") || section.elementsEqual(bytes)
                        || section.suffix(bytes.count).elementsEqual(bytes)
                else {
                    throw MediaParseError(
                        "A rendition's init section changes midway (a discontinuity); it cannot be one file.")
                }
            case fourCC("moof"):
                let moof = head.header + (try await body(head, cursor))
                var between: [UInt8] = []
                while true {
                    guard let next = try await nextBox(cursor) else {
                        throw MediaParseError("A moof box has no mdat after it.")
                    }
                    between += next.header
                    if next.type == fourCC("mdat") {
                        guard next.bodyLength != nil else {
                            throw MediaParseError(
                                "An mdat box without a size (to the end of its file) cannot be moved.")
                        }
                        let body = moof[(moof.count - Int(head.bodyLength ?? 0))...]
                        let runs = try MP4Fragments.trackFragments(of: body) { id in
                            merge.tracks.first { $0.source == source && $0.originalID == id }?.defaultDuration
                        }
                        let seconds =
                            runs.first.map { run -> Double in
                                let track = merge.tracks.first { $0.source == source && $0.originalID == run.trackID }
                                return Double(run.decodeTime ?? track?.end ?? 0) / Double(track?.timescale ?? 1)
                            } ?? 0
                        return Fragment(
                            moof: moof, offset: head.offset, between: between, dataLength: next.bodyLength,
                            seconds: seconds)
                    }
                    between += try await body(next, cursor)
                    guard between.count <= maximumHeaderBox else {
                        throw MediaParseError("Too much between a moof and its mdat.")
                    }
                }
            default:
                // styp, sidx, prft, emsg, free: of the segment, not of the one file.
                try await cursor.pass(head.bodyLength)
            }
        }
    }

    /// The header of the next box of the current resource; `nil` at its end.
    private static func nextBox(_ cursor: ResourceCursor) async throws -> BoxHead? {
        guard cursor.current != nil, !(try await cursor.atEnd()) else { return nil }
        let offset = cursor.position
        var header = try await cursor.exactly(8)
        if header[0..<4].elementsEqual([0, 0, 0, 1]) { header += try await cursor.exactly(8) }
        if header[4..<8].elementsEqual(Array("uuid".utf8)) { header += try await cursor.exactly(16) }
        guard let box = try MP4Box.header(in: header[...], at: 0, offset: offset) else {
            throw MediaParseError("A box header ends early.")
        }
        return BoxHead(
            type: box.type, header: header, bodyLength: box.size.map { $0 - Int64(header.count) }, offset: offset)
    }

    private static func body(_ head: BoxHead, _ cursor: ResourceCursor) async throws -> [UInt8] {
        guard let length = head.bodyLength, length <= Int64(maximumHeaderBox) else {
            throw MediaParseError("A \(String(decoding: head.header[4..<8], as: UTF8.self)) box is too large to read.")
        }
        return try await cursor.exactly(Int(length))
    }
}
