// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields
import NIOHTTP1

/// What a checked request may reach: never the proxy itself; from the LAN, what its credential
/// grants until it expires or is revoked, and only the internet for a URL another origin named.
extension ProxyRouter {
    /// Refuses an origin that is this proxy (an address of this machine at the port it listens
    /// on, whichever listener asked), and one on an address of this machine or its networks
    /// written in a URL that `grant`s only the internet. A name is judged after it resolves
    /// (``ProxyHandler``), and a request that comes back through this proxy by a name is refused
    /// by its `Via` (``checkSender(_:localPort:)``).
    func checkReach(_ origin: URL, grant: LANCapabilities.Grant, localPort: Int) throws {
        guard let authority = HostAndPort(authorityOf: origin) else { return }
        let scope = AddressScope(host: authority.name)
        let port = authority.port ?? (origin.scheme?.lowercased() == "https" ? 443 : 80)
        let ownHosts = [configuration.host, configuration.lanAddress].compactMap { $0?.lowercased() }
        if port == localPort || port == configuration.port,
            scope == .loopback || scope == .unspecified || ownHosts.contains(authority.name)
        {
            throw ProxyRequestError(
                status: .forbidden,
                "The origin \(authority.name.prefix(100)):\(port) is this proxy: it never fetches from itself.",
                refusal: .loop)
        }
        if grant == .publicAddressesOnly, let scope, !scope.isPublic {
            throw Self.privateAddress(authority.name, scope)
        }
    }

    /// The refusal of a LAN URL another origin named on an address that is not on the internet.
    static func privateAddress(_ host: String, _ scope: AddressScope) -> ProxyRequestError {
        ProxyRequestError(
            status: .forbidden,
            "\(host.prefix(100)) is a \(scope.rawValue) address, and this URL was named by another origin's playlist: from the LAN, the proxy reaches this machine and its networks only at an origin the user named.",
            refusal: .privateAddress)
    }

    /// What a request for `proxy` may reach, if it may be answered at all: on loopback, the origin
    /// it names when it carries the access token (``hasToken(_:_:)``); on the LAN listener, what
    /// the credential its URL carries grants, when it was minted for what the URL names
    /// (`LANCapabilities`). Never the token there.
    func admission(_ target: RequestTarget, proxy: ProxyTarget, _ head: HTTPRequestHead) -> LANCapabilities.Verdict {
        guard configuration.isLANListener else {
            return hasToken(target, head) ? .granted(.namedOrigin, until: nil) : .refused
        }
        guard let capabilities = configuration.lanCapabilities, let minted = target.mintedURL() else { return .refused }
        return capabilities.verdict(of: proxy, minted: minted, now: Self.now())
    }

    /// Seconds since 1970, as credentials' expiries are written.
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// The refusal of a LAN URL revoked by itself (``LANRevocations``).
    static let revoked = ProxyRequestError(
        status: .forbidden, "This URL was revoked: ask the one who gave it for a new one.", refusal: .revoked)

    /// Refuses a LAN request whose credential was revoked.
    func checkRevoked(_ credential: String?) throws {
        guard let credential, configuration.lanRevocations.contains(credential: credential) else { return }
        throw Self.revoked
    }

    /// The refusal of a LAN URL whose credential expired at `until`.
    static func expired(at until: Int64) -> ProxyRequestError {
        ProxyRequestError(
            status: .forbidden,
            "This URL expired at \(Date(timeIntervalSince1970: TimeInterval(until)).formatted(.iso8601)): ask the one who gave it for a new one.",
            refusal: .expired)
    }
}
