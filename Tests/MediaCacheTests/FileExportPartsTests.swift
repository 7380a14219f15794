// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheTestSupport
import Testing
import _CryptoExtras

@testable import MediaCache

/// The pure parts of a one-file export besides the movie merge: transport streams merged into one
/// programme, AES-128 undone piece by piece, WebVTT segments joined, and which segments a
/// playlist encrypts how. Each against what it must give, then on random input: a refusal or a
/// result, never a trap.
@Suite(.stallLimit) struct FileExportPartsTests {
    /// A packet of `pid` starting a table: the pointer field, `section`, and its CRC.
    static func tablePacket(pid: UInt16, _ section: [UInt8], counter: UInt8 = 0) -> [UInt8] {
        let crc = MovieMerge.bytes(UInt64(TransportStreamMerge.crc32(section)), width: 4)
        let payload = [0] + section + crc
        return [0x47, 0x40 | UInt8(pid >> 8), UInt8(pid & 0xFF), 0x10 | counter] + payload
            + [UInt8](repeating: 0xFF, count: 184 - payload.count)
    }

    static func pat(map: UInt16) -> [UInt8] {
        tablePacket(pid: 0, [0x00, 0xB0, 13, 0, 1, 0xC1, 0, 0, 0, 1, 0xE0 | UInt8(map >> 8), UInt8(map & 0xFF)])
    }

    static func pmt(map: UInt16, pcr: UInt16, streams: [(UInt8, UInt16)], counter: UInt8 = 0) -> [UInt8] {
        var section: [UInt8] = [0x02, 0, 0, 0, 1, 0xC1, 0, 0, 0xE0 | UInt8(pcr >> 8), UInt8(pcr & 0xFF), 0xF0, 0]
        for (type, pid) in streams { section += [type, 0xE0 | UInt8(pid >> 8), UInt8(pid & 0xFF), 0xF0, 0] }
        let length = section.count - 3 + 4
        (section[1], section[2]) = (0xB0 | UInt8(length >> 8), UInt8(length & 0xFF))
        return tablePacket(pid: map, section, counter: counter)
    }

    static func pes(pid: UInt16, counter: UInt8, fill: UInt8) -> [UInt8] {
        [0x47, 0x40 | UInt8(pid >> 8), UInt8(pid & 0xFF), 0x10 | counter, 0, 0, 1, 0xC0]
            + [UInt8](repeating: fill, count: 180)
    }

    static func programme(_ packets: [[UInt8]]) throws -> TransportStreamMerge.Programme? {
        var reader = TransportStreamMerge.ProgrammeReader()
        for packet in packets { try reader.read(packet[...]) }
        return reader.programme
    }

    @Test func aSeparateAudioStreamJoinsTheVariantsProgramme() throws {
        // ffmpeg writes each rendition with its first stream at 0x100 and its map at 0x1000.
        let main = [Self.pat(map: 0x1000), Self.pmt(map: 0x1000, pcr: 0x100, streams: [(0x1B, 0x100)], counter: 5)]
        let audio = [Self.pat(map: 0x1000), Self.pmt(map: 0x1000, pcr: 0x100, streams: [(0x0F, 0x100)])]
        let merge = try TransportStreamMerge(
            programmes: [try #require(try Self.programme(main)), try #require(try Self.programme(audio))])
        var output: [UInt8] = []
        for packet in main + [Self.pes(pid: 0x100, counter: 1, fill: 0xAA)] {
            merge.append(packet[...], source: 0, to: &output)
        }
        for packet in audio + [
            Self.pes(pid: 0x100, counter: 7, fill: 0xBB), Self.pes(pid: 0x1FFF, counter: 0, fill: 0),
        ] {
            merge.append(packet[...], source: 1, to: &output)
        }
        // PAT, merged PMT, video PES, audio PES: the audio's tables and padding are gone.
        #expect(output.count == 4 * 188)
        let packets = stride(from: 0, to: output.count, by: 188).map { Array(output[$0..<($0 + 188)]) }
        #expect(packets[0] == main[0])
        let merged = try #require(try Self.programme([packets[0], packets[1]]))
        #expect(merged.streams.map(\.pid) == [0x100, 0x101] && merged.streams.map(\.type) == [0x1B, 0x0F])
        #expect(merged.pcrPID == 0x100 && packets[1][3] & 0x0F == 5, "the map keeps its continuity counter")
        // The section's CRC: over the section with its CRC, MPEG-2's CRC is 0.
        let length = Int(packets[1][6] & 0x0F) << 8 | Int(packets[1][7])
        #expect(TransportStreamMerge.crc32(packets[1][5..<(8 + length)]) == 0)
        #expect(packets[2] == Self.pes(pid: 0x100, counter: 1, fill: 0xAA))
        #expect(packets[3] == Self.pes(pid: 0x101, counter: 7, fill: 0xBB), "moved to 0x101, nothing else changed")
    }

    /// Random packets (tables among them, mutated) read for a programme, and random programmes
    /// merged: a refusal or a result, never a trap.
    @Test func randomPacketsAndProgrammesNeverTrap() {
        var random = SplitMix(seed: Mutator.seed ^ 0x5453)
        var outcomes: [String: Int] = [:]
        for _ in 0..<max(1, Mutator.iterations / 10) {
            // The table's PID is the one the PAT maps in half the inputs (a random one would
            // match one time in 8,192, and nearly every input would be refused unread).
            let map = UInt16(random.below(0x2000))
            var packets = [
                Self.pat(map: map),
                Self.pmt(
                    map: random.below(2) == 0 ? map : UInt16(random.below(0x2000)), pcr: 0x100,
                    streams: (0..<random.below(31)).map { _ in
                        (UInt8(random.below(256)), UInt16(random.below(0x2000)))
                    }),
            ]
            for index in packets.indices where random.below(2) == 0 {
                for _ in 0..<(1 + random.below(4)) { packets[index][random.below(188)] = UInt8(random.below(256)) }
            }
            if random.below(4) == 0 { packets[1] = Array(packets[1].prefix(random.below(188))) }
            do {
                guard let programme = try Self.programme(packets) else {
                    outcomes["none", default: 0] += 1
                    continue
                }
                let merge = try TransportStreamMerge(programmes: [programme, programme])
                var output: [UInt8] = []
                for packet in packets where packet.count == 188 {
                    merge.append(packet[...], source: random.below(2), to: &output)
                }
                #expect(output.count % 188 == 0)
                outcomes["merged", default: 0] += 1
            } catch {
                outcomes["refused", default: 0] += 1
            }
        }
        print("fuzz programmes: \(outcomes)")
        #expect(outcomes.count == 3, "\(outcomes)")
    }

    /// AES-128-CBC undone in pieces of any size gives the plain bytes; a wrong key or a cut
    /// segment is refused.
    @Test func aSegmentIsDecipheredInPiecesOfAnySize() throws {
        var random = SplitMix(seed: Mutator.seed ^ 0xAE5)
        let key = (0..<16).map { _ in UInt8(random.below(256)) }
        for _ in 0..<300 {
            let plain = (0..<random.below(5000)).map { _ in UInt8(random.below(256)) }
            let iv = (0..<16).map { _ in UInt8(random.below(256)) }
            let cipher = Array(
                try AES._CBC.encrypt(plain, using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: iv)))
            var decryptor = try SegmentDecryptor(key: key, iv: iv)
            var output: [UInt8] = []
            var at = 0
            while at < cipher.count {
                let end = min(cipher.count, at + 1 + random.below(100))
                output += try decryptor.decrypt(cipher[at..<end])
                at = end
            }
            output += try decryptor.finish()
            #expect(output == plain)
        }
        let cipher = Array(
            try AES._CBC.encrypt(Array("a segment".utf8), using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: key))
        )
        var cut = try SegmentDecryptor(key: key, iv: key)
        _ = try cut.decrypt(cipher.dropLast(3))
        #expect(throws: MediaParseError.self) { try cut.finish() }
        #expect(throws: MediaParseError.self) { try SegmentDecryptor(key: [1, 2, 3], iv: key) }
    }

    @Test func webVTTSegmentsJoinOnTheMediaTimeline() throws {
        let segments = [
            "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000\n\n00:00:01.000 --> 00:00:03.000\nOne\n\n00:00:05.500 --> 00:00:06.500 line:80%\nSpans\n",
            "WEBVTT\r\nX-TIMESTAMP-MAP=LOCAL:00:00:00.000,MPEGTS:126000\r\n\r\n00:00:05.500 --> 00:00:06.500 line:80%\r\nSpans\r\n\r\ncue-id\r\n01:02.250 --> 01:03.000\r\nTwo\r\n",
        ].map { Array($0.utf8) }
        // The media's first timestamp is 1.4 s (126,000 at 90 kHz): the map's zero.
        let joined = try WebVTTJoin.join(segments, zero: 1400)
        #expect(
            joined
                == "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\nOne\n\n00:00:05.500 --> 00:00:06.500 line:80%\nSpans\n\ncue-id\n00:01:02.250 --> 00:01:03.000\nTwo\n"
        )
        // A later map moves its cues; no map means cue time 0 is timestamp 0.
        let later = try WebVTTJoin.join(
            [
                Array(
                    "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:1026000,LOCAL:00:00:00.000\n\n00:00:01.000 --> 00:00:02.000\nLater\n"
                        .utf8),
                Array("WEBVTT\n\n00:00:20.000 --> 00:00:21.000\nBare\n".utf8),
            ], zero: 1400)
        #expect(
            later.contains("00:00:11.000 --> 00:00:12.000\nLater")
                && later.contains("00:00:18.600 --> 00:00:19.600\nBare"))
        #expect(throws: WebVTTJoin.Failure.self) {
            try WebVTTJoin.join([Array("1\n00:00:01,000 --> 00:00:02,000\nSRT\n".utf8)], zero: 0)
        }
    }

    /// A segment whose lines end with a CR alone is WebVTT too (found by `anyTextJoinsOrIsRefused`
    /// with `MEDIACACHE_FUZZ_SEED=123`: a timing line ending `align:start\r` and a cue's text
    /// were read as one line). Its cues are moved to the timeline like any other's.
    @Test func aSegmentWhoseLinesEndWithCRAloneIsJoinedWithItsTimesMoved() throws {
        let joined = try WebVTTJoin.join(
            [Array("WEBVTT\r\r00:00:01.000 --> 00:00:02.000 align:start\rHi\r".utf8)], zero: 1000)
        #expect(joined == "WEBVTT\n\n00:00:00.000 --> 00:00:01.000 align:start\nHi\n", "\(joined.debugDescription)")
    }

    /// Any text as WebVTT segments (`|` a line end): a refusal, or WebVTT whose every timing line
    /// is well formed and never negative.
    @Test func anyTextJoinsOrIsRefused() throws {
        let timing = /^(\d{2,}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2,}):(\d{2}):(\d{2})\.(\d{3})( .*)?$/
        let outcomes = try Mutator.run("subtitles", share: 10) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n")
            let halves = [String(text.prefix(text.count / 2)), "WEBVTT\n\n" + text.dropFirst(text.count / 2)]
            let output: String
            do {
                output = try WebVTTJoin.join(halves.map { Array($0.utf8) }, zero: Int64(text.count) * 7)
            } catch {
                return ("refused", nil)
            }
            for line in output.split(separator: "\n") where line.contains("-->") {
                guard (try? timing.wholeMatch(in: String(line))) != nil else { return ("joined", "\(line)") }
            }
            return ("joined", output.hasPrefix("WEBVTT\n") ? nil : "no header")
        }
        try Mutator.expectVaried(outcomes, ["joined", "refused"])
    }

    @Test func eachSegmentKnowsItsEncryption() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MEDIA-SEQUENCE:7
            #EXTINF:2,
            clear.ts
            #EXT-X-KEY:METHOD=AES-128,URI="k1"
            #EXTINF:2,
            a.ts
            #EXT-X-KEY:METHOD=AES-128,URI="k2",IV=0X000102030405060708090A0B0C0D0E0F
            #EXTINF:2,
            b.ts
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:2,
            c.ts
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://x",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXT-X-KEY:METHOD=AES-128,URI="k3"
            #EXTINF:2,
            d.ts
            #EXT-X-KEY:METHOD=AES-128,URI="k4",KEYFORMAT="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"
            #EXTINF:2,
            e.ts
            #EXT-X-ENDLIST

            """
        let playlist = try HLSPlaylist(parsing: Array(text.utf8))
        let encryptions = try playlist.segmentEncryptions()
        #expect(
            encryptions == [
                .none, .aes128(key: "k1", iv: MovieMerge.bytes(8, width: 16)),
                .aes128(key: "k2", iv: Array(0..<16)), .none,
                .other(method: "SAMPLE-AES", keyFormat: "com.apple.streamingkeydelivery"),
                .other(method: "AES-128", keyFormat: "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"),
            ])
    }

    /// Found by the target below: a URI line after no `EXTINF` (or a variant's) is no segment, so
    /// it takes no key; counted as one, every later segment took the key of the one before it.
    @Test func aURILineWithoutEXTINFTakesNoSegmentsKey() throws {
        let text =
            "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x0000000000000000000000000000000A\nstray.ts\n#EXTINF:1,\na.ts\n"
        let playlist = try HLSPlaylist(parsing: Array(text.utf8))
        #expect(playlist.segments.map(\.uri) == ["a.ts"])
        #expect(try playlist.segmentEncryptions() == [.aes128(key: "k", iv: MovieMerge.bytes(10, width: 16))])
    }

    /// Found by the WebVTT target: cue text holding `-->` would start a cue of its own in the
    /// joined file; it is broken as `--&gt;`.
    @Test func aCueTextHoldingAnArrowIsBroken() throws {
        let segment = "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nthis --> that\n00:00:03.000 --> 00:00:04.000\n"
        let joined = try WebVTTJoin.join([Array(segment.utf8)], zero: 0)
        #expect(
            joined == "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nthis --&gt; that\n00:00:03.000 --&gt; 00:00:04.000\n")
    }

    @Test func packedAudioIsKnownByItsFramesAndItsTagSkipped() {
        #expect(
            PackedAudioWriter.kind(of: [0xFF, 0xF1, 0x50]) == "aac"
                && PackedAudioWriter.kind(of: [0xFF, 0xF9]) == "aac")
        #expect(
            PackedAudioWriter.kind(of: [0xFF, 0xFB, 0x90]) == "mp3"
                && PackedAudioWriter.kind(of: [0xFF, 0xF3]) == "mp3")
        #expect(PackedAudioWriter.kind(of: [0x47, 0x40]) == nil && PackedAudioWriter.kind(of: [0xFF]) == nil)
        // 10 + a 28-bit syncsafe size (+ 10 with a footer); a size byte with its top bit set is no tag.
        #expect(PackedAudioWriter.tagLength(Array("ID3".utf8) + [4, 0, 0, 0, 0, 1, 0x7F]) == 10 + 255)
        #expect(
            PackedAudioWriter.tagLength(Array("ID3".utf8) + [4, 0, 0x10, 0x7F, 0x7F, 0x7F, 0x7F]) == 20 + (1 << 28) - 1)
        #expect(PackedAudioWriter.tagLength(Array("ID3".utf8) + [4, 0, 0, 0, 0, 0x80, 0]) == nil)
        var random = SplitMix(seed: Mutator.seed ^ 0x1D3)
        for _ in 0..<10_000 {
            let bytes = (0..<random.below(12)).map { _ in UInt8(random.below(256)) }
            let length = PackedAudioWriter.tagLength(Array("ID3".utf8) + bytes)
            #expect(length.map { $0 >= 10 && $0 <= 20 + (1 << 28) } ?? true)
            _ = PackedAudioWriter.kind(of: bytes)
        }
    }

    /// Any playlist text: an encryption per segment, or a refusal; never a trap.
    @Test func anyPlaylistsEncryptionsAreOnePerSegment() throws {
        let outcomes = try Mutator.run("hls", share: 4) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n")
            guard let playlist = try? HLSPlaylist(parsing: Array(text.utf8)) else { return ("not a playlist", nil) }
            guard let encryptions = try? playlist.segmentEncryptions() else { return ("refused", nil) }
            return (
                "read",
                encryptions.count == playlist.segments.count
                    ? nil : "\(encryptions.count) for \(playlist.segments.count)"
            )
        }
        #expect((outcomes["read"] ?? 0) > 0, "\(outcomes)")
    }
}
