// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import MediaCacheHTTPFields

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a host's addresses are: an address or a name that never leaves the machine is judged as
/// written (``AddressScope/init(host:)``); any other name is resolved by the system's resolver
/// (`getaddrinfo`, on the I/O thread pool: it blocks). A name that does not resolve has no scope:
/// no connection will reach it either.
///
/// The connection that follows resolves the name again (the HTTP client does its own lookup), so a
/// name whose answers change between the two (DNS rebinding, with a short TTL) is judged by the
/// first: docs/http.md lists this.
package struct AddressResolver: Sendable {
    /// The addresses of a name, as scopes.
    private let lookUp: @Sendable (String) async -> [AddressScope]

    /// A resolver that looks names up with `lookUp` (a test gives the answers it wants).
    package init(lookUp: @escaping @Sendable (String) async -> [AddressScope]) {
        self.lookUp = lookUp
    }

    /// The system's resolver.
    package static let system = AddressResolver { name in
        (try? await BlockingIO.run { systemScopes(of: name) }) ?? []
    }

    /// The scopes of `host`'s addresses.
    package func scopes(of host: String) async -> [AddressScope] {
        if let scope = AddressScope(host: host) { return [scope] }
        return await lookUp(host)
    }

    /// The first scope of `host`'s addresses that is not public, if any.
    package func nonPublicScope(of host: String) async -> AddressScope? {
        await scopes(of: host).first { !$0.isPublic }
    }

    private static func systemScopes(of name: String) -> [AddressScope] {
        var hints = addrinfo()
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var scopes: [AddressScope] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let entry = next {
            defer { next = entry.pointee.ai_next }
            guard let address = entry.pointee.ai_addr else { continue }
            switch Int32(entry.pointee.ai_family) {
            case AF_INET:
                let v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
                scopes.append(AddressScope(ipv4: UInt32(bigEndian: v4)))
            case AF_INET6:
                let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
                }
                scopes.append(AddressScope(ipv6: bytes))
            default: continue
            }
        }
        return scopes
    }
}
