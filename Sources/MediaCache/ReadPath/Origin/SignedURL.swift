// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// What the query of a signed URL says: when its signature expires, and which of its
/// parameters carry the signature. Pure text work on the URL as the player gave it (each
/// parameter's raw, percent-encoded text is kept as it is); numbers are read with bounds.
enum SignedURL {
    /// One query parameter as written (`name=value`, neither decoded).
    struct Parameter: Hashable, Sendable {
        var name: String
        var value: String
    }

    /// The names (lower-cased) of the parameters that carry a signature: those of the
    /// ``CacheKeyRule/presets`` and a bare `exp`.
    static let credentialNames: Set<String> = Set(
        CacheKeyRule.presets.values.flatMap { $0.map { $0.lowercased() } } + ["exp", "hmac", "sig", "signature"])

    /// The latest expiry a parameter may state (year 5138): past it a number is not a date.
    static let latestExpiry: Int64 = 100_000_000_000

    /// The longest lifetime an `X-Amz-Expires` or `X-Goog-Expires` may give (a year; S3 allows
    /// a week).
    static let longestLifetime: Int64 = 31_536_000

    /// `url`'s query parameters in order (an empty query has none).
    static func parameters(of url: URL) -> [Parameter] {
        guard let query = url.query(percentEncoded: true), !query.isEmpty else { return [] }
        return query.split(separator: "&", omittingEmptySubsequences: true).map { item in
            let name = item.prefix { $0 != "=" }
            let value = item.dropFirst(name.count + 1)
            return Parameter(name: String(name), value: String(value))
        }
    }

    /// The parameters of `url` that carry its signature, in order.
    static func credentials(of url: URL) -> [Parameter] {
        parameters(of: url).filter { credentialNames.contains(decoded($0.name).lowercased()) }
    }

    /// When `url`'s signature expires, as its query states it, or `nil` when it states none:
    /// `exp`, `expires` (Unix seconds: Wowza, CloudFront's `Expires`, many token schemes),
    /// `X-Amz-Date` plus `X-Amz-Expires` (S3) and the `X-Goog-` pair (Cloud Storage), and the
    /// `exp=` field of an Akamai token (`hdnts`, `__token__`). With several, the earliest.
    static func expiry(of url: URL) -> Date? {
        // Every value of a name counts: a URL that states two expiries is renewed by the
        // earlier (a renewal too early costs a call of the hook; one too late, a refusal).
        var fields: [String: [String]] = [:]
        for parameter in parameters(of: url) {
            fields[decoded(parameter.name).lowercased(), default: []].append(decoded(parameter.value))
        }
        var seconds: [Int64] = []
        for name in ["exp", "expires"] {
            seconds += (fields[name] ?? []).compactMap(unixSeconds)
        }
        for vendor in ["amz", "goog"] {
            // A date past the latest expiry is no date, as for the other parameters.
            if let date = fields["x-\(vendor)-date"]?.first.flatMap(compactDate), date <= latestExpiry,
                let lifetime = fields["x-\(vendor)-expires"]?.first.flatMap({ number($0, atMost: longestLifetime) })
            {
                seconds.append(date + lifetime)
            }
        }
        for token in (fields["hdnts"] ?? []) + (fields["__token__"] ?? []) {
            for field in token.split(separator: "~") where field.hasPrefix("exp=") {
                if let time = unixSeconds(String(field.dropFirst(4))) { seconds.append(time) }
            }
        }
        return seconds.min().map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// A decimal number of at most 12 digits, no sign, within `0...limit`.
    static func number(_ text: String, atMost limit: Int64) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 12, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int64(text), value <= limit
        else { return nil }
        return value
    }

    /// Unix seconds, within ``latestExpiry``.
    static func unixSeconds(_ text: String) -> Int64? {
        number(text, atMost: latestExpiry)
    }

    /// ISO 8601's basic form in UTC (`20261127T033351Z`, as S3 writes `X-Amz-Date`), in Unix
    /// seconds; `nil` for anything else or a date that does not exist.
    static func compactDate(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z") else { return nil }
        func digits(_ range: Range<Int>) -> Int64? {
            number(String(decoding: bytes[range], as: UTF8.self), atMost: 9999)
        }
        guard let year = digits(0..<4), let month = digits(4..<6), let day = digits(6..<8),
            let hour = digits(9..<11), let minute = digits(11..<13), let second = digits(13..<15),
            (1970...9999).contains(year), (1...12).contains(month), (1...daysIn(month, of: year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        return daysSinceEpoch(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second
    }

    private static func daysIn(_ month: Int64, of year: Int64) -> Int64 {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][Int(month - 1)]
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (year ≥ 1970).
    private static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shifted = month <= 2 ? year - 1 : year
        let era = shifted / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func decoded(_ text: String) -> String {
        text.removingPercentEncoding ?? text
    }
}
