// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

extension HLSPlaylist {
    /// The groups of playlists of this master (from `base`) that are one stream at other URIs:
    /// variants with the same `STABLE-VARIANT-ID` (content steering's pathways), or, without
    /// one, with the same `BANDWIDTH`, `AVERAGE-BANDWIDTH`, `RESOLUTION`, `CODECS` and
    /// `FRAME-RATE` (redundant streams, RFC 8216 §6.2.3), and renditions with the same `TYPE`
    /// and `STABLE-RENDITION-ID`. Each group has at least two URLs, in the master's order.
    package func sameStreams(base: URL) -> [[URL]] {
        guard isMaster else { return [] }
        var groups: [String: [URL]] = [:]
        var order: [String] = []
        func add(_ key: String, _ uri: String?) {
            guard let uri, let url = Self.resolve(uri, base: base) else { return }
            if groups[key] == nil { order.append(key) }
            if groups[key]?.contains(url) != true { groups[key, default: []].append(url) }
        }
        for (index, line) in lines.enumerated() {
            guard case .tag(let name, let value) = line.kind, let value,
                let attributes = try? Self.attributes(value)
            else { continue }
            switch name {
            case "EXT-X-STREAM-INF":
                let next = lines[(index + 1)...].first { if case .uri = $0.kind { true } else { false } }
                guard case .uri(let uri)? = next?.kind else { continue }
                let key =
                    attributes["STABLE-VARIANT-ID"].map { "stable \($0)" }
                    ?? "same "
                    + ["BANDWIDTH", "AVERAGE-BANDWIDTH", "RESOLUTION", "CODECS", "FRAME-RATE"].map {
                        attributes[$0] ?? "-"
                    }.joined(separator: " ")
                add("variant " + key, uri)
            case "EXT-X-MEDIA":
                guard let id = attributes["STABLE-RENDITION-ID"], let type = attributes["TYPE"] else { continue }
                add("rendition \(type) \(id)", attributes["URI"])
            default: continue
            }
        }
        return order.compactMap { groups[$0] }.filter { $0.count >= 2 }
    }
}
