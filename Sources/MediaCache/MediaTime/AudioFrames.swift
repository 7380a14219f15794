// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The byte rate of an audio file without an index, from its first frames: MPEG audio (MP3,
/// with its Xing/Info or VBRI header when it is VBR), ADTS (AAC), or WAV's `fmt ` chunk.
enum AudioFrames {
    /// Where the audio starts and how many bytes a second of it takes.
    struct Rate: Equatable {
        /// The first frame's offset (after an ID3v2 tag or WAV's headers).
        var start: Int64
        var bytesPerSecond: Double
        var shape: MediaShape
    }

    /// The rate `head` (the file's first bytes) gives, if it starts like one of the formats.
    static func rate(head: [UInt8], length: Int64) -> Rate? {
        if head.count >= 12, head[0..<4].elementsEqual("RIFF".utf8), head[8..<12].elementsEqual("WAVE".utf8) {
            return wave(head)
        }
        var start = 0
        // ID3v2 (id3.org, v2.4 §3.1): a 10-byte header, a syncsafe size, 10 more with a footer.
        if head.count >= 10, head[0..<3].elementsEqual("ID3".utf8), head[6...9].allSatisfy({ $0 < 0x80 }) {
            start = 10 + head[6...9].reduce(0) { $0 << 7 | Int($1) } + (head[5] & 0x10 != 0 ? 10 : 0)
        }
        guard start + 4 <= head.count else { return nil }
        if let rate = adts(head, from: start) { return rate }
        return mpeg(head, from: start, length: length)
    }

    /// MPEG-1/2/2.5 audio: the first frame header's bit rate, or a Xing/Info or VBRI header's
    /// frame and byte counts (a VBR file's average).
    static func mpeg(_ head: [UInt8], from start: Int, length: Int64) -> Rate? {
        // The first frame: a sync word with a header whose next frame also starts with one.
        var index = start
        let scanEnd = min(head.count - 4, start + 64 << 10)
        while index < scanEnd {
            if let frame = MPEGFrame(head, at: index),
                index + frame.length + 2 > head.count || MPEGFrame(head, at: index + frame.length) != nil
            {
                let audioBytes = Double(max(1, length - Int64(index)))
                if let frames = frame.framesFromVBRHeader(head, at: index), frames > 0 {
                    let seconds = Double(frames) * Double(frame.samples) / Double(frame.sampleRate)
                    return Rate(start: Int64(index), bytesPerSecond: audioBytes / seconds, shape: .mp3)
                }
                return Rate(start: Int64(index), bytesPerSecond: Double(frame.bitRate) / 8, shape: .mp3)
            }
            index += 1
        }
        return nil
    }

    /// ADTS (ISO/IEC 13818-7 §6.2): the first frames' lengths over their samples.
    static func adts(_ head: [UInt8], from start: Int) -> Rate? {
        let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]
        var index = start
        var frames = 0
        var bytes = 0
        var sampleRate = 0
        while index + 7 <= head.count, frames < 64 {
            guard head[index] == 0xFF, head[index + 1] & 0xF6 == 0xF0 else { break }
            let rateIndex = Int(head[index + 2] >> 2 & 0x0F)
            let length = Int(head[index + 3] & 0x03) << 11 | Int(head[index + 4]) << 3 | Int(head[index + 5] >> 5)
            guard rateIndex < rates.count, length >= 7 else { break }
            sampleRate = rates[rateIndex]
            frames += 1 + Int(head[index + 6] & 0x03)
            bytes += length
            index += length
        }
        guard frames >= 2, sampleRate > 0 else { return nil }
        return Rate(
            start: Int64(start), bytesPerSecond: Double(bytes) / (Double(frames) * 1024 / Double(sampleRate)),
            shape: .adts)
    }

    /// WAV: `fmt `'s byte rate, and where `data` begins.
    static func wave(_ head: [UInt8]) -> Rate? {
        var index = 12
        var byteRate: UInt32?
        while index + 8 <= head.count {
            var reader = BoxReader(head[(index + 4)..<(index + 8)])
            guard let little = try? reader.u32() else { return nil }
            let size = Int(little.byteSwapped)  // RIFF sizes are little-endian
            if head[index..<(index + 4)].elementsEqual("fmt ".utf8), index + 20 <= head.count {
                byteRate = (16..<20).reversed().reduce(0) { $0 << 8 | UInt32(head[index + $1]) }
            }
            if head[index..<(index + 4)].elementsEqual("data".utf8), let byteRate, byteRate > 0 {
                return Rate(start: Int64(index + 8), bytesPerSecond: Double(byteRate), shape: .wave)
            }
            guard size <= Int(Int32.max) else { return nil }
            index += 8 + size + (size & 1)
        }
        return nil
    }
}

/// One MPEG audio frame header (ISO/IEC 11172-3 §2.4.2.3, 13818-3, and MPEG 2.5).
struct MPEGFrame: Equatable {
    var version: Int  // 1, 2, or 25 for MPEG 2.5
    var layer: Int
    var bitRate: Int
    var sampleRate: Int
    var length: Int
    var samples: Int
    var isMono: Bool

    init?(_ bytes: [UInt8], at index: Int) {
        guard index >= 0, index + 4 <= bytes.count, bytes[index] == 0xFF, bytes[index + 1] & 0xE0 == 0xE0 else {
            return nil
        }
        let versionBits = Int(bytes[index + 1] >> 3 & 0x03)
        let layerBits = Int(bytes[index + 1] >> 1 & 0x03)
        let bitRateIndex = Int(bytes[index + 2] >> 4)
        let rateIndex = Int(bytes[index + 2] >> 2 & 0x03)
        guard versionBits != 1, layerBits != 0, bitRateIndex != 0, bitRateIndex != 15, rateIndex != 3 else {
            return nil
        }
        version = versionBits == 3 ? 1 : versionBits == 2 ? 2 : 25
        layer = 4 - layerBits
        bitRate = (version == 1 ? Self.mpeg1Rates : Self.mpeg2Rates)[layer - 1][bitRateIndex - 1] * 1000
        sampleRate = [44100, 48000, 32000][rateIndex] / (version == 1 ? 1 : version == 2 ? 2 : 4)
        let padding = Int(bytes[index + 2] >> 1 & 0x01)
        isMono = bytes[index + 3] >> 6 == 3
        samples = layer == 1 ? 384 : layer == 3 && version != 1 ? 576 : 1152
        length = layer == 1 ? (12 * bitRate / sampleRate + padding) * 4 : samples / 8 * bitRate / sampleRate + padding
        guard length >= 4 else { return nil }
    }

    /// Bit rates in kbit/s by layer and index (ISO/IEC 11172-3 Table 3-B.2, 13818-3).
    static let mpeg1Rates = [
        [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
        [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
        [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
    ]
    static let mpeg2Rates = [
        [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
        [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
        [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    ]

    /// The frame count a Xing/Info or VBRI header in this frame gives, if it has one.
    func framesFromVBRHeader(_ bytes: [UInt8], at index: Int) -> Int? {
        let sideInfo = version == 1 ? (isMono ? 17 : 32) : (isMono ? 9 : 17)
        let xing = index + 4 + sideInfo
        func number(_ at: Int) -> Int? {
            guard at >= 0, at + 4 <= bytes.count else { return nil }
            return bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
        }
        if xing + 8 <= bytes.count,
            bytes[xing..<(xing + 4)].elementsEqual("Xing".utf8) || bytes[xing..<(xing + 4)].elementsEqual("Info".utf8),
            let flags = number(xing + 4), flags & 1 != 0
        {
            return number(xing + 8)
        }
        let vbri = index + 4 + 32
        if vbri + 18 <= bytes.count, bytes[vbri..<(vbri + 4)].elementsEqual("VBRI".utf8) { return number(vbri + 14) }
        return nil
    }
}
