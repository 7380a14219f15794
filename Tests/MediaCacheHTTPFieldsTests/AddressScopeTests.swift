// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTPFields

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which addresses are this machine, its link, a private network or the internet, as the
/// system's resolver reads a host: the parsers checked against the C library's own
/// (`inet_aton`, `inet_pton`) on generated hosts, and the scopes against the registries' blocks.
@Suite(.stallLimit, .cpuBound) struct AddressScopeTests {
    /// `inet_aton`'s reading of `text`; `nil` when it reads none. (It stops at white space, which
    /// no host holds: the model is asked only of text without any.)
    static func systemIPv4(_ text: String) -> UInt32? {
        var address = in_addr()
        guard inet_aton(text, &address) != 0 else { return nil }
        return UInt32(bigEndian: address.s_addr)
    }

    static func systemIPv6(_ text: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// Fuzz target: the IPv4 and IPv6 readers agree with the C library's on every generated host.
    @Test func addressesAreReadAsTheSystemReadsThem() throws {
        let outcomes = try Mutator.run("address") { input in
            let bytes = Array(input.utf8)
            let v4 = AddressScope.ipv4(input)
            let v6 = AddressScope.ipv6(input)
            if bytes.contains(where: { $0 <= 0x20 || $0 >= 0x7f }) {
                // White space, control characters and non-ASCII: never an address here.
                return v4 == nil && v6 == nil ? ("other", nil) : ("mismatch", "read \(String(describing: v4 ?? 0))")
            }
            let (model4, model6) = (Self.systemIPv4(input), Self.systemIPv6(input))
            guard v4 == model4 else {
                return ("mismatch", "IPv4 \(String(describing: v4)), inet_aton \(String(describing: model4))")
            }
            guard v6 == model6 else {
                return ("mismatch", "IPv6 \(String(describing: v6)), inet_pton \(String(describing: model6))")
            }
            if let v4, AddressScope(host: input) != AddressScope(ipv4: v4) { return ("mismatch", "scope") }
            return (v4 != nil ? "ipv4" : v6 != nil ? "ipv6" : "other", nil)
        }
        try Mutator.expectVaried(outcomes, ["ipv4", "ipv6", "other"])
    }

    @Test func scopesFollowTheRegistries() {
        let expected: [(String, AddressScope?)] = [
            ("127.0.0.1", .loopback), ("127.255.0.9", .loopback), ("0x7f.1", .loopback), ("2130706433", .loopback),
            ("017700000001", .loopback), ("[::1]", .loopback), ("::ffff:127.0.0.1", .loopback),
            ("::ffff:7f00:1", .loopback), ("64:ff9b::7f00:1", .loopback), ("2002:7f00:1::", .loopback),
            ("localhost", .loopback), ("LocalHost.", .loopback), ("tv.localhost", .loopback),
            ("0.0.0.0", .unspecified), ("0", .unspecified), ("::", .unspecified), ("0.1.2.3", .unspecified),
            ("169.254.169.254", .linkLocal), ("fe80::1", .linkLocal), ("febf:ffff::1", .linkLocal),
            ("10.1.2.3", .privateNetwork), ("172.16.0.1", .privateNetwork), ("172.31.255.255", .privateNetwork),
            ("192.168.0.1", .privateNetwork), ("100.64.0.1", .privateNetwork), ("100.127.255.255", .privateNetwork),
            ("fc00::1", .privateNetwork), ("fd00::1", .privateNetwork), ("fec0::1", .privateNetwork),
            ("::ffff:10.0.0.1", .privateNetwork), ("224.0.0.1", .reserved), ("255.255.255.255", .reserved),
            ("ff02::1", .reserved), ("2001:db8::1", .reserved), ("192.0.2.1", .reserved),
            ("172.32.0.1", .publicInternet), ("100.128.0.1", .publicInternet), ("8.8.8.8", .publicInternet),
            ("2606:4700::1111", .publicInternet), ("::ffff:8.8.8.8", .publicInternet),
            ("example.com", nil), ("localhost.example.com", nil), ("127.0.0.1.nip.io", nil), ("1.2.3.4.5", nil),
        ]
        for (host, scope) in expected {
            #expect(AddressScope(host: host) == scope, "\(host)")
        }
        #expect(AddressScope.allCases.filter(\.isPublic) == [.publicInternet])
    }
}
