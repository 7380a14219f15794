// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOHTTP1

/// A request the proxy refuses, with its status.
struct ProxyRequestError: Error, Sendable {
    /// Which guard refused a request (see ``ProxyRouter/noteRefusal(_:_:)``); the label of
    /// `mediacache_refused_requests_total`.
    enum Refusal: String, CaseIterable, Sendable {
        /// A page of another site (Fetch Metadata).
        case crossSite = "cross-site"
        /// A `Host` that does not name the proxy (DNS rebinding).
        case host
        /// A missing or wrong access token.
        case token
        /// On the LAN listener: a URL whose credential was not minted for what it names (another
        /// path, origin or credential than it was given).
        case capability
        /// On the LAN listener: a URL minted to work until a time that has passed.
        case expired
        /// On the LAN listener: a URL revoked by itself (`mediacache lan revoke`).
        case revoked
        /// A target that is the proxy itself: one of its listeners, or a request that already
        /// passed through it (its `Via` names it).
        case loop
        /// On the LAN listener: a URL another origin's playlist named, on an address of this
        /// machine or its networks.
        case privateAddress = "private-address"
        /// An origin host not on the allow-list.
        case origin
        /// A changing admin request without `X-MediaCache-Admin: 1`.
        case admin
    }

    var status: HTTPResponseStatus
    var message: String
    var headers: [(String, String)]
    var refusal: Refusal?
    init(status: HTTPResponseStatus, _ message: String, headers: [(String, String)] = [], refusal: Refusal? = nil) {
        self.status = status
        self.message = message
        self.headers = headers
        self.refusal = refusal
    }
}
