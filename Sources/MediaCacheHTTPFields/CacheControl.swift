// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The directives of `Cache-Control` header fields (RFC 9111 §5.2): names compared without
/// case, values as tokens or quoted strings, several fields or lines joined by commas.
///
/// Parsing never fails as a whole: a malformed directive is skipped, as RFC 9111 §5.2 asks
/// of directives a cache does not understand, and numbers are bounded (`delta-seconds`
/// above 2^31 count as 2^31, §1.2.2).
package struct CacheControl: Sendable, Hashable {
    /// Each directive's lower-cased name and its value (`nil` for none), in order.
    package var directives: [(name: String, value: String?)]

    package static func == (a: CacheControl, b: CacheControl) -> Bool {
        a.directives.elementsEqual(b.directives) { $0.name == $1.name && $0.value == $1.value }
    }

    package func hash(into hasher: inout Hasher) {
        for (name, value) in directives {
            hasher.combine(name)
            hasher.combine(value)
        }
    }

    /// The largest `delta-seconds` kept (RFC 9111 §1.2.2).
    package static let maximumSeconds: Int64 = 1 << 31

    /// Parses the values of every `Cache-Control` field of a message.
    package init(_ values: [String]) {
        directives = values.flatMap(Self.parse)
    }

    /// The value of directive `name` (lower-case), `.some(nil)` when present without one.
    package func value(_ name: String) -> String?? {
        directives.first { $0.name == name }.map(\.value)
    }

    /// Whether directive `name` (lower-case) is present.
    package func contains(_ name: String) -> Bool {
        directives.contains { $0.name == name }
    }

    /// `no-store`: the response must not be stored.
    package var noStore: Bool { contains("no-store") }

    /// `max-age` in seconds, if present and a valid `delta-seconds`.
    package var maxAge: Int64? { seconds("max-age") }

    /// A `delta-seconds` directive, bounded; `nil` when absent or not a number.
    package func seconds(_ name: String) -> Int64? {
        guard case .some(.some(let text)) = value(name), let number = HTTPNumber.saturating(text) else { return nil }
        return min(number, Self.maximumSeconds)
    }

    private static func parse(_ value: String) -> [(name: String, value: String?)] {
        var result: [(name: String, value: String?)] = []
        var bytes = Array(value.utf8)[...]
        while true {
            skip(&bytes) { $0 == .space || $0 == .tab || $0 == .comma }
            guard !bytes.isEmpty else { return result }
            let name = take(&bytes, while: isTokenByte)
            skip(&bytes) { $0 == .space || $0 == .tab }
            var directiveValue: String?
            var isValid = !name.isEmpty
            if bytes.first == .equals {
                bytes.removeFirst()
                skip(&bytes) { $0 == .space || $0 == .tab }
                if bytes.first == .quote {
                    if let quoted = quotedString(&bytes) { directiveValue = quoted } else { isValid = false }
                } else {
                    let token = take(&bytes, while: isTokenByte)
                    if token.isEmpty {
                        isValid = false
                    } else {
                        directiveValue = String(decoding: token, as: UTF8.self)
                    }
                }
            }
            skip(&bytes) { $0 == .space || $0 == .tab }
            if let next = bytes.first, next != .comma {
                // Garbage after the directive: skip to the next comma, drop this directive.
                isValid = false
                skip(&bytes) { $0 != .comma }
            }
            if isValid { result.append((String(decoding: name, as: UTF8.self).lowercased(), directiveValue)) }
        }
    }

    /// A `quoted-string` at the start of `bytes` (which starts with `"`), unescaped; `nil`
    /// when it is not closed.
    private static func quotedString(_ bytes: inout ArraySlice<UInt8>) -> String? {
        var copy = bytes.dropFirst()
        var text: [UInt8] = []
        while let byte = copy.popFirst() {
            switch byte {
            case .quote:
                bytes = copy
                return String(decoding: text, as: UTF8.self)
            case .backslash:
                guard let escaped = copy.popFirst() else { return nil }
                text.append(escaped)
            default:
                text.append(byte)
            }
        }
        return nil
    }

    /// RFC 9110 §5.6.2 `tchar`.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func skip(_ bytes: inout ArraySlice<UInt8>, while predicate: (UInt8) -> Bool) {
        while let first = bytes.first, predicate(first) { bytes.removeFirst() }
    }

    private static func take(_ bytes: inout ArraySlice<UInt8>, while predicate: (UInt8) -> Bool) -> ArraySlice<UInt8> {
        let end = bytes.firstIndex { !predicate($0) } ?? bytes.endIndex
        defer { bytes = bytes[end...] }
        return bytes[bytes.startIndex..<end]
    }
}

extension UInt8 {
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let tab = UInt8(ascii: "\t")
    fileprivate static let comma = UInt8(ascii: ",")
    fileprivate static let equals = UInt8(ascii: "=")
    fileprivate static let quote = UInt8(ascii: "\"")
    fileprivate static let backslash = UInt8(ascii: "\\")
}
