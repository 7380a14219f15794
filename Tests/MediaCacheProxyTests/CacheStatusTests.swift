// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import Testing

@testable import MediaCacheProxy

/// RFC 9211's `Cache-Status` judged from what the store held before and after, without a proxy:
/// one row per case. (The live tests show it on the wire.)
@Suite(.stallLimit) struct CacheStatusTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    /// A version of 1,000 bytes with a strong `ETag`, fresh for `fresh` seconds from ``now``.
    static func version(_ etag: String = "\"v1\"", fresh: Double = 60) -> ContentMetadata {
        var metadata = ContentMetadata(length: 1_000, acceptsRanges: true, etag: etag)
        metadata.freshUntil = now.addingTimeInterval(fresh)
        return metadata
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let before: CacheStatus.Before
        let answered: ContentMetadata
        let range: ByteRange?
        /// When the origin last gave or confirmed the version once the answer was made.
        let validated: Date?
        var passesThrough = false
        let header: String
        var testDescription: String { name }
    }

    static let earlier = now.addingTimeInterval(-30)
    static let rows: [Row] = [
        Row(
            name: "nothing stored", before: .init(metadata: nil, spans: SpanSet(), validated: nil),
            answered: version(), range: ByteRange(0, 100), validated: now,
            header: "MediaCache;fwd=uri-miss;stored"),
        Row(
            name: "the range held, fresh",
            before: .init(
                metadata: version(), spans: SpanSet([ByteRange(0, 1_000)]),
                validated: earlier), answered: version(), range: ByteRange(0, 100), validated: earlier,
            header: "MediaCache;hit;ttl=60"),
        Row(
            name: "part of the range held",
            before: .init(
                metadata: version(), spans: SpanSet([ByteRange(0, 50)]),
                validated: earlier), answered: version(), range: ByteRange(0, 100), validated: earlier,
            header: "MediaCache;fwd=partial;stored"),
        Row(
            name: "stale, confirmed, the range held: 304",
            before: .init(metadata: version(fresh: -10), spans: SpanSet([ByteRange(0, 1_000)]), validated: earlier),
            answered: version(), range: ByteRange(0, 100), validated: now,
            header: "MediaCache;fwd=stale;fwd-status=304;stored"),
        Row(
            name: "stale, confirmed with the missing bytes: 206",
            before: .init(metadata: version(fresh: -10), spans: SpanSet([ByteRange(0, 50)]), validated: earlier),
            answered: version(), range: ByteRange(0, 100), validated: now,
            header: "MediaCache;fwd=stale;fwd-status=206;stored"),
        Row(
            name: "stale, another version came whole: 200",
            before: .init(metadata: version(fresh: -10), spans: SpanSet([ByteRange(0, 1_000)]), validated: earlier),
            answered: version("\"v2\""), range: ByteRange(0, 100), validated: now,
            header: "MediaCache;fwd=stale;fwd-status=200;stored"),
        Row(
            name: "no-store passes through", before: .init(metadata: nil, spans: SpanSet(), validated: nil),
            answered: {
                var metadata = version()
                metadata.isStorable = false
                return metadata
            }(), range: ByteRange(0, 100), validated: now, header: "MediaCache;fwd=bypass"),
        Row(
            name: "a stream without a length passes through",
            before: .init(metadata: nil, spans: SpanSet(), validated: nil),
            answered: version(), range: nil, validated: nil, passesThrough: true, header: "MediaCache;fwd=bypass"),
    ]

    @Test(arguments: rows) func eachCaseIsJudgedAsRFC9211Says(_ row: Row) {
        let status = CacheStatus.judge(
            before: row.before, answered: row.answered, range: row.range, validated: row.validated,
            passesThrough: row.passesThrough, now: Self.now)
        #expect(status.headerValue == row.header)
    }

    /// Any status the proxy can write reads back as RFC 9211's grammar with the structured-field
    /// parser, and the remembered value is the one written now, however many statuses come.
    @Test func everyStatusIsWrittenAsAStructuredFieldAndRememberedRight() {
        var random = SystemRandomNumberGenerator()
        let forwards: [CacheStatus.Forward?] = [nil, .uriMiss, .stale, .partial, .bypass]
        for _ in 0..<5_000 {
            let status = CacheStatus(
                hit: Bool.random(using: &random), forward: forwards.randomElement(using: &random)!,
                forwardStatus: Bool.random(using: &random) ? Int.random(in: 100...599, using: &random) : nil,
                stored: Bool.random(using: &random),
                ttl: Bool.random(using: &random) ? Int.random(in: -100_000...100_000, using: &random) : nil,
                detail: ["refused", "local", "origin-failed", "side-loaded", nil].randomElement(using: &random)!)
            let value = status.headerValue
            #expect(value == status.serialized && status.headerValue == value, "\(status)")
            #expect(ProxyHarness.isCacheStatus(value), "\(value)")
        }
    }
}
