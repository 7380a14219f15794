// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Several MPEG transport streams (ISO/IEC 13818-1) as one programme: an HLS variant's and its
/// separate audio renditions'. The first stream's packets pass as they are but for its programme
/// map, which also lists the others' elementary streams; the others' elementary stream packets
/// move to PIDs the first does not use, and their own tables (PAT, PMT, SDT) and padding are
/// dropped. Pure: packets in, packets out.
struct TransportStreamMerge {
    static let packetSize = 188

    /// A stream's programme: its map's PID and its elementary streams (type, PID, descriptors).
    struct Programme: Equatable {
        var mapPID: UInt16
        var pcrPID: UInt16
        var info: [UInt8]
        var streams: [(type: UInt8, pid: UInt16, info: [UInt8])]
        /// The map section's fields before its streams (programme number to version).
        var programmeNumber: UInt16
        var version: UInt8

        static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.mapPID == rhs.mapPID && lhs.streams.map(\.pid) == rhs.streams.map(\.pid)
        }
    }

    /// For each stream after the first, its elementary PIDs' new PIDs.
    private var moves: [[UInt16: UInt16]]
    private let mapPID: UInt16
    /// The first stream's map packet payload as merged (a pointer field and the section).
    private let mergedMap: [UInt8]

    /// - Throws: ``MediaParseError`` when a merged map would not fit one packet.
    init(programmes: [Programme]) throws(MediaParseError) {
        guard let first = programmes.first else { throw MediaParseError("No transport stream to merge.") }
        var used = Set(first.streams.map(\.pid) + [0, 0x11, 0x1FFF, first.mapPID, first.pcrPID])
        var streams = first.streams
        moves = [[:]]
        var next: UInt16 = 0x100
        for programme in programmes.dropFirst() {
            var move: [UInt16: UInt16] = [:]
            for stream in programme.streams {
                while used.contains(next) { next += 1 }
                guard next < 0x1FFF else { throw MediaParseError("The merged programme has too many streams.") }
                used.insert(next)
                move[stream.pid] = next
                streams.append((stream.type, next, stream.info))
            }
            moves.append(move)
        }
        mapPID = first.mapPID
        var section: [UInt8] = [0x02, 0, 0]  // table_id, then the length
        section += MovieMerge.bytes(UInt64(first.programmeNumber), width: 2)
        section += [0xC1 | (first.version & 0x1F) << 1, 0, 0]
        section += MovieMerge.bytes(UInt64(0xE000 | first.pcrPID), width: 2)
        section += MovieMerge.bytes(UInt64(0xF000 | first.info.count), width: 2) + first.info
        for stream in streams {
            section += [stream.type] + MovieMerge.bytes(UInt64(0xE000 | stream.pid), width: 2)
            section += MovieMerge.bytes(UInt64(0xF000 | stream.info.count), width: 2) + stream.info
        }
        let length = section.count - 3 + 4
        section[1] = 0xB0 | UInt8(length >> 8)
        section[2] = UInt8(length & 0xFF)
        section += MovieMerge.bytes(UInt64(Self.crc32(section)), width: 4)
        guard section.count + 1 <= Self.packetSize - 4, length < 1021 else {
            throw MediaParseError("The merged programme map does not fit one packet.")
        }
        mergedMap = [0] + section + [UInt8](repeating: 0xFF, count: Self.packetSize - 4 - 1 - section.count)
    }

    /// Appends `packet` of stream `source`, as the merged stream carries it, to `output`.
    func append(_ packet: ArraySlice<UInt8>, source: Int, to output: inout [UInt8]) {
        let pid = Self.pid(packet)
        if source == 0 {
            if pid == mapPID, packet[packet.startIndex + 1] & 0x40 != 0 {
                // The merged map, with the packet's continuity counter.
                let counter = packet[packet.startIndex + 3] & 0x0F
                output += [0x47, 0x40 | UInt8(pid >> 8), UInt8(pid & 0xFF), 0x10 | counter] + mergedMap
            } else if pid != mapPID {
                output += packet
            }
            return
        }
        guard let moved = moves[source][pid] else { return }
        let start = output.count
        output += packet
        output[start + 1] = packet[packet.startIndex + 1] & 0xE0 | UInt8(moved >> 8)
        output[start + 2] = UInt8(moved & 0xFF)
    }

    static func pid(_ packet: ArraySlice<UInt8>) -> UInt16 {
        UInt16(packet[packet.startIndex + 1] & 0x1F) << 8 | UInt16(packet[packet.startIndex + 2])
    }

    /// Learns a stream's programme from its packets: the first programme its PAT names, and
    /// that programme's map. `nil` until both were seen.
    struct ProgrammeReader {
        private var mapPID: UInt16?
        private(set) var programme: Programme?

        /// Reads one packet. - Throws: ``MediaParseError`` for a table that cannot be read.
        mutating func read(_ packet: ArraySlice<UInt8>) throws(MediaParseError) {
            guard programme == nil, packet.count == TransportStreamMerge.packetSize, packet.first == 0x47,
                packet[packet.startIndex + 1] & 0x40 != 0
            else { return }
            let pid = TransportStreamMerge.pid(packet)
            guard pid == 0 || pid == mapPID else { return }
            var reader = BoxReader(packet)
            try reader.skip(3)
            let control = try reader.u8()
            if control & 0x20 != 0 { try reader.skip(Int(try reader.u8())) }
            try reader.skip(Int(try reader.u8()))  // the pointer field
            let tableID = try reader.u8()
            let length = Int(try reader.u16() & 0x0FFF)
            guard length >= 9, length <= reader.remaining else {
                throw MediaParseError("A transport stream table spans packets or claims more than it holds.")
            }
            var section = BoxReader(reader.bytes[reader.position..<(reader.position + length - 4)])
            if pid == 0, tableID == 0 {
                try section.skip(5)
                while section.remaining >= 4 {
                    let number = try section.u16()
                    let target = try section.u16() & 0x1FFF
                    if number != 0 {
                        mapPID = target
                        return
                    }
                }
            } else if pid == mapPID, tableID == 2 {
                let number = try section.u16()
                let version = (try section.u8() >> 1) & 0x1F
                try section.skip(2)
                let pcr = try section.u16() & 0x1FFF
                let info = Array(try bytes(&section, Int(try section.u16() & 0x0FFF)))
                var streams: [(type: UInt8, pid: UInt16, info: [UInt8])] = []
                while section.remaining >= 5 {
                    let type = try section.u8()
                    let stream = try section.u16() & 0x1FFF
                    streams.append((type, stream, Array(try bytes(&section, Int(try section.u16() & 0x0FFF)))))
                }
                programme = Programme(
                    mapPID: pid, pcrPID: pcr, info: info, streams: streams, programmeNumber: number, version: version)
            }
        }

        private func bytes(_ reader: inout BoxReader, _ count: Int) throws(MediaParseError) -> ArraySlice<UInt8> {
            let start = reader.position
            try reader.skip(count)
            return reader.bytes[start..<(start + count)]
        }
    }

    /// The CRC-32 of MPEG-2 sections (polynomial 0x04C11DB7, not reflected, starting all ones).
    static func crc32(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte) << 24
            for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? crc << 1 ^ 0x04C1_1DB7 : crc << 1 }
        }
        return crc
    }
}
