// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// A master playlist from outside filtered to what is held: never a trap; the output, if
    /// any, parses again and names only held variants and renditions (a held set drawn from
    /// the input's own URIs, by a hash, so each input has one).
    @Test func filteredMastersParseAgainAndNameOnlyWhatIsHeld() throws {
        let base = URL(string: "https://cdn.example/a/b/index.m3u8")!
        let outcomes = try Mutator.run("hls", share: 5) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            guard let playlist = try? HLSPlaylist(parsing: Array(text.utf8)) else { return ("refused", nil) }
            let isHeld = { (url: URL) in url.absoluteString.utf8.reduce(0) { $0 &+ Int($1) } % 3 != 0 }
            guard let output = playlist.filteredMaster(base: base, isHeld: isHeld) else {
                return (playlist.isMaster ? "nothing held" : "media", nil)
            }
            guard let again = try? HLSPlaylist(parsing: Array(output.utf8)) else {
                return ("filtered", "the output does not parse: \(output.debugDescription)")
            }
            let named = again.variants.map(\.uri) + again.renditions.map(\.uri)
            guard named.allSatisfy({ HLSPlaylist.resolve($0, base: base).map(isHeld) == true }) else {
                return ("filtered", "names what is not held: \(named)")
            }
            return ("filtered", again.variants.isEmpty ? "no variant left in \(output.debugDescription)" : nil)
        }
        try Mutator.expectVaried(outcomes, ["filtered", "media"])
    }

    /// A rendition choice over a master playlist from outside: never a trap; what it takes is
    /// named by the master (variants, renditions, trick play), each once, at least one variant
    /// when the master names an http(s) one; a language asked for is taken or refused by name.
    @Test func renditionChoicesTakeOnlyWhatTheMasterNames() throws {
        let base = URL(string: "https://cdn.example/a/b/index.m3u8")!
        let choices = [
            RenditionChoice(),
            RenditionChoice(
                variants: [.atMostHeight(720), .lowestBandwidth], audio: .all, subtitles: .all, trickPlay: true),
            RenditionChoice(
                variants: [.highestBandwidth], audio: .languages(["en", "fr"]), subtitles: .languages(["en"])),
        ]
        let outcomes = try Mutator.run("hls", share: 5) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            guard let playlist = try? HLSPlaylist(parsing: Array(text.utf8)), playlist.isMaster else {
                return ("not a master", nil)
            }
            let named = Set(
                (playlist.variants.map(\.uri) + playlist.renditions.map(\.uri) + playlist.trickPlayPlaylists.map(\.uri))
                    .compactMap { HLSPlaylist.resolve($0, base: base) })
            for choice in choices {
                let chosen: [ChosenRendition]
                do {
                    chosen = try choice.renditions(of: playlist, base: base)
                } catch {
                    let message = (error as? RenditionSelectionError)?.message ?? "\(error)"
                    guard choice.audio?.languages.isEmpty == false, message.contains(" in ") else {
                        return ("chosen", "refused without naming a language: \(message)")
                    }
                    continue
                }
                guard chosen.allSatisfy({ named.contains($0.url) }), Set(chosen.map(\.url)).count == chosen.count else {
                    return ("chosen", "takes what the master does not name, or twice: \(chosen.map(\.url))")
                }
                let hasVariant = playlist.variants.contains { HLSPlaylist.resolve($0.uri, base: base) != nil }
                if choice.variants.count <= 1, hasVariant,
                    playlist.variants.first.flatMap({ HLSPlaylist.resolve($0.uri, base: base) }) != nil,
                    !chosen.contains(where: { $0.role == .variant })
                {
                    return ("chosen", "no variant taken from \(text.debugDescription)")
                }
            }
            return ("chosen", nil)
        }
        try Mutator.expectVaried(outcomes, ["chosen", "not a master"])
    }
}
