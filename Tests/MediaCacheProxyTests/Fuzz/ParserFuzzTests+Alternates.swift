// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// The alternates a master or an MPD names, from any text: groups of two or more distinct
    /// absolute URLs, each of which ``LearnedAlternates`` then maps to the others (a URL under
    /// one member to the same place under each other), never to itself.
    @Test func manifestsNameAlternatesThatMapOntoEachOther() throws {
        let base = URL(string: "https://origin.example/show/master")!
        for corpus in ["hls", "mpd"] {
            let outcomes = try Mutator.run(corpus, share: 10) { input in
                let text = input.replacingOccurrences(of: "|", with: "\n")
                let groups: [[URL]]
                if corpus == "hls" {
                    guard let playlist = try? HLSPlaylist(parsing: Array(text.utf8)) else { return ("refused", nil) }
                    groups = playlist.sameStreams(base: base)
                } else {
                    guard let manifest = try? DASHManifest(parsing: Array(text.utf8)) else { return ("refused", nil) }
                    groups = manifest.siblingBases(base: base)
                }
                guard !groups.isEmpty else { return ("none", nil) }
                for group in groups {
                    guard group.count >= 2, Set(group).count == group.count, group.allSatisfy({ $0.host != nil }) else {
                        return ("named", "a group that is not two distinct absolute URLs: \(group)")
                    }
                    var learned = LearnedAlternates()
                    learned.learn(group)
                    for member in group where member.fragment == nil && ["http", "https"].contains(member.scheme) {
                        let alternates = learned.alternates(of: member)
                        guard !alternates.contains(member),
                            Set(alternates).isSubset(of: Set(group)) || alternates.isEmpty
                        else {
                            return ("named", "\(member) maps to \(alternates) in \(group)")
                        }
                    }
                }
                return ("named", nil)
            }
            try Mutator.expectVaried(outcomes, ["named", "none"])
        }
    }
}
