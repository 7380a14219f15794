// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// A host with an optional port, as a `Host` header (RFC 9110 §7.2) or a URL's authority
/// (RFC 3986 §3.2.2) holds it: `name[:port]` or `[IPv6]:port`. The name is lower-cased and
/// kept without brackets; the port is within 0...65535 or the whole thing is refused.
package struct HostAndPort: Hashable, Sendable {
    package var name: String
    package var port: Int?

    /// The authority of `url` (its user info dropped); `nil` when it is not a plain
    /// `name[:port]` with a port in range (Foundation accepts a port of 30 digits).
    package init?(authorityOf url: URL) {
        self.init(authorityIn: url.absoluteString)
    }

    /// The authority of the absolute URL `text`, as ``init(authorityOf:)``.
    package init?(authorityIn text: String) {
        // On the string's own bytes, by offset: the authority of every origin URL is read
        // several times on a miss's path.
        var text = text
        guard
            let parsed = text.withUTF8({ bytes -> HostAndPort? in
                let (slash, colon) = (UInt8(ascii: "/"), UInt8(ascii: ":"))
                var index = 0
                while index + 2 < bytes.count,
                    bytes[index] != colon || bytes[index + 1] != slash || bytes[index + 2] != slash
                {
                    index += 1
                }
                guard index + 2 < bytes.count else { return nil }
                var (start, end) = (index + 3, index + 3)
                while end < bytes.count, bytes[end] != slash, bytes[end] != UInt8(ascii: "?"),
                    bytes[end] != UInt8(ascii: "#")
                {
                    end += 1
                }
                if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")) { start = at + 1 }
                return HostAndPort(bytes: bytes[start..<end])
            })
        else { return nil }
        self = parsed
    }

    /// `nil` when the value is not a host with an optional port (or is longer than 300 bytes).
    package init?(parsing value: String) {
        // On the string's own bytes: every request's Host is parsed.
        var value = value
        guard let parsed = value.withUTF8({ HostAndPort(bytes: $0[...]) }) else { return nil }
        self = parsed
    }

    /// Parsed as bytes: every byte that may appear is ASCII, so no Unicode processing is
    /// needed (done on `Character`s it showed in a hot request's profile: docs/benchmarks.md).
    private init?<Bytes: BidirectionalCollection<UInt8>>(bytes value: Bytes)
    where Bytes.SubSequence == Bytes, Bytes.Index == Int {
        var text = value
        while let first = text.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { text.removeFirst() }
        while let last = text.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { text.removeLast() }
        guard !text.isEmpty, text.count <= 300 else { return nil }
        let nameBytes: Bytes
        let portBytes: Bytes?
        if text.first == UInt8(ascii: "[") {
            guard let close = text.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let literal = text[(text.startIndex + 1)..<close]
            guard !literal.isEmpty, literal.contains(UInt8(ascii: ":")),
                literal.allSatisfy({ Self.isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return nil }
            nameBytes = literal
            let rest = text[(close + 1)...]
            if rest.isEmpty {
                portBytes = nil
            } else {
                guard rest.first == UInt8(ascii: ":") else { return nil }
                portBytes = rest.dropFirst()
            }
        } else {
            if let colon = text.firstIndex(of: UInt8(ascii: ":")) {
                guard !text[(colon + 1)...].contains(UInt8(ascii: ":")) else { return nil }
                nameBytes = text[..<colon]
                portBytes = text[(colon + 1)...]
            } else {
                nameBytes = text
                portBytes = nil
            }
            guard !nameBytes.isEmpty, nameBytes.allSatisfy(Self.isNameByte) else { return nil }
        }
        name = String(
            decoding: nameBytes.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }, as: UTF8.self
        )
        if let portBytes, !portBytes.isEmpty {
            guard let number = HTTPNumber.strict(digits: portBytes), number <= 65535 else { return nil }
            port = Int(number)
        } else {
            port = nil
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// ASCII letters, digits, `.`, `-` and `_`.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    /// Whether the name is an IPv4 (`a.b.c.d`) or IPv6 address rather than a DNS name.
    package var isIPLiteral: Bool {
        if name.contains(":") { return true }  // only a bracketed IPv6 literal gets here with a colon
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4
            && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
    }
}
