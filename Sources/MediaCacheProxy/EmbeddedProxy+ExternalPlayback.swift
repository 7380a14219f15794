// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import MediaCache

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// AirPlay and other external playback: the receiver fetches the item's URL itself, from
/// another device of the network, so `127.0.0.1` (itself) will not do.
extension EmbeddedProxy {
    /// What an external display is given to play an item.
    public enum ExternalSource: Sendable, Equatable {
        /// This proxy on the LAN address, the token in the URL's path (no header is sent).
        case lan(URL)
        /// The origin itself.
        case origin(URL)
    }

    /// Where a receiver plays from, by what the cache holds (pure).
    enum ExternalChoice: Equatable {
        case lan(String)
        case origin
    }

    static func externalChoice(holdsAny: Bool, lanAddress: String?, prefersOriginWhenNothingHeld: Bool)
        -> ExternalChoice
    {
        guard let lanAddress, holdsAny || !prefersOriginWhenNothingHeld else { return .origin }
        return .lan(lanAddress)
    }

    /// The URL an external display (an AirPlay receiver) plays `originURL` from: this proxy on
    /// `lanAddress` (listening there from now on, until ``endExternalPlayback()``), a credential
    /// for that resource alone in the path (`/o/<origin>.<credential>/…`), so held bytes, pinned ones included, play on the
    /// receiver with the origin gone; or the origin URL itself when there is no LAN address, or
    /// when the cache holds nothing of it and the app prefers the origin (`prefersOriginWhenNothingHeld`).
    /// The LAN URL works for a day (a film night):
    /// ``externalSource(for:lanAddress:prefersOriginWhenNothingHeld:lifetime:)`` gives another lifetime.
    /// - Throws: ``ProxyError`` when the proxy cannot listen on `lanAddress`.
    public func externalSource(for originURL: URL, lanAddress: String?, prefersOriginWhenNothingHeld: Bool = false)
        async throws -> ExternalSource
    {
        try await externalSource(
            for: originURL, lanAddress: lanAddress, prefersOriginWhenNothingHeld: prefersOriginWhenNothingHeld,
            lifetime: 86_400)
    }

    /// ``externalSource(for:lanAddress:prefersOriginWhenNothingHeld:)`` with a LAN URL that works
    /// for `lifetime` seconds from now.
    public func externalSource(
        for originURL: URL, lanAddress: String?, prefersOriginWhenNothingHeld: Bool, lifetime: Int64
    ) async throws -> ExternalSource {
        let choice = Self.externalChoice(
            holdsAny: reader.holdsVersion(of: originURL), lanAddress: lanAddress,
            prefersOriginWhenNothingHeld: prefersOriginWhenNothingHeld)
        guard case .lan(let address) = choice else {
            await endExternalPlayback()
            return .origin(originURL)
        }
        try await server.listen(onLAN: address)
        let host = address.contains(":") ? "[\(address)]" : address
        guard let capabilities = server.lanCapabilities,
            let url = URL(
                string: "http://\(host):\(port)"
                    + capabilities.pathForm(for: originURL, until: Int64(Date().timeIntervalSince1970) + lifetime))
        else {
            throw ProxyError("\(address) cannot be written in a URL.", setting: .host)
        }
        return .lan(url)
    }

    /// Stops listening on the LAN address external playback opened: call it when it ends.
    public func endExternalPlayback() async {
        server.stopListeningOnLAN()
    }

    /// The origin URL a URL of this proxy (``url(for:)``, a path-form URL) names, or `nil`.
    public func originURL(of playerURL: URL) -> URL? {
        guard playerURL.port == port else { return nil }
        return try? ProxyTarget(readingURL: playerURL).origin
    }
}

/// The machine's address on the network a receiver reaches it at.
public enum LANAddress {
    /// The IPv4 address of the Wi-Fi interface (`en0` on an iPhone), else of another Ethernet or
    /// wireless one; `nil` when there is none (no network, or a cellular one only).
    public static func current() -> String? {
        choose(interfaces())
    }

    /// The address to use among `interfaces` (name, IPv4 address): `en0` first, then other
    /// `en`, `wl` and `eth` interfaces in order; never loopback or link-local (169.254/16).
    static func choose(_ interfaces: [(name: String, address: String)]) -> String? {
        let usable = interfaces.filter { !$0.address.hasPrefix("127.") && !$0.address.hasPrefix("169.254.") }
        for prefix in ["en0", "en", "wl", "eth"] {
            if let found = usable.first(where: { $0.name.hasPrefix(prefix) }) { return found.address }
        }
        return nil
    }

    /// The IPv4 addresses of the interfaces that are up, by name.
    static func interfaces() -> [(name: String, address: String)] {
        var first: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&first) == 0, let first else { return [] }
        defer { freeifaddrs(first) }
        var found: [(String, String)] = []
        var next: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = next {
            defer { next = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                entry.pointee.ifa_flags & UInt32(IFF_UP) != 0
            else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else {
                continue
            }
            found.append(
                (
                    String(cString: entry.pointee.ifa_name),
                    String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                ))
        }
        return found
    }
}
