// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
public import Foundation

/// The identity of a cached resource.
///
/// By default it is the hex SHA-256 of the normalised URL; a caller may supply its own key
/// function, for example one that drops a CDN token from the query. A key is only ever
/// stored in the index, never used as a file name, so it may hold any characters and be
/// of any length.
public struct CacheKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The key's text.
    public var rawValue: String {
        didSet { textHash = rawValue.hashValue }
    }

    /// The text's hash, computed once: the store looks a key up many times per request, and
    /// a key is 64 characters or more.
    private var textHash: Int

    /// Creates a key from any text.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
        textHash = rawValue.hashValue
    }

    public static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.textHash == rhs.textHash && lhs.rawValue == rhs.rawValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(textHash)
    }

    private enum CodingKeys: String, CodingKey {
        case rawValue
    }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .rawValue))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(rawValue, forKey: .rawValue)
    }

    /// The default key for `url`: the hex SHA-256 of ``normalizedURLString(_:)``.
    public init(url: URL) {
        let digest = SHA256.hash(data: Data(CacheKey.normalizedURLString(url).utf8))
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        self.init(String(decoding: text, as: UTF8.self))
    }

    /// The URL text the default key hashes: scheme and host lower-cased, the default port
    /// and the fragment removed; path and query kept as they are.
    public static func normalizedURLString(_ url: URL) -> String {
        let text = url.absoluteString
        return isNormalized(text) ? text : normalizedByComponents(url)
    }

    /// ``normalizedURLString(_:)`` by `URLComponents`, for a URL whose text is not already
    /// normalized. A host `URLComponents` cannot decode (a label `xn--` that is no valid
    /// Punycode) has no `host`: it is lower-cased as it is written, not dropped (dropped, every
    /// such host's `/a` had the key of `https:/a`, one entry for all of them). A path whose
    /// escapes are no UTF-8 (`/i%dex.m3u8`) has an empty `path`: it is kept as it is written, not
    /// replaced by `/` (replaced, every such path of a host had the key of its `/`).
    static func normalizedByComponents(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        // Taken first: a new scheme drops a host it cannot decode.
        let undecoded = components.host == nil ? components.encodedHost : nil
        components.scheme = components.scheme?.lowercased()
        if let undecoded {
            components.encodedHost = undecoded.lowercased()
        } else {
            components.host = components.host?.lowercased()
        }
        if let port = components.port,
            (components.scheme == "http" && port == 80) || (components.scheme == "https" && port == 443)
        {
            components.port = nil
        }
        components.fragment = nil
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        return components.string ?? url.absoluteString
    }

    public var description: String { rawValue }

    /// Whether `text` is already what ``normalizedURLString(_:)`` makes of its URL, read on its
    /// bytes (a miss's key is worked out once per URL, and `URLComponents` cost most of it): a
    /// scheme of lower-case letters, digits, `+`, `-` and `.`; `://`; a host of lower-case
    /// letters, digits, `-` and `.`, with no user; a port, if any, of digits without a leading
    /// zero and not the scheme's default; a path that begins with `/`; no fragment; ASCII only.
    /// Anything else takes `URLComponents`' road (`ParserFuzzTests.cacheKeysAreURLComponentsOnes`).
    static func isNormalized(_ text: String) -> Bool {
        // A string not stored contiguously (bridged) takes the other road, to the same result.
        text.utf8.withContiguousStorageIfAvailable { isNormalized($0[...]) } ?? false
    }

    private static func isNormalized(_ whole: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        var bytes = whole
        func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        guard let first = bytes.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) else { return false }
        let scheme = bytes.prefix {
            isLowerAlphanumeric($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
        }
        bytes = bytes[scheme.endIndex...]
        guard bytes.starts(with: "://".utf8) else { return false }
        bytes = bytes.dropFirst(3)
        let host = bytes.prefix { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
        guard !host.isEmpty else { return false }
        bytes = bytes[host.endIndex...]
        if bytes.first == UInt8(ascii: ":") {
            let digits = bytes.dropFirst().prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            guard (1...5).contains(digits.count), digits.first != UInt8(ascii: "0"),
                case let port = digits.reduce(0, { $0 * 10 + Int($1 - UInt8(ascii: "0")) }), port <= 65_535
            else { return false }
            let defaultPort = scheme.elementsEqual("http".utf8) ? 80 : scheme.elementsEqual("https".utf8) ? 443 : nil
            guard port != defaultPort else { return false }
            bytes = bytes[digits.endIndex...]
        }
        return bytes.first == UInt8(ascii: "/") && !bytes.contains { $0 == UInt8(ascii: "#") || $0 >= 0x80 }
    }
}

/// Which parts of a URL do not name the resource: the query parameters a CDN signs a URL
/// with change on every play (`?Expires=…&Signature=…`), so a key that keeps them never hits.
/// The key drops them; the request to the origin keeps them. A new version under the same
/// key is still told apart by its validators and length, never mixed with the old one.
public struct CacheKeyRule: Sendable, Equatable {
    /// Query parameter names left out of the key, compared without regard to case.
    public var ignoredQueryParameters: Set<String> {
        didSet { lowercased = Self.lowercased(ignoredQueryParameters) }
    }

    /// The rule of a store that sets none: it leaves out only ``alwaysIgnoredQueryParameters``.
    public static let standard = CacheKeyRule()

    /// Left out of every key: `CMCD` (CTA-5004 Common Media Client Data, which describes the
    /// player's state on each request and never what it asks for; the origin still gets it).
    public static let alwaysIgnoredQueryParameters: Set<String> = ["CMCD"]

    private static func lowercased(_ names: Set<String>) -> Set<String> {
        Set(names.union(alwaysIgnoredQueryParameters).map { $0.lowercased() })
    }

    private var lowercased: Set<String>

    /// Groups of hosts that serve the same resources at the same paths (the pathways, or
    /// CDNs, of a stream with content steering): a URL on any host of a group has the key of
    /// the same URL on the group's first host, so a segment fetched from one CDN is a hit when
    /// the player steers to another. Opt-in: hosts that serve different bytes at one path must
    /// never be grouped. A host is compared without case; the port is the URL's own.
    public var sameContentHosts: [[String]] {
        didSet { aliases = Self.aliases(of: sameContentHosts) }
    }

    private var aliases: [String: String]

    /// A rule that leaves out `ignoredQueryParameters`.
    public init(ignoredQueryParameters: Set<String> = []) {
        self.init(ignoredQueryParameters: ignoredQueryParameters, sameContentHosts: [])
    }

    /// A rule that leaves out `ignoredQueryParameters` and treats each group of
    /// `sameContentHosts` as one host.
    public init(ignoredQueryParameters: Set<String> = [], sameContentHosts: [[String]]) {
        self.ignoredQueryParameters = ignoredQueryParameters
        lowercased = Self.lowercased(ignoredQueryParameters)
        self.sameContentHosts = sameContentHosts
        aliases = Self.aliases(of: sameContentHosts)
    }

    private static func aliases(of groups: [[String]]) -> [String: String] {
        var aliases: [String: String] = [:]
        for group in groups {
            guard let first = group.first?.lowercased() else { continue }
            for host in group.dropFirst() where aliases[host.lowercased()] == nil { aliases[host.lowercased()] = first }
        }
        return aliases
    }

    /// The parameters of common CDN signatures, by the name ``preset(named:)`` takes.
    public static let presets: [String: Set<String>] = [
        // Amazon CloudFront signed URLs (canned and custom policy).
        "cloudfront": ["Expires", "Signature", "Key-Pair-Id", "Policy"],
        // Amazon S3 presigned URLs (Signature Version 4).
        "s3": [
            "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
            "X-Amz-Signature", "X-Amz-Security-Token",
        ],
        // Google Cloud Storage signed URLs (V4).
        "gcs": [
            "X-Goog-Algorithm", "X-Goog-Credential", "X-Goog-Date", "X-Goog-Expires", "X-Goog-SignedHeaders",
            "X-Goog-Signature",
        ],
        // Akamai token authentication.
        "akamai": ["hdnts", "__token__"],
        // Azure Blob Storage shared access signatures.
        "azure": [
            "sv", "ss", "srt", "sp", "se", "st", "spr", "sig", "sr", "si", "skoid", "sktid", "skt", "ske", "sks", "skv",
        ],
        // A bare `token` or `expires` parameter (many smaller CDNs and Wowza).
        "token": ["token", "expires", "wmsAuthSign"],
    ]

    /// The rule of the preset `name` (see ``presets``), or `nil` when there is none.
    public static func preset(named name: String) -> CacheKeyRule? {
        presets[name.lowercased()].map { CacheKeyRule(ignoredQueryParameters: $0) }
    }

    /// This rule with the parameters and host groups of `other` too.
    public func adding(_ other: CacheKeyRule) -> CacheKeyRule {
        CacheKeyRule(
            ignoredQueryParameters: ignoredQueryParameters.union(other.ignoredQueryParameters),
            sameContentHosts: sameContentHosts + other.sameContentHosts)
    }

    /// `url` without the ignored parameters, on its group's first host; the rest of its text
    /// stays as it is (the other parameters keep their order and encoding).
    public func keyURL(for url: URL) -> URL {
        var url = url
        if !aliases.isEmpty, let host = url.host?.lowercased(), let canonical = aliases[host],
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        {
            components.host = canonical
            url = components.url ?? url
        }
        let text = url.absoluteString
        // The query runs from the first `?` to the fragment's `#`; a `?` after a `#` is the fragment's.
        // Found on the bytes: a URL's text is ASCII (`ParserFuzzTests.cacheKeysAreURLComponentsOnes`).
        let bytes = text.utf8
        guard let mark = bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }),
            bytes[mark] == UInt8(ascii: "?")
        else { return url }
        let end = bytes[mark...].firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        let items = text[text.index(after: mark)..<end].split(separator: "&", omittingEmptySubsequences: false)
        let kept = items.filter { item in
            let name = item.prefix { $0 != "=" }
            return !lowercased.contains((name.removingPercentEncoding ?? String(name)).lowercased())
        }
        guard kept.count != items.count else { return url }
        return URL(
            string: String(text[..<mark]) + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&")) + text[end...])
            ?? url
    }

    /// The key of `url` under this rule.
    public func key(for url: URL) -> CacheKey {
        CacheKey(url: keyURL(for: url))
    }
}
