import Foundation
import MediaCache
import MediaCacheHTTP
import Synchronization

/// A proxy request target, `/?url=ENC[&token=T][&memory=1]`, parsed without trusting a byte of it.
struct RequestTarget: Sendable {
    /// The path, or `nil` when the target is not a URI reference.
    let path: String?
    /// The query items, percent-decoded.
    let items: [URLQueryItem]

    init(_ uri: String) {
        let components = URLComponents(string: uri)
        path = components?.path
        items = components?.queryItems ?? []
    }

    /// `memory=1`: the resource is kept in memory only, never in the store (an HLS key; the
    /// proxy adds this to the key URIs of the playlists it rewrites).
    var isMemoryOnly: Bool { query("memory") == "1" }

    /// The first value of the query item `name`.
    func query(_ name: String) -> String? {
        items.first { $0.name == name }?.value
    }

    /// The origin URL the target asks for: an absolute http or https URL with a host and a
    /// port in 1...65535. The path is `/`, or any path when `url=` is given: URIs in rewritten
    /// HLS playlists end with the resource's file name (`/seg001.ts?url=…`), because
    /// ffmpeg's HLS reader refuses a segment whose path has no media extension.
    /// The parameters of an HLS blocking reload (`_HLS_msn`, `_HLS_part`, `_HLS_skip`), which a
    /// player appends to the playlist URL it was given (the proxy's), go on to the origin URL.
    /// - Throws: ``ProxyRequestError`` with 404 for another path without `url=`, 400 for a
    ///   missing or bad URL.
    func originURL() throws -> URL {
        guard let path, path == "/" || (path.hasPrefix("/") && query("url") != nil) else {
            throw ProxyRequestError(status: .notFound, "Nothing here: ask for /?url=<percent-encoded http or https URL>.")
        }
        guard let text = query("url"), !text.isEmpty else {
            throw ProxyRequestError(status: .badRequest, "Missing url: ask for /?url=<percent-encoded http or https URL>.")
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              let authority = HostAndPort(authorityIn: text), authority.port.map({ $0 > 0 }) ?? true else {
            throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".")
        }
        guard scheme == "http" || scheme == "https" else {
            throw ProxyRequestError(status: .badRequest, "Only http and https URLs can be proxied, not \(scheme.prefix(20)).")
        }
        let reload = items.filter { HLSPlaylist.blockingReloadParameters.contains($0.name) }
        guard !reload.isEmpty else { return url }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".")
        }
        components.queryItems = (components.queryItems ?? []).filter { !HLSPlaylist.blockingReloadParameters.contains($0.name) } + reload
        guard let withReload = components.url else { throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".") }
        return withReload
    }
}

/// The parsed targets of recent request URIs. A player asks for the same URL again and again,
/// and parsing one (percent-decoding its query, then the origin URL in it) cost more than the
/// rest of answering a cached range. At most ``limit``, forgotten all at once when full.
final class RecentTargets: Sendable {
    struct Parsed: Sendable {
        var target: RequestTarget
        var originURL: Result<URL, ProxyRequestError>
    }

    private let parsed = Mutex<[String: Parsed]>([:])
    static let limit = 256

    /// The parsed `uri`; `check` (the origin allow-list: it does not change) runs on a new
    /// one's URL, and its refusal is remembered as the target's result.
    func parse(_ uri: String, check: (URL) throws(ProxyRequestError) -> Void) -> Parsed {
        if let known = parsed.withLock({ $0[uri] }) { return known }
        let target = RequestTarget(uri)
        let result = Parsed(target: target, originURL: Result {
            let url = try target.originURL()
            try check(url)
            return url
        }.mapError { error in
            error as? ProxyRequestError ?? ProxyRequestError(status: .badRequest, "Malformed request target.")
        })
        parsed.withLock { parsed in
            if parsed.count >= Self.limit { parsed.removeAll(keepingCapacity: true) }
            parsed[uri] = result
        }
        return result
    }
}
