// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Where an address leads: this machine, its link, a private network, or the internet. The
/// proxy's LAN listener never makes the proxy connect to an address that is not public unless the
/// user named that origin, and no origin on the internet redirects it to one (the host's own
/// services and the home network's devices are reachable from the host, not from the LAN).
package enum AddressScope: String, Sendable, CaseIterable {
    /// `127.0.0.0/8`, `::1`, and the names that never leave the machine (`localhost`, `*.localhost`).
    case loopback
    /// `0.0.0.0/8` and `::`: "this host" (connecting there reaches this machine).
    case unspecified
    /// `169.254.0.0/16`, `fe80::/10`.
    case linkLocal = "link-local"
    /// RFC 1918, shared (`100.64.0.0/10`), unique local (`fc00::/7`), site-local (`fec0::/10`).
    case privateNetwork = "private"
    /// Multicast, broadcast, and the blocks reserved for protocols, documentation or the future.
    case reserved
    /// Anything else.
    case publicInternet = "public"

    /// Whether an address of this scope is on the internet rather than this machine or its networks.
    package var isPublic: Bool { self == .publicInternet }

    /// The scope of `host` (a URL's host, lower-cased, brackets optional) when it is an address
    /// in any form the system's resolver reads as one (IPv4 in `inet_aton`'s forms: `127.1`,
    /// `0x7f.0.0.1`, `2130706433`; IPv6 with an embedded IPv4 address judged by that one), or a
    /// name that never leaves the machine; `nil` for any other name, whose scope is its addresses'.
    package init?(host: String) {
        var host = Substring(host)
        if host.first == "[", host.last == "]" { host = host.dropFirst().dropLast() }
        if host.last == "." { host = host.dropLast() }
        guard host.utf8.count <= 300 else { return nil }
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered.hasSuffix(".localhost") {
            self = .loopback
        } else if let address = Self.ipv4(lowered) {
            self.init(ipv4: address)
        } else if let address = Self.ipv6(lowered) {
            self.init(ipv6: address)
        } else {
            return nil
        }
    }

    /// The scope of an IPv4 address (`a.b.c.d` as `a << 24 | b << 16 | c << 8 | d`).
    package init(ipv4 address: UInt32) {
        func within(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ bits: UInt32) -> Bool {
            let mask: UInt32 = bits == 0 ? 0 : ~0 << (32 - bits)
            return address & mask == (a << 24 | b << 16 | c << 8 | d) & mask
        }
        if within(127, 0, 0, 0, 8) {
            self = .loopback
        } else if within(0, 0, 0, 0, 8) {
            self = .unspecified
        } else if within(169, 254, 0, 0, 16) {
            self = .linkLocal
        } else if within(10, 0, 0, 0, 8) || within(172, 16, 0, 0, 12) || within(192, 168, 0, 0, 16)
            || within(100, 64, 0, 0, 10)
        {
            self = .privateNetwork
        } else if within(224, 0, 0, 0, 4) || within(240, 0, 0, 0, 4) || within(192, 0, 0, 0, 24)
            || within(192, 0, 2, 0, 24) || within(198, 18, 0, 0, 15) || within(198, 51, 100, 0, 24)
            || within(203, 0, 113, 0, 24)
        {
            self = .reserved
        } else {
            self = .publicInternet
        }
    }

    /// The scope of an IPv6 address (16 bytes); one that embeds an IPv4 address (mapped,
    /// compatible, NAT64, 6to4) has that address's scope.
    package init(ipv6 bytes: [UInt8]) {
        precondition(bytes.count == 16)
        func ipv4(at offset: Int) -> UInt32 {
            bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
        }
        let zeros = { (range: Range<Int>) in bytes[range].allSatisfy { $0 == 0 } }
        if zeros(0..<15) {
            self = bytes[15] == 1 ? .loopback : .unspecified
        } else if zeros(0..<10), bytes[10] == 0xff, bytes[11] == 0xff {
            self.init(ipv4: ipv4(at: 12))  // ::ffff:a.b.c.d
        } else if zeros(0..<12) {
            self.init(ipv4: ipv4(at: 12))  // ::a.b.c.d (deprecated, still read)
        } else if bytes[0...3] == [0x00, 0x64, 0xff, 0x9b], zeros(4..<12) || (bytes[4...5] == [0x00, 0x01]) {
            self.init(ipv4: ipv4(at: 12))  // NAT64: 64:ff9b::/96 and 64:ff9b:1::/48
        } else if bytes[0] == 0x20, bytes[1] == 0x02 {
            self.init(ipv4: ipv4(at: 2))  // 6to4: 2002:AABB:CCDD::/48
        } else if bytes[0] == 0xfe, bytes[1] & 0xc0 == 0x80 {
            self = .linkLocal
        } else if bytes[0] & 0xfe == 0xfc || (bytes[0] == 0xfe && bytes[1] & 0xc0 == 0xc0) {
            self = .privateNetwork
        } else if bytes[0] == 0xff || (bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0d && bytes[3] == 0xb8) {
            self = .reserved  // multicast, documentation
        } else {
            self = .publicInternet
        }
    }

    /// `text` as an IPv4 address in any form `inet_aton` reads: one to four parts separated by
    /// dots, each decimal, octal (`0…`) or hexadecimal (`0x…`); the last fills the bytes the
    /// others leave. `nil` for anything else (bounded: no part may exceed 32 bits).
    package static func ipv4(_ text: some StringProtocol) -> UInt32? {
        let bytes = Array(text.utf8)
        guard bytes.count <= 300 else { return nil }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt32] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            values.append(value)
        }
        let leading = values.dropLast()
        guard leading.allSatisfy({ $0 <= 0xff }) else { return nil }
        let lastBits = UInt32(8 * (5 - parts.count))
        let last = values[values.count - 1]
        guard lastBits == 32 || last < (1 << lastBits) else { return nil }
        return leading.enumerated().reduce(last) { $0 | $1.element << (24 - 8 * UInt32($1.offset)) }
    }

    /// One part of an IPv4 address: `[1-9][0-9]*`, `0[0-7]*` or `0[xX][0-9a-fA-F]+`.
    private static func number(_ part: ArraySlice<UInt8>) -> UInt32? {
        guard let first = part.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return nil }
        var digits = part[...]
        var radix: UInt64 = 10
        if first == UInt8(ascii: "0") {
            digits = digits.dropFirst()
            radix = 8
            if let x = digits.first, x == UInt8(ascii: "x") || x == UInt8(ascii: "X") {
                digits = digits.dropFirst()
                radix = 16
                guard !digits.isEmpty else { return nil }
            }
        }
        var value: UInt64 = 0
        for byte in digits {
            guard let digit = HexDigit.value(of: byte), UInt64(digit) < radix else { return nil }
            value = value * radix + UInt64(digit)
            guard value <= UInt64(UInt32.max) else { return nil }
        }
        return UInt32(value)
    }

    /// `text` as an IPv6 address (RFC 4291 §2.2, as `inet_pton` reads it: groups of one to four
    /// hexadecimal digits, one `::`, an IPv4 address of four decimal parts at the end), 16 bytes;
    /// `nil` for anything else.
    package static func ipv6(_ text: some StringProtocol) -> [UInt8]? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes.count <= 45, bytes.contains(UInt8(ascii: ":")) else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        var index = 0
        if bytes.starts(with: [UInt8(ascii: ":"), UInt8(ascii: ":")]) {
            sawGap = true
            index = 2
            if index == bytes.count { return [UInt8](repeating: 0, count: 16) }
        } else if bytes[0] == UInt8(ascii: ":") {
            return nil
        }
        while index < bytes.count {
            // A group, or the IPv4 address that ends the text.
            let end = bytes[index...].firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
            let group = bytes[index..<end]
            if end == bytes.count, group.contains(UInt8(ascii: ".")) {
                guard let v4 = strictIPv4(group) else { return nil }
                let words = [UInt16(v4 >> 16), UInt16(v4 & 0xffff)]
                if sawGap { tail += words } else { head += words }
                index = end
                break
            }
            guard (1...4).contains(group.count) else { return nil }
            var word: UInt16 = 0
            for byte in group {
                guard let digit = HexDigit.value(of: byte) else { return nil }
                word = word << 4 | UInt16(digit)
            }
            if sawGap { tail.append(word) } else { head.append(word) }
            if end == bytes.count {
                index = end
                break
            }
            // After a group: `:` and another group, or `::` (once).
            if end + 1 < bytes.count, bytes[end + 1] == UInt8(ascii: ":") {
                guard !sawGap else { return nil }
                sawGap = true
                index = end + 2
                if index == bytes.count { break }
            } else {
                guard end + 1 < bytes.count else { return nil }  // a trailing single `:`
                index = end + 1
            }
        }
        let count = head.count + tail.count
        guard sawGap ? count <= 7 : count == 8 else { return nil }
        let words = head + [UInt16](repeating: 0, count: 8 - count) + tail
        return words.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }
    }

    /// The dotted-quad an IPv6 address may end with: four decimal parts of at most 255, without
    /// a leading zero.
    private static func strictIPv4(_ text: ArraySlice<UInt8>) -> UInt32? {
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var address: UInt32 = 0
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ (48...57).contains($0) }),
                part.count == 1 || part.first != UInt8(ascii: "0")
            else { return nil }
            let value = part.reduce(0) { $0 * 10 + UInt32($1 - 48) }
            guard value <= 255 else { return nil }
            address = address << 8 | value
        }
        return address
    }
}
