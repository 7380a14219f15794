// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields

/// What a proxy URL names: an origin resource and what the proxy must know when a player asks
/// for it. The proxy's URL grammar lives here alone: ``uri`` writes it, ``init(reading:)``
/// reads it back, and the two are fuzzed against each other.
///
/// - The query form, `/<file name>?url=<origin URL>[&token=T][&memory=1][&list=1][&c=CMCD]
///   [&v.<name>=<value>…]`: the path ends with the resource's file name (ffmpeg's HLS reader
///   refuses a segment URL without a media extension); every byte outside RFC 3986's
///   unreserved set is percent-encoded.
/// - The path form, `/o/<origin>[.<token>]/<origin path>[?<origin query>]`, for resources
///   whose relative references players resolve themselves (DASH manifests and segment
///   templates, steering servers): the origin's scheme and authority (base64url) and the
///   proxy's token in the first segment, the rest the origin's as it is, so a relative
///   reference resolved against a proxy URL is the proxy URL of what it names. It carries
///   nothing else: its query is the origin's.
struct ProxyTarget: Sendable, Equatable {
    enum Form: Sendable, Equatable {
        case query, path
    }

    var origin: URL
    var form = Form.query
    /// The proxy's access token.
    var token: String?
    /// `memory=1`: kept in memory only, never in the store (an HLS key).
    var memoryOnly = false
    /// `list=1`: an HLS interstitial's asset list, whose asset URIs are rewritten in turn.
    var assetList = false
    /// `c=`: the CMCD to send for it when its player sends none.
    var cmcd: String?
    /// `v.<name>=`: the definitions of the multivariant playlist a media playlist was reached
    /// from, for its `EXT-X-DEFINE:IMPORT`.
    var imports: [String: String] = [:]

    /// `sl=`, `sn=`, `su=` (language, name, URL, one triple per track): subtitle files to add
    /// to the multivariant playlist this names (``SideLoadedSubtitle``).
    var subtitles: [SideLoadedSubtitle] = []
    /// What a side-loaded subtitle file (the ``origin``) is served as.
    var subtitleRole: SubtitleRole?

    /// The two answers a side-loaded subtitle file gives.
    enum SubtitleRole: Sendable, Equatable {
        /// `sub=p&tl=<URL>`: the track's media playlist, as long as the media playlist at the URL.
        case playlist(timeline: URL)
        /// `sub=v[&ts=<MPEGTS>]`: the file as WebVTT, its cues mapped to the MPEG-TS timestamp.
        case file(mpegts: Int64?)
    }

    /// The most side-loaded tracks written and read.
    static let maximumSubtitles = 32

    /// The prefix of the import items, and how many are written and read at most.
    static let importPrefix = "v."
    static let maximumImports = 256

    /// The path and query a player asks for. The path form of an origin URL it cannot split
    /// (no scheme or host) is the query form.
    var uri: String {
        if form == .path, let written = pathForm { return written }
        let last = origin.lastPathComponent
        let name = last.isEmpty || last == "/" ? "index" : last
        var path = "/" + HLSPlaylist.percentEncoded(name) + "?url=" + HLSPlaylist.percentEncoded(origin.absoluteString)
        if let token { path += "&token=" + HLSPlaylist.percentEncoded(token) }
        if memoryOnly { path += "&memory=1" }
        if assetList { path += "&list=1" }
        if let cmcd { path += "&c=" + HLSPlaylist.percentEncoded(cmcd) }
        for track in subtitles.prefix(Self.maximumSubtitles) {
            path +=
                "&sl=" + HLSPlaylist.percentEncoded(track.language) + "&sn=" + HLSPlaylist.percentEncoded(track.name)
            path += "&su=" + HLSPlaylist.percentEncoded(track.url.absoluteString)
        }
        switch subtitleRole {
        case .playlist(let timeline)?: path += "&sub=p&tl=" + HLSPlaylist.percentEncoded(timeline.absoluteString)
        case .file(let mpegts)?: path += "&sub=v" + (mpegts.map { "&ts=\($0)" } ?? "")
        case nil: break
        }
        for (name, value) in imports.sorted(by: { $0.key < $1.key }).prefix(Self.maximumImports) {
            path += "&" + HLSPlaylist.percentEncoded(Self.importPrefix + name) + "=" + HLSPlaylist.percentEncoded(value)
        }
        return path
    }

    private var pathForm: String? {
        let text = origin.absoluteString
        guard let scheme = origin.scheme, let host = origin.host, let start = text.range(of: "://") else { return nil }
        let afterScheme = text[start.upperBound...]
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        let rest = String(afterScheme[authorityEnd...].prefix { $0 != "#" })
        var authority = scheme.lowercased() + "://" + (host.contains(":") ? "[\(host)]" : host)
        if let port = origin.port { authority += ":\(port)" }
        var segment = Self.base64URL(authority)
        if let token { segment += "." + Self.base64URL(token) }
        return "/o/" + segment + (rest.utf8.starts(with: "/".utf8) ? rest : "/" + rest)
    }

    init(_ origin: URL, form: Form = .query, token: String? = nil) {
        self.origin = origin
        self.form = form
        self.token = token
    }

    /// What a URL of the proxy's names (its path and query, as sent; see ``init(reading:)``).
    init(readingURL url: URL) throws(ProxyRequestError) {
        var target = url.path(percentEncoded: true)
        if let query = url.query(percentEncoded: true) { target += "?" + query }
        try self.init(reading: RequestTarget(target))
    }

    /// What `target` names.
    /// - Throws: `ProxyRequestError` with 404 for another path without `url=`, 400 for a
    ///   missing or bad URL (see `RequestTarget.originURL()`).
    init(reading target: RequestTarget) throws(ProxyRequestError) {
        do {
            origin = try target.originURL()
        } catch let error as ProxyRequestError {
            throw error
        } catch {
            throw ProxyRequestError(status: .badRequest, "Malformed request target.")
        }
        token = target.token
        guard target.pathForm == nil else {
            form = .path
            return
        }
        memoryOnly = target.query("memory") == "1"
        assetList = target.query("list") == "1"
        cmcd = target.query("c")
        subtitles = Self.subtitles(in: target)
        switch target.query("sub") {
        case "p":
            guard let timeline = target.query("tl").flatMap(URL.init(string:)), timeline.host != nil else {
                throw ProxyRequestError(status: .badRequest, "A subtitle playlist needs tl=<the timeline's URL>.")
            }
            subtitleRole = .playlist(timeline: timeline)
        case "v":
            let stamp = target.query("ts")
            let mpegts = stamp.flatMap { Int64($0) }.flatMap { (0...(Int64(1) << 33)).contains($0) ? $0 : nil }
            guard stamp == nil || mpegts != nil else {
                throw ProxyRequestError(status: .badRequest, "ts= takes an MPEG-TS timestamp (0 to 2^33).")
            }
            subtitleRole = .file(mpegts: mpegts)
        case nil: break
        default: throw ProxyRequestError(status: .badRequest, "sub= takes p or v.")
        }
        for item in target.items.prefix(Self.maximumImports) where item.name.utf8.starts(with: Self.importPrefix.utf8) {
            imports[String(Substring(item.name.utf8.dropFirst(Self.importPrefix.utf8.count)))] = item.value ?? ""
        }
    }

    /// The tracks of `sl=`, `sn=`, `su=` triples, in order; a triple that is not a track is
    /// left out (a name or a language a player cannot show, a URL that is not http).
    private static func subtitles(in target: RequestTarget) -> [SideLoadedSubtitle] {
        var tracks: [SideLoadedSubtitle] = []
        var pending: (language: String?, name: String?) = (nil, nil)
        for item in target.items where tracks.count < maximumSubtitles {
            switch item.name {
            case "sl": pending = (item.value, nil)
            case "sn": pending.name = item.value
            case "su":
                if let language = pending.language, let url = item.value.flatMap(URL.init(string:)),
                    let track = SideLoadedSubtitle(language: language, url: url, name: pending.name)
                {
                    tracks.append(track)
                }
                pending = (nil, nil)
            default: continue
            }
        }
        return tracks
    }

    static func base64URL(_ text: String) -> String {
        base64URL(bytes: Array(text.utf8))
    }

    static func base64URL(bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func fromBase64URL(_ text: Substring) -> String? {
        // Not `String(data:encoding:)`: it drops a leading U+FEFF.
        bytesFromBase64URL(text).flatMap { String(validating: $0, as: UTF8.self) }
    }

    static func bytesFromBase64URL(_ text: Substring) -> [UInt8]? {
        guard text.count <= 2048,
            text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}
