// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOHTTP1
import Testing

@testable import MediaCache
@testable import MediaCacheProxy

/// The LAN listener's gate, without I/O: which targets a credential admits, what each may reach,
/// and that the proxy never names itself as an origin.
@Suite(.stallLimit) struct LANCapabilitiesTests {
    /// The proxy's port in these tests.
    static let port = 9

    static func lanConfiguration(_ capabilities: LANCapabilities) -> ProxyConfiguration {
        var configuration = ProxyConfiguration()
        configuration.host = "127.0.0.3"
        configuration.port = port
        configuration.isLANListener = true
        configuration.lanCapabilities = capabilities
        return configuration
    }

    static func router(_ configuration: ProxyConfiguration) -> ProxyRouter {
        ProxyRouter(configuration: configuration, checkOrigin: { _ in })
    }

    static func head(_ uri: String, host: String = "127.0.0.3:\(port)", via: String? = nil) -> HTTPRequestHead {
        var headers = HTTPHeaders([("Host", host)])
        if let via { headers.add(name: "Via", value: via) }
        return HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: headers)
    }

    /// What `router` makes of `uri`: the checked request, or the refusal.
    static func check(_ router: ProxyRouter, _ uri: String, via: String? = nil) -> Result<
        ProxyRouter.CheckedRequest, ProxyRequestError
    > {
        let host = router.configuration.isLANListener ? "127.0.0.3:\(port)" : "127.0.0.1:\(port)"
        do {
            guard case .request(let request) = try router.check(head(uri, host: host, via: via), localPort: port) else {
                return .failure(ProxyRequestError(status: .imATeapot, "not a proxy request"))
            }
            return .success(request)
        } catch {
            return .failure(error as? ProxyRequestError ?? ProxyRequestError(status: .badRequest, "\(error)"))
        }
    }

    static func refusal(_ result: Result<ProxyRouter.CheckedRequest, ProxyRequestError>) -> ProxyRequestError.Refusal? {
        guard case .failure(let error) = result else { return nil }
        return error.refusal
    }

    /// The path form of `url` with `token` as its credential.
    static func withToken(_ url: URL, _ token: String) -> String {
        var target = ProxyTarget(url, form: .path)
        target.token = token
        return target.uri
    }

    /// A credential minted to expire: granted until its time, then expired (the MAC checked
    /// first: an altered expiry, later or earlier, is a wrong credential); what the answer to it
    /// names expires with it; one minted without an expiry works as before.
    @Test func aCredentialMintedToExpireWorksUntilThenAndItsExpiryCannotBeChanged() throws {
        let capabilities = LANCapabilities.made()
        let url = URL(string: "http://192.168.1.10:8096/films/night.mp4")!
        let until: Int64 = 1_800_000_000
        let uri = capabilities.pathForm(for: url, until: until)
        let target = try ProxyTarget(reading: RequestTarget(uri))
        let credential = try #require(target.token)
        #expect(credential.hasPrefix("r~1800000000."), "\(credential)")
        #expect(capabilities.verdict(of: target, minted: url, now: until - 1) == .granted(.namedOrigin, until: until))
        #expect(capabilities.verdict(of: target, minted: url, now: until) == .expired(at: until))
        for altered in ["1900000000", "1700000000", "01800000000", "", "-1", "99999999999999999999"] {
            var changed = target
            changed.token = credential.replacingOccurrences(of: "1800000000", with: altered)
            #expect(capabilities.verdict(of: changed, minted: url, now: until - 1) == .refused, "\(altered)")
        }
        var unexpiring = target
        unexpiring.token = capabilities.credential(for: ProxyTarget(url, form: .path))
        #expect(capabilities.verdict(of: unexpiring, minted: url, now: .max) == .granted(.namedOrigin, until: nil))
        // What a playlist of it names carries the same expiry.
        var configuration = Self.lanConfiguration(capabilities)
        configuration.minting = .init(authority: LANCapabilities.authority(of: url), grant: .namedOrigin, until: until)
        let named = try ProxyTarget(
            reading: RequestTarget(
                configuration.pathForm(for: url.deletingLastPathComponent().appendingPathComponent("seg1.ts"))))
        #expect(named.token?.hasPrefix("r~1800000000.") == true, "\(named.token ?? "-")")
    }

    @Test func aMintedURLIsAdmittedWithItsGrantAndAnAlteredOneIsNot() throws {
        let capabilities = LANCapabilities.made()
        var configuration = Self.lanConfiguration(capabilities)
        let router = Self.router(configuration)
        let url = URL(string: "http://cdn.example.com/hls/v1/index.m3u8?sig=abc")!
        let path = capabilities.pathForm(for: url)
        let query = capabilities.queryForm(for: url, subtitles: [])
        for uri in [path, query] {
            let request = try Self.check(router, uri).get()
            #expect(request.url == url && request.grant == .namedOrigin, "\(uri)")
            // The parameters a player adds go through; any other change is refused.
            let reload = try Self.check(router, uri + "&_HLS_msn=4&_HLS_part=1").get()
            #expect(reload.url.absoluteString.contains("_HLS_msn=4"), "\(reload.url)")
        }
        for altered in [
            path.replacingOccurrences(of: "index.m3u8", with: "secret.txt"),
            path.replacingOccurrences(of: "sig=abc", with: "sig=abd"),
            path + "&file=secret",
            query.replacingOccurrences(of: "index.m3u8", with: "secret.txt"),
            Self.withToken(url, "p" + (RequestTarget(path).token ?? "")),
            // The last character changed (to another: one in 64 MACs already ends in "A").
            Self.withToken(url, RequestTarget(path).token.map { $0.dropLast() + ($0.last == "A" ? "B" : "A") } ?? ""),
            capabilities.pathForm(for: URL(string: "http://cdn.example.com/hls/v1/index.m3u8")!)
                .replacingOccurrences(of: "/hls/", with: "/HLS/"),
            LANCapabilities.made().pathForm(for: url),
        ] {
            #expect(Self.refusal(Self.check(router, altered)) == .capability, "\(altered)")
        }
        // Another origin in the first segment, the credential kept.
        let other = capabilities.pathForm(for: URL(string: "http://127.0.0.1:22/hls/v1/index.m3u8?sig=abc")!)
        let credential = path.split(separator: "/")[1].split(separator: ".")[1...].joined(separator: ".")
        let swapped =
            "/o/" + other.split(separator: "/")[1].split(separator: ".")[0] + "." + credential
            + "/hls/v1/index.m3u8?sig=abc"
        #expect(Self.refusal(Self.check(router, swapped)) == .capability, "\(swapped)")

        // What a playlist of this origin names is minted with its grant; what it names on another
        // origin reaches only the internet.
        configuration.minting = .init(authority: LANCapabilities.authority(of: url), grant: .namedOrigin)
        let same = configuration.pathForm(for: URL(string: "http://cdn.example.com/hls/v1/seg1.ts")!)
        let elsewhere = configuration.pathForm(for: URL(string: "http://media.example.net/seg1.ts")!)
        #expect(try Self.check(router, same).get().grant == .namedOrigin)
        #expect(try Self.check(router, elsewhere).get().grant == .publicAddressesOnly)
        let base = configuration.pathForm(for: URL(string: "http://cdn.example.com/dash/")!)
        #expect(try Self.check(router, base + "init-stream0.m4s").get().grant == .namedOrigin)
        #expect(Self.refusal(Self.check(router, base + "%2e%2e/secret.txt")) == .capability)
    }

    @Test func anotherOriginsPlaylistNeverLeadsToThisMachineOrItsNetworks() throws {
        let capabilities = LANCapabilities.made()
        var configuration = Self.lanConfiguration(capabilities)
        configuration.minting = .init(authority: "http://cdn.example.com", grant: .namedOrigin)
        let router = Self.router(configuration)
        for (url, scope) in [
            ("http://127.0.0.1:22/ssh", "loopback"), ("http://0x7f.1:8080/a.ts", "loopback"),
            ("http://2130706433/a.ts", "loopback"), ("http://[::ffff:127.0.0.1]:8080/a.ts", "loopback"),
            ("http://192.168.1.1/admin", "private"), ("http://10.0.0.7/a.ts", "private"),
            ("http://169.254.169.254/latest/meta-data", "link-local"), ("http://[fe80::1]/a.ts", "link-local"),
            ("http://localhost:631/jobs", "loopback"), ("http://printer.localhost/a.ts", "loopback"),
            ("http://0.0.0.0:8080/a.ts", "unspecified"),
        ] {
            let uri = configuration.pathForm(for: URL(string: url)!)
            let result = Self.check(router, uri)
            #expect(Self.refusal(result) == .privateAddress, "\(url): \(result)")
            if case .failure(let error) = result { #expect(error.message.contains(scope), "\(error.message)") }
        }
        // The user named it: that origin is reached wherever it is, and what its playlists name on it.
        let nas = URL(string: "http://192.168.1.20:8096/videos/movie.mp4")!
        let named = try Self.check(router, capabilities.pathForm(for: nas)).get()
        #expect(named.url == nas && named.grant == .namedOrigin)
        configuration.minting = .init(authority: LANCapabilities.authority(of: nas), grant: .namedOrigin)
        #expect(
            try Self.check(Self.router(configuration), configuration.pathForm(for: nas.appending(path: "x"))).get()
                .grant == .namedOrigin)
    }

    @Test func theProxyNeverFetchesFromItself() throws {
        let capabilities = LANCapabilities.made()
        var loopback = ProxyConfiguration()
        loopback.port = Self.port
        loopback.lanAddress = "127.0.0.3"
        for configuration in [loopback, Self.lanConfiguration(capabilities)] {
            let router = Self.router(configuration)
            for own in [
                "http://127.0.0.1:\(Self.port)/status.json", "http://localhost:\(Self.port)/_mediacache/entries",
                "http://[::1]:\(Self.port)/metrics", "http://127.0.0.3:\(Self.port)/status",
                "http://0.0.0.0:\(Self.port)/",
                "http://127.0.0.2:\(Self.port)/status.json",
            ] {
                let url = URL(string: own)!
                let uri =
                    configuration.isLANListener
                    ? capabilities.pathForm(for: url) : ProxyTarget(url).uri
                #expect(Self.refusal(Self.check(router, uri)) == .loop, "\(own) on \(configuration.host)")
            }
            // A name that leads back here is told by the proxy's own Via on the request it sent.
            let origin = URL(string: "http://media.example.com/a.mp4")!
            let uri = configuration.isLANListener ? capabilities.pathForm(for: origin) : ProxyTarget(origin).uri
            let request = try Self.check(router, uri).get()
            let via = try #require(request.asked.forwarded.last { $0.name == "Via" })
            #expect(via.value == "1.1 " + configuration.pseudonym)
            #expect(Self.refusal(Self.check(router, uri, via: "1.0 squid, " + via.value)) == .loop)
            #expect(Self.refusal(Self.check(router, uri, via: "1.1 mediacache-other")) == nil)
        }
    }

    /// Fuzz target: LAN targets made from minted URLs (path and query forms, folders, both
    /// grants, URLs on this machine, its networks and the proxy's own port) mutated at random.
    /// Whatever the router admits is what was minted, with the grant it was minted with: a
    /// resource's origin, path and query, or a path under a minted folder; never the proxy itself,
    /// never an address off the internet for a URL that reaches only the internet.
    @Test func nothingButWhatWasMintedIsEverAdmitted() throws {
        let capabilities = try #require(LANCapabilities(key: (0..<32).map { UInt8($0 * 7 % 251) }))
        var configuration = Self.lanConfiguration(capabilities)
        let router = Self.router(configuration)
        struct Minted {
            var authority: String
            var path: String
            var query: String
            var isFolder: Bool
            var grant: LANCapabilities.Grant
        }
        var minted: [Minted] = []
        var lines: [String] = []
        func mint(_ text: String, by playlistOrigin: String?, queryForm: Bool = false) {
            let url = URL(string: text)!
            configuration.minting = playlistOrigin.map { .init(authority: $0, grant: .namedOrigin) }
            let grant: LANCapabilities.Grant =
                playlistOrigin == nil || playlistOrigin == LANCapabilities.authority(of: url)
                ? .namedOrigin : .publicAddressesOnly
            let uri: String
            if playlistOrigin == nil {
                uri = queryForm ? capabilities.queryForm(for: url, subtitles: []) : capabilities.pathForm(for: url)
            } else {
                uri = queryForm ? configuration.uri(of: ProxyTarget(url)) : configuration.pathForm(for: url)
            }
            let path = LANCapabilities.path(of: url)
            minted.append(
                Minted(
                    authority: LANCapabilities.authority(of: url), path: path,
                    query: LANCapabilities.mintedQuery(of: url), isFolder: !queryForm && path.hasSuffix("/"),
                    grant: grant))
            lines.append(uri)
        }
        let playlist = "http://cdn.example.com"
        mint("http://cdn.example.com/hls/master.m3u8", by: nil)
        mint("http://cdn.example.com/hls/master.m3u8", by: nil, queryForm: true)
        mint("http://cdn.example.com/hls/v1/index.m3u8?sig=abc&_HLS_msn=3", by: playlist)
        mint("https://media.example.net/a/b/seg-1.ts?sig=x", by: playlist)
        mint("https://media.example.net/a/b/seg-2.ts", by: playlist, queryForm: true)
        mint("http://cdn.example.com/dash/", by: playlist)
        mint("https://media.example.net/dash/v2/", by: playlist)
        mint("http://192.168.1.20:8096/videos/movie.mp4", by: nil)
        mint("http://[::1]:8080/live/", by: "http://[::1]:8080")
        mint("http://10.0.0.7/other/seg.ts", by: playlist)
        mint("http://[fe80::1]/other/", by: playlist)
        mint("http://127.0.0.1:\(Self.port)/status.json", by: nil)
        mint("http://localhost:\(Self.port)/_mediacache/entries", by: nil, queryForm: true)
        // Credentials moved onto other targets, dot segments, other schemes.
        let credentials = lines.compactMap { RequestTarget($0).token }
        for (index, line) in lines.enumerated() where line.hasPrefix("/o/") {
            let credential = credentials[(index + 3) % credentials.count]
            let parts = line.split(separator: "/", maxSplits: 2)
            let origin = parts[1].split(separator: ".")[0]
            lines.append("/o/\(origin).\(credential)/\(parts.count > 2 ? parts[2] : "")")
            lines.append(line.replacingOccurrences(of: "/dash/", with: "/dash/../"))
        }
        let outcomes = try Mutator.run("lan-paths", lines: lines) { input in
            let result = Self.check(router, input)
            guard case .success(let request) = result else { return ("refused", nil) }
            let url = request.url
            let (authority, path) = (LANCapabilities.authority(of: url), LANCapabilities.path(of: url))
            let query = LANCapabilities.mintedQuery(of: url)
            let match = minted.first { item in
                item.authority == authority && item.grant == request.grant
                    && (item.isFolder
                        ? path.hasPrefix(item.path) && path != item.path && LANCapabilities.hasNoDotSegment(url)
                        : item.path == path && item.query == query)
            }
            guard match != nil else { return ("admitted", "admitted \(url) (\(request.grant)), never minted") }
            let port = HostAndPort(authorityOf: url)?.port
            if port == Self.port, url.host == "127.0.0.1" || url.host == "localhost" {
                return ("admitted", "admitted the proxy itself: \(url)")
            }
            if request.grant == .publicAddressesOnly, let scope = AddressScope(host: url.host ?? ""), !scope.isPublic {
                return ("admitted", "admitted a \(scope) address for a URL another origin named: \(url)")
            }
            return ("admitted", nil)
        }
        try Mutator.expectVaried(outcomes, ["admitted", "refused"])
    }

    /// Each hop of random redirect chains of a LAN request: followed to the exact origin its URL
    /// was minted for (scheme, host in any case, port written or by default), or where the
    /// target's addresses are all on the internet; any other target on this machine or its
    /// networks is refused, whichever hop it is.
    @Test func aLANRequestsRedirectsAreFollowedOnlyToItsOriginOrTheInternet() throws {
        var random = SplitMix(seed: 91)
        let hosts = [
            "127.0.0.1", "127.0.0.2", "LOCALHOST", "192.168.1.5", "10.0.0.1", "169.254.1.1", "[::1]", "93.184.216.34",
            "8.8.8.8",
        ]
        let ports: [Int?] = [nil, 80, 443, 8080]
        func pick() -> (scheme: String, host: String, port: Int?) {
            (
                ["http", "https", "HTTP"].randomElement(using: &random)!, hosts.randomElement(using: &random)!,
                ports.randomElement(using: &random)!
            )
        }
        func url(_ origin: (scheme: String, host: String, port: Int?)) throws -> URL {
            try #require(
                URL(string: "\(origin.scheme)://\(origin.host)\(origin.port.map { ":\($0)" } ?? "")/a/b.mp4?x=1"))
        }
        var outcomes: [Bool: Int] = [:]
        for _ in 0..<2_000 {
            let minted = pick()
            let reach = LANReach(mintedFor: try url(minted), client: "192.168.1.20")
            for _ in 0..<Int.random(in: 1...5, using: &random) {
                let next = pick()
                let scope = AddressScope(host: next.host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")))
                    .flatMap { $0.isPublic ? nil : $0 }
                func effectivePort(_ origin: (scheme: String, host: String, port: Int?)) -> Int {
                    origin.port ?? (origin.scheme.lowercased() == "https" ? 443 : 80)
                }
                let sameOrigin =
                    minted.scheme.lowercased() == next.scheme.lowercased()
                    && minted.host.lowercased() == next.host.lowercased()
                    && effectivePort(minted) == effectivePort(next)
                let follows = reach.follows(try url(next), scope: scope)
                #expect(follows == (scope == nil || sameOrigin), "\(minted) -> \(next)")
                outcomes[follows, default: 0] += 1
            }
        }
        // Both outcomes are met often.
        #expect(outcomes[true, default: 0] > 500 && outcomes[false, default: 0] > 500, "\(outcomes)")
    }

    /// A revoked URL is known by its credential's MAC, kept in its file across instances (a
    /// restart); another credential is not revoked, and a text that is no credential revokes nothing.
    @Test func revocationsAreKeptInTheirFileAndTouchOnlyTheirURL() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("lan.revoked")
            let capabilities = LANCapabilities.made()
            let url = URL(string: "http://192.168.1.10/film.mp4")!
            let first = capabilities.credential(for: ProxyTarget(url, form: .path), until: 2_000_000_000)
            let second = capabilities.credential(for: ProxyTarget(url, form: .path))
            let revocations = await LANRevocations.loading(file)
            let (once, twice) = (
                try await revocations.revoke(credential: first), try await revocations.revoke(credential: first)
            )
            let nothing = try await revocations.revoke(credential: "not a credential")
            #expect(once && !twice && !nothing)
            let reopened = await LANRevocations.loading(file)
            #expect(reopened.contains(credential: first) && !reopened.contains(credential: second))
        }
    }
}
