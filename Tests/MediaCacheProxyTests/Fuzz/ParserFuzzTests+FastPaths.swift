// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheHTTPFields
@testable import MediaCacheProxy

/// The parsers a miss's path runs several times were rewritten to work on bytes by offset
/// (docs/benchmarks.md, "A miss's own work"): each is checked here against a reference that
/// reads the same input the way the code before did (by `Character`, by generic collection
/// operations, or with Foundation's `URLComponents`), on the corpora of request targets and
/// URLs, mutated.
extension ParserFuzzTests {
    /// Origin URLs: the corpora of locations and signed URLs, and URLs with the parameters a
    /// player adds for a blocking reload or for content steering.
    private static func originURLs() throws -> [String] {
        try Mutator(corpus: "location").corpus + Mutator(corpus: "signed-url").corpus + [
            "https://cdn.example/live/index.m3u8?_HLS_msn=5&_HLS_part=1",
            "https://cdn.example/steer.json?_HLS_pathway=A&_HLS_throughput=1000",
            "https://cdn.example/live/index.m3u8?%5FHLS_skip=YES",
            "https://cdn.example/a/seg_1.ts?a=b#_HLS_msn=1",
            "https://cdn.example/steer?_DASH_pathway=B&x=%41",
            "http://[::1]:8080/v/seg2.m4s?token=t",
        ]
    }

    @Test func authoritiesReadAsByTheWholeURLsBytes() throws {
        // The reference: the code before, on an array of the URL's bytes.
        func reference(_ text: String) -> HostAndPort? {
            let bytes = Array(text.utf8)[...]
            let separator = Array("://".utf8)
            guard let schemeEnd = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else {
                return nil
            }
            let authority = bytes[(schemeEnd + 3)...].prefix {
                $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
            }
            let host = authority.lastIndex(of: UInt8(ascii: "@")).map { authority[($0 + 1)...] } ?? authority
            return HostAndPort(parsing: String(decoding: host, as: UTF8.self))
        }
        let outcomes = try Mutator.run("origin URLs", lines: Self.originURLs(), share: 4) { input in
            let (fast, slow) = (HostAndPort(authorityIn: input), reference(input))
            guard fast == slow else {
                return ("differs", "\(String(describing: fast)) against \(String(describing: slow))")
            }
            return (fast == nil ? "none" : "authority", nil)
        }
        try Mutator.expectVaried(outcomes, ["none", "authority"])
    }

    @Test func queryItemsDecodeAsByteByByte() throws {
        // The reference: each `%XX` read by index arithmetic on the view, as before.
        func decoded(_ text: Substring.UTF8View) -> String? {
            var bytes: [UInt8] = []
            var index = text.startIndex
            while index != text.endIndex {
                let byte = text[index]
                if byte == UInt8(ascii: "%"), let high = text.index(index, offsetBy: 1, limitedBy: text.endIndex),
                    high != text.endIndex, let low = text.index(high, offsetBy: 1, limitedBy: text.endIndex),
                    low != text.endIndex,
                    let value = UInt8(String(decoding: [text[high], text[low]], as: UTF8.self), radix: 16),
                    text[high] != UInt8(ascii: "+"), text[high] != UInt8(ascii: "-")
                {
                    bytes.append(value)
                    index = text.index(after: low)
                } else {
                    bytes.append(byte)
                    index = text.index(after: index)
                }
            }
            return String(validating: bytes, as: UTF8.self)
        }
        let outcomes = try Mutator.run("target", share: 4) { input in
            let query = URLComponents(string: input)?.percentEncodedQuery
            let items = RequestTarget.items(of: query)
            let pieces = (query ?? "").split(separator: "&")
            guard items.count == pieces.count else {
                return ("count", "\(items.count) items of \(pieces.count) pieces")
            }
            for (item, piece) in zip(items, pieces) {
                let equals = piece.utf8.firstIndex(of: UInt8(ascii: "="))
                let name = decoded(piece.utf8[..<(equals ?? piece.utf8.endIndex)]) ?? ""
                let value = equals.flatMap { decoded(Substring(piece.utf8[piece.utf8.index(after: $0)...]).utf8) }
                guard item.name == name, item.value == value else {
                    return ("differs", "\(item) against \(name)=\(value ?? "nil")")
                }
            }
            return (items.isEmpty ? "none" : "items", nil)
        }
        try Mutator.expectVaried(outcomes, ["none", "items"])
    }

    /// A query's pieces, cut at `&` and named by what comes before `=`, on bytes where the query
    /// is ASCII: the same pieces and names as by `Character` (the code before), which a
    /// combining mark after a `&` or a `=` joins to it.
    @Test func queryPiecesAreCutAndNamedAsByCharacters() throws {
        func reference(_ query: String) -> [(name: String, text: Substring)] {
            query.split(separator: "&").map { piece in
                let name = String(piece.prefix { $0 != "=" })
                return (name.utf8.contains(UInt8(ascii: "%")) ? name.removingPercentEncoding ?? name : name, piece)
            }
        }
        let outcomes = try Mutator.run("origin URLs", lines: Self.originURLs(), share: 4) { input in
            let query = Substring(input.drop { $0 != "?" }.dropFirst())
            for text in [String(query), input, input + "&=\u{301}a&b\u{301}=c&\u{301}d=e&&"] {
                let (fast, slow) = (RequestTarget.pieces(of: text), reference(text))
                guard fast.map(\.name) == slow.map(\.name), fast.map(\.text) == slow.map(\.text) else {
                    return ("differs", "\(fast.map(\.text)) against \(slow.map(\.text))")
                }
            }
            return (query.isEmpty ? "no query" : "query", nil)
        }
        try Mutator.expectVaried(outcomes, ["no query", "query"])
    }

    @Test func aQueryWithoutUnderscoresNamesNoHLSOrDASHParameter() throws {
        let outcomes = try Mutator.run("origin URLs", lines: Self.originURLs(), share: 4) { input in
            guard let url = URL(string: input) else { return ("not a URL", nil) }
            let names = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.map(\.name) ?? []
            let withUnderscore = names.contains { $0.contains("_") }
            if withUnderscore, !url.queryMayNameUnderscores { return ("missed", "names \(names)") }
            let reload = names.contains { HLSPlaylist.blockingReloadParameters.contains($0) }
            guard HLSPlaylist.isBlockingReload(url) == reload else { return ("reload", "names \(names)") }
            let steering = names.contains { SteeringManifest.playerParameters.contains($0) }
            guard SteeringManifest.isSteeringRequest(url) == steering else { return ("steering", "names \(names)") }
            return (url.queryMayNameUnderscores ? "parsed" : "skipped", nil)
        }
        try Mutator.expectVaried(outcomes, ["parsed", "skipped"])
    }

    @Test func itemsAreNamedAsByCharacters() throws {
        // The reference: the code before, by `Character`.
        func reference(_ url: String, mimeType: String?) -> String? {
            var path = Substring(url)
            if let query = path.firstIndex(of: "?") { path = path[..<query] }
            guard let slash = path.lastIndex(of: "/") else { return nil }
            let types: Set<String> = ["video/mp2t", "video/iso.segment", "audio/iso.segment"]
            if !(mimeType.map { $0.utf8.count <= 17 && types.contains($0.lowercased()) } ?? false) {
                let name = path[path.index(after: slash)...]
                guard let dot = name.lastIndex(of: "."), name.utf8.distance(from: dot, to: name.endIndex) <= 8,
                    [".ts", ".m4s", ".cmfv", ".cmfa"].contains(name[dot...].lowercased())
                else { return nil }
            }
            return String(path[...slash])
        }
        let outcomes = try Mutator.run("origin URLs", lines: Self.originURLs(), share: 4) { input in
            for type in [nil, "video/mp2t", "VIDEO/MP2T", "audio/mpeg"] {
                let (fast, slow) = (EvictionPolicy.item(of: input, mimeType: type), reference(input, mimeType: type))
                // A `/` or `.` a combining mark follows is no `Character` of its own: the reference
                // skips it, the bytes do not. Either names a group; only ASCII ones are compared.
                guard fast == slow || input.unicodeScalars.contains(where: { !$0.isASCII }) else {
                    return ("differs", "\(type ?? "no type"): \(fast ?? "nil") against \(slow ?? "nil")")
                }
            }
            return (EvictionPolicy.item(of: input, mimeType: nil) == nil ? "alone" : "item", nil)
        }
        try Mutator.expectVaried(outcomes, ["alone", "item"])
    }

    /// Keys stay what they were: a stored entry is found by its key, so the key of a URL read on
    /// its bytes must be the one `URLComponents` gives, and its query found where `Character`s
    /// found it (the code before). It found, on hosts of invalid Punycode, that `URLComponents`
    /// dropped the host from the key (`CacheKeyTests.hostsOfInvalidPunycodeKeepTheirKeysApart`).
    @Test func cacheKeysAreURLComponentsOnes() throws {
        func queryStart(_ text: String) -> (mark: String.Index, end: String.Index)? {
            guard let mark = text.firstIndex(where: { $0 == "?" || $0 == "#" }), text[mark] == "?" else { return nil }
            return (mark, text[mark...].firstIndex(of: "#") ?? text.endIndex)
        }
        let rule = CacheKeyRule(ignoredQueryParameters: ["token", "Signature"])
        let lines =
            try Mutator(corpus: "key-url").corpus + Self.originURLs() + [
                "HTTP://CDN.Example/a.mp4", "http://cdn.example:80/a.mp4", "https://cdn.example:443/a.mp4",
                "https://cdn.example:0443/a", "http://cdn.example:8080/a?b#c", "http://user@cdn.example/a",
                "http://cdn.example", "http://cdn.example?x=1", "http://cdn.example:/a", "http://cdn%2Eexample/a",
                "http://[::1]/a", "ftp://cdn.example/a", "http://cdn.example:99999/a", "http://cdn.example/a%20b",
                "https://xn--bcher-kva.example/a", "http://cdn.example./a", "http://127.0.0.1:8089/a?url=b",
            ]
        let outcomes = try Mutator.run("key-url", lines: lines, share: 4) { input in
            guard let url = URL(string: input) else { return ("not a URL", nil) }
            let text = url.absoluteString
            let (fast, slow) = (CacheKey.normalizedURLString(url), CacheKey.normalizedByComponents(url))
            guard fast == slow else { return ("differs", "\(fast) against \(slow)") }
            // Nothing that names the resource is lost: the host as written (lower-cased) and the
            // path and query as written are in the key's text (of a URL with a scheme and a host
            // without escapes; `URLComponents` rewrites the others, as it did before).
            if let parts = URLComponents(url: url, resolvingAgainstBaseURL: true), parts.scheme != nil,
                parts.encodedHost?.contains("%") != true
            {
                // (A host `URLComponents` cannot decode may keep its case, an empty path and a
                // fragment: none of it loses what names the resource.)
                let tail = parts.percentEncodedPath + (parts.percentEncodedQuery.map { "?" + $0 } ?? "")
                guard tail.isEmpty || slow.contains(tail) else { return ("lost", "\(slow) has no \(tail)") }
                if let host = parts.encodedHost, !host.isEmpty, !slow.lowercased().contains(host.lowercased()) {
                    return ("lost", "\(slow) has no \(host)")
                }
            }
            // The query is found on the bytes; on ASCII text (a URL's) they are its characters.
            if text.utf8.allSatisfy({ $0 < 0x80 }) {
                let reference = queryStart(text)
                let bytes = text.utf8
                let mark = bytes.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
                let found = mark.flatMap { mark -> (String.Index, String.Index)? in
                    guard bytes[mark] == UInt8(ascii: "?") else { return nil }
                    return (mark, bytes[mark...].firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex)
                }
                guard found?.0 == reference?.mark, found?.1 == reference?.end else {
                    return ("query", "\(String(describing: found)) against \(String(describing: reference))")
                }
            } else {
                return ("not ASCII", nil)
            }
            _ = rule.key(for: url)
            return (CacheKey.isNormalized(text) ? "bytes" : "components", nil)
        }
        try Mutator.expectVaried(outcomes, ["bytes", "components"])
    }
}
