// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// A subtitle file made into the WebVTT an HLS subtitle rendition carries (RFC 8216 §3.5):
/// SRT converted cue by cue, WebVTT kept as it is; both with an `X-TIMESTAMP-MAP` that puts
/// the file's time zero at the stream's first timestamp. Pure, bounded by
/// ``SideLoadedSubtitles/maximumFileSize``.
package enum SubtitleText {
    /// Why a file cannot be made WebVTT, in words for the player's error and the log.
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var description: String
    }

    /// The most cues converted.
    static let maximumCues = 100_000

    /// `bytes` as WebVTT whose local time zero is `mpegts` (90 kHz) in the stream, or with no
    /// map when `mpegts` is `nil` (the stream starts at 0).
    package static func webVTT(_ bytes: [UInt8], mpegts: Int64?) throws(Failure) -> String {
        guard bytes.count <= SideLoadedSubtitles.maximumFileSize else {
            throw Failure(
                description:
                    "The subtitle file is \(bytes.count) bytes; at most \(SideLoadedSubtitles.maximumFileSize) are converted."
            )
        }
        var text = decoded(bytes).replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(
            of: "\r", with: "\n")
        if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
        let map = mpegts.map { "X-TIMESTAMP-MAP=MPEGTS:\($0),LOCAL:00:00:00.000" }
        if isWebVTT(text) {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let headerEnd = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) ?? lines.count
            lines.removeSubrange(1..<headerEnd)  // the header's other lines (an old map, a region) go
            if let map { lines.insert(map, at: 1) }
            return lines.joined(separator: "\n") + (text.hasSuffix("\n") ? "" : "\n")
        }
        let cues = try srtCues(text)
        return "WEBVTT\n" + (map.map { $0 + "\n" } ?? "") + cues.map { "\n" + $0 + "\n" }.joined()
    }

    static func isWebVTT(_ text: String) -> Bool {
        guard text.hasPrefix("WEBVTT") else { return false }
        let next = text.dropFirst(6).first
        return next == nil || next == " " || next == "\t" || next == "\n"
    }

    /// UTF-8, else Windows-1252 (the encoding of many SRT files made on Windows).
    static func decoded(_ bytes: [UInt8]) -> String {
        String(validating: bytes, as: UTF8.self) ?? String(bytes.map { Character(Unicode.Scalar($0)) })
    }

    /// SRT's cues as WebVTT cues (timing line and text), in order.
    static func srtCues(_ text: String) throws(Failure) -> [String] {
        var cues: [String] = []
        let blocks = text.components(separatedBy: "\n\n").map {
            $0.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        }.filter { !$0.isEmpty }
        for (index, block) in blocks.enumerated() where cues.count < maximumCues {
            let timingAt = block.first.map { Int($0.trimmingCharacters(in: .whitespaces)) != nil } == true ? 1 : 0
            guard timingAt < block.count, let timing = self.timing(block[timingAt]) else {
                guard index > 0 else {
                    throw Failure(
                        description: "The subtitle file is neither WebVTT nor SRT (its first cue has no timing line).")
                }
                continue  // one broken cue is left out, as players do
            }
            let lines = block[(timingAt + 1)...].map(cueText).filter { !$0.isEmpty }
            guard !lines.isEmpty else { continue }
            cues.append(timing + "\n" + lines.joined(separator: "\n"))
        }
        guard !cues.isEmpty else { throw Failure(description: "The subtitle file holds no cue.") }
        return cues
    }

    /// `00:00:01,000 --> 00:00:02,500` (`.` accepted for `,`, an hour of one digit, a position
    /// after) as WebVTT's `00:00:01.000 --> 00:00:02.500`; `nil` when it is no timing line or
    /// ends before it starts.
    static func timing(_ line: String) -> String? {
        let parts = line.components(separatedBy: "-->")
        guard parts.count == 2, let start = milliseconds(parts[0].trimmingCharacters(in: .whitespaces)),
            let endText = parts[1].split(separator: " ", omittingEmptySubsequences: true).first,
            let end = milliseconds(String(endText)), end >= start
        else { return nil }
        return written(start) + " --> " + written(end)
    }

    /// `H:MM:SS,mmm` in milliseconds (hours at most 9999).
    static func milliseconds(_ text: String) -> Int64? {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 3 else { return nil }
        let seconds = fields[2].split(omittingEmptySubsequences: false) { $0 == "," || $0 == "." }
        guard seconds.count == 2, let hours = number(fields[0], digits: 1...4),
            let minutes = number(fields[1], digits: 2...2),
            let whole = number(seconds[0], digits: 2...2), let fraction = number(seconds[1], digits: 1...3),
            minutes < 60, whole < 60
        else { return nil }
        let scale: Int64 = [1: 100, 2: 10, 3: 1][seconds[1].count] ?? 1
        return ((hours * 60 + minutes) * 60 + whole) * 1000 + fraction * scale
    }

    private static func number(_ text: Substring, digits: ClosedRange<Int>) -> Int64? {
        guard digits.contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }

    static func written(_ milliseconds: Int64) -> String {
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (minutes, second) = seconds.quotientAndRemainder(dividingBy: 60)
        let (hours, minute) = minutes.quotientAndRemainder(dividingBy: 60)
        return String(format: "%02lld:%02lld:%02lld.%03lld", hours, minute, second, fraction)
    }

    /// The tags WebVTT shares with SRT; SRT's others (`<font>`) and ASS overrides (`{\an8}`)
    /// are dropped.
    static let keptTags: Set<String> = ["i", "b", "u", "/i", "/b", "/u"]

    /// One SRT text line as WebVTT cue text: `&` and a `<` that opens no kept tag escaped,
    /// and `-->` (which would end the cue's text) broken.
    static func cueText(_ line: String) -> String {
        var output = ""
        var rest = Substring(line)
        while let character = rest.first {
            if character == "{", rest.hasPrefix("{\\"), let close = rest.firstIndex(of: "}") {
                rest = rest[rest.index(after: close)...]
                continue
            }
            if character == "<", let close = rest.firstIndex(of: ">") {
                let name = rest[rest.index(after: rest.startIndex)..<close].lowercased()
                let tag = String(name.prefix { !$0.isWhitespace })
                if keptTags.contains(tag) { output += "<\(tag)>" }
                if keptTags.contains(tag) || tag.hasPrefix("font") || tag.hasPrefix("/font") {
                    rest = rest[rest.index(after: close)...]
                    continue
                }
            }
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            default: output.append(character)
            }
            rest = rest.dropFirst()
        }
        return output.trimmingCharacters(in: .whitespaces)
    }
}

/// The timestamps of an MPEG-2 transport stream (ISO/IEC 13818-1), as far as side-loaded
/// subtitles need them: pure, reads only whole 188-byte packets.
package enum MPEGTSTimestamps {
    /// The earliest presentation timestamp (90 kHz) of the PES packets that begin in `bytes`,
    /// the start of a transport stream; `nil` when `bytes` is not one or holds no timestamp.
    package static func earliestPTS(_ bytes: [UInt8]) -> Int64? {
        let size = 188
        guard bytes.count >= size, bytes[0] == 0x47 else { return nil }
        var earliest: Int64?
        var start = 0
        while start + size <= bytes.count, bytes[start] == 0x47 {
            defer { start += size }
            let packet = bytes[start..<(start + size)]
            let head = packet.startIndex
            guard packet[head + 1] & 0x40 != 0 else { continue }  // no PES begins here
            let control = (packet[head + 3] >> 4) & 0x3
            guard control & 0x1 != 0 else { continue }  // no payload
            var payload = head + 4
            if control & 0x2 != 0 { payload += 1 + Int(packet[head + 4]) }
            guard payload + 14 <= packet.endIndex, packet[payload] == 0, packet[payload + 1] == 0,
                packet[payload + 2] == 1, packet[payload + 7] & 0x80 != 0
            else { continue }
            let p = payload + 9
            let pts =
                Int64((packet[p] >> 1) & 0x7) << 30 | Int64(packet[p + 1]) << 22 | Int64(packet[p + 2] >> 1) << 15
                | Int64(packet[p + 3]) << 7 | Int64(packet[p + 4] >> 1)
            earliest = min(earliest ?? pts, pts)
        }
        return earliest
    }
}
