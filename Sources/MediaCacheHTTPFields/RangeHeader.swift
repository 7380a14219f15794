// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// A single byte range from an HTTP `Range` header: `a-b`, `a-` or `-n`.
package enum RangeSpecifier: Sendable, Hashable {
    /// Bytes `first` through `last` (inclusive), or to the end when `last` is `nil`.
    case from(first: Int64, last: Int64?)
    /// The last `length` bytes.
    case suffix(length: Int64)

    /// What a `Range` header value holds.
    package enum Parsed: Sendable, Hashable {
        /// One range.
        case single(RangeSpecifier)
        /// Several ranges; the first is given.
        case multiple(first: RangeSpecifier)
        /// Not a valid `bytes=` range: per RFC 9110 the header is then ignored.
        case invalid
    }

    /// Parses a `Range` header value such as `bytes=0-1023`.
    package static func parse(_ value: String) -> Parsed {
        var value = value
        return value.withUTF8 { parse(bytes: $0[...]) }
    }

    private typealias Bytes = Slice<UnsafeBufferPointer<UInt8>>

    /// Works on the header's bytes (one pass, no allocation: it runs on every request).
    private static func parse(bytes: Bytes) -> Parsed {
        let value = trimmed(bytes)
        let prefix: StaticString = "bytes="
        let expected = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        guard value.count >= expected.count,
            zip(value, expected).allSatisfy({ byte, expected in
                byte == expected || (65...90).contains(byte) && byte + 32 == expected
            })
        else {
            return .invalid
        }
        var first: RangeSpecifier?
        var count = 0
        var start = value.startIndex + expected.count
        while true {
            let end = value[start...].firstIndex(of: UInt8(ascii: ",")) ?? value.endIndex
            guard let one = parseOne(trimmed(value[start..<end])) else { return .invalid }
            first = first ?? one
            count += 1
            guard end < value.endIndex else { break }
            start = end + 1
        }
        guard let first else { return .invalid }
        return count == 1 ? .single(first) : .multiple(first: first)
    }

    /// `bytes` without leading and trailing spaces and tabs (RFC 9110 OWS).
    private static func trimmed(_ bytes: Bytes) -> Bytes {
        var lower = bytes.startIndex
        var upper = bytes.endIndex
        while lower < upper, bytes[lower] == 32 || bytes[lower] == 9 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 32 || bytes[upper - 1] == 9 { upper -= 1 }
        return bytes[lower..<upper]
    }

    /// A client's numbers are read saturating at ``HTTPNumber/maximum``: a larger last
    /// position or suffix means "to the end" (RFC 9110 allows a last position past the end),
    /// and a larger first position can never be satisfied, so it gets a 416.
    private static func parseOne(_ spec: Bytes) -> RangeSpecifier? {
        guard let dash = spec.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let firstDigits = spec[spec.startIndex..<dash]
        let lastDigits = spec[(dash + 1)...]
        if firstDigits.isEmpty {
            guard let length = HTTPNumber.saturating(digits: lastDigits) else { return nil }
            return .suffix(length: length)
        }
        guard let first = HTTPNumber.saturating(digits: firstDigits) else { return nil }
        if lastDigits.isEmpty { return .from(first: first, last: nil) }
        guard let last = HTTPNumber.saturating(digits: lastDigits), last >= first else { return nil }
        return .from(first: first, last: last)
    }

    /// The bytes this specifier selects in a resource of `length` bytes, or `nil` when it is
    /// unsatisfiable (it starts at or past the end, or asks for an empty suffix).
    package func resolvedBounds(length: Int64) -> Range<Int64>? {
        switch self {
        case .from(let first, let last):
            guard first < length else { return nil }
            return first..<(min(length - 1, last ?? (length - 1)) + 1)
        case .suffix(let suffix):
            guard suffix > 0, length > 0 else { return nil }
            return max(0, length - min(suffix, length))..<length
        }
    }

    /// The header value for `range`: `bytes=a-b`, with `b` inclusive; `bytes=a-` (to the
    /// end, however far it is) when the range ends at ``HTTPNumber/maximum``.
    package static func headerValue(forBounds range: Range<Int64>) -> String {
        range.upperBound >= HTTPNumber.maximum
            ? "bytes=\(range.lowerBound)-" : "bytes=\(range.lowerBound)-\(range.upperBound - 1)"
    }
}

/// A `Content-Range` header: `bytes a-b/total`, `bytes a-b/*` or `bytes */total`.
package struct ContentRange: Sendable, Hashable {
    /// The bytes the body holds, or `nil` for `bytes */total` (with a 416).
    package var bounds: Range<Int64>?
    /// The resource's total length, if given.
    package var totalLength: Int64?

    /// Creates a content range.
    package init(bounds: Range<Int64>?, totalLength: Int64?) {
        self.bounds = bounds
        self.totalLength = totalLength
    }

    /// Parses a header value; `nil` when malformed.
    package init?(parsing value: String) {
        let trimmed = value.trimmingHTTPWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let rest = trimmed.dropFirst("bytes ".count)
        let halves = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        if halves[1] == "*" {
            totalLength = nil
        } else {
            guard let total = HTTPNumber.strict(halves[1]) else { return nil }
            totalLength = total
        }
        if halves[0] == "*" {
            guard totalLength != nil else { return nil }
            bounds = nil
            return
        }
        let positions = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        // An origin's numbers are read strictly: past the bound, the answer is malformed
        // (and `last + 1` stays within it).
        guard positions.count == 2, let first = HTTPNumber.strict(positions[0]),
            let last = HTTPNumber.strict(positions[1]),
            last >= first
        else { return nil }
        if let total = totalLength, last >= total { return nil }
        bounds = first..<(last + 1)
    }

    /// The header value: `bytes a-b/total`, or `bytes */total` without a range.
    package var headerValue: String {
        // Written digit by digit into one string: every partial answer has one, and
        // interpolating it was the costliest of its head's fields.
        String(unsafeUninitializedCapacity: 80) { buffer in
            var end = 0
            func append(_ text: StaticString) {
                for byte in UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount) {
                    buffer[end] = byte
                    end += 1
                }
            }
            func append(_ number: Int64) {
                if number < 0 { append("-") }
                var rest = number.magnitude
                let start = end
                repeat {
                    buffer[end] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                    end += 1
                } while rest > 0
                buffer[start..<end].reverse()
            }
            append("bytes ")
            if let range = bounds {
                append(range.lowerBound)
                append("-")
                append(range.upperBound - 1)
            } else {
                append("*")
            }
            append("/")
            if let totalLength { append(totalLength) } else { append("*") }
            return end
        }
    }
}

/// Non-negative decimal numbers from HTTP headers (`1*DIGIT` in RFC 9110), read without
/// `Int64.init`'s leniency (`+5`, `-0`) and without a trap however long the digit string.
package enum HTTPNumber {
    /// The bound of every offset and length read: past it a number is a lie (an origin's) or
    /// "more than any file" (a client's). The engine's `ByteRange.maximumOffset` is this bound.
    package static let maximum: Int64 = 1 << 60

    /// The value, or `nil` when `text` is not all ASCII digits (or empty) or is not below
    /// ``HTTPNumber/maximum``. For numbers from origins: past the bound is a lie.
    package static func strict(_ text: some StringProtocol) -> Int64? {
        strict(digits: text.utf8)
    }

    /// ``strict(_:)`` on UTF-8 bytes.
    package static func strict(digits: some Sequence<UInt8>) -> Int64? {
        guard let value = saturating(digits: digits), value < HTTPNumber.maximum else { return nil }
        return value
    }

    /// The value, capped at ``HTTPNumber/maximum``; `nil` when `text` is not all ASCII
    /// digits (or empty). For numbers from clients, where "more than any file" has a meaning.
    package static func saturating(_ text: some StringProtocol) -> Int64? {
        saturating(digits: text.utf8)
    }

    /// ``saturating(_:)`` on UTF-8 bytes.
    package static func saturating(digits: some Sequence<UInt8>) -> Int64? {
        var value: Int64 = 0
        var sawDigit = false
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            sawDigit = true
            // Once past a tenth of the bound the next digit takes it past the bound, so the
            // multiplication only ever runs on values up to 2^60 / 10: it cannot overflow.
            value =
                value > HTTPNumber.maximum / 10
                ? HTTPNumber.maximum
                : min(value * 10 + Int64(byte - UInt8(ascii: "0")), HTTPNumber.maximum)
        }
        return sawDigit ? value : nil
    }
}

extension String {
    package func trimmingHTTPWhitespace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
