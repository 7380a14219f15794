// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// ``MovieMerge`` on init sections and fragments built here, each with what it must become: the
/// tracks of two renditions (each track 1 in its own) in one `moov` as tracks 1 and 2, with their
/// handlers, timescales and defaults; fragments rewritten in place; durations and `mfra` from the
/// fragments written. Then mutated inputs: a refusal or a result, never a trap.
@Suite(.stallLimit) struct MovieMergeTests {
    /// A box of `type` around `body`.
    static func box(_ type: String, _ body: [UInt8]) -> [UInt8] { SyntheticMP4.box(type, body) }
    static func u32(_ value: UInt32) -> [UInt8] { SyntheticMP4.u32(value) }
    static func u64(_ value: UInt64) -> [UInt8] { u32(UInt32(value >> 32)) + u32(UInt32(value & 0xFFFF_FFFF)) }

    /// An init section with one track `id` of `handler`, `timescale`, default duration `duration`
    /// (version 0 boxes, as most packagers write), its sample entry `entry`.
    static func initSection(
        id: UInt32 = 1, handler: String, timescale: UInt32, duration: UInt32, entry: String = "avc1",
        extra: [UInt8] = []
    ) -> [UInt8] {
        let mvhd = box(
            "mvhd",
            [0, 0, 0, 0] + u32(1) + u32(2) + u32(1000) + u32(0) + [UInt8](repeating: 7, count: 76) + u32(id + 1))
        let tkhd = box(
            "tkhd", [0, 0, 0, 3] + u32(1) + u32(2) + u32(id) + u32(0) + u32(0) + [UInt8](repeating: 9, count: 60))
        let mdhd = box("mdhd", [0, 0, 0, 0] + u32(1) + u32(2) + u32(timescale) + u32(0) + [0x55, 0xC4, 0, 0])
        let hdlr = box("hdlr", [0, 0, 0, 0] + u32(0) + Array(handler.utf8) + [UInt8](repeating: 0, count: 13))
        let stsd = box("stsd", [0, 0, 0, 0] + u32(1) + box(entry, [UInt8](repeating: 1, count: 20)))
        let minf = box("minf", box("stbl", stsd + box("stts", [0, 0, 0, 0] + u32(0))))
        let trak = box("trak", tkhd + box("tref", box("chap", u32(9))) + box("mdia", mdhd + hdlr + minf))
        let trex = box("trex", [0, 0, 0, 0] + u32(id) + u32(1) + u32(duration) + u32(0) + u32(0))
        return box("ftyp", Array("iso6".utf8) + u32(0) + Array("iso6cmfc".utf8))
            + box("moov", mvhd + trak + box("mvex", trex) + extra)
    }

    /// A fragment of track `id`: `sequence`, decode time `time`, `samples` samples of `duration`
    /// each (in `trun` when `explicit`, else by default), and a `base_data_offset` when given.
    static func fragment(
        id: UInt32 = 1, sequence: UInt32, time: UInt64, samples: Int, duration: UInt32, explicit: Bool,
        baseDataOffset: UInt64? = nil
    ) -> [UInt8] {
        let flags: UInt32 = baseDataOffset == nil ? 0x02_0000 : 0x01
        let tfhd = box("tfhd", u32(flags) + u32(id) + (baseDataOffset.map(u64) ?? []))
        let tfdt = box("tfdt", [1, 0, 0, 0] + u64(time))
        var run = u32(explicit ? 0x301 : 0x201) + u32(UInt32(samples)) + u32(0)
        for _ in 0..<samples { run += (explicit ? u32(duration) : []) + u32(100) }
        return box("moof", box("mfhd", u32(0) + u32(sequence)) + box("traf", tfhd + tfdt + box("trun", run)))
    }

    @Test func twoRenditionsBecomeOneMovieWithTheirTracksRenumbered() throws {
        let video = Self.initSection(handler: "vide", timescale: 12_800, duration: 512)
        let audio = Self.initSection(handler: "soun", timescale: 44_100, duration: 1024, entry: "mp4a")
        var merge = try MovieMerge(initSections: [video[...], audio[...]])
        #expect(merge.tracks.map(\.id) == [1, 2] && merge.tracks.map(\.originalID) == [1, 1])
        #expect(merge.tracks.map(\.handler) == [fourCC("vide"), fourCC("soun")])
        #expect(!merge.isAudioOnly)
        // 30 fragments of 2 s each, audio's by default durations, video's in their runs.
        var offset: Int64 = 1000
        for index in 0..<30 {
            var moof = Self.fragment(
                sequence: 1, time: UInt64(index) * 25_600, samples: 50, duration: 512, explicit: true)
            let before = moof
            let runs = try merge.rewrite(
                fragment: &moof, source: 0, sequence: UInt32(2 * index + 1), oldOffset: 0, newOffset: offset)
            #expect(
                moof.count == before.count
                    && runs == [MovieMerge.Run(track: 1, decodeTime: UInt64(index) * 25_600, ticks: 25_600)])
            offset += Int64(moof.count) + 5000
            var sound = Self.fragment(
                sequence: 1, time: UInt64(index) * 88_064, samples: 86, duration: 0, explicit: false)
            let runs2 = try merge.rewrite(
                fragment: &sound, source: 1, sequence: UInt32(2 * index + 2), oldOffset: 0, newOffset: offset)
            #expect(runs2 == [MovieMerge.Run(track: 2, decodeTime: UInt64(index) * 88_064, ticks: 88_064)])
            // The audio fragment now names track 2 and its sequence number.
            let traf = try #require(try MP4Box.child(fourCC("traf"), of: sound[8...]))
            let tfhd = try #require(try MP4Box.child(fourCC("tfhd"), of: traf))
            #expect(Array(tfhd[(tfhd.startIndex + 4)..<(tfhd.startIndex + 8)]) == Self.u32(2))
            #expect(Array(sound[20..<24]) == Self.u32(UInt32(2 * index + 2)))
            offset += Int64(sound.count) + 3000
        }
        // The header read back: two tracks, durations of 60 s, the tref left out.
        let header = merge.header
        let top = try MP4Box.children(of: header[...])
        #expect(top.map(\.type) == [fourCC("ftyp"), fourCC("moov")])
        let movie = try MP4Movie(moov: top[1].body)
        #expect(movie.tracks.map(\.id) == [1, 2] && movie.tracks.map(\.timescale) == [12_800, 44_100])
        #expect(movie.defaultDurations == [1: 512, 2: 1024] && movie.isFragmented)
        #expect(movie.timescale == 1000 && movie.duration == 60_000)  // the audio's 59.9 s is shorter
        let traks = try MP4Box.children(of: top[1].body).filter { $0.type == fourCC("trak") }
        #expect(try traks.allSatisfy { try MP4Box.child(fourCC("tref"), of: $0.body) == nil })
        let mdia = try #require(try MP4Box.child(fourCC("mdia"), of: traks[0].body))
        let mdhd = try #require(try MP4Box.child(fourCC("mdhd"), of: mdia))
        var reader = BoxReader(mdhd)
        #expect(try reader.u8() == 1)
        try reader.skip(3 + 16)
        #expect(try reader.u32() == 12_800 && (try reader.u64()) == 30 * 25_600)
        // The header is as long before the fragments as after: it is written first, then again.
        #expect(try MovieMerge(initSections: [video[...], audio[...]]).header.count == header.count)
        // mfra: a tfra per track of 30 entries, and mfro giving its size.
        let mfra = merge.randomAccess
        let boxes = try MP4Box.children(of: mfra[8...])
        #expect(boxes.map(\.type) == [fourCC("tfra"), fourCC("tfra"), fourCC("mfro")])
        var tfra = BoxReader(boxes[1].body)
        try tfra.skip(4)
        #expect(try tfra.u32() == 2)
        try tfra.skip(4)
        #expect(try tfra.u32() == 30)
        var mfro = BoxReader(boxes[2].body)
        try mfro.skip(4)
        #expect(try mfro.u32() == UInt32(mfra.count))
    }

    @Test func anAbsoluteBaseDataOffsetMovesWithItsFragment() throws {
        var merge = try MovieMerge(initSections: [
            Self.initSection(handler: "vide", timescale: 90_000, duration: 3600)[...]
        ])
        for (old, new) in [(Int64(4096), Int64(70_000)), (70_000, 4096)] {
            var moof = Self.fragment(
                sequence: 1, time: 0, samples: 3, duration: 0, explicit: false, baseDataOffset: UInt64(old + 700))
            try merge.rewrite(fragment: &moof, source: 0, sequence: 1, oldOffset: old, newOffset: new)
            let traf = try #require(try MP4Box.child(fourCC("traf"), of: moof[8...]))
            let tfhd = try #require(try MP4Box.child(fourCC("tfhd"), of: traf))
            var reader = BoxReader(tfhd)
            try reader.skip(8)
            #expect(try reader.u64() == UInt64(new + 700))
        }
        #expect(merge.tracks[0].end == 3 * 3600)
    }

    @Test func contentUnderDRMIsRefused() throws {
        let pssh = Self.box("pssh", [0, 0, 0, 0] + [UInt8](repeating: 0xED, count: 16) + Self.u32(0))
        for section in [
            Self.initSection(handler: "vide", timescale: 90_000, duration: 1, extra: pssh),
            Self.initSection(handler: "vide", timescale: 90_000, duration: 1, entry: "encv"),
            Self.initSection(handler: "soun", timescale: 48_000, duration: 1, entry: "enca"),
        ] {
            #expect(throws: MediaParseError.self) { try MovieMerge(initSections: [section[...]]) }
        }
        // A fragment naming a track its init section does not name.
        var merge = try MovieMerge(initSections: [
            Self.initSection(handler: "vide", timescale: 90_000, duration: 1)[...]
        ])
        var stranger = Self.fragment(id: 7, sequence: 1, time: 0, samples: 1, duration: 1, explicit: true)
        #expect(throws: MediaParseError.self) {
            try merge.rewrite(fragment: &stranger, source: 0, sequence: 1, oldOffset: 0, newOffset: 0)
        }
    }

    /// Init sections and fragments with bytes changed, cut or added: the merge and the rewrite
    /// throw or return, never trap, and a rewritten fragment keeps its length.
    @Test func mutatedInitSectionsAndFragmentsNeverTrap() throws {
        var random = SplitMix(seed: Mutator.seed ^ 0x4D45_5247)
        var outcomes: [String: Int] = [:]
        for _ in 0..<max(1, Mutator.iterations / 20) {
            var section = Self.initSection(
                handler: random.below(2) == 0 ? "vide" : "soun", timescale: UInt32(random.below(100_000)),
                duration: UInt32(random.below(5000)))
            var moof = Self.fragment(
                sequence: UInt32(random.below(9)), time: random.next(), samples: random.below(40),
                duration: UInt32(random.below(1 << 20)), explicit: random.below(2) == 0,
                baseDataOffset: random.below(3) == 0 ? random.next() : nil)
            Self.mutate(&section, &random)
            if random.below(2) == 0 { Self.mutate(&moof, &random) }
            do {
                var merge = try MovieMerge(initSections: [section[...]])
                let length = moof.count
                _ = merge.header
                _ = try merge.rewrite(
                    fragment: &moof, source: 0, sequence: 3, oldOffset: Int64(random.below(1 << 30)),
                    newOffset: Int64(random.below(1 << 30)))
                #expect(moof.count == length)
                _ = merge.randomAccess
                outcomes["merged", default: 0] += 1
            } catch {
                outcomes["refused", default: 0] += 1
            }
        }
        #expect((outcomes["merged"] ?? 0) > 0 && (outcomes["refused"] ?? 0) > 0, "\(outcomes)")
    }

    /// Sets a few bytes to edge values, flips some, cuts or inserts a run.
    static func mutate(_ bytes: inout [UInt8], _ random: inout SplitMix) {
        for _ in 0..<(1 + random.below(4)) {
            guard !bytes.isEmpty else { return }
            let at = random.below(bytes.count)
            switch random.below(5) {
            case 0: bytes[at] = [0, 0xFF, 0x7F, 0x80, 1][random.below(5)]
            case 1: bytes[at] ^= UInt8(1 << random.below(8))
            case 2: bytes.removeSubrange(at..<min(bytes.count, at + 1 + random.below(16)))
            case 3:
                bytes.insert(
                    contentsOf: [UInt8](repeating: UInt8(random.below(256)), count: 1 + random.below(8)), at: at)
            default:
                bytes.replaceSubrange(
                    at..<min(bytes.count, at + 4), with: Self.u32([0, 1, 8, 0xFFFF_FFFF][random.below(4)]))
            }
        }
    }
}
