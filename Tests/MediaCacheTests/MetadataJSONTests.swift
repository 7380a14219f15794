// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The store writes each entry's metadata as JSON by hand (`ContentMetadata.json()`, for
/// speed) and reads it with `JSONDecoder`: what it writes must read back to the same value,
/// the value `JSONEncoder`'s JSON reads back to, for any metadata, with every stored
/// property written.
@Suite(.stallLimit) struct MetadataJSONTests {
    /// Every stored property of `ContentMetadata`, by the names its synthesized `Codable` uses,
    /// in its order: decoded, it makes a metadata with any of them set, the private ones too.
    private struct AllFields: Codable {
        var length: Int64?
        var mimeType: String?
        var acceptsRanges: Bool
        var etag: String?
        var lastModified: String?
        var storable: Bool?
        var freshUntil: Date?
        var generatedAt: Date?
        var storedResponseHeaders: [ContentMetadata.HeaderField]?
        var revalidationRequired: Bool?
        var finalURL: URL?
        var sourceURL: URL?
        var staleWhileRevalidate: Int64?
        var varyingRequestFields: [ContentMetadata.HeaderField]?
        var wholeContentDigest: String?
        var digestsMatched: [String]?
        var startIsMedia: Bool?
    }

    private static let texts = [
        "", "a", "audio/mpeg", "\"W/\\\"x\\\"\"", "back\\slash", "quote\"d", "tab\there", "nul\u{0}byte",
        "\u{1F}\u{7F}",
        "line\nfeed\r", "é", "日本", "🎵", "\u{2028}\u{2029}", "\u{FEFF}start", "</script>", "/slash/",
    ]
    private static let urls = [
        "https://cdn.example/a/b.mp3", "http://127.0.0.1:8080/x?y=1&z=%20", "https://[::1]/seg.ts#frag",
        "https://h.example/%E6%97%A5.m4a", "http://u:p@h.example/",
    ].map { URL(string: $0)! }

    private static func random(_ random: inout SplitMix, full: Bool) -> AllFields {
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { full || random.next() % 2 == 0 ? value() : nil }
        func text() -> String {
            (0..<Int(random.next() % 3)).map { _ in texts[Int(random.next() % UInt64(texts.count))] }.joined()
        }
        func date() -> Date {
            let scales: [Double] = [1, 1e-7, 1e3, 1e9, 1e12, -1e9]
            let fraction = Double(random.next() % 1_000_000_007) / 1_000_000_007
            return Date(timeIntervalSinceReferenceDate: (fraction - 0.3) * scales[Int(random.next() % 6)])
        }
        func number() -> Int64 {
            [Int64.min, -1, 0, 1, Int64.max, Int64(bitPattern: random.next())][Int(random.next() % 6)]
        }
        func fields() -> [ContentMetadata.HeaderField] {
            (0..<Int(random.next() % 4)).map { _ in ContentMetadata.HeaderField(name: text(), value: text()) }
        }
        return AllFields(
            length: maybe(number()), mimeType: maybe(text()), acceptsRanges: random.next() % 2 == 0,
            etag: maybe(text()), lastModified: maybe(text()), storable: maybe(random.next() % 2 == 0),
            freshUntil: maybe(date()), generatedAt: maybe(date()), storedResponseHeaders: maybe(fields()),
            revalidationRequired: maybe(random.next() % 2 == 0), finalURL: maybe(urls[Int(random.next() % 5)]),
            sourceURL: maybe(urls[Int(random.next() % 5)]), staleWhileRevalidate: maybe(number()),
            varyingRequestFields: maybe(fields()), wholeContentDigest: maybe(text()),
            digestsMatched: maybe((0..<Int(random.next() % 3)).map { _ in text() }),
            startIsMedia: maybe(random.next() % 2 == 0))
    }

    private static func metadata(_ fields: AllFields) throws -> ContentMetadata {
        try JSONDecoder().decode(ContentMetadata.self, from: JSONEncoder().encode(fields))
    }

    @Test func everyStoredPropertyIsWritten() throws {
        var generator = SplitMix(seed: 7)
        let full = try Self.metadata(Self.random(&generator, full: true))
        let properties = Mirror(reflecting: full).children.compactMap(\.label)
        let fields = Mirror(reflecting: Self.random(&generator, full: true)).children.compactMap(\.label)
        #expect(properties == fields, "a property ContentMetadata.json() and this test do not know of")
        let json = try #require(full.json())
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
        #expect(Set(object.keys) == Set(properties))
    }

    @Test func anyMetadataReadsBackAsItWasAndAsJSONEncodersDoes() throws {
        var generator = SplitMix(seed: 11)
        for round in 0..<3_000 {
            let metadata = try Self.metadata(Self.random(&generator, full: round % 10 == 0))
            let json = try #require(metadata.json())
            let back = try JSONDecoder().decode(ContentMetadata.self, from: Data(json))
            let standard = try JSONDecoder().decode(ContentMetadata.self, from: JSONEncoder().encode(metadata))
            guard back == metadata, back == standard else {
                Issue.record("round \(round): \(String(decoding: json, as: UTF8.self)) read back as \(back)")
                return
            }
        }
    }

    @Test func aDateJSONCannotHoldIsNotWritten() {
        var metadata = ContentMetadata(length: 1)
        metadata.freshUntil = Date(timeIntervalSinceReferenceDate: .infinity)
        #expect(metadata.json() == nil)
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(metadata) }
    }
}
