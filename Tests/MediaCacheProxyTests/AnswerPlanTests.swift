// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// What the proxy answers, decided without I/O: a request's method and fields, and what is
/// known of the resource, give one ``AnswerPlan``. One row per rule of RFC 9110 the proxy
/// applies (ranges §14, conditions §13) and per shape of resource (empty, without a length,
/// from an origin that serves ranges of it or not).
@Suite(.stallLimit) struct AnswerPlanTests {
    struct Row: CustomStringConvertible, Sendable {
        var name: String
        var method: HTTPMethod = .GET
        var fields: [(String, String)] = []
        var metadata: ContentMetadata
        var plan: AnswerPlan
        var description: String { name }
    }

    static let etag = "\"v1\""
    static let modified = "Tue, 10 Nov 2026 08:00:00 GMT"
    static let file = ContentMetadata(
        length: 1000, mimeType: "video/mp4", acceptsRanges: true, etag: etag, lastModified: modified)
    static let growing = ContentMetadata(length: nil, mimeType: "video/mp4", acceptsRanges: true)
    static let radio = ContentMetadata(length: nil, mimeType: "audio/mpeg", acceptsRanges: false)

    static let rows: [Row] = [
        Row(name: "whole file", metadata: file, plan: .read(range: ByteRange(0, 1000), specifier: nil)),
        Row(
            name: "a closed range", fields: [("Range", "bytes=100-199")], metadata: file,
            plan: .read(range: ByteRange(100, 200), specifier: .from(first: 100, last: 199))),
        Row(
            name: "an open range", fields: [("Range", "bytes=900-")], metadata: file,
            plan: .read(range: ByteRange(900, 1000), specifier: .from(first: 900, last: nil))),
        Row(
            name: "a last position past the end is the end", fields: [("Range", "bytes=990-5000")], metadata: file,
            plan: .read(range: ByteRange(990, 1000), specifier: .from(first: 990, last: 5000))),
        Row(
            name: "a suffix", fields: [("Range", "bytes=-100")], metadata: file,
            plan: .read(range: ByteRange(900, 1000), specifier: .suffix(length: 100))),
        Row(
            name: "several ranges: the first", fields: [("Range", "bytes=0-9,20-29")], metadata: file,
            plan: .read(range: ByteRange(0, 10), specifier: .from(first: 0, last: 9))),
        Row(
            name: "a range past the end", fields: [("Range", "bytes=1000-")], metadata: file,
            plan: .unsatisfiable(total: 1000)),
        Row(
            name: "an empty suffix", fields: [("Range", "bytes=-0")], metadata: file, plan: .unsatisfiable(total: 1000)),
        Row(
            name: "HEAD", method: .HEAD, metadata: file,
            plan: .headOnly(status: .ok, range: ByteRange(0, 1000), isPartial: false)),
        Row(
            name: "HEAD of a range", method: .HEAD, fields: [("Range", "bytes=0-9")], metadata: file,
            plan: .headOnly(status: .partialContent, range: ByteRange(0, 10), isPartial: true)),
        Row(
            name: "an empty file", metadata: ContentMetadata(length: 0, mimeType: "video/mp4", acceptsRanges: true),
            plan: .headOnly(status: .ok, range: ByteRange(0, 0), isPartial: false)),
        Row(
            name: "If-None-Match of the version", fields: [("If-None-Match", etag)], metadata: file, plan: .notModified),
        Row(
            name: "If-None-Match of another version", fields: [("If-None-Match", "\"v0\"")], metadata: file,
            plan: .read(range: ByteRange(0, 1000), specifier: nil)),
        Row(
            name: "If-Modified-Since after the change",
            fields: [("If-Modified-Since", "Wed, 11 Nov 2026 08:00:00 GMT")], metadata: file, plan: .notModified),
        Row(
            name: "If-None-Match wins over If-Modified-Since",
            fields: [("If-None-Match", "\"v0\""), ("If-Modified-Since", "Wed, 11 Nov 2026 08:00:00 GMT")],
            metadata: file, plan: .read(range: ByteRange(0, 1000), specifier: nil)),
        Row(
            name: "If-Match of another version", fields: [("If-Match", "\"v0\"")], metadata: file,
            plan: .preconditionFailed),
        Row(
            name: "If-Unmodified-Since before the change",
            fields: [("If-Unmodified-Since", "Mon, 09 Nov 2026 08:00:00 GMT")], metadata: file,
            plan: .preconditionFailed),
        Row(
            name: "If-Range of the version", fields: [("Range", "bytes=0-9"), ("If-Range", etag)], metadata: file,
            plan: .read(range: ByteRange(0, 10), specifier: .from(first: 0, last: 9))),
        Row(
            name: "If-Range of another version: the whole file",
            fields: [("Range", "bytes=0-9"), ("If-Range", "\"v0\"")], metadata: file,
            plan: .read(range: ByteRange(0, 1000), specifier: nil)),
        Row(name: "no length, whole", metadata: radio, plan: .stream(firstByte: nil, length: nil)),
        Row(
            name: "no length, a range the origin does not serve", fields: [("Range", "bytes=500-")], metadata: radio,
            plan: .stream(firstByte: nil, length: nil)),
        Row(
            name: "no length, a range of a growing resource", fields: [("Range", "bytes=500-")], metadata: growing,
            plan: .stream(firstByte: 500, length: nil)),
        Row(
            name: "no length, a closed range of it", fields: [("Range", "bytes=500-599")], metadata: growing,
            plan: .stream(firstByte: 500, length: 100)),
        Row(
            name: "no length, a suffix: whole", fields: [("Range", "bytes=-100")], metadata: growing,
            plan: .stream(firstByte: nil, length: nil)),
        Row(
            name: "no length, HEAD", method: .HEAD, metadata: growing,
            plan: .headOnly(status: .ok, range: nil, isPartial: false)),
    ]

    @Test(arguments: rows)
    func eachRequestGetsItsPlan(_ row: Row) throws {
        let head = HTTPRequestHead(
            version: .http1_1, method: row.method, uri: "/?url=x", headers: HTTPHeaders(row.fields))
        let asked = try ProxyRouter.parse(head, url: URL(string: "https://origin.example/v.mp4")!)
        #expect(AnswerPlan.plan(asked, metadata: row.metadata, sendsBody: row.method != .HEAD) == row.plan)
    }

    /// A `Range` that is not a bytes range is refused with a reason, not ignored silently.
    @Test func aMalformedRangeIsRefused() {
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/?url=x", headers: ["Range": "pages=1-2"])
        #expect(throws: ProxyRequestError.self) {
            try ProxyRouter.parse(head, url: URL(string: "https://origin.example/v.mp4")!)
        }
    }
}
