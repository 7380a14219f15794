// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

extension HLSPlaylist {
    /// A trick-play playlist of a master playlist: I-frames (`EXT-X-I-FRAME-STREAM-INF`) or
    /// images (`EXT-X-IMAGE-STREAM-INF`, thumbnails for scrubbing).
    package struct TrickPlayPlaylist: Sendable, Equatable {
        package enum Kind: String, Sendable, Codable { case iFrames, images }
        package var kind: Kind
        package var uri: String
        package var bandwidth: Int64
        package var height: Int64?
        package var videoGroup: String?
    }

    /// The height of a `RESOLUTION` (`<width>x<height>`), bounded; `nil` when it is not one.
    static func height(_ resolution: String?) -> Int64? {
        guard let parts = resolution?.split(separator: "x", maxSplits: 1, omittingEmptySubsequences: false),
            parts.count == 2,
            Self.decimal(parts[0]) != nil, let height = Self.decimal(parts[1]), height <= 1 << 20
        else { return nil }
        return height
    }

    /// The tags of a master playlist that name a playlist of their own in a `URI` attribute,
    /// which a player may choose: renditions, I-frame and image (trick play) playlists.
    package static let choosableTags: Set<String> = [
        "EXT-X-MEDIA", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-IMAGE-STREAM-INF",
    ]

    /// This master playlist with only what a player can play from what is held, so that no
    /// player chooses what is not there (offline): a variant (`EXT-X-STREAM-INF` and its URI
    /// line), a rendition (`EXT-X-MEDIA`) or an I-frame or image playlist whose URI (resolved
    /// against `base`) `isHeld` refuses is left out; so is a variant whose `AUDIO` or `VIDEO`
    /// group has no rendition left (a group whose renditions name no URI, carried in the
    /// variant, stays), and a variant's `SUBTITLES` whose group has none left is taken off it.
    /// Every other line stays as it was. `nil` when no variant is left (or for a media playlist).
    package func filteredMaster(base: URL, isHeld: (URL) -> Bool) -> String? {
        guard isMaster else { return nil }
        func held(_ uri: String) -> Bool { Self.resolve(uri, base: base).map(isHeld) ?? false }
        var dropped = Set<Int>()
        /// Each `EXT-X-MEDIA` group by type and ID: whether any member is left.
        var groups: [String: Bool] = [:]
        for (index, line) in lines.enumerated() {
            guard case .tag(let name, let value?) = line.kind, Self.choosableTags.contains(name),
                let attributes = try? Self.attributes(value)
            else { continue }
            let kept = attributes["URI"].map(held) ?? (name == "EXT-X-MEDIA")
            if !kept { dropped.insert(index) }
            if name == "EXT-X-MEDIA", let type = attributes["TYPE"], let group = attributes["GROUP-ID"] {
                groups[type + "\u{0}" + group] = (groups[type + "\u{0}" + group] ?? false) || kept
            }
        }
        var replaced: [Int: String] = [:]
        var variantsLeft = 0
        for (index, line) in lines.enumerated() {
            // A tag without an attribute list still makes a variant of the URI after it.
            guard case .tag("EXT-X-STREAM-INF", let value) = line.kind else { continue }
            guard
                let uriLine = lines[(index + 1)...].firstIndex(where: { if case .uri = $0.kind { true } else { false } }
                ),
                case .uri(let uri) = lines[uriLine].kind
            else { continue }
            guard let entries = try? Self.attributeEntries(value ?? "") else {
                dropped.formUnion([index, uriLine])
                continue
            }
            func groupLeft(_ type: String, _ attribute: String) -> Bool? {
                entries.first { $0.name == attribute }.flatMap { entry in
                    groups[type + "\u{0}" + entry.value.trimmingCharacters(in: ["\""])]
                }
            }
            guard held(uri), groupLeft("AUDIO", "AUDIO") != false, groupLeft("VIDEO", "VIDEO") != false else {
                dropped.formUnion([index, uriLine])
                continue
            }
            variantsLeft += 1
            if groupLeft("SUBTITLES", "SUBTITLES") == false {
                let rest = entries.filter { $0.name != "SUBTITLES" }.map { "\($0.name)=\($0.value)" }.joined(
                    separator: ",")
                replaced[index] = "#EXT-X-STREAM-INF:" + rest
            }
        }
        guard variantsLeft > 0 else { return nil }
        var output = hasByteOrderMark ? "\u{FEFF}" : ""
        for (index, line) in lines.enumerated() where !dropped.contains(index) {
            output += (replaced[index] ?? line.text) + line.ending
        }
        return output
    }
}

extension HLSPlaylist {
    /// This master playlist with the variants `leads` picks (their URIs resolved against
    /// `base`) listed first, each with its own lines, the others after them in their order, and
    /// every other line where it was: a player that starts on the first variant listed (as
    /// AVPlayer with `startsOnFirstEligibleVariant`, hls.js without a bandwidth estimate) starts
    /// where the bytes are. `nil` when nothing moves (not a master, none picked, or the picked
    /// ones lead already).
    package func withVariantsFirst(base: URL, leads: (URL) -> Bool) -> String? {
        guard isMaster else { return nil }
        var blocks: [(lines: ClosedRange<Int>, leads: Bool)] = []
        for (index, line) in lines.enumerated() {
            guard case .tag("EXT-X-STREAM-INF", _) = line.kind,
                let uriLine = lines[(index + 1)...].firstIndex(where: { if case .uri = $0.kind { true } else { false } }
                ),
                case .uri(let uri) = lines[uriLine].kind
            else { continue }
            // A tag whose URI another's follows first is no variant to move: left as it is.
            if let last = blocks.last, last.lines.upperBound >= index { return nil }
            blocks.append((index...uriLine, Self.resolve(uri, base: base).map(leads) ?? false))
        }
        let ordered = blocks.filter(\.leads) + blocks.filter { !$0.leads }
        guard ordered.map(\.lines) != blocks.map(\.lines) else { return nil }
        var slot: [Int: Int] = [:]  // where each block begins: the block that goes there
        for (position, block) in blocks.enumerated() { slot[block.lines.lowerBound] = position }
        var output = hasByteOrderMark ? "\u{FEFF}" : ""
        var index = 0
        while index < lines.count {
            if let position = slot[index] {
                for moved in ordered[position].lines { output += lines[moved].text + lines[moved].ending }
                index = blocks[position].lines.upperBound + 1
            } else {
                output += lines[index].text + lines[index].ending
                index += 1
            }
        }
        return output
    }
}
