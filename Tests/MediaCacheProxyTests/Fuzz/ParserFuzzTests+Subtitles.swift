// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// ``SubtitleText/webVTT(_:mpegts:)`` on any text (`|` a line end, `~` a carriage return):
    /// a clear refusal, or WebVTT whose header carries the map asked for and whose every timing
    /// line is WebVTT's, starting no later than it ends; an SRT keeps at most its cues, and no
    /// cue text can end a cue (`-->`) or open a tag WebVTT does not know.
    @Test func subtitleFilesBecomeWebVTTOrAClearRefusal() throws {
        let timing = /^(\d{2,}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2,}):(\d{2}):(\d{2})\.(\d{3})$/
        let outcomes = try Mutator.run("subtitles", share: 10) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            let mpegts = text.utf8.count % 3 == 0 ? nil : Int64(text.utf8.count) * 3_000
            let output: String
            do {
                output = try SubtitleText.webVTT(Array(text.utf8), mpegts: mpegts)
            } catch let error as SubtitleText.Failure {
                return error.description.isEmpty ? ("refused", "an empty reason") : ("refused", nil)
            } catch {
                return ("refused", "threw \(error), not a SubtitleText.Failure")
            }
            let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
            guard lines.first?.hasPrefix("WEBVTT") == true else { return ("converted", "no WEBVTT line: \(output)") }
            let map = mpegts.map { "X-TIMESTAMP-MAP=MPEGTS:\($0),LOCAL:00:00:00.000" }
            guard map == nil || lines.dropFirst().first.map(String.init) == map else {
                return ("converted", "the map is not the header's second line: \(output)")
            }
            let unmarked = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
            if SubtitleText.isWebVTT(unmarked.replacingOccurrences(of: "\r", with: "\n")) { return ("kept", nil) }
            var cues = 0
            for line in lines where line.contains("-->") {
                guard let match = try? timing.wholeMatch(in: String(line)) else {
                    return ("converted", "a cue line holds --> and is no timing line: \(line)")
                }
                let start = [match.1, match.2, match.3, match.4].compactMap { Int64($0) }
                let end = [match.5, match.6, match.7, match.8].compactMap { Int64($0) }
                guard start.lexicographicallyPrecedes(end) || start == end else {
                    return ("converted", "a cue ends before it starts: \(line)")
                }
                cues += 1
            }
            let opened = output.matches(of: /<([^>]*)>/).map { String($0.1) }
            guard opened.allSatisfy(SubtitleText.keptTags.contains) else {
                return ("converted", "a tag kept: \(opened)")
            }
            guard cues <= text.components(separatedBy: "-->").count - 1 else {
                return ("converted", "\(cues) cues from fewer timing lines")
            }
            return ("converted", nil)
        }
        try Mutator.expectVaried(outcomes, ["converted", "kept", "refused"])
    }

    /// A master from any playlist text with side-loaded tracks added reads back as a master in
    /// which every variant names a subtitle group holding every track, the input's lines all
    /// kept in order.
    @Test func mastersWithSideLoadedTracksListThemOnEveryVariant() throws {
        let tracks = [
            SideLoadedSubtitle(language: "en", url: URL(string: "https://s.example/en.srt")!)!,
            SideLoadedSubtitle(language: "fr", url: URL(string: "https://s.example/fr.vtt")!, name: "Français")!,
        ]
        let outcomes = try Mutator.run("hls", share: 10) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            guard let playlist = try? HLSPlaylist(parsing: Array(text.utf8)) else { return ("not a playlist", nil) }
            guard let output = SideLoadedSubtitles.master(playlist, adding: tracks) else {
                return playlist.isMaster && !playlist.variants.isEmpty
                    ? ("master", "a master got no tracks") : ("media", nil)
            }
            guard let read = try? HLSPlaylist(parsing: Array(output.utf8)) else {
                return ("master", "the output does not read: \(output)")
            }
            let urls = Set(tracks.map(\.url.absoluteString))
            for variant in read.variants {
                let group = read.renditions.filter { $0.type == "SUBTITLES" && $0.groupID == variant.subtitlesGroup }
                guard variant.subtitlesGroup != nil, urls.isSubset(of: Set(group.map(\.uri))) else {
                    return ("master", "a variant without every track: \(output)")
                }
                guard Set(group.compactMap(\.name)).count == group.count else {
                    return ("master", "two tracks of one group share a name: \(output)")
                }
            }
            // (A blank line would match any; the byte order mark is written before the first.)
            let unmarked = output.hasPrefix("\u{FEFF}") ? String(output.dropFirst()) : output
            // Split on bytes: "\r\n" is one Character, which a split at "\n" would not cut.
            var remaining = unmarked.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }[...]
            for line in playlist.lines where !line.text.isEmpty {
                guard let index = remaining.firstIndex(where: { $0.hasPrefix(line.text) }) else {
                    return ("master", "the line \(line.text) is lost: \(output)")
                }
                remaining = remaining[(index + 1)...]
            }
            return ("master", nil)
        }
        try Mutator.expectVaried(outcomes, ["master", "media"])
    }

    /// ``MPEGTSTimestamps/earliestPTS(_:)`` finds a PES's timestamp among null packets, and on
    /// any mutation of such bytes answers `nil` or a 33-bit timestamp.
    @Test func transportStreamTimestampsAreReadWithinBounds() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<2_000 {
            let pts = Int64.random(in: 0..<(1 << 33), using: &generator)
            var bytes = SyntheticTransportStream.segment(pts: pts, length: 188 * 3)
            if round % 2 == 0 {
                #expect(MPEGTSTimestamps.earliestPTS(bytes) == pts)
                continue
            }
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator)))
            if let read = MPEGTSTimestamps.earliestPTS(bytes) { #expect((0..<(Int64(1) << 33)).contains(read)) }
        }
    }

    /// `mediacache url --subtitles`'s text, whatever it is: a track whose language is a tag,
    /// whose URL is http(s) and whose name a quoted attribute can carry, or `nil`.
    @Test func subtitleArgumentsReadAsTracksOrNothing() throws {
        let outcomes = try Mutator.run("key-url", share: 5) { input in
            let text = (input.count % 2 == 0 ? "en=" : "pt-BR=") + input + (input.count % 3 == 0 ? ",A name" : "")
            guard let track = SideLoadedSubtitle(parsing: text) else { return ("refused", nil) }
            guard SideLoadedSubtitle.isLanguageTag(track.language), ["http", "https"].contains(track.url.scheme),
                !track.name.contains("\""), !track.name.contains(where: \.isNewline)
            else { return ("read", "\(track)") }
            return ("read", nil)
        }
        try Mutator.expectVaried(outcomes, ["read", "refused"])
    }
}
