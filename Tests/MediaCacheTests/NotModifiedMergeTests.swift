// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The header update a `304` makes to a stored answer (RFC 9111 §3.2, §4.3.4), as a property
/// over generated field lists: every field name the `304` carries ends with exactly the
/// `304`'s lines of that name, in its order; every other name keeps exactly its stored lines;
/// nothing else appears, so no field is lost or duplicated, whatever the letter case.
@Suite(.stallLimit, .cpuBound) struct NotModifiedMergeTests {
    /// Field names the generator picks from, in several letter cases, so that a name the
    /// `304` spells differently from the stored answer is still the same field.
    static let names = [
        "Date", "date", "DATE", "Cache-Control", "cache-control", "Expires", "X-Version", "x-version", "Vary",
        "Content-Disposition", "X-A", "x-b",
    ]

    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        mutating func fields() -> [ContentMetadata.HeaderField] {
            (0..<next(6)).map { _ in
                ContentMetadata.HeaderField(
                    name: NotModifiedMergeTests.names[next(NotModifiedMergeTests.names.count)], value: "v\(next(1000))")
            }
        }
        mutating func validator(_ prefix: String) -> String? {
            next(3) == 0 ? nil : "\(prefix)\(next(4))"
        }
    }

    static func lines(_ fields: [ContentMetadata.HeaderField], named name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name }.map(\.value)
    }

    @Test func aNotModifiedMergeNeverLosesOrDuplicatesAField() {
        var generator = Generator(state: 0x5EED_304)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for round in 0..<5_000 {
            var stored = ContentMetadata(
                length: 1000, etag: generator.validator("\"s"), lastModified: generator.validator("Mon, 0"))
            stored.responseHeaders = generator.fields()
            stored.generatedAt = start
            stored.freshUntil = start.addingTimeInterval(Double(generator.next(100)))
            var answer = ContentMetadata(etag: generator.validator("\"n"), lastModified: generator.validator("Tue, 0"))
            answer.responseHeaders = generator.fields()
            answer.generatedAt = start.addingTimeInterval(Double(generator.next(1000)))
            answer.freshUntil = answer.generatedAt!.addingTimeInterval(Double(generator.next(100)))
            let merged = stored.refreshed(by: answer)

            let answered = Set(answer.responseHeaders.map { $0.name.lowercased() })
            let all = answered.union(stored.responseHeaders.map { $0.name.lowercased() })
            let described =
                "round \(round): \(stored.responseHeaders) + \(answer.responseHeaders) → \(merged.responseHeaders)"
            var expectedCount = 0
            for name in all {
                let expected =
                    answered.contains(name)
                    ? Self.lines(answer.responseHeaders, named: name) : Self.lines(stored.responseHeaders, named: name)
                expectedCount += expected.count
                guard Self.lines(merged.responseHeaders, named: name) == expected else {
                    Issue.record("\(name) lost or duplicated, \(described)")
                    return
                }
            }
            guard merged.responseHeaders.count == expectedCount else {
                Issue.record("a field from nowhere, \(described)")
                return
            }
            guard merged.etag == (answer.etag ?? stored.etag),
                merged.lastModified == (answer.lastModified ?? stored.lastModified),
                merged.length == stored.length, merged.generatedAt == answer.generatedAt
            else {
                Issue.record("validators, length or age not as the 304 says, \(described)")
                return
            }
        }
    }
}
