// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import MediaCacheHTTPFields
import NIOHTTP1

/// A player's own conditional request fields (RFC 9110 §13), evaluated against the version
/// the cache holds, in the order §13.2.2 gives: `If-Match`, `If-Unmodified-Since`,
/// `If-None-Match` (which makes `If-Modified-Since` ignored), `If-Modified-Since`; then
/// `If-Range`, which decides whether a `Range` applies. Fields that cannot be parsed are
/// ignored, as §13.1.3 and §13.1.4 say of dates.
struct PlayerConditions: Sendable {
    /// The field lines, for the origin when the cache has nothing to answer them with.
    var fields: RequestHeaders
    private var ifMatch: EntityTagList?
    private var ifUnmodifiedSince: Int64?
    private var ifNoneMatch: EntityTagList?
    private var ifModifiedSince: Int64?
    private var ifRange: String?

    /// What to do with a request, given the version the cache holds.
    enum Outcome: Equatable {
        /// Answer as usual (`200`/`206`).
        case proceed
        /// The version matches what the player has: `304 Not Modified`.
        case notModified
        /// A precondition failed: `412 Precondition Failed`.
        case preconditionFailed
    }

    init(_ headers: HTTPHeaders) {
        fields = headers.filter { RequestHeaders.isConditional($0.name) }.map { (name: $0.name, value: $0.value) }
        // Most requests carry no condition: nothing more to look up.
        guard !fields.isEmpty else { return }
        ifMatch = Self.list(headers["if-match"])
        ifNoneMatch = Self.list(headers["if-none-match"])
        ifUnmodifiedSince = Self.date(headers["if-unmodified-since"])
        ifModifiedSince = Self.date(headers["if-modified-since"])
        ifRange = headers["if-range"].count == 1 ? headers["if-range"][0].trimmingCharacters(in: .whitespaces) : nil
    }

    /// Whether the request carries any condition.
    var isEmpty: Bool { fields.isEmpty }

    /// The outcome for a `GET` or `HEAD` of the version `metadata` describes.
    func evaluate(against metadata: ContentMetadata) -> Outcome {
        if fields.isEmpty { return .proceed }  // most requests: nothing to parse
        let lastModified = (metadata.lastModified ?? metadata.responseHeader("date")).flatMap(HTTPDate.parse)
        if let ifMatch {
            // Strong comparison (§13.1.1).
            guard ifMatch.matchesAny || ifMatch.tags.contains(where: { EntityTag.strongMatch($0, metadata.etag) })
            else { return .preconditionFailed }
        } else if let ifUnmodifiedSince, let lastModified, lastModified > ifUnmodifiedSince {
            return .preconditionFailed
        }
        if let ifNoneMatch {
            // Weak comparison (§13.1.2).
            if ifNoneMatch.matchesAny || ifNoneMatch.tags.contains(where: { EntityTag.weakMatch($0, metadata.etag) }) {
                return .notModified
            }
        } else if let ifModifiedSince, let lastModified, lastModified <= ifModifiedSince {
            return .notModified
        }
        return .proceed
    }

    /// Whether a `Range` applies to the version `metadata` describes (§13.1.5): no `If-Range`,
    /// or one that names this version by a strong entity tag or by its exact `Last-Modified`.
    func rangeApplies(to metadata: ContentMetadata) -> Bool {
        guard let ifRange else { return true }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") { return EntityTag.strongMatch(ifRange, metadata.etag) }
        // A date must be exactly the stored Last-Modified, itself a strong validator.
        guard let date = HTTPDate.parse(ifRange), let stored = metadata.lastModified.flatMap(HTTPDate.parse) else {
            return false
        }
        return date == stored
    }

    private static func date(_ lines: [String]) -> Int64? {
        lines.count == 1 ? HTTPDate.parse(lines[0].trimmingCharacters(in: .whitespaces)) : nil
    }

    private static func list(_ lines: [String]) -> EntityTagList? {
        lines.isEmpty ? nil : EntityTagList(parsing: lines.joined(separator: ","))
    }
}

/// `*` or a list of entity tags (RFC 9110 §8.8.3), as a condition field carries them.
struct EntityTagList: Sendable, Equatable {
    var matchesAny = false
    var tags: [String] = []

    /// At most this many tags are read; the rest are ignored.
    static let maximumCount = 64

    /// Parses `text`; `nil` when it is neither `*` nor a list of entity tags.
    init?(parsing text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "*" {
            matchesAny = true
            return
        }
        var bytes = Array(trimmed.utf8)[...]
        while !bytes.isEmpty {
            while let first = bytes.first,
                first == UInt8(ascii: ",") || first == UInt8(ascii: " ") || first == UInt8(ascii: "\t")
            { bytes.removeFirst() }
            guard !bytes.isEmpty else { break }
            var tag: [UInt8] = []
            if bytes.starts(with: Array("W/".utf8)) {
                tag += bytes.prefix(2)
                bytes = bytes.dropFirst(2)
            }
            guard bytes.first == UInt8(ascii: "\"") else { return nil }
            guard let close = bytes.dropFirst().firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            let opaque = bytes[bytes.startIndex...close]
            // etagc: %x21 / %x23-7E / obs-text
            guard opaque.dropFirst().dropLast().allSatisfy({ $0 == 0x21 || $0 >= 0x23 && $0 != 0x7F }) else {
                return nil
            }
            tag += opaque
            bytes = bytes[(close + 1)...]
            if tags.count < Self.maximumCount { tags.append(String(decoding: tag, as: UTF8.self)) }
            while let first = bytes.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                bytes.removeFirst()
            }
            guard bytes.isEmpty || bytes.first == UInt8(ascii: ",") else { return nil }
        }
        guard !tags.isEmpty else { return nil }
    }
}

/// Entity-tag comparison (RFC 9110 §8.8.3.2).
enum EntityTag {
    /// Both strong and the same.
    static func strongMatch(_ a: String, _ b: String?) -> Bool {
        guard let b else { return false }
        return !a.hasPrefix("W/") && !b.hasPrefix("W/") && a == b
    }

    /// The same once any `W/` is dropped.
    static func weakMatch(_ a: String, _ b: String?) -> Bool {
        guard let b else { return false }
        return opaque(a) == opaque(b)
    }

    private static func opaque(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : tag[...]
    }
}
