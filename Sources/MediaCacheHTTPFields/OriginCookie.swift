// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// One cookie an origin set (or a player sent), as RFC 6265 §5.3 stores it.
package struct OriginCookie: Sendable, Codable, Hashable {
    package var name: String
    package var value: String
    /// Lower case, without a leading dot.
    package var domain: String
    /// Sent only to ``domain`` itself, not to its subdomains (no `Domain` attribute).
    package var hostOnly: Bool
    package var path: String
    /// Sent only over HTTPS.
    package var secure: Bool
    /// When it ends; `nil` for a session cookie (kept while the process, or the download job
    /// that holds it, lives).
    package var expires: Date?
    package var created: Date

    /// The longest name and value together (RFC 6265bis §5.7: 4096 bytes).
    package static let maximumNameAndValueBytes = 4096
    /// The longest attribute value read (RFC 6265bis: 1024 bytes); a longer one is ignored.
    package static let maximumAttributeBytes = 1024
    /// The longest `Set-Cookie` value read at all.
    package static let maximumLineBytes = 8192

    /// Why a `Set-Cookie` value was not taken.
    package enum Refusal: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case tooLong
        case otherDomain(String)
        case secureOverHTTP

        package var description: String {
            switch self {
            case .malformed(let why): "malformed (\(why))"
            case .tooLong:
                "over the size limits (name and value \(OriginCookie.maximumNameAndValueBytes) bytes, the field \(OriginCookie.maximumLineBytes))"
            case .otherDomain(let domain): "for the domain \(domain.prefix(100)), which the origin's host is not in"
            case .secureOverHTTP: "Secure, but sent over plain HTTP"
            }
        }
    }

    /// The cookie a `Set-Cookie` field value received from `url` at `now` sets (RFC 6265 §5.2
    /// and §5.3): attributes read case-insensitively, `Max-Age` before `Expires`, the default
    /// path from `url`, a `Domain` the host must be in (a name of one label, or a domain given
    /// for an IP address, is refused: without a public-suffix list nothing wider than a
    /// registrable-looking name is accepted). An expiry in the past gives a cookie whose
    /// storing removes the one of that name.
    /// - Throws: ``Refusal`` with the reason.
    package static func parse(setCookie line: String, from url: URL, now: Date) throws(Refusal) -> OriginCookie {
        guard line.utf8.count <= maximumLineBytes else { throw .tooLong }
        guard let host = url.host?.lowercased(), !host.isEmpty else { throw .malformed("the URL has no host") }
        var parts = line.split(separator: ";", omittingEmptySubsequences: false)[...]
        let pair = parts.popFirst() ?? ""
        guard let equals = pair.firstIndex(of: "=") else { throw .malformed("no name=value") }
        let name = trimmed(pair[..<equals])
        let value = trimmed(pair[pair.index(after: equals)...])
        guard !name.isEmpty else { throw .malformed("an empty name") }
        guard name.utf8.count + value.utf8.count <= maximumNameAndValueBytes else { throw .tooLong }
        guard !(name + value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .malformed("a control character")
        }
        var cookie = OriginCookie(
            name: name, value: value, domain: host, hostOnly: true, path: defaultPath(of: url), secure: false,
            expires: nil, created: now)
        var maxAge: Date?
        var expires: Date?
        for attribute in parts {
            let (attributeName, attributeValue): (String, String)
            if let equals = attribute.firstIndex(of: "=") {
                (attributeName, attributeValue) = (
                    trimmed(attribute[..<equals]).lowercased(), trimmed(attribute[attribute.index(after: equals)...])
                )
            } else {
                (attributeName, attributeValue) = (trimmed(attribute).lowercased(), "")
            }
            guard attributeValue.utf8.count <= maximumAttributeBytes else { continue }
            switch attributeName {
            case "expires":
                if let date = CookieDate.parse(attributeValue) { expires = date }
            case "max-age":
                if let seconds = deltaSeconds(attributeValue) {
                    maxAge = seconds <= 0 ? .distantPast : now.addingTimeInterval(TimeInterval(seconds))
                }
            case "domain":
                var domain = attributeValue.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                guard !domain.isEmpty else { continue }
                // One label wider than a name ("com") is refused; without a public-suffix
                // list, two ("co.uk") are not.
                guard domainMatches(host, domain: domain), domain == host || domain.contains(".") else {
                    throw .otherDomain(domain)
                }
                cookie.domain = domain
                cookie.hostOnly = false
            case "path":
                if attributeValue.hasPrefix("/") { cookie.path = attributeValue }
            case "secure":
                cookie.secure = true
            default:
                continue  // HttpOnly (no script here), SameSite (no sites here), extensions
            }
        }
        if cookie.secure, url.scheme?.lowercased() != "https" { throw .secureOverHTTP }
        cookie.expires = maxAge ?? expires
        return cookie
    }

    /// The cookies of a player's `Cookie` field (`a=b; c=d`), as session cookies for the host
    /// of `url` only, at the root path.
    package static func parse(cookieField value: String, for url: URL, now: Date) -> [OriginCookie] {
        guard value.utf8.count <= maximumLineBytes, let host = url.host?.lowercased(), !host.isEmpty else { return [] }
        return value.split(separator: ";").compactMap { pair in
            guard let equals = pair.firstIndex(of: "=") else { return nil }
            let name = trimmed(pair[..<equals])
            let value = trimmed(pair[pair.index(after: equals)...])
            guard !name.isEmpty, name.utf8.count + value.utf8.count <= maximumNameAndValueBytes,
                !(name + value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return nil }
            return OriginCookie(
                name: name, value: value, domain: host, hostOnly: true, path: "/", secure: false, expires: nil,
                created: now)
        }
    }

    /// Whether this cookie goes with a request for `url` at `now` (RFC 6265 §5.4).
    package func isSent(to url: URL, now: Date) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        if let expires, expires <= now { return false }
        if secure, url.scheme?.lowercased() != "https" { return false }
        guard hostOnly ? host == domain : Self.domainMatches(host, domain: domain) else { return false }
        return Self.pathMatches(url.path.isEmpty ? "/" : url.path, cookiePath: path)
    }

    /// RFC 6265 §5.1.3: `host` is `domain`, or a name (not an address) ending in `.domain`.
    package static func domainMatches(_ host: String, domain: String) -> Bool {
        if host == domain { return true }
        return !isAddress(host) && host.hasSuffix("." + domain)
    }

    /// RFC 6265 §5.1.4.
    package static func pathMatches(_ requestPath: String, cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).hasPrefix("/")
    }

    /// RFC 6265 §5.1.4: the URL's path up to its last `/`, or `/`.
    static func defaultPath(of url: URL) -> String {
        let path = url.path
        guard path.hasPrefix("/"), let last = path.lastIndex(of: "/"), last != path.startIndex else { return "/" }
        return String(path[..<last])
    }

    static func isAddress(_ host: String) -> Bool {
        host.contains(":") || (!host.isEmpty && host.allSatisfy { $0 == "." || $0.isASCII && $0.isNumber })
    }

    /// RFC 6265 §5.2.2: an optional `-` and digits; a number past a century is a century.
    static func deltaSeconds(_ text: String) -> Int64? {
        var digits = Substring(text)
        let negative = digits.first == "-"
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        if negative { return 0 }
        let century: Int64 = 100 * 366 * 86_400
        let significant = digits.drop { $0 == "0" }
        guard significant.count <= 10, let seconds = Int64(significant.isEmpty ? "0" : significant) else {
            return century
        }
        return min(seconds, century)
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

/// RFC 6265 §5.1.1's cookie-date: tokens of a time, a day, a month name and a year in any
/// order among delimiters, as browsers read `Expires`.
package enum CookieDate {
    package static func parse(_ text: String) -> Date? {
        var time: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        let tokens = text.utf8.split(whereSeparator: isDelimiter)
        for token in tokens.prefix(64) {
            let bytes = Array(token.prefix(32))
            if time == nil, let found = Self.time(bytes) {
                time = found
            } else if day == nil, let found = leadingDigits(bytes, 1...2) {
                day = found
            } else if month == nil, bytes.count >= 3,
                let found = months.firstIndex(of: String(decoding: bytes.prefix(3), as: UTF8.self).lowercased())
            {
                month = found + 1
            } else if year == nil, let found = leadingDigits(bytes, 2...4) {
                year = found
            }
        }
        guard let (hour, minute, second) = time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        guard (1...31).contains(day), year >= 1601, hour <= 23, minute <= 59, second <= 59,
            day <= CivilDate.daysIn(month: Int64(month), year: Int64(year))
        else {
            return nil
        }
        let days = CivilDate.days(year: Int64(year), month: Int64(month), day: Int64(day))
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + Int64(hour * 3600 + minute * 60 + second)))
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte) || (0x5B...0x60).contains(byte)
            || (0x7B...0x7E).contains(byte)
    }

    /// 1*2DIGIT ":" 1*2DIGIT ":" 1*2DIGIT, then anything that does not start with a digit.
    private static func time(_ bytes: [UInt8]) -> (Int, Int, Int)? {
        var fields: [Int] = []
        var index = 0
        for field in 0..<3 {
            var value = 0
            var count = 0
            while index < bytes.count, count < 3, (0x30...0x39).contains(bytes[index]) {
                value = value * 10 + Int(bytes[index] - 0x30)
                count += 1
                index += 1
            }
            guard (1...2).contains(count) else { return nil }
            fields.append(value)
            if field < 2 {
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
            }
        }
        return (fields[0], fields[1], fields[2])
    }

    /// `count` digits, then anything that does not start with a digit.
    private static func leadingDigits(_ bytes: [UInt8], _ count: ClosedRange<Int>) -> Int? {
        let digits = bytes.prefix { (0x30...0x39).contains($0) }
        guard count.contains(digits.count) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }
}
