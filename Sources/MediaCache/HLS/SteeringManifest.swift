// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// A content steering manifest: the JSON a steering server answers with (HLS, RFC 8216bis
/// §7.2; DASH-IF Content Steering), which names the pathways (CDNs) in the order the player
/// should use them, when to ask again (`TTL`, `RELOAD-URI`) and pathway clones.
///
/// Through the proxy, the URLs in it must lead back through the proxy: `RELOAD-URI` and a
/// clone's `PER-VARIANT-URIS`/`PER-RENDITION-URIS` are mapped. A clone that replaces the
/// `HOST` or adds `PARAMS` to the URIs of its base pathway cannot: the player would apply it
/// to the proxy's URLs (and reach another host, past the cache). Such clones are left out,
/// and the player steers among the pathways the playlist or manifest names.
package enum SteeringManifest {
    /// The largest steering manifest read.
    package static let maximumSize = 64 << 10

    /// The query parameters a player adds to the steering server's URI when it asks: a
    /// request with one of them is for a steering manifest.
    package static let playerParameters: Set<String> = [
        "_HLS_pathway", "_HLS_throughput", "_DASH_pathway", "_DASH_throughput",
    ]

    /// The deepest nesting read: the decoder recurses once per level.
    static let maximumDepth = 32

    /// How deep arrays and objects nest in `bytes` (outside strings).
    static func nestingDepth(_ bytes: [UInt8]) -> Int {
        var (depth, deepest, inString, escaped) = (0, 0, false, false)
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                depth += 1
                deepest = max(deepest, depth)
            } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
                depth -= 1
            }
        }
        return deepest
    }

    /// Whether `url` asks a steering server (see ``playerParameters``).
    package static func isSteeringRequest(_ url: URL) -> Bool {
        guard url.queryMayNameUnderscores,
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems
        else { return false }
        return items.contains { playerParameters.contains($0.name) }
    }

    /// The manifest `bytes` with its URLs mapped: `RELOAD-URI` (resolved against `base`) by
    /// `reload`, the per-variant and per-rendition URIs of clones by `resource`; clones that
    /// replace a host or add parameters left out (their IDs returned, to log).
    /// - Throws: ``SteeringManifestError`` for what is not a steering manifest of version 1.
    package static func rewritten(
        _ bytes: [UInt8], base: URL, reload: (URL) -> String, resource: (URL) -> String
    ) throws(SteeringManifestError) -> (bytes: [UInt8], droppedClones: [String]) {
        guard bytes.count <= maximumSize else {
            throw SteeringManifestError("The steering manifest is larger than \(maximumSize >> 10) KiB.")
        }
        guard nestingDepth(bytes) <= maximumDepth else {
            throw SteeringManifestError("The steering manifest nests deeper than \(maximumDepth) levels.")
        }
        guard case .object(var manifest)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else {
            throw SteeringManifestError("The steering manifest is not a JSON object.")
        }
        guard case .number(let version)? = manifest["VERSION"], version == 1 else {
            throw SteeringManifestError("The steering manifest is not of VERSION 1.")
        }
        if case .string(let text)? = manifest["RELOAD-URI"] {
            guard let url = HLSPlaylist.resolve(text, base: base) else {
                throw SteeringManifestError("The steering manifest's RELOAD-URI is not an http or https URL.")
            }
            manifest["RELOAD-URI"] = .string(reload(url))
        }
        var dropped: [String] = []
        if case .array(let clones)? = manifest["PATHWAY-CLONES"] {
            var kept: [JSONValue] = []
            for clone in clones {
                guard case .object(var fields) = clone, case .object(var replacement)? = fields["URI-REPLACEMENT"]
                else {
                    kept.append(clone)
                    continue
                }
                if replacement["HOST"] != nil || replacement["PARAMS"] != nil {
                    if case .string(let id)? = fields["ID"] {
                        dropped.append(String(id.prefix(100)))
                    } else {
                        dropped.append("(no ID)")
                    }
                    continue
                }
                for name in ["PER-VARIANT-URIS", "PER-RENDITION-URIS"] {
                    guard case .object(let uris)? = replacement[name] else { continue }
                    replacement[name] = .object(
                        uris.mapValues { value in
                            guard case .string(let text) = value, let url = HLSPlaylist.resolve(text, base: base) else {
                                return value
                            }
                            return .string(resource(url))
                        })
                }
                fields["URI-REPLACEMENT"] = .object(replacement)
                kept.append(.object(fields))
            }
            manifest["PATHWAY-CLONES"] = .array(kept)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let output = try? encoder.encode(JSONValue.object(manifest)) else {
            throw SteeringManifestError("The steering manifest cannot be written again.")
        }
        return (Array(output), dropped)
    }
}

/// A steering manifest that cannot be read, and why.
package struct SteeringManifestError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// Any JSON value, read and written again as it was (numbers as `Double`, which holds every
/// number a steering manifest has: a version, a TTL).
package enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
