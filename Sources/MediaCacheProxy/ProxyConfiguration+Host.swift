// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheHTTPFields

extension ProxyConfiguration {
    /// Whether a request naming `host` was meant for this proxy listening on `localPort`
    /// (see ``ProxyConfiguration/serverNames``). A DNS rebinding page can only send its own name, so
    /// accepting IP literals on a wildcard address opens nothing to it.
    func accepts(_ header: HostAndPort, localPort: Int) -> Bool {
        guard header.port == localPort || (header.port == nil && localPort == 80) else { return false }
        var listening = host.lowercased()
        if listening.hasPrefix("["), listening.hasSuffix("]") { listening = String(listening.dropFirst().dropLast()) }
        if ["127.0.0.1", "localhost", "::1", listening].contains(header.name) { return true }
        if serverNames.contains(where: { $0.lowercased() == header.name }) { return true }
        return ["0.0.0.0", "::", ""].contains(listening) && header.isIPLiteral
    }
}
