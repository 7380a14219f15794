// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
package import Foundation
package import MediaCache

/// The credentials of the LAN listener's URLs (`serve --lan`): each URL carries one minted for
/// what it names, an HMAC under the server's LAN key (kept in the store folder), never the
/// server's token. Holding the URL of one clip (as a TV does, and as anyone on the network who
/// sees that plain-HTTP request does), a client reaches that clip, or the files of the folder a
/// DASH manifest named as its base, and nothing else: another path, another origin, another
/// credential is refused. Pure: the key is given.
///
/// - The query form (`/<name>?url=…&token=<credential>`) carries `r.<mac>` over the whole target
///   as the proxy writes it without its credential: the origin URL and every parameter (those a
///   player adds, `_HLS_…` and `CMCD`, are the origin URL's and outside it).
/// - The path form (`/o/<origin>.<credential>/<path>`) carries `r.<mac>` over the origin, the
///   path and the query but for the parameters a player adds (``mintedQuery(of:)``), or
///   `f<n>.<mac>` over the origin and the first `n` segments of the path: a folder (a DASH base),
///   under which any path without a dot segment is admitted (a player resolves its templates
///   there).
/// - A credential the proxy mints while it rewrites a playlist or manifest for a URL on another
///   origin than the playlist's starts with `p` (``Grant/publicAddressesOnly``): what another
///   origin names is reached only on the internet. The user's own URLs, and those of their
///   origin, reach that origin wherever it is.
package struct LANCapabilities: Sendable, CustomStringConvertible {
    private let key: [UInt8]

    /// Says nothing of the key.
    package var description: String { "LANCapabilities(key withheld)" }

    /// The capabilities of `key` (32 bytes or more).
    package init?(key: [UInt8]) {
        guard key.count >= 32 else { return nil }
        self.key = key
    }

    /// Capabilities under a new random key.
    package static func made() -> LANCapabilities {
        var generator = SystemRandomNumberGenerator()
        return LANCapabilities(key: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })!
    }

    /// The key as text (base64url), for the file it is kept in; ``init(keyText:)`` reads it back.
    package var keyText: String {
        ProxyTarget.base64URL(bytes: key)
    }

    /// The capabilities of a key written by ``keyText``; `nil` for text that is not one.
    package init?(keyText: String) {
        guard let bytes = ProxyTarget.bytesFromBase64URL(Substring(keyText)) else { return nil }
        self.init(key: bytes)
    }

    /// How many characters of the MAC's base64url a credential carries (132 bits).
    static let macLength = 22

    /// What a credential lets its holder reach.
    package enum Grant: Equatable, Sendable {
        /// The origin its URL names, wherever it is: the user named it (`mediacache url --lan`,
        /// AirPlay's switch), or a playlist of that origin named another of its resources.
        case namedOrigin
        /// The origin its URL names only while it is on the internet: a playlist of another
        /// origin named it, and no origin may lead a device of the network to this machine or
        /// its networks (written `p…`).
        case publicAddressesOnly
    }

    /// What a credential says of the target it comes with (``verdict(of:minted:now:)``).
    package enum Verdict: Equatable, Sendable {
        /// Minted for it: it reaches what `grant` says, until `until` (seconds since 1970) if set.
        case granted(Grant, until: Int64?)
        /// Minted for it, but only until `at`, which has passed.
        case expired(at: Int64)
        /// Not minted for it (another path, origin or credential, or an altered one).
        case refused
    }

    /// The latest expiry a credential may carry (seconds since 1970: beyond year 36,000).
    static let maximumExpiry: Int64 = 1 << 40

    /// The credential for `target`: for the whole resource, or, with `folderDepth`, for the
    /// folder of the first `folderDepth` segments of its path (the path form only), granting `grant`,
    /// until `until` (seconds since 1970; `nil`: for as long as the key lasts). The expiry is
    /// written in the credential (`r~<until>.<mac>`) and covered by its MAC: a changed expiry
    /// is a changed credential.
    func credential(for target: ProxyTarget, folderDepth: Int? = nil, grant: Grant = .namedOrigin, until: Int64? = nil)
        -> String
    {
        let prefix = grant == .namedOrigin ? "" : "p"
        let expiry = until.map { "~\(min(max($0, 0), Self.maximumExpiry))" } ?? ""
        if target.form == .path, let folderDepth, let folder = Self.folder(of: target.origin, depth: folderDepth) {
            let kind = prefix + "f"
            let scope = kind + "\(folderDepth)" + expiry
            return scope + "." + mac(of: Self.pathMessage(target.origin, kind: kind, path: folder) + Self.until(expiry))
        }
        return prefix + "r" + expiry + "." + mac(of: message(for: target, kind: prefix + "r") + Self.until(expiry))
    }

    /// What an expiry adds to the message a MAC covers.
    private static func until(_ expiry: String) -> String {
        expiry.isEmpty ? "" : "\nuntil " + expiry.dropFirst()
    }

    /// What `target`'s credential grants at `now` (seconds since 1970). `minted` is the origin
    /// URL as its credential was minted for (the query form's `url=`, before the parameters a
    /// player adds). An expiry is judged only once the MAC holds: an altered one is refused.
    func verdict(of target: ProxyTarget, minted: URL, now: Int64) -> Verdict {
        guard let credential = target.token, let dot = credential.firstIndex(of: "."),
            credential[credential.index(after: dot)...].count == Self.macLength
        else { return .refused }
        var scope = credential[..<dot]
        let given = credential[credential.index(after: dot)...]
        var expiry: Substring = ""
        var until: Int64?
        if let mark = scope.firstIndex(of: "~") {
            expiry = scope[mark...]
            guard let value = Int64(expiry.dropFirst()), (0...Self.maximumExpiry).contains(value),
                String(value) == expiry.dropFirst()
            else { return .refused }
            (scope, until) = (scope[..<mark], value)
        }
        let grant: Grant = scope.first == "p" ? .publicAddressesOnly : .namedOrigin
        let prefix = grant == .namedOrigin ? "" : "p"
        if grant == .publicAddressesOnly { scope = scope.dropFirst() }
        let message: String
        if scope == "r" {
            var asMinted = target
            asMinted.origin = minted
            message = self.message(for: asMinted, kind: prefix + "r")
        } else {
            guard target.form == .path, scope.first == "f", let depth = Int(scope.dropFirst()),
                (0...64).contains(depth), String(depth) == scope.dropFirst(), Self.hasNoDotSegment(target.origin),
                let folder = Self.folder(of: target.origin, depth: depth), Self.path(of: target.origin) != folder
            else { return .refused }
            message = Self.pathMessage(target.origin, kind: prefix + "f", path: folder)
        }
        guard Self.equal(given, mac(of: message + Self.until(String(expiry)))) else { return .refused }
        if let until, now >= until { return .expired(at: until) }
        return .granted(grant, until: until)
    }

    /// What `target`'s credential grants now, if it was minted for it and has not expired.
    func grant(of target: ProxyTarget, minted: URL, now: Int64 = Int64(Date().timeIntervalSince1970)) -> Grant? {
        guard case .granted(let grant, _) = verdict(of: target, minted: minted, now: now) else { return nil }
        return grant
    }

    /// What a resource credential of `kind` covers: the target written without its credential
    /// (query form), or the origin and the path (path form).
    private func message(for target: ProxyTarget, kind: String) -> String {
        var bare = target
        bare.token = nil
        guard target.form == .path else { return (kind == "r" ? "q\n" : "pq\n") + bare.uri }
        let query = Self.mintedQuery(of: target.origin)
        return Self.pathMessage(
            target.origin, kind: kind, path: Self.path(of: target.origin) + (query.isEmpty ? "" : "?" + query))
    }

    /// The parameters of `url`'s query a resource credential covers, as written: all but those a
    /// player adds to a URL it was given (`_HLS_…`, `_DASH_…`: blocking reloads, steering,
    /// asset lists; `CMCD`).
    static func mintedQuery(of url: URL) -> String {
        let text = url.absoluteString
        guard let mark = text.firstIndex(of: "?") else { return "" }
        let query = text[text.index(after: mark)...].prefix { $0 != "#" }
        return query.split(separator: "&").filter { piece in
            let name = String(piece.prefix { $0 != "=" })
            let decoded = name.removingPercentEncoding ?? name
            return !decoded.hasPrefix("_HLS_") && !decoded.hasPrefix("_DASH_") && decoded != "CMCD"
        }.joined(separator: "&")
    }

    private static func pathMessage(_ origin: URL, kind: String, path: String) -> String {
        "p\n" + kind + "\n" + authority(of: origin) + "\n" + path
    }

    private func mac(of message: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(
            for: Data(("mediacache-lan/1\n" + message).utf8), using: SymmetricKey(data: key))
        return String(ProxyTarget.base64URL(bytes: Array(code)).prefix(Self.macLength))
    }

    /// The path form of `url` (`/o/<origin>.<credential>/<path>`) with a credential for it alone:
    /// what a device of the network is given (`mediacache url --lan`, AirPlay's switch).
    /// - Parameter until: when it stops working (seconds since 1970), if ever.
    package func pathForm(for url: URL, until: Int64? = nil) -> String {
        var target = ProxyTarget(url, form: .path)
        target.token = credential(for: target, until: until)
        return target.uri
    }

    /// The query form of an HLS master playlist `url` with `subtitles` added, with a credential
    /// for it alone, until `until` if set.
    package func queryForm(for url: URL, subtitles: [SideLoadedSubtitle], until: Int64? = nil) -> String {
        var target = ProxyTarget(url)
        target.subtitles = subtitles
        target.token = credential(for: target, until: until)
        return target.uri
    }

    /// Compared in time that does not depend on where they first differ.
    private static func equal(_ a: Substring, _ b: String) -> Bool {
        let (a, b) = (Array(a.utf8), Array(b.utf8))
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The scheme and authority of `url`, as the path form writes them.
    static func authority(of url: URL) -> String {
        let host = url.host?.lowercased() ?? ""
        return (url.scheme?.lowercased() ?? "") + "://" + (host.contains(":") ? "[\(host)]" : host)
            + (url.port.map { ":\($0)" } ?? "")
    }

    /// The path of `url` as written (percent-encoding kept), `/` when empty.
    static func path(of url: URL) -> String {
        let text = url.absoluteString
        guard let start = text.range(of: "://") else { return "/" }
        let afterScheme = text[start.upperBound...]
        let pathStart = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        let path = afterScheme[pathStart...].prefix { $0 != "?" && $0 != "#" }
        return path.isEmpty ? "/" : String(path)
    }

    /// The first `depth` segments of `url`'s path, ending with `/` (`/` for none).
    static func folder(of url: URL, depth: Int) -> String? {
        let segments = path(of: url).split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard depth >= 0, segments.count > depth else { return nil }
        return "/" + segments.prefix(depth).map { $0 + "/" }.joined()
    }

    /// Whether no segment of `url`'s path is, once decoded, `.` or `..` or holds a backslash
    /// (which some servers take for a slash): a folder's credential must not lead above it.
    static func hasNoDotSegment(_ url: URL) -> Bool {
        path(of: url).split(separator: "/", omittingEmptySubsequences: false).allSatisfy { segment in
            guard let decoded = String(segment).removingPercentEncoding else { return false }
            return decoded != "." && decoded != ".." && !decoded.contains("\\")
        }
    }
}
