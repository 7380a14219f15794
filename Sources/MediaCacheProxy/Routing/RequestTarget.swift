// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields
import Synchronization

/// A request target as it came, parsed without trusting a byte of it: its path and query
/// items, and of the path form (`/o/…`, see ``ProxyTarget``) the origin URL and token its
/// first segment names. What a proxy URL means is ``ProxyTarget``'s to read.
struct RequestTarget: Sendable {
    /// The path, or `nil` when the target is not a URI reference.
    let path: String?
    /// The query items, percent-decoded (the proxy's own in the `?url=` form; the origin's
    /// in the path form, where the proxy reads none of them).
    let items: [URLQueryItem]
    /// The query as it came (what goes on to the origin goes as the player wrote it).
    let percentEncodedQuery: String?
    /// In the path form: the origin URL's text and the token of the first segment, or why
    /// the segment cannot be read.
    let pathForm: Result<(url: String, token: String?), ProxyRequestError>?

    init(_ uri: String) {
        let components = URLComponents(string: uri)
        path = components?.path
        items = Self.items(of: components?.percentEncodedQuery)
        percentEncodedQuery = components?.percentEncodedQuery
        pathForm = uri.utf8.starts(with: "/o/".utf8) ? Self.parsePathForm(uri) : nil
    }

    /// The items of a percent-encoded query, each name and value decoded byte by byte (a value
    /// that is not UTF-8 is `nil`; a `%` not followed by two hex digits stays as it is). Not
    /// Foundation's: it drops a leading U+FEFF, so a value the proxy wrote would not read back.
    static func items(of query: String?) -> [URLQueryItem] {
        guard let query else { return [] }
        func decoded(_ text: Substring.UTF8View) -> String? {
            guard text.contains(UInt8(ascii: "%")) else { return String(Substring(text)) }
            let source = Array(text)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(source.count)
            var index = 0
            while index < source.count {
                if source[index] == UInt8(ascii: "%"), index + 2 < source.count,
                    let value = hexValue(source[index + 1], source[index + 2])
                {
                    bytes.append(value)
                    index += 3
                } else {
                    bytes.append(source[index])
                    index += 1
                }
            }
            return String(validating: bytes, as: UTF8.self)
        }
        return cut(query).map { piece in
            let equals = piece.utf8.firstIndex(of: UInt8(ascii: "="))
            let name = decoded(piece.utf8[..<(equals ?? piece.utf8.endIndex)]) ?? ""
            let value = equals.map { piece.utf8[piece.utf8.index(after: $0)...] }
            return URLQueryItem(name: name, value: value.flatMap { decoded(Substring($0).utf8) })
        }
    }

    /// The byte two hex digits name; `nil` when either is not a hex digit.
    private static func hexValue(_ high: UInt8, _ low: UInt8) -> UInt8? {
        func nibble(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        guard let high = nibble(high), let low = nibble(low) else { return nil }
        return high << 4 | low
    }

    /// `query` cut at each `&`, empty pieces left out. A query of ASCII (every query a parsed
    /// URI gives) is cut byte by byte, in one pass that makes each piece at once: cutting it by
    /// characters, as `String.split` does, took more of a new request's instructions than any
    /// other step of reading its target, and the view's generic `split` half of what was left.
    private static func cut(_ query: String) -> [Substring] {
        let bytes = query.utf8
        var pieces: [Substring] = []
        var start = bytes.startIndex
        var index = start
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte >= 0x80 { return query.split(separator: "&") }
            if byte == UInt8(ascii: "&") {
                if index != start { pieces.append(query[start..<index]) }
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        if start != bytes.endIndex { pieces.append(query[start...]) }
        return pieces
    }

    /// The origin URL text and token of a path-form target.
    private static func parsePathForm(_ uri: String) -> Result<(url: String, token: String?), ProxyRequestError> {
        // By Unicode scalar: a combining mark after a `/` must not hide it (nor join it).
        let rest = uri.unicodeScalars.dropFirst(3)
        let segmentEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let parts = rest[..<segmentEnd].split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).map {
            Substring($0)
        }
        guard let origin = parts.first.flatMap(ProxyTarget.fromBase64URL),
            origin.utf8.starts(with: "http://".utf8) || origin.utf8.starts(with: "https://".utf8),
            !origin.utf8.dropFirst(8).contains(UInt8(ascii: "/")),
            !origin.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
        else {
            return .failure(
                ProxyRequestError(
                    status: .badRequest, "Malformed path-form target: its first segment names no http or https origin.")
            )
        }
        let token = parts.count == 2 ? ProxyTarget.fromBase64URL(parts[1]) : nil
        if parts.count == 2, token == nil {
            return .failure(
                ProxyRequestError(status: .badRequest, "Malformed path-form target: its token cannot be read."))
        }
        let tail = String(rest[segmentEnd...].prefix { $0 != "#" })
        return .success((origin + (tail.utf8.starts(with: "/".utf8) ? tail : "/" + tail), token))
    }

    /// The origin URL as a LAN credential was minted for it: the path form's, or the query form's
    /// `url=` without what a player adds to it (``originURL()``); `nil` when there is none.
    func mintedURL() -> URL? {
        if let pathForm { return (try? pathForm.get()).flatMap { try? Self.checked($0.url) } }
        return query("url").flatMap { try? Self.checked($0) }
    }

    /// The proxy's token the target carries: the path form's, or `token=`.
    var token: String? {
        if let pathForm { return (try? pathForm.get())?.token }
        return query("token")
    }

    /// The first value of the query item `name`.
    func query(_ name: String) -> String? {
        items.first { $0.name == name }?.value
    }

    /// Every value of the query item `name`, in order.
    func queries(_ name: String) -> [String] {
        items.filter { $0.name == name }.compactMap(\.value)
    }

    /// The origin URL the target asks for: an absolute http or https URL with a host and a
    /// port in 1...65535. The path is `/`, or any path when `url=` is given: URIs in rewritten
    /// HLS playlists end with the resource's file name (`/seg001.ts?url=…`), because
    /// ffmpeg's HLS reader refuses a segment whose path has no media extension.
    /// The `_HLS_` parameters a player appends to a URL it was given (the proxy's): a blocking
    /// reload's (`_HLS_msn`, `_HLS_part`, `_HLS_skip`), an interstitial asset list's
    /// (`_HLS_primary_id`, `_HLS_start_offset`), go on to the origin URL, and so does the
    /// `CMCD` a web player appends (hls.js, dash.js: CTA-5004's query form), as it wrote it
    /// (no cache key has it: `CacheKey.alwaysIgnoredQueryParameters`).
    /// - Throws: ``ProxyRequestError`` with 404 for another path without `url=`, 400 for a
    ///   missing or bad URL.
    func originURL() throws -> URL {
        if let pathForm {
            let text = try pathForm.get().url
            return try Self.checked(text)
        }
        guard let path, path == "/" || (path.utf8.starts(with: "/".utf8) && query("url") != nil) else {
            throw ProxyRequestError(
                status: .notFound, "Nothing here: ask for /?url=<percent-encoded http or https URL>.")
        }
        guard let text = query("url"), !text.isEmpty else {
            throw ProxyRequestError(
                status: .badRequest, "Missing url: ask for /?url=<percent-encoded http or https URL>.")
        }
        let url = try Self.checked(text)
        // What a player adds to a URL it was given (`_HLS_msn`, `_HLS_primary_id`, …, `CMCD`) is
        // the origin's, as the player wrote it (its percent-encoding kept).
        let added = Self.pieces(of: percentEncodedQuery).filter {
            $0.name.utf8.starts(with: "_HLS_".utf8) || $0.name == CMCD.queryName
        }
        guard !added.isEmpty else { return url }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".")
        }
        // A blocking reload's parameters replace all of the origin URL's; any other the player
        // added replaces the one of its name.
        let names = Set(added.map(\.name))
        let reloads = !names.isDisjoint(with: HLSPlaylist.blockingReloadParameters)
        let kept = Self.pieces(of: components.percentEncodedQuery).filter {
            !names.contains($0.name) && !(reloads && HLSPlaylist.blockingReloadParameters.contains($0.name))
        }
        // Both came out of parsed URIs, so each piece is percent-encoded already.
        components.percentEncodedQuery = (kept + added).map(\.text).joined(separator: "&")
        guard let withAdded = components.url else {
            throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".")
        }
        return withAdded
    }

    /// The `&`-separated pieces of a percent-encoded query, each with its name decoded.
    static func pieces(of query: String?) -> [(name: String, text: Substring)] {
        guard let query, !query.isEmpty else { return [] }
        return cut(query).map { piece in
            // Of ASCII, the bytes before the first `=`; else by characters, as the piece was cut.
            let name =
                piece.utf8.allSatisfy { $0 < 0x80 }
                ? String(piece[..<(piece.utf8.firstIndex(of: UInt8(ascii: "=")) ?? piece.endIndex)])
                : String(piece.prefix { $0 != "=" })
            return (name.utf8.contains(UInt8(ascii: "%")) ? name.removingPercentEncoding ?? name : name, piece)
        }
    }

    /// `text` as an origin URL: absolute http or https, with a host and a port in 1...65535.
    private static func checked(_ text: String) throws -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
            let authority = HostAndPort(authorityIn: text), authority.port.map({ $0 > 0 }) ?? true
        else {
            throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".")
        }
        guard scheme == "http" || scheme == "https" else {
            throw ProxyRequestError(
                status: .badRequest, "Only http and https URLs can be proxied, not \(scheme.prefix(20)).")
        }
        return url
    }
}

/// The parsed targets of recent request URIs. A player asks for the same URL again and again,
/// and parsing one (percent-decoding its query, then the origin URL in it) cost more than the
/// rest of answering a cached range. At most ``limit``, forgotten all at once when full: more
/// than a soak's 400 files (256 were not: every request parsed its target again), and URIs no
/// longer than ``longest`` bytes, so the whole is a few MB at most whatever clients send.
final class RecentTargets: Sendable {
    struct Parsed: Sendable {
        var target: RequestTarget
        /// What it names, checked.
        var proxy: Result<ProxyTarget, ProxyRequestError>
    }

    private let parsed = Mutex<[String: Parsed]>([:])
    static let limit = 1_024
    static let longest = 2_048

    /// The parsed `uri`; `check` (the origin allow-list: it does not change) runs on a new
    /// one's URL, and its refusal is remembered as the target's result.
    func parse(_ uri: String, check: (URL) throws(ProxyRequestError) -> Void) -> Parsed {
        if let known = parsed.withLock({ $0[uri] }) { return known }
        let target = RequestTarget(uri)
        let result = Parsed(
            target: target,
            proxy: Result {
                let proxy = try ProxyTarget(reading: target)
                try check(proxy.origin)
                return proxy
            }.mapError { error in
                error as? ProxyRequestError ?? ProxyRequestError(status: .badRequest, "Malformed request target.")
            })
        guard uri.utf8.count <= Self.longest else { return result }
        parsed.withLock { parsed in
            if parsed.count >= Self.limit { parsed.removeAll(keepingCapacity: true) }
            parsed[uri] = result
        }
        return result
    }
}
