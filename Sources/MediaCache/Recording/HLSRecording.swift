// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// An HLS recording: the media playlist it follows (its job's URL, or the chosen variant's of
/// a multivariant playlist) and the segments it holds, and of a multivariant playlist the
/// renditions followed beside the variant.
package struct HLSRecording: Sendable, Codable, Equatable {
    /// What it takes of a multivariant playlist (by default the first variant, default audio).
    package var choice: RenditionChoice
    /// When it stops, if not at the end of the presentation.
    package var until: Date?
    /// It stopped: at its time, at the end of the presentation, or by hand.
    package var finished = false
    /// The media playlist followed, once known.
    package var mediaPlaylist: URL?
    /// The variant's segments (track 0).
    package var timeline = RecordingTimeline()
    /// Of a multivariant playlist, once read: what the recording's own multivariant playlist
    /// is written from.
    package var master: Master?

    /// A recording of a multivariant playlist: the variant's `EXT-X-STREAM-INF` line, the
    /// renditions followed beside it (tracks 1, 2, …), and the `EXT-X-MEDIA` lines of its
    /// groups that name no playlist.
    package struct Master: Sendable, Codable, Equatable {
        package var variantLine: String
        package var renditions: [RecordedPlaylist]
        package var carried: [String]
    }

    package init(choice: RenditionChoice, until: Date?) {
        self.choice = choice
        self.until = until
    }

    /// The renditions followed beside the variant (none for a media playlist).
    package var renditions: [RecordedPlaylist] { master?.renditions ?? [] }

    /// Its timelines by track: the variant's, then its renditions'.
    package var timelines: [RecordingTimeline] { [timeline] + renditions.map(\.timeline) }

    /// The seconds held (gaps left out): the variant's.
    package var duration: Double { timeline.duration }

    /// Applies `body` to the timeline of `track`: 0 (or `nil`) the variant's, 1, 2, … its
    /// renditions'; nothing for a track it lacks.
    package mutating func update(_ track: Int?, _ body: (inout RecordingTimeline) -> Void) {
        guard let track, track > 0 else { return body(&timeline) }
        guard track <= renditions.count else { return }
        body(&master!.renditions[track - 1].timeline)
    }
}

/// A media playlist of an HLS recording beside its variant's: an audio or subtitles rendition,
/// followed as the variant's is, with its `EXT-X-MEDIA` line (URIs absolute).
package struct RecordedPlaylist: Sendable, Codable, Equatable {
    package var url: URL
    package var line: String
    package var timeline = RecordingTimeline()
}

/// What a recording of an HLS multivariant playlist follows: the chosen variant's media
/// playlist and `EXT-X-STREAM-INF` line, the renditions a pin would take with it (the default
/// audio, or those a ``RenditionChoice`` names), and the `EXT-X-MEDIA` lines of its groups
/// that name no playlist (closed captions, audio carried in the variant). Pure.
package struct RecordedMaster: Sendable, Equatable {
    package var variant: URL
    package var variantLine: String
    package var renditions: [RecordedPlaylist]
    package var carried: [String]

    /// The choice of `choice` in `master` (fetched from `base`), its lines with URIs absolute.
    /// - Throws: ``CacheError`` `.outOfBounds` when `choice` names what the playlist lacks,
    ///   `.originRejected` when it has no variant.
    package init(_ master: HLSPlaylist, base: URL, choice: RenditionChoice) throws {
        let chosen: [ChosenRendition]
        do {
            chosen = try choice.renditions(of: master, base: base)
        } catch {
            throw CacheError(.outOfBounds, error.message)
        }
        let absolute = try HLSPlaylist(
            parsing: Array(master.rewritten(base: base) { url, _ in url.absoluteString }.utf8))
        guard let variant = chosen.first(where: { $0.role == .variant })?.url,
            let index = absolute.lines.indices.first(where: { index in
                guard case .tag("EXT-X-STREAM-INF", _) = absolute.lines[index].kind else { return false }
                let next = absolute.lines[(index + 1)...].first { if case .uri = $0.kind { true } else { false } }
                if case .uri(let uri) = next?.kind { return URL(string: uri) == variant }
                return false
            })
        else { throw CacheError(.originRejected, "The multivariant playlist names no variant to record.") }
        self.variant = variant
        let wanted = chosen.filter { $0.role == .audio || $0.role == .subtitles }.map(\.url)
        var renditions: [RecordedPlaylist] = []
        var carried: [String] = []
        let groups = Self.groups(of: absolute.lines[index].text)
        for line in absolute.lines {
            guard case .tag("EXT-X-MEDIA", let value?) = line.kind, let attributes = try? HLSPlaylist.attributes(value),
                let type = attributes["TYPE"], let group = attributes["GROUP-ID"], groups[type] == group
            else { continue }
            if let uri = attributes["URI"] {
                if let url = URL(string: uri), wanted.contains(url), !renditions.contains(where: { $0.url == url }) {
                    renditions.append(RecordedPlaylist(url: url, line: line.text))
                }
            } else {
                carried.append(line.text)
            }
        }
        self.renditions = renditions
        self.carried = carried
        variantLine = Self.keepingGroups(absolute.lines[index].text, of: carried + renditions.map(\.line))
    }

    /// The groups a variant's `EXT-X-STREAM-INF` line names, by rendition type.
    static func groups(of line: String) -> [String: String] {
        guard let value = line.split(separator: ":", maxSplits: 1).last,
            let attributes = try? HLSPlaylist.attributes(String(value))
        else { return [:] }
        var groups: [String: String] = [:]
        for (attribute, type) in [
            ("AUDIO", "AUDIO"), ("VIDEO", "VIDEO"), ("SUBTITLES", "SUBTITLES"), ("CLOSED-CAPTIONS", "CLOSED-CAPTIONS"),
        ] {
            if let group = attributes[attribute], group != "NONE" { groups[type] = group }
        }
        return groups
    }

    /// `variant` without the group attributes that no line of `kept` is in (a recording holds
    /// none of that group: a player must not look for it).
    static func keepingGroups(_ variant: String, of kept: [String]) -> String {
        guard let value = variant.split(separator: ":", maxSplits: 1).last,
            let entries = try? HLSPlaylist.attributeEntries(String(value))
        else { return variant }
        let present = Set(
            kept.compactMap { line -> String? in
                guard let value = line.split(separator: ":", maxSplits: 1).last,
                    let attributes = try? HLSPlaylist.attributes(String(value))
                else { return nil }
                return attributes["TYPE"].flatMap { type in attributes["GROUP-ID"].map { type + "\u{0}" + $0 } }
            })
        let rest = entries.filter { entry in
            guard ["AUDIO", "VIDEO", "SUBTITLES"].contains(entry.name) else { return true }
            return present.contains(entry.name + "\u{0}" + entry.value.trimmingCharacters(in: ["\""]))
        }
        return "#EXT-X-STREAM-INF:" + rest.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
    }

    /// A recording's multivariant playlist: the lines carried, each rendition's `EXT-X-MEDIA`
    /// line with its `URI` the reference `reference` gives for its track (1, 2, …), and the
    /// variant with the reference of track 0.
    package static func playlist(
        variantLine: String, renditions: [RecordedPlaylist], carried: [String], reference: (Int) -> String
    ) -> String {
        var text = "#EXTM3U\n"
        for line in carried { text += line + "\n" }
        for (index, rendition) in renditions.enumerated() {
            guard let value = rendition.line.split(separator: ":", maxSplits: 1).last,
                let entries = try? HLSPlaylist.attributeEntries(String(value))
            else { continue }
            let written = entries.map {
                $0.name == "URI" ? "URI=\"\(reference(index + 1))\"" : "\($0.name)=\($0.value)"
            }
            text += "#EXT-X-MEDIA:" + written.joined(separator: ",") + "\n"
        }
        return text + variantLine + "\n" + reference(0) + "\n"
    }
}
