// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
package import MediaCacheHTTPFields

/// Where the redirects of a request that came from the LAN listener may lead: to the exact
/// origin its capability was minted for (scheme, host and port), or to the internet. A NAS
/// the user named may redirect within itself; it may not lead a device of the network to
/// another service of this machine or its networks (a loopback port, a router's page), which
/// loopback clients may reach. The proxy sets ``current`` for the work of a LAN request; every
/// task the read path starts for it carries it (a task-local), so each hop of every chain, the
/// probe's and the transfer's, is judged.
package struct LANReach: Sendable, Equatable {
    /// The origin the capability names, as ``origin(of:)`` writes it.
    package var origin: String
    /// The client's address, for the log.
    package var client: String

    /// The reach of a LAN request for `url` from `client`.
    package init(mintedFor url: URL, client: String?) {
        origin = Self.origin(of: url) ?? ""
        self.client = client ?? "-"
    }

    /// The reach of the request being answered: `nil` for a loopback client's.
    @TaskLocal package static var current: LANReach?

    /// `url`'s origin: its scheme, host and port, lower-cased, the default port written out.
    package static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let authority = HostAndPort(authorityOf: url) else { return nil }
        let port = authority.port ?? (scheme == "https" ? 443 : 80)
        let host = authority.name.lowercased()
        return scheme + "://" + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    /// Whether a redirect to `next`, whose addresses are of `scope` (the first that is not
    /// public; `nil`: all public, or none), is followed.
    package func follows(_ next: URL, scope: AddressScope?) -> Bool {
        scope == nil || Self.origin(of: next) == origin
    }
}
