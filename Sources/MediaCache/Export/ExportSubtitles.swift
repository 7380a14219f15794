// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The subtitle renditions of a one-file export, each written beside the file as one WebVTT file
/// named as players look for it: `<name>.<language>.vtt`.
struct ExportSubtitles {
    /// An offline read path.
    let reader: CachingReader

    /// Writes each rendition's WebVTT segments joined (``WebVTTJoin``) beside `destination`.
    /// - Throws: ``CacheError`` `.originRejected` for segments that are not WebVTT, `.ioFailure`.
    /// `zero`: the file's first media timestamp, in milliseconds. Then each side-loaded subtitle
    /// file of `sideLoaded` (SRT or WebVTT, held whole) as WebVTT, its times the file's (the
    /// stream's start is its zero).
    /// - Throws: ``CacheError`` `.originRejected` for segments or a file that is not WebVTT (or
    ///   SRT), `.offline` for a file not held, `.ioFailure`.
    func write(
        _ renditions: [FileExport.Rendition], sideLoaded: [SideLoadedSubtitle], beside destination: URL, zero: Int64
    ) async throws -> (files: Int, bytes: Int64) {
        var bytes: Int64 = 0
        var names: Set<String> = []
        for (rendition, resources) in renditions {
            var segments: [[UInt8]] = []
            for resource in resources {
                let (body, _) = try await reader.bodies.playlistBody(resource.item.url, as: .own(.export))
                segments.append(
                    Array(
                        resource.item.range.map { range in
                            body.dropFirst(Int(range.lowerBound)).prefix(Int(range.length))
                        } ?? body[...]))
            }
            let text: String
            do {
                text = try WebVTTJoin.join(segments, zero: zero)
            } catch {
                throw CacheError(.originRejected, "\(FileExport.describe(rendition)): \(error.message)")
            }
            bytes += try await write(
                text, language: rendition.language ?? rendition.name, beside: destination, names: &names)
        }
        for track in sideLoaded {
            let text: String
            do {
                text = try await reader.bodies.sideLoadedWebVTT(track.url, mpegts: nil)
            } catch let error as SubtitleText.Failure {
                throw CacheError(.originRejected, "\(track.url.absoluteString.prefix(200)): \(error.description)")
            }
            bytes += try await write(text, language: track.language, beside: destination, names: &names)
        }
        return (names.count, bytes)
    }

    /// Writes `text` as `<name>.<language>.vtt` beside `destination` (a number added to a name
    /// in `names` already); returns its bytes.
    private func write(_ text: String, language: String?, beside destination: URL, names: inout Set<String>)
        async throws -> Int64
    {
        let stem = destination.deletingPathExtension().lastPathComponent
        let language = (language ?? "subtitles").filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            .prefix(35)
        var name = "\(stem).\(language.isEmpty ? "subtitles" : String(language)).vtt"
        if names.contains(name) { name = "\(stem).\(language)-\(names.count).vtt" }
        names.insert(name)
        try await Exporter.writeFile(
            Array(text.utf8), to: destination.deletingLastPathComponent().appendingPathComponent(name).path)
        return Int64(text.utf8.count)
    }
}

/// WebVTT segments of an HLS subtitle rendition as one WebVTT file: each segment's cues moved by
/// its `X-TIMESTAMP-MAP` (RFC 8216 §3.5; without one, cue time 0 is timestamp 0) to the media's
/// time, whose first timestamp a player shows as 0; a cue repeated across segments (one that spans
/// their boundary) kept once. Pure; bounded by ``maximumCues``.
enum WebVTTJoin {
    struct Failure: Error, Equatable {
        var message: String
    }

    static let maximumCues = 200_000

    /// `zero`: the media's first timestamp, in milliseconds of its 90 kHz clock.
    /// - Throws: ``Failure`` for a segment that is not WebVTT, or too many cues.
    static func join(_ segments: [[UInt8]], zero: Int64) throws(Failure) -> String {
        var output = "WEBVTT\n"
        var seen: Set<String> = []
        var count = 0
        for bytes in segments {
            let text = String(
                decoding: bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...], as: UTF8.self
            )
            // A line ends with CR LF, LF or CR alone (WebVTT, 6.1): a cue's timing line that
            // ended with a CR would otherwise carry its text along and keep its old times.
            .replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            guard text.hasPrefix("WEBVTT") else { throw Failure(message: "A subtitle segment is not WebVTT.") }
            let blocks = text.components(separatedBy: "\n\n")
            // The header: X-TIMESTAMP-MAP=MPEGTS:<90 kHz>,LOCAL:<time>.
            var shift = -zero
            if let map = blocks[0].split(separator: "\n").first(where: { $0.hasPrefix("X-TIMESTAMP-MAP=") }) {
                var mpegts: Int64 = 0
                var local: Int64 = 0
                for part in map.dropFirst("X-TIMESTAMP-MAP=".count).split(separator: ",") {
                    if part.hasPrefix("MPEGTS:") {
                        mpegts = Int64(part.dropFirst(7)).map { min(max($0, 0), 1 << 40) } ?? 0
                    }
                    if part.hasPrefix("LOCAL:") { local = milliseconds(part.dropFirst(6)) ?? 0 }
                }
                shift = mpegts / 90 - local - zero
            }
            for block in blocks.dropFirst() {
                let lines = block.split(separator: "\n", omittingEmptySubsequences: false)
                guard let timing = lines.firstIndex(where: { $0.contains("-->") }) else { continue }
                let parts = lines[timing].split(separator: " ", omittingEmptySubsequences: true)
                guard parts.count >= 3, parts[1] == "-->", let start = milliseconds(parts[0]),
                    let end = milliseconds(parts[2])
                else { continue }
                var cue = lines[..<timing].map(String.init)
                cue.append(
                    ([SubtitleText.written(max(0, start + shift)), "-->", SubtitleText.written(max(0, end + shift))]
                        + parts.dropFirst(3).map(String.init))
                        .joined(separator: " "))
                // A text line may not hold `-->` (it would start another cue): broken as `--&gt;`.
                cue += lines[(timing + 1)...].map { $0.replacingOccurrences(of: "-->", with: "--&gt;") }
                let joined = cue.joined(separator: "\n").trimmingCharacters(in: .newlines)
                guard seen.insert(joined).inserted else { continue }
                count += 1
                guard count <= maximumCues else {
                    throw Failure(message: "The subtitles hold more than \(maximumCues) cues.")
                }
                output += "\n" + joined + "\n"
            }
        }
        return output
    }

    /// `[HH:]MM:SS.mmm` in milliseconds; `nil` for anything else.
    static func milliseconds(_ text: Substring) -> Int64? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count), let last = parts.last else { return nil }
        let seconds = last.split(separator: ".", omittingEmptySubsequences: false)
        func number(_ digits: Substring) -> Int64? {
            digits.allSatisfy { ("0"..."9").contains($0) } ? Int64(digits) : nil
        }
        guard seconds.count == 2, seconds[1].count == 3, seconds[0].count == 2,
            let whole = number(seconds[0]), let fraction = number(seconds[1]), whole < 60
        else { return nil }
        var total = whole * 1000 + fraction
        for (index, part) in parts.dropLast().reversed().enumerated() {
            guard part.count >= 2, part.count <= 6, let value = number(part) else { return nil }
            guard index == 1 || value < 60 else { return nil }
            total += value * (index == 0 ? 60_000 : 3_600_000)
        }
        return total
    }
}
