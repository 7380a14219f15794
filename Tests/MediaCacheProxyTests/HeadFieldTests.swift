// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// The fields every answer's head is built from, written and compared without the general
/// (slower) string operations they replace: each against the plain form as a model.
@Suite(.stallLimit) struct HeadFieldTests {
    @Test func aContentRangeIsWrittenAsInterpolationWouldWriteIt() {
        var random = SplitMix(seed: 42)
        var numbers: [Int64] = [0, 1, 9, 10, 99, 100, 65_535, 65_536, 999_999_999, Int64.max - 1, Int64.max]
        for _ in 0..<2_000 { numbers.append(Int64(random.next() >> (1 + random.next() % 63))) }
        for (index, first) in numbers.enumerated() {
            let last = numbers[(index * 7 + 3) % numbers.count]
            let (low, high) = (min(first, last), max(first, last))
            guard high > low else { continue }
            let range = ByteRange(low, high)
            #expect(ContentRange(range: range, totalLength: high).headerValue == "bytes \(low)-\(high - 1)/\(high)")
            #expect(ContentRange(range: range, totalLength: nil).headerValue == "bytes \(low)-\(high - 1)/*")
            #expect(ContentRange(range: nil, totalLength: low).headerValue == "bytes */\(low)")
        }
        #expect(ContentRange(range: nil, totalLength: nil).headerValue == "bytes */*")
    }

    @Test func fieldNamesMatchInAnyASCIICaseAndNoOtherWay() {
        let names: [StaticString] = [
            "range", "if-range", "connection", "x-mediacache-token", "date", "content-type", "te",
        ]
        var random = SplitMix(seed: 7)
        /// RFC 9110 §5.1: field names are tokens, compared without regard to ASCII case only.
        func model(_ name: String, _ lowercase: String) -> Bool {
            name.utf8.elementsEqual(lowercase.utf8) { ($0 >= 65 && $0 <= 90 ? $0 + 32 : $0) == $1 }
        }
        for name in names {
            let lowercase = name.description
            var candidates = [
                lowercase, lowercase.uppercased(), lowercase + "s", String(lowercase.dropLast()), "",
                "\u{212A}" + lowercase.dropFirst(),
            ]
            for _ in 0..<200 {
                var bytes = Array(lowercase.utf8)
                let position = Int(random.next() % UInt64(bytes.count))
                switch random.next() % 4 {
                case 0: bytes[position] ^= 0x20  // a case flip (or a letter changed into another byte)
                case 1: bytes[position] = UInt8(truncatingIfNeeded: random.next())
                case 2: bytes.insert(UInt8(ascii: "-"), at: position)
                default: bytes.remove(at: position)
                }
                candidates.append(String(decoding: bytes, as: UTF8.self))
            }
            for candidate in candidates {
                #expect(
                    FieldName.matches(candidate, name) == model(candidate, lowercase),
                    "\(candidate) against \(lowercase)")
            }
        }
    }

    @Test func fieldValuesLoseSpacesAndTabsAroundThemAndNothingElse() {
        /// RFC 9110 §5.6.3: optional whitespace is spaces and horizontal tabs.
        func model(_ text: String) -> String {
            let scalars = Array(text.unicodeScalars)
            let isOWS = { (scalar: Unicode.Scalar) in scalar == " " || scalar == "\t" }
            guard let first = scalars.firstIndex(where: { !isOWS($0) }),
                let last = scalars.lastIndex(where: { !isOWS($0) })
            else { return "" }
            var kept = String.UnicodeScalarView()
            kept.append(contentsOf: scalars[first...last])
            return String(kept)
        }
        let pieces = [" ", "\t", "a", "*", ",", "\u{00A0}", "\u{2003}", "é", "\r", "\u{1F600}", "x y"]
        var random = SplitMix(seed: 11)
        var candidates = ["", " ", "\t \t", "close", " close ", "\u{00A0}close\u{00A0}"]
        for _ in 0..<2_000 {
            candidates.append(
                (0..<Int(random.next() % 7)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined())
        }
        for candidate in candidates {
            #expect(
                String(FieldValue.trimmed(Substring(candidate))) == model(candidate), "\(candidate.debugDescription)")
            // A token of a list, as the callers take them.
            for token in candidate.split(separator: ",") {
                #expect(String(FieldValue.trimmed(token)) == model(String(token)), "\(token.debugDescription)")
            }
        }
    }

    @Test func onlyEndToEndFieldsAreForwardedInAnyCase() {
        let head: HTTPHeaders = [
            "HOST": "127.0.0.1", "User-Agent": "mpv", "rAnGe": "bytes=0-1", "Connection": "keep-alive, X-Hop",
            "x-hop": "1",
            "Cookie": "a=b", "IF-NONE-MATCH": "\"v1\"", "X-MediaCache-Token": "t", "Accept-Language": "fr",
        ]
        let forwarded = ProxyRouter.endToEndHeaders(head)
        #expect(forwarded.map(\.name) == ["User-Agent", "Cookie", "Accept-Language"])
        #expect(forwarded.map(\.value) == ["mpv", "a=b", "fr"])
    }
}
