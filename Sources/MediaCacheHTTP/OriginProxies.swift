// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// The proxies origin requests go through, and the hosts that go direct: read from the
/// environment as curl reads it (``init(environment:)``), or one parent for every origin
/// (``init(parent:noProxy:)``, `serve --parent-proxy`). Plain HTTP goes to an HTTP proxy as an
/// absolute-form request (so a parent cache can store it), HTTPS through `CONNECT`; a SOCKS5
/// proxy carries both. Pure: it decides, ``HTTPOriginFetcher`` connects.
public struct OriginProxies: Sendable, Equatable {
    /// A proxy server. Its credentials (from the URL's user-info) are never in its
    /// ``description``, nor in any message.
    package struct Server: Sendable, Hashable, CustomStringConvertible {
        package enum Kind: String, Sendable, Hashable {
            /// An HTTP proxy (`http://`).
            case http
            /// A SOCKS5 proxy (`socks5://`, `socks5h://`).
            case socks5
        }

        package var kind: Kind
        package var host: String
        package var port: Int
        package var username: String?
        package var password: String?

        /// `http://proxy.example:3128`, without credentials.
        package var description: String {
            "\(kind == .http ? "http" : "socks5")://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        }
    }

    /// For `http://` and for `https://` origins; `nil`: direct.
    package var http: Server?
    package var https: Server?
    /// The hosts that go direct whatever the proxies.
    package var bypass = NoProxyList("")

    /// Every origin direct.
    public static let none = OriginProxies()

    package init() {}

    /// The proxies as curl reads them from `environment`: `http_proxy` (lower case only, as
    /// curl: a CGI program's `HTTP_PROXY` is a request header), `https_proxy` or
    /// `HTTPS_PROXY`, and `all_proxy` or `ALL_PROXY` for a scheme with none of its own;
    /// `no_proxy` or `NO_PROXY` (matched as curl matches it: see `NoProxyList`). The lower-case form wins; an empty one
    /// counts as unset.
    /// - Throws: ``OriginProxyError`` naming the variable and what is wrong with it.
    public init(environment: [String: String]) throws(OriginProxyError) {
        func value(_ names: String...) -> (name: String, text: String)? {
            for name in names {
                if let text = environment[name], !text.trimmingCharacters(in: .whitespaces).isEmpty {
                    return (name, text)
                }
            }
            return nil
        }
        func server(_ variable: (name: String, text: String)?) throws(OriginProxyError) -> Server? {
            guard let variable else { return nil }
            return try Self.server(variable.text, source: variable.name)
        }
        let all = try server(value("all_proxy", "ALL_PROXY"))
        http = try server(value("http_proxy")) ?? all
        https = try server(value("https_proxy", "HTTPS_PROXY")) ?? all
        bypass = NoProxyList(value("no_proxy", "NO_PROXY")?.text ?? "")
    }

    /// Every origin through `parent`, but the hosts `noProxy` names (a `no_proxy` list).
    /// - Throws: ``OriginProxyError`` saying what is wrong with `parent`.
    public init(parent: String, noProxy: String? = nil) throws(OriginProxyError) {
        let server = try Self.server(parent, source: "the parent proxy")
        http = server
        https = server
        bypass = NoProxyList(noProxy ?? "")
    }

    /// The proxy a request to `url` goes through; `nil`: direct.
    package func server(for url: URL) -> Server? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !bypass.matches(host) else { return nil }
        return scheme == "https" ? https : scheme == "http" ? http : nil
    }

    /// Every proxy named.
    package var servers: [Server] { Array(Set([http, https].compactMap { $0 })) }

    /// A proxy URL as curl reads one: `[scheme://][user[:password]@]host[:port][/]`, `http`
    /// when no scheme is given, port 1080 when none is (curl's default for every kind).
    /// - Throws: ``OriginProxyError`` for what is not one, or a kind this fetcher cannot speak
    ///   (TLS to the proxy, SOCKS4, SOCKS authentication).
    static func server(_ text: String, source: String) throws(OriginProxyError) -> Server {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        func refuse(_ why: String) -> OriginProxyError {
            // The value is not repeated: it may hold a password.
            OriginProxyError(message: "The proxy in \(source) \(why).")
        }
        guard trimmed.utf8.count <= 2048, !trimmed.contains(where: { $0.isNewline || $0 == " " }) else {
            throw refuse("is not a URL")
        }
        let withScheme = trimmed.contains("://") ? trimmed : "http://" + trimmed
        guard let components = URLComponents(string: withScheme), let scheme = components.scheme?.lowercased() else {
            throw refuse("is not a URL")
        }
        let kind: Server.Kind
        switch scheme {
        case "http": kind = .http
        case "socks5", "socks5h": kind = .socks5
        case "https":
            throw refuse(
                "is an https:// proxy; TLS to a proxy is not supported (give it as http://, HTTPS origins still go through CONNECT)"
            )
        case "socks4", "socks4a": throw refuse("is SOCKS4; only SOCKS5 and HTTP proxies are supported")
        default: throw refuse("has the scheme \(scheme.prefix(20)), which is not http, socks5 or socks5h")
        }
        guard var host = components.percentEncodedHost else { throw refuse("names no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // `[]` is no host either (found by the fuzz target).
        guard !host.isEmpty else { throw refuse("names no host") }
        let port = components.port ?? 1080
        guard (1...65_535).contains(port) else { throw refuse("has a port outside 1-65535") }
        guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil
        else {
            throw refuse("has a path, a query or a fragment")
        }
        let username = components.percentEncodedUser.map { $0.removingPercentEncoding ?? $0 }
        let password = components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 }
        if kind == .socks5, username != nil { throw refuse("has credentials; SOCKS5 authentication is not supported") }
        return Server(kind: kind, host: host.lowercased(), port: port, username: username, password: password)
    }
}

/// A proxy setting that cannot be used, saying why (never repeating a password).
public struct OriginProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The hosts that go direct (`no_proxy`), matched as curl matches them: entries separated by
/// commas or white space; `*` alone matches every host; a name matches itself and every name
/// under it (`example.com` matches `www.example.com`, not `notexample.com`; a leading dot is
/// dropped, as is a trailing one of the host's); an IPv4 or IPv6 address (without brackets)
/// matches itself, and with `/bits` (CIDR) every address in that network. Case does not matter.
package struct NoProxyList: Sendable, Equatable {
    var all = false
    var names: [String] = []
    /// Each network's address bytes (4 or 16) and prefix length.
    var networks: [[UInt8]: Int] = [:]

    package init(_ text: String) {
        let entries = text.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map { $0.lowercased() }
        for entry in entries where entry.utf8.count <= 256 {
            if entry == "*" {
                all = true
                continue
            }
            // Dots around an entry are dropped first: `.::1` is the address `::1` (found by
            // the fuzz target, where it stayed a name no address host could match).
            var trimmed = Substring(entry)
            while trimmed.hasPrefix(".") { trimmed = trimmed.dropFirst() }
            while trimmed.hasSuffix(".") { trimmed = trimmed.dropLast() }
            let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = parts.first else { continue }
            if let address = Self.address(String(first)) {
                let maximum = address.count * 8
                if parts.count == 2 {
                    // A prefix that is not a number in range makes the entry match nothing.
                    guard parts[1].allSatisfy(\.isASCII), let bits = Int(parts[1]), (0...maximum).contains(bits) else {
                        continue
                    }
                    networks[address] = min(bits, networks[address] ?? maximum)
                } else {
                    networks[address] = networks[address] ?? maximum
                }
                continue
            }
            // A name is letters, digits, `-`, `_` and dots; anything else matches no host.
            if !trimmed.isEmpty,
                trimmed.unicodeScalars.allSatisfy({
                    $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0))
                })
            {
                names.append(String(trimmed))
            }
        }
    }

    /// Whether `host` (a URL's host, an IPv6 address with or without brackets) goes direct.
    package func matches(_ host: String) -> Bool {
        if all { return true }
        var host = Substring(host.lowercased())
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        while host.hasSuffix(".") { host = host.dropLast() }
        if let address = Self.address(String(host)) {
            return networks.contains { network, bits in
                network.count == address.count && Self.samePrefix(network, address, bits: bits)
            }
        }
        return names.contains { host == $0 || host.hasSuffix("." + $0) }
    }

    /// The bytes of an IPv4 or IPv6 address in text; `nil` for anything else.
    static func address(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 64 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// Whether `a` and `b` agree in their first `bits` bits.
    static func samePrefix(_ a: [UInt8], _ b: [UInt8], bits: Int) -> Bool {
        for index in 0..<a.count {
            let remaining = bits - index * 8
            if remaining <= 0 { return true }
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if a[index] & mask != b[index] & mask { return false }
        }
        return true
    }
}
