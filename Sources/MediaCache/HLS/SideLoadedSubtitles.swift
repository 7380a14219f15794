// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// A subtitle file (SRT or WebVTT) added to an HLS stream that does not list it: the cache's
/// master playlist gains an `EXT-X-MEDIA TYPE=SUBTITLES` rendition for it, whose media playlist
/// has one WebVTT segment, the file converted and aligned with the stream's first segment.
public struct SideLoadedSubtitle: Sendable, Hashable, Codable {
    /// The language, an RFC 5646 tag (`en`, `pt-BR`).
    public let language: String
    /// The name players show.
    public let name: String
    /// The file, `http` or `https`.
    public let url: URL

    /// A subtitle track, or `nil` when `language` is not a language tag (letters, digits and
    /// hyphens, its first part two or three letters), `url` not `http(s)`, or `name` empty or
    /// longer than 100 characters (the language stands for a name not given).
    public init?(language: String, url: URL, name: String? = nil) {
        let name = (name ?? language).filter { $0 != "\"" && !$0.isNewline }
        guard Self.isLanguageTag(language), url.scheme == "http" || url.scheme == "https", url.host != nil,
            !name.trimmingCharacters(in: .whitespaces).isEmpty, name.count <= 100
        else { return nil }
        (self.language, self.name, self.url) = (language, name, url)
    }

    /// Reads `LANG=URL[,NAME]` (`mediacache url --subtitles`); the name is what follows the
    /// URL's last comma when that text holds no `/`, `?` or `=`.
    public init?(parsing text: String) {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        let language = String(text[..<equals])
        var rest = String(text[text.index(after: equals)...])
        var name: String?
        if let comma = rest.lastIndex(of: ","), !rest[comma...].contains(where: { "/?=".contains($0) }) {
            name = String(rest[rest.index(after: comma)...])
            rest = String(rest[..<comma])
        }
        guard let url = URL(string: rest) else { return nil }
        self.init(language: language, url: url, name: name)
    }

    private enum CodingKeys: String, CodingKey {
        case language, name, url
    }

    /// Reads a track, checked as ``init(language:url:name:)`` checks one.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard
            let track = SideLoadedSubtitle(
                language: try container.decode(String.self, forKey: .language),
                url: try container.decode(URL.self, forKey: .url),
                name: try container.decode(String.self, forKey: .name))
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .language, in: container, debugDescription: "Not a subtitle track.")
        }
        self = track
    }

    static func isLanguageTag(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, (2...3).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }),
            text.count <= 35
        else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.count) && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        }
    }
}

/// The text work of side-loaded subtitles: pure, no I/O.
package enum SideLoadedSubtitles {
    /// The group the added renditions form when no variant has a subtitle group of its own.
    package static let groupID = "mediacache-subtitles"
    /// The largest subtitle file converted (a feature film's SRT is about 100 KB).
    package static let maximumFileSize = 4 << 20

    /// `master` with a `TYPE=SUBTITLES` rendition per track (its URI the track's file: the proxy
    /// rewrites it to the track's media playlist), in each subtitle group its variants name,
    /// and `SUBTITLES=` added to every variant that names none. `nil` for a media playlist or
    /// no tracks.
    package static func master(_ master: HLSPlaylist, adding tracks: [SideLoadedSubtitle]) -> String? {
        guard master.isMaster, !tracks.isEmpty else { return nil }
        let named = Set(master.variants.compactMap(\.subtitlesGroup))
        let unnamed = master.variants.contains { $0.subtitlesGroup == nil }
        let groups = named.sorted() + (unnamed ? [groupID] : [])
        var media: [String] = []
        for group in groups {
            var names = Set(
                master.renditions.filter { $0.type == "SUBTITLES" && $0.groupID == group }.compactMap(\.name))
            for track in tracks {
                var name = track.name
                var suffix = 2
                while names.contains(name) {
                    name = "\(track.name) (\(suffix))"
                    suffix += 1
                }
                names.insert(name)
                media.append(
                    "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"\(group)\",NAME=\"\(name)\",LANGUAGE=\"\(track.language)\","
                        + "DEFAULT=NO,AUTOSELECT=YES,FORCED=NO,URI=\"\(track.url.absoluteString)\"")
            }
        }
        var output = master.hasByteOrderMark ? "\u{FEFF}" : ""
        var inserted = false
        for line in master.lines {
            var text = line.text
            if case .tag(let name, let value) = line.kind, name == "EXT-X-STREAM-INF" {
                if !inserted {
                    output += media.map { $0 + line.ending }.joined()
                    inserted = true
                }
                if (try? HLSPlaylist.attributes(value ?? ""))?.keys.contains("SUBTITLES") != true {
                    // After a list's trailing comma, no second one (an empty attribute); nor
                    // a first one in a list that is empty.
                    let list = (value ?? "").trimmingCharacters(in: .whitespaces)
                    text += (list.isEmpty || text.hasSuffix(",") ? "" : ",") + "SUBTITLES=\"\(groupID)\""
                }
            }
            output += text + line.ending
        }
        return inserted ? output : nil
    }

    /// The media playlist of a side-loaded track: one WebVTT segment at `uri` as long as the
    /// stream (RFC 8216 §4.3.3: the target duration is the segment's, rounded up).
    package static func mediaPlaylist(duration: Double, uri: String) -> String {
        let duration = max(0.001, duration.isFinite ? duration : 0.001)
        return """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:\(Int64(duration.rounded(.up)))
            #EXT-X-MEDIA-SEQUENCE:0
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXTINF:\(String(format: "%.3f", duration)),
            \(uri)
            #EXT-X-ENDLIST

            """
    }
}
