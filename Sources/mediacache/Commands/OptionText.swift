// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import ArgumentParser
import Foundation
public import Logging

/// Parses sizes such as `500M`, `2G`, `1.5G`, `1048576`.
enum ByteSize {
    static func parse(_ text: String) throws -> Int64 {
        let units: [Character: Double] = ["K": 0x1p10, "M": 0x1p20, "G": 0x1p30, "T": 0x1p40]
        var number = text.uppercased()
        if number.hasSuffix("B") { number.removeLast() }
        if number.hasSuffix("I") { number.removeLast() }
        var multiplier = 1.0
        if let last = number.last, let unit = units[last] {
            multiplier = unit
            number.removeLast()
        }
        guard let value = Double(number), value > 0, value * multiplier >= 1, value * multiplier < 9e18 else {
            throw ValidationError("\(text) is not a size: use a number of bytes or one with K, M, G or T (500M, 2G).")
        }
        return Int64(value * multiplier)
    }

    static func format(_ bytes: Int64) -> String {
        bytes >= 1 << 30
            ? String(format: "%.1f GiB", Double(bytes) / Double(1 << 30))
            : String(format: "%.0f MiB", Double(bytes) / Double(1 << 20))
    }
}

/// Parses ages such as `30d`, `12h`, `90m`, `3600s`, `3600`.
enum Age {
    static func parse(_ text: String) throws -> Duration {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var number = text.lowercased()
        var multiplier = 1.0
        if let last = number.last, let unit = units[last] {
            multiplier = unit
            number.removeLast()
        }
        guard let value = Double(number), value > 0, value * multiplier <= 100 * 365 * 86400 else {
            throw ValidationError(
                "\(text) is not an age: use a number with s, m, h or d (30d, 12h), at most 100 years.")
        }
        return .seconds(value * multiplier)
    }
}

// swift-format-ignore: AvoidRetroactiveConformances
// (`--log-level` parses swift-log's own levels; neither package will conform one to the other.)
extension Logger.Level: @retroactive ExpressibleByArgument {}

extension CharacterSet {
    /// RFC 3986's unreserved characters: everything else is percent-encoded in a query value.
    static let urlUnreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
