// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Places that serve the same bytes, as the streams' own manifests say: a DASH MPD's sibling
/// `BaseURL`s, an HLS master's redundant variants (the same stream at another URI: the same
/// `STABLE-VARIANT-ID`, or the same `BANDWIDTH`, `RESOLUTION`, `CODECS` and `FRAME-RATE`), and
/// so the variants of content steering's pathways. Each group is a set of URL prefixes (a
/// folder ending in `/`, or a whole URL); a URL under one member has its alternates under the
/// others, the rest of its text kept. Pure; at most ``limit`` groups, the oldest forgotten.
struct LearnedAlternates: Sendable {
    static let limit = 256
    /// The most members a group keeps.
    static let memberLimit = 8
    private(set) var groups: [[String]] = []

    /// Learns that `urls` serve the same bytes (with those under their folders, when each is a
    /// file of another folder). A group sharing a member with one known replaces it.
    mutating func learn(_ urls: [URL]) {
        var members: [String] = []
        for url in urls.prefix(Self.memberLimit) where url.scheme == "http" || url.scheme == "https" {
            let text = url.absoluteString
            if url.fragment == nil, !members.contains(text) { members.append(text) }
        }
        guard members.count >= 2 else { return }
        add(members)
        // The files' folders, when they differ: the segments each playlist names relatively.
        let folders = urls.prefix(Self.memberLimit).compactMap { URL(string: "./", relativeTo: $0)?.absoluteString }
        if Set(folders).count == folders.count, !folders.contains(where: members.contains) { add(folders) }
    }

    private mutating func add(_ members: [String]) {
        groups.removeAll { !Set($0).isDisjoint(with: members) }
        groups.append(members)
        if groups.count > Self.limit { groups.removeFirst(groups.count - Self.limit) }
    }

    /// The URLs that serve what `url` serves, by the group whose member is the longest prefix of
    /// it (a whole URL only with nothing after it, or its query), in the group's order.
    func alternates(of url: URL) -> [URL] {
        let text = url.absoluteString
        var best: (group: [String], member: String)?
        for group in groups {
            for member in group where text.hasPrefix(member) && member.count > (best?.member.count ?? 0) {
                let rest = text.dropFirst(member.count)
                guard member.hasSuffix("/") || rest.isEmpty || rest.hasPrefix("?") else { continue }
                best = (group, member)
            }
        }
        guard let best else { return [] }
        let rest = text.dropFirst(best.member.count)
        return best.group.filter { $0 != best.member }.compactMap { URL(string: $0 + rest) }
    }
}
