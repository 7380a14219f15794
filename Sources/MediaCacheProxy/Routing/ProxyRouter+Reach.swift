// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields

/// What a checked request may reach: never the proxy itself, and from the LAN, only the
/// internet for a URL another origin named.
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
}
