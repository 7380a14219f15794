// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// One rendition a ``RenditionChoice`` takes: an HLS media playlist, or a DASH representation.
package struct ChosenRendition: Sendable, Equatable, Hashable, Codable {
    package enum Role: String, Sendable, Codable, Comparable {
        case variant, audio, subtitles, iFrames, images

        package static func < (lhs: Self, rhs: Self) -> Bool { lhs.order < rhs.order }
        private var order: Int { [.variant, .audio, .subtitles, .iFrames, .images].firstIndex(of: self)! }
    }

    package var role: Role
    /// HLS: the media playlist's URL. DASH: the manifest's, with `representation` naming one.
    package var url: URL
    /// DASH: the representation's `id` and its period's position.
    package var representation: String?
    package var period: Int?
    package var language: String?
    package var name: String?
    package var bandwidth: Int64
    package var height: Int64?
    package var isForced = false
}

/// A choice that names what the asset does not have.
package struct RenditionSelectionError: Error, Sendable, Equatable {
    package var message: String
}

extension RenditionChoice {
    /// The renditions of the master playlist `master` (its relative URIs resolved against
    /// `base`) this choice takes, each once, in the master's order within each role: each chosen
    /// variant; the audio and video renditions of its groups, and its subtitles, by language; the
    /// forced subtitles in a chosen audio language; with `trickPlay`, an I-frame playlist per
    /// variant (the one of its height, else the lightest) and the lightest image playlist.
    /// Pure.
    /// - Throws: when a language asked for has no rendition in any chosen variant's group.
    package func renditions(of master: HLSPlaylist, base: URL) throws(RenditionSelectionError) -> [ChosenRendition] {
        let choice = resolved
        var chosen: [ChosenRendition] = []
        func add(_ rendition: ChosenRendition) {
            if !chosen.contains(where: { $0.url == rendition.url }) { chosen.append(rendition) }
        }
        let variants = choice.variants.compactMap { AssetPlanner.choose($0, among: master.variants) }
        var audioGroups: [String] = []
        var subtitleGroups: [String] = []
        for variant in master.variants where variants.contains(variant) {
            guard let url = HLSPlaylist.resolve(variant.uri, base: base) else { continue }
            add(
                ChosenRendition(
                    role: .variant, url: url, language: nil, name: nil, bandwidth: variant.bandwidth,
                    height: variant.height))
            if let group = variant.audioGroup, !audioGroups.contains(group) { audioGroups.append(group) }
            if let group = variant.subtitlesGroup, !subtitleGroups.contains(group) { subtitleGroups.append(group) }
            // An alternative video rendition carries the picture: the group's default (or first).
            let video = master.renditions.filter { $0.type == "VIDEO" && $0.groupID == variant.videoGroup }
            if let rendition = video.first(where: \.isDefault) ?? video.first,
                let url = HLSPlaylist.resolve(rendition.uri, base: base)
            {
                add(
                    ChosenRendition(
                        role: .variant, url: url, language: rendition.language, name: rendition.name,
                        bandwidth: variant.bandwidth, height: variant.height))
            }
        }
        func pick(
            _ type: String, groups: [String], _ languages: RenditionChoice.Languages, role: ChosenRendition.Role,
            option: String
        ) throws(RenditionSelectionError) {
            let candidates = master.renditions.filter { $0.type == type && groups.contains($0.groupID) && !$0.isForced }
            var taken: [HLSPlaylist.Rendition] = []
            if languages.includesAll { taken = candidates }
            if languages.includesDefault,
                let first = candidates.first(where: \.isDefault) ?? (type == "AUDIO" ? candidates.first : nil)
            {
                taken.append(first)
            }
            for tag in languages.languages {
                let matching = candidates.filter { RenditionChoice.Languages.tag(tag, names: $0.language, $0.name) }
                guard !matching.isEmpty else {
                    let have = Set(candidates.compactMap { $0.language ?? $0.name }).sorted()
                    throw RenditionSelectionError(
                        message: "The asset has no \(option) in \(tag.prefix(64))"
                            + (have.isEmpty ? "." : "; it has \(have.joined(separator: ", ")).")
                    )
                }
                // One per group: the one a player picks first.
                for group in groups {
                    let inGroup = matching.filter { $0.groupID == group }
                    if let best = inGroup.first(where: \.isDefault) ?? inGroup.first { taken.append(best) }
                }
            }
            for rendition in candidates where taken.contains(rendition) {
                guard let url = HLSPlaylist.resolve(rendition.uri, base: base) else { continue }
                add(
                    ChosenRendition(
                        role: role, url: url, language: rendition.language, name: rendition.name, bandwidth: 0,
                        height: nil))
            }
        }
        try pick("AUDIO", groups: audioGroups, choice.audio ?? .default, role: .audio, option: "audio")
        try pick("SUBTITLES", groups: subtitleGroups, choice.subtitles ?? .none, role: .subtitles, option: "subtitles")
        let audioLanguages = chosen.filter { $0.role == .audio }.compactMap(\.language)
        for rendition in master.renditions
        where rendition.type == "SUBTITLES" && rendition.isForced && subtitleGroups.contains(rendition.groupID) {
            guard let language = rendition.language,
                audioLanguages.contains(where: { RenditionChoice.Languages.sameLanguage($0, language) }),
                let url = HLSPlaylist.resolve(rendition.uri, base: base)
            else { continue }
            add(
                ChosenRendition(
                    role: .subtitles, url: url, language: language, name: rendition.name, bandwidth: 0, height: nil,
                    isForced: true))
        }
        if choice.trickPlay {
            let iFrames = master.trickPlayPlaylists.filter { $0.kind == .iFrames }
            for variant in variants {
                let same = iFrames.first { $0.height != nil && $0.height == variant.height }
                if let playlist = same ?? iFrames.min(by: { $0.bandwidth < $1.bandwidth }),
                    let url = HLSPlaylist.resolve(playlist.uri, base: base)
                {
                    add(
                        ChosenRendition(
                            role: .iFrames, url: url, language: nil, name: nil, bandwidth: playlist.bandwidth,
                            height: playlist.height))
                }
            }
            if let images = master.trickPlayPlaylists.filter({ $0.kind == .images }).min(by: {
                $0.bandwidth < $1.bandwidth
            }),
                let url = HLSPlaylist.resolve(images.uri, base: base)
            {
                add(
                    ChosenRendition(
                        role: .images, url: url, language: nil, name: nil, bandwidth: images.bandwidth,
                        height: images.height))
            }
        }
        return chosen.enumerated().sorted { ($0.element.role, $0.offset) < ($1.element.role, $1.offset) }.map(\.element)
    }

    /// The representations of `presentation` (from the manifest at `url`) this choice takes:
    /// in each period, in each video adaptation set the representation each variant choice
    /// picks; the audio adaptation sets by language (default: the one with role `main`, else the
    /// first), each with the representation the first variant choice picks by bandwidth; the
    /// text adaptation sets by language, and the forced ones in a chosen audio language, each
    /// with its first representation; with `trickPlay`, the lightest representation of each
    /// trick-mode and image adaptation set. A set whose kind is not said counts as video. Pure.
    /// - Throws: when a language asked for is in no period.
    package func representations(of presentation: DASHPresentation, url: URL) throws(RenditionSelectionError) -> [(
        ChosenRendition, DASHPresentation.Representation
    )] {
        let choice = resolved
        var chosen: [(ChosenRendition, DASHPresentation.Representation)] = []
        var found: [String: Set<String>] = ["audio": [], "subtitles": []]
        func take(
            _ representation: DASHPresentation.Representation, _ set: DASHPresentation.AdaptationSet,
            role: ChosenRendition.Role, period: Int
        ) {
            guard !chosen.contains(where: { $0.1.element == representation.element }) else { return }
            let rendition = ChosenRendition(
                role: role, url: url, representation: representation.id, period: period, language: set.language,
                name: nil,
                bandwidth: representation.bandwidth, height: representation.height,
                isForced: set.roles.contains("forced-subtitle"))
            chosen.append((rendition, representation))
        }
        func byBandwidth(_ set: DASHPresentation.AdaptationSet, _ variant: HLSPrefetchOptions.VariantChoice)
            -> DASHPresentation.Representation?
        {
            let variants = set.representations.enumerated().map {
                HLSPlaylist.Variant(bandwidth: $0.element.bandwidth, uri: String($0.offset), height: $0.element.height)
            }
            return AssetPlanner.choose(variant, among: variants).flatMap { Int($0.uri) }.map { set.representations[$0] }
        }
        func languageSets(_ sets: [DASHPresentation.AdaptationSet], _ languages: RenditionChoice.Languages, key: String)
            -> [DASHPresentation.AdaptationSet]
        {
            sets.filter { set in
                let isDefault =
                    set.roles.contains("main")
                    || (key == "audio" && !sets.contains { $0.roles.contains("main") }
                        && set.element == sets.first?.element)
                let named = languages.languages.filter { RenditionChoice.Languages.tag($0, names: set.language, nil) }
                found[key, default: []].formUnion(named.map { $0.lowercased() })
                return languages.includesAll || (languages.includesDefault && isDefault) || !named.isEmpty
            }
        }
        for (index, period) in presentation.periods.enumerated() {
            let sets = period.adaptationSets
            for set in sets where set.content == .video || set.content == nil {
                for variant in choice.variants {
                    byBandwidth(set, variant).map { take($0, set, role: .variant, period: index) }
                }
            }
            let audio = languageSets(sets.filter { $0.content == .audio }, choice.audio ?? .default, key: "audio")
            for set in audio {
                byBandwidth(set, choice.variants.first.map(Self.audioChoice) ?? .first).map {
                    take($0, set, role: .audio, period: index)
                }
            }
            let text = sets.filter { $0.content == .text }
            let audioLanguages = audio.compactMap(\.language)
            for set in languageSets(
                text.filter { !$0.roles.contains("forced-subtitle") }, choice.subtitles ?? .none, key: "subtitles")
                + text.filter({ set in
                    set.roles.contains("forced-subtitle")
                        && audioLanguages.contains { RenditionChoice.Languages.sameLanguage($0, set.language ?? "") }
                })
            {
                set.representations.first.map { take($0, set, role: .subtitles, period: index) }
            }
            if choice.trickPlay {
                for set in sets where set.content == .trickPlay || set.content == .images {
                    set.representations.min { $0.bandwidth < $1.bandwidth }.map {
                        take($0, set, role: set.content == .images ? .images : .iFrames, period: index)
                    }
                }
            }
        }
        for (key, languages) in [("audio", choice.audio), ("subtitles", choice.subtitles)] {
            for tag in languages?.languages ?? [] where !(found[key] ?? []).contains(tag.lowercased()) {
                let have = Set(
                    presentation.periods.flatMap(\.adaptationSets).filter {
                        $0.content == (key == "audio" ? .audio : .text)
                    }.compactMap(\.language)
                ).sorted()
                throw RenditionSelectionError(
                    message: "The presentation has no \(key) in \(tag.prefix(64))"
                        + (have.isEmpty ? "." : "; it has \(have.joined(separator: ", ")).")
                )
            }
        }
        return chosen
    }

    /// The choice of an audio representation for a variant choice: by bandwidth as for video;
    /// a height cap, which audio has none of, takes the first.
    private static func audioChoice(_ variant: HLSPrefetchOptions.VariantChoice) -> HLSPrefetchOptions.VariantChoice {
        if case .atMostHeight = variant { return .first }
        return variant
    }
}
