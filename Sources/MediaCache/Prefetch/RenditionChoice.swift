// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Which renditions of an HLS asset or a DASH presentation to store: the variants (the
/// video quality), the audio languages, the subtitle languages, and the trick-play
/// (I-frame and thumbnail) playlists.
///
/// ```swift
/// // 720p at most, English and French audio, French subtitles:
/// RenditionChoice(variants: [.atMostHeight(720)], audio: .languages(["en", "fr"]), subtitles: .languages(["fr"]))
/// ```
/// A part left unsaid (`variants` empty, `audio` or `subtitles` `nil`) takes the default on a
/// new pin (the first variant, the default audio, no subtitles) and leaves an existing pin's
/// choice as it is: pinning an asset again adds what the new choice names.
///
/// Subtitles marked forced (`FORCED=YES`, DASH role `forced-subtitle`) in a chosen audio
/// language are always kept: they carry what a player shows with that audio whether or not the
/// user asked for subtitles.
public struct RenditionChoice: Sendable, Codable, Equatable {
    /// HLS variants, or DASH video representations (one per video adaptation set for each choice).
    public var variants: [HLSPrefetchOptions.VariantChoice]
    public var audio: RenditionChoice.Languages?
    public var subtitles: RenditionChoice.Languages?
    /// I-frame playlists and image (thumbnail) playlists; DASH trick-mode and image adaptation sets.
    public var trickPlay: Bool
    /// Subtitle files added to an HLS master (``SideLoadedSubtitle``): each stored whole with
    /// the asset, so the track plays offline.
    public var sideLoaded: [SideLoadedSubtitle] = []

    public init(
        variants: [HLSPrefetchOptions.VariantChoice] = [], audio: RenditionChoice.Languages? = nil,
        subtitles: RenditionChoice.Languages? = nil, trickPlay: Bool = false
    ) {
        self.variants = variants
        self.audio = audio
        self.subtitles = subtitles
        self.trickPlay = trickPlay
    }

    /// Whether the choice names nothing.
    public var isEmpty: Bool {
        variants.isEmpty && audio == nil && subtitles == nil && !trickPlay && sideLoaded.isEmpty
    }

    /// Every part said, the defaults where it was not: the first variant, the default audio, no subtitles.
    public var resolved: RenditionChoice {
        var resolved = RenditionChoice(
            variants: variants.isEmpty ? [.first] : variants, audio: audio ?? .default,
            subtitles: subtitles ?? RenditionChoice.Languages.none, trickPlay: trickPlay)
        resolved.sideLoaded = sideLoaded
        return resolved
    }

    /// This choice and `other` together (what pinning again with `other` adds).
    public func adding(_ other: RenditionChoice) -> RenditionChoice {
        var result = self
        for variant in other.variants where !result.variants.contains(variant) { result.variants.append(variant) }
        if let audio = other.audio { result.audio = (result.audio ?? .none).union(audio) }
        if let subtitles = other.subtitles { result.subtitles = (result.subtitles ?? .none).union(subtitles) }
        result.trickPlay = trickPlay || other.trickPlay
        for track in other.sideLoaded where !result.sideLoaded.contains(track) { result.sideLoaded.append(track) }
        return result
    }

    private enum CodingKeys: String, CodingKey {
        case variants, audio, subtitles, trickPlay, sideLoaded
    }

    /// Reads a choice; one written before side-loaded subtitles existed has none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        variants = try container.decode([HLSPrefetchOptions.VariantChoice].self, forKey: .variants)
        audio = try container.decodeIfPresent(RenditionChoice.Languages.self, forKey: .audio)
        subtitles = try container.decodeIfPresent(RenditionChoice.Languages.self, forKey: .subtitles)
        trickPlay = try container.decode(Bool.self, forKey: .trickPlay)
        sideLoaded = try container.decodeIfPresent([SideLoadedSubtitle].self, forKey: .sideLoaded) ?? []
    }
}

extension RenditionChoice {
    /// Which languages of a kind of rendition (audio, or subtitles) to take.
    public struct Languages: Sendable, Codable, Equatable, Hashable {
        /// The rendition marked default (`DEFAULT=YES`; DASH: role `main`, else the first).
        public var includesDefault: Bool
        /// Every language.
        public var includesAll: Bool
        /// RFC 5646 tags (`en` takes `en-GB` too) or rendition names, compared without case.
        public var languages: [String]

        public init(includesDefault: Bool = false, includesAll: Bool = false, languages: [String] = []) {
            self.includesDefault = includesDefault
            self.includesAll = includesAll
            self.languages = languages
        }

        public static let none = RenditionChoice.Languages()
        public static let `default` = RenditionChoice.Languages(includesDefault: true)
        public static let all = RenditionChoice.Languages(includesAll: true)
        public static func languages(_ tags: [String]) -> RenditionChoice.Languages {
            RenditionChoice.Languages(languages: tags)
        }

        /// Whether it names nothing.
        public var isNone: Bool { !includesDefault && !includesAll && languages.isEmpty }

        /// Both choices' languages.
        public func union(_ other: RenditionChoice.Languages) -> RenditionChoice.Languages {
            var tags = languages
            for tag in other.languages where !tags.contains(where: { $0.caseInsensitiveCompare(tag) == .orderedSame }) {
                tags.append(tag)
            }
            return RenditionChoice.Languages(
                includesDefault: includesDefault || other.includesDefault,
                includesAll: includesAll || other.includesAll,
                languages: tags)
        }

        /// Whether `tag` names a rendition of `language` (an RFC 5646 tag) or `name`.
        static func tag(_ tag: String, names language: String?, _ name: String?) -> Bool {
            let wanted = tag.lowercased()
            if let language = language?.lowercased(), language == wanted || language.hasPrefix(wanted + "-") {
                return true
            }
            return name?.lowercased() == wanted
        }

        /// Whether two RFC 5646 tags name one language (their primary subtags agree: `fr`, `fr-CA`).
        static func sameLanguage(_ a: String, _ b: String) -> Bool {
            a.split(separator: "-").first?.lowercased() == b.split(separator: "-").first?.lowercased()
        }

        /// Parses `none`, or `default`, `all` and languages separated by commas (`default,fr`), as
        /// the command line and the admin endpoints write them.
        package static func parse(_ text: String, option: String = "") throws(PrefetchRequestError)
            -> RenditionChoice.Languages
        {
            let items = text.split(separator: ",").map { HLSPlaylist.trimmingSpaces($0) }
            var choice = RenditionChoice.Languages()
            let isTag: (String) -> Bool = { tag in
                !tag.isEmpty && tag.count <= 64
                    && tag.allSatisfy {
                        $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == " ")
                    }
            }
            for item in items {
                switch item.lowercased() {
                case "default": choice.includesDefault = true
                case "all": choice.includesAll = true
                case "none" where items.count == 1: break
                case let tag where isTag(tag) && tag != "none": choice.languages.append(item)
                default:
                    throw PrefetchRequestError(
                        option, takes: "default, all, none or languages separated by commas (en,fr)", given: text)
                }
            }
            guard !items.isEmpty, items.count <= 32 else {
                throw PrefetchRequestError(
                    option, takes: "default, all, none or 1 to 32 languages separated by commas (en,fr)", given: text)
            }
            return choice
        }

        /// The text form ``parse(_:option:)`` reads.
        package var text: String {
            var parts = languages
            if includesAll { parts.insert("all", at: 0) }
            if includesDefault { parts.insert("default", at: 0) }
            return parts.isEmpty ? "none" : parts.joined(separator: ",")
        }
    }
}

/// An option's text that cannot be read: the option (`range`, `seconds`, `variant`, `audio`,
/// `subtitles`, `trick-play`), what it takes, and what it was given. The command line says it
/// as its flag, the admin endpoints as their query item.
package struct PrefetchRequestError: Error, Sendable {
    package var option: String
    package var takes: String
    package var given: String

    package init(_ option: String, takes: String, given: String) {
        (self.option, self.takes, self.given) = (option, takes, String(given.prefix(60)))
    }

    /// The error said with the option written as `spelling` writes its name.
    package func message(_ spelling: (String) -> String) -> String {
        "\(spelling(option)) takes \(takes), not \(given)."
    }

    /// The error said with the option as its name.
    package var message: String { message { $0 } }
}
