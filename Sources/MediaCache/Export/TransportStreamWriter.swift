// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Writes renditions of MPEG-TS segments as one `.ts`: one rendition's segments one after
/// another, as deciphered; with separate audio renditions, one programme
/// (``TransportStreamMerge``), each rendition's segments taken in turn by their start times.
enum TransportStreamWriter {
    /// The most packets read for a stream's programme tables before giving up.
    static let programmeSearch = 8192

    /// Writes `renditions` to `output`; returns the first segment's earliest timestamp in
    /// milliseconds (the time a player shows as 0). `fresh` makes another cursor over a rendition's resources
    /// (for its tables, read before anything is written).
    /// - Throws: ``MediaParseError`` for segments that are not whole packets or tables that
    ///   cannot be read, ``CacheError`` for bytes not held or a file that cannot be written.
    static func write(
        _ renditions: [ResourceCursor], fresh: (Int) -> ResourceCursor, to output: ExportOutput
    ) async throws -> Int64 {
        var merge: TransportStreamMerge?
        if renditions.count > 1 {
            var programmes: [TransportStreamMerge.Programme] = []
            for index in renditions.indices { programmes.append(try await programme(of: fresh(index))) }
            merge = try TransportStreamMerge(programmes: programmes)
        }
        // Each rendition's next resource and its start.
        var starts = Array(repeating: 0.0, count: renditions.count)
        var done = Array(repeating: false, count: renditions.count)
        var zero: Int64?
        while let index = renditions.indices.filter({ !done[$0] }).min(by: { starts[$0] < starts[$1] }) {
            let cursor = renditions[index]
            guard try await cursor.advance(), let resource = cursor.current else {
                done[index] = true
                continue
            }
            starts[index] += resource.seconds
            try await copyPackets(cursor, source: index, merge: merge, zero: &zero, to: output)
        }
        return (zero ?? 0) / 90
    }

    /// The programme of the rendition's first segment.
    private static func programme(of cursor: ResourceCursor) async throws -> TransportStreamMerge.Programme {
        var reader = TransportStreamMerge.ProgrammeReader()
        if try await cursor.advance() {
            for _ in 0..<programmeSearch {
                let packet = try await cursor.next(atMost: TransportStreamMerge.packetSize)
                guard packet.count == TransportStreamMerge.packetSize else { break }
                try reader.read(packet)
                if let programme = reader.programme { return programme }
            }
        }
        throw MediaParseError("A rendition's segments name no programme (PAT and PMT) in their first packets.")
    }

    /// The current resource's packets, as the merged stream carries them.
    private static func copyPackets(
        _ cursor: ResourceCursor, source: Int, merge: TransportStreamMerge?, zero: inout Int64?,
        to output: ExportOutput
    ) async throws {
        let size = TransportStreamMerge.packetSize
        var carry: [UInt8] = []
        var passed = 0
        var first = true
        while true {
            let piece = try await cursor.next(atMost: 1 << 20)
            if piece.isEmpty { break }
            if first {
                guard piece.first == 0x47 else {
                    throw MediaParseError("A segment does not start with an MPEG-TS packet.")
                }
                first = false
                if zero == nil { zero = MPEGTSTimestamps.earliestPTS(Array(piece)) }
            }
            guard let merge else {
                passed = (passed + piece.count) % size
                try await output.write(piece)
                continue
            }
            let bytes = carry + piece
            let whole = bytes.count / size * size
            var packets: [UInt8] = []
            packets.reserveCapacity(whole)
            var at = 0
            while at < whole {
                let packet = bytes[at..<(at + size)]
                guard packet.first == 0x47 else { throw MediaParseError("A segment loses MPEG-TS packet sync.") }
                merge.append(packet, source: source, to: &packets)
                at += size
            }
            carry = Array(bytes[whole...])
            try await output.write(packets)
        }
        guard carry.isEmpty, passed == 0 else {
            throw MediaParseError("A segment is not a whole number of MPEG-TS packets.")
        }
    }
}
