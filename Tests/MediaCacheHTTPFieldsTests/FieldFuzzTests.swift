// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheHTTPFields

/// The parsers of HTTP fields from outside (numbers, `Range`, `Content-Range`,
/// `Cache-Control`), run on generated inputs (see `Mutator`) and checked against a reference
/// model written another way: byte by byte, with numbers compared as digit strings, so no
/// arithmetic of the model can overflow either. A trap in a parser ends the test process, so
/// a passing run also says no input crashed it.
@Suite(.stallLimit, .cpuBound) struct FieldFuzzTests {
    // MARK: Reference models

    /// `1*DIGIT` as a digit string without leading zeros; `nil` when not all ASCII digits.
    static func digits(_ bytes: ArraySlice<UInt8>) -> String? {
        guard !bytes.isEmpty, bytes.allSatisfy({ (48...57).contains($0) }) else { return nil }
        let trimmed = bytes.drop { $0 == 48 }
        return trimmed.isEmpty ? "0" : String(decoding: trimmed, as: UTF8.self)
    }

    static let bound = String(ByteRange.maximumOffset)  // "1152921504606846976"

    /// Whether the digit string is below 2^60, compared as text.
    static func isBelowBound(_ digits: String) -> Bool {
        digits.count < bound.count || (digits.count == bound.count && digits < bound)
    }

    /// The model of `HTTPNumber.saturating`.
    static func saturating(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard let digits = digits(bytes) else { return nil }
        return isBelowBound(digits) ? Int64(digits)! : ByteRange.maximumOffset
    }

    /// The model of `HTTPNumber.strict`.
    static func strict(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard let digits = digits(bytes), isBelowBound(digits) else { return nil }
        return Int64(digits)!
    }

    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 32 || first == 9 { slice.removeFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice.removeLast() }
        return slice
    }

    static func hasPrefixIgnoringASCIICase(_ bytes: ArraySlice<UInt8>, _ prefix: String) -> Bool {
        let p = Array(prefix.utf8)
        guard bytes.count >= p.count else { return false }
        return zip(bytes.prefix(p.count), p).allSatisfy { a, b in a == b || (a >= 65 && a <= 90 && a + 32 == b) }
    }

    /// The model of `RangeSpecifier.parse`: RFC 9110 §14.1.1's `bytes=` range set, client
    /// numbers saturating at the bound.
    static func modelRange(_ text: String) -> RangeSpecifier.Parsed {
        let value = trimmed(Array(text.utf8)[...])
        guard hasPrefixIgnoringASCIICase(value, "bytes=") else { return .invalid }
        var specs: [RangeSpecifier] = []
        for element in value.dropFirst(6).split(separator: 44, omittingEmptySubsequences: false) {  // ","
            let spec = trimmed(element)
            guard let dash = spec.firstIndex(of: 45) else { return .invalid }  // "-"
            let first = spec[spec.startIndex..<dash]
            let last = spec[(dash + 1)...]
            if first.isEmpty {
                guard let length = saturating(last) else { return .invalid }
                specs.append(.suffix(length: length))
            } else {
                guard let a = saturating(first) else { return .invalid }
                if last.isEmpty {
                    specs.append(.from(first: a, last: nil))
                } else {
                    guard let b = saturating(last), b >= a else { return .invalid }
                    specs.append(.from(first: a, last: b))
                }
            }
        }
        guard let first = specs.first else { return .invalid }
        return specs.count == 1 ? .single(first) : .multiple(first: first)
    }

    /// The model of `ContentRange(parsing:)`: `bytes a-b/total`, `bytes a-b/*`, `bytes */total`.
    static func modelContentRange(_ text: String) -> ContentRange? {
        let value = trimmed(Array(text.utf8)[...])
        guard hasPrefixIgnoringASCIICase(value, "bytes ") else { return nil }
        let rest = value.dropFirst(6)
        guard let slash = rest.firstIndex(of: 47) else { return nil }  // "/"
        let left = rest[rest.startIndex..<slash]
        let right = rest[(slash + 1)...]
        let total: Int64?
        if Array(right) == [42] {  // "*"
            total = nil
        } else {
            guard let t = strict(right) else { return nil }
            total = t
        }
        if Array(left) == [42] {
            guard let total else { return nil }
            return ContentRange(range: nil, totalLength: total)
        }
        guard let dash = left.firstIndex(of: 45), let a = strict(left[left.startIndex..<dash]),
            let b = strict(left[(dash + 1)...]), b >= a
        else { return nil }
        if let total, b >= total { return nil }
        return ContentRange(range: ByteRange(a, b + 1), totalLength: total)
    }

    // MARK: Targets

    @Test func httpNumbersMatchTheModel() throws {
        let outcomes = try Mutator.run("number") { input in
            let bytes = Array(input.utf8)[...]
            let (s, t) = (HTTPNumber.saturating(input), HTTPNumber.strict(input))
            if s != Self.saturating(bytes) {
                return (
                    "mismatch",
                    "saturating gave \(String(describing: s)), model \(String(describing: Self.saturating(bytes)))"
                )
            }
            if t != Self.strict(bytes) {
                return (
                    "mismatch", "strict gave \(String(describing: t)), model \(String(describing: Self.strict(bytes)))"
                )
            }
            if let s, !(0...ByteRange.maximumOffset).contains(s) { return ("out of bounds", "\(s)") }
            return (t != nil ? "number" : s != nil ? "saturated" : "refused", nil)
        }
        try Mutator.expectVaried(outcomes, ["number", "saturated", "refused"])
    }

    @Test func rangeHeadersMatchTheModelAndResolveWithinTheResource() throws {
        let lengths: [Int64] = [0, 1, 2, 1000, 1_500_000, ByteRange.maximumOffset - 1]
        let outcomes = try Mutator.run("range") { input in
            let parsed = RangeSpecifier.parse(input)
            let model = Self.modelRange(input)
            guard parsed == model else { return ("mismatch", "parsed \(parsed), model \(model)") }
            let specifier: RangeSpecifier
            switch parsed {
            case .invalid: return ("invalid", nil)
            case .single(let one): specifier = one
            case .multiple(let first): specifier = first
            }
            for length in lengths {
                guard let range = specifier.resolve(length: length) else { continue }
                // Within the resource, not empty, and what RFC 9110 §14.1.2 says it selects.
                guard range.lowerBound >= 0, range.upperBound <= length, !range.isEmpty else {
                    return ("bad resolve", "\(specifier) on \(length) gave \(range)")
                }
                switch specifier {
                case .from(let first, let last):
                    if range.lowerBound != first || range.upperBound != min(length, (last ?? length - 1) &+ 1) {
                        return ("bad resolve", "\(range)")
                    }
                case .suffix(let suffix):
                    if range.upperBound != length || range.length != min(suffix, length) {
                        return ("bad resolve", "\(range)")
                    }
                }
            }
            if case .multiple = parsed { return ("several", nil) }
            return ("one", nil)
        }
        try Mutator.expectVaried(outcomes, ["one", "invalid"])
    }

    @Test func contentRangesMatchTheModel() throws {
        let outcomes = try Mutator.run("content-range") { input in
            let parsed = ContentRange(parsing: input)
            let model = Self.modelContentRange(input)
            guard parsed == model else {
                return ("mismatch", "parsed \(String(describing: parsed)), model \(String(describing: model))")
            }
            if let parsed, ContentRange(parsing: parsed.headerValue) != parsed {
                return ("round trip", "\(parsed.headerValue) does not parse back")
            }
            return (parsed == nil ? "invalid" : parsed?.range == nil ? "unsatisfied" : "range", nil)
        }
        try Mutator.expectVaried(outcomes, ["range", "invalid"])
    }

    @Test func cacheControlDirectivesAreTokensWithBoundedNumbersAndRoundTrip() throws {
        let outcomes = try Mutator.run("cache-control") { input in
            let parsed = CacheControl([input])
            for (name, _) in parsed.directives
            where name.isEmpty || name != name.lowercased() || !name.utf8.allSatisfy(CacheControl.isTokenByte) {
                return ("bad name", "\(parsed.directives)")
            }
            if let maxAge = parsed.maxAge, !(0...CacheControl.maximumSeconds).contains(maxAge) {
                return ("bad number", "\(maxAge)")
            }
            if parsed.noStore != parsed.directives.contains(where: { $0.name == "no-store" }) {
                return ("no-store", "\(parsed.directives)")
            }
            // Written back out (tokens bare, anything else quoted), the directives parse the same.
            let text = parsed.directives.map { name, value -> String in
                guard let value else { return name }
                if !value.isEmpty, value.utf8.allSatisfy(CacheControl.isTokenByte) { return "\(name)=\(value)" }
                // Escaped byte by byte: a quote followed by a combining mark is one Character,
                // which a Character-based replacement does not see (found at 1,000,000 inputs).
                let escaped = value.utf8.flatMap {
                    $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") ? [UInt8(ascii: "\\"), $0] : [$0]
                }
                return "\(name)=\"" + String(decoding: escaped, as: UTF8.self) + "\""
            }.joined(separator: ", ")
            guard CacheControl([text]) == parsed else {
                return ("round trip", "\(text) gave \(CacheControl([text]).directives), not \(parsed.directives)")
            }
            return (parsed.directives.isEmpty ? "none" : parsed.noStore ? "no-store" : "directives", nil)
        }
        try Mutator.expectVaried(outcomes, ["directives", "no-store", "none"])
    }
}
