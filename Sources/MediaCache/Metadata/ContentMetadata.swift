// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
package import MediaCacheHTTPFields

/// What is known about a resource apart from its bytes: length, type and validators.
public struct ContentMetadata: Hashable, Sendable, Codable {
    /// The resource's total length in bytes, or `nil` while it is not yet known.
    public var length: Int64?
    /// The origin's `Content-Type` (parameters such as `charset` removed), if any.
    public var mimeType: String?
    /// Whether the origin answers byte-range requests.
    public var acceptsRanges: Bool
    /// The origin's `ETag`, kept verbatim (weak validators keep their `W/` prefix).
    public var etag: String?
    /// The origin's `Last-Modified`, kept verbatim.
    public var lastModified: String?
    /// Stored as `false` only, so that index rows written before the field existed decode.
    private var storable: Bool?
    /// Until when the cached resource may be served without asking the origin (RFC 9111
    /// §4.2: the origin's freshness lifetime from when its answer was received, less the
    /// answer's age); `nil` when unknown, which counts as stale.
    public var freshUntil: Date?
    /// When the origin generated the answer this entry holds (received, less its age when
    /// received, RFC 9111 §4.2.3): a cache's answer carries `Age` = now − this.
    public var generatedAt: Date?
    /// Stored only when not empty, so that index rows written before the field existed decode.
    private var storedResponseHeaders: [ContentMetadata.HeaderField]?
    /// Stored as `true` only (see ``requiresRevalidation``).
    private var revalidationRequired: Bool?
    /// Where the origin's answer came from when redirects led away from the URL asked for
    /// (the last hop's URL); `nil` when it came from that URL. Relative URIs in the body (an
    /// HLS playlist's) resolve against this (RFC 3986 §5.1.3).
    public var finalURL: URL?
    /// The URL the resource was asked for by (the cache key is a hash of it): what `ls` shows.
    public var sourceURL: URL?
    /// The origin's `stale-while-revalidate` (RFC 5861 §3), in seconds: for this long after
    /// it turns stale, the stored answer may be served while one revalidation runs in the
    /// background; `nil` without it.
    package var staleWhileRevalidate: Int64?
    /// The request's values of the fields the answer's `Vary` names (RFC 9111 §4.1), lower-case
    /// names in `Vary`'s order, each value normalised; `nil` without `Vary`.
    private var varyingRequestFields: [ContentMetadata.HeaderField]?
    /// The `Content-Digest` of the whole, unencoded `200` that brought this version: then a
    /// digest of the representation. Kept apart from ``responseHeaders``: the field describes
    /// one answer's body, so it is never sent again with another (docs/http.md).
    package var wholeContentDigest: String?
    /// The algorithms of the origin's digests (``originDigests``) that the stored bytes were
    /// found to match, strongest first (`sha-256`), once the entry was whole and checked;
    /// `nil` until then. A version with other digests starts unchecked.
    package var digestsMatched: [String]?
    /// Stored as `true` only: the body's start was looked at and is neither a playlist nor a
    /// manifest (a small file of a generic type), so its ranges take the store's fast road.
    package var startIsMedia: Bool?

    /// This metadata as JSON, as `JSONEncoder` writes it (see ``JSONObjectWriter``); `nil` for
    /// a date JSON cannot hold. Every stored property is a field of the same name.
    package func json() -> [UInt8]? {
        var writer = JSONObjectWriter()
        writer.field("length", length)
        writer.field("mimeType", mimeType)
        writer.field("acceptsRanges", acceptsRanges)
        writer.field("etag", etag)
        writer.field("lastModified", lastModified)
        writer.field("storable", storable)
        writer.field("freshUntil", freshUntil)
        writer.field("generatedAt", generatedAt)
        writer.field("storedResponseHeaders", storedResponseHeaders)
        writer.field("revalidationRequired", revalidationRequired)
        writer.field("finalURL", finalURL)
        writer.field("sourceURL", sourceURL)
        writer.field("staleWhileRevalidate", staleWhileRevalidate)
        writer.field("varyingRequestFields", varyingRequestFields)
        writer.field("wholeContentDigest", wholeContentDigest)
        writer.field("digestsMatched", digestsMatched)
        writer.field("startIsMedia", startIsMedia)
        return writer.finish()
    }

    /// What the origin said this version's bytes hash to (`Repr-Digest`, a whole answer's
    /// `Content-Digest`, `x-amz-checksum-*`, `x-goog-hash`), each of an algorithm the cache
    /// computes.
    package var originDigests: [OriginDigest] {
        var fields = responseHeaders.map { (name: $0.name, value: $0.value) }
        if let wholeContentDigest { fields.append((name: "Content-Digest", value: wholeContentDigest)) }
        return OriginDigest.digests(in: fields, wholeContent: true)
    }

    /// The origin's end-to-end response header fields (`Cache-Control`, `Expires`, `Date`,
    /// `Content-Disposition`, `Content-Language`, `Vary`, …), kept with the entry and sent
    /// again with every answer from it. Fields the cache writes itself (length, range, type,
    /// validators, `Age`), hop-by-hop fields and `Set-Cookie` are not among them.
    public var responseHeaders: [ContentMetadata.HeaderField] {
        get { storedResponseHeaders ?? [] }
        set { storedResponseHeaders = newValue.isEmpty ? nil : newValue }
    }

    /// Whether the origin forbids serving the cached resource once stale without asking it
    /// (`must-revalidate` or `no-cache`, RFC 9111 §5.2.2.2 and §5.2.2.4): then a failing
    /// origin makes an error, never a stale answer.
    public var requiresRevalidation: Bool {
        get { revalidationRequired ?? false }
        set { revalidationRequired = newValue ? true : nil }
    }

    /// The value of the first response header field named `name` (any case), if any.
    public func responseHeader(_ name: String) -> String? {
        responseHeaders.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// This stored version as refreshed by an origin's "not modified" answer described by
    /// `notModified` (RFC 9111 §3.2, §4.3.4): each header field it carries replaces the stored
    /// fields of that name (its `ETag` and `Last-Modified` too); its freshness applies if it
    /// says one (`Cache-Control` or `Expires`), else the stored freshness lifetime starts
    /// again from its age.
    public func refreshed(by notModified: ContentMetadata) -> ContentMetadata {
        var refreshed = self
        refreshed.etag = notModified.etag ?? etag
        refreshed.lastModified = notModified.lastModified ?? lastModified
        let names = Set(notModified.responseHeaders.map { $0.name.lowercased() })
        refreshed.responseHeaders =
            responseHeaders.filter { !names.contains($0.name.lowercased()) } + notModified.responseHeaders
        let saysFreshness = names.contains("cache-control") || names.contains("expires")
        if names.contains("cache-control") {
            refreshed.requiresRevalidation = notModified.requiresRevalidation
            refreshed.staleWhileRevalidate = notModified.staleWhileRevalidate
        }
        refreshed.generatedAt = notModified.generatedAt ?? generatedAt
        refreshed.finalURL = notModified.finalURL
        if saysFreshness || freshUntil == nil || generatedAt == nil || notModified.generatedAt == nil {
            refreshed.freshUntil = notModified.freshUntil
        } else if let freshUntil, let generatedAt, let again = notModified.generatedAt {
            refreshed.freshUntil = again.addingTimeInterval(freshUntil.timeIntervalSince(generatedAt))
        }
        return refreshed
    }

    /// The field names the answer's `Vary` lists, lower-case, in order (`*` included).
    package var varyingFieldNames: [String] {
        responseHeaders.filter { $0.name.lowercased() == "vary" }.flatMap { Self.listMembers($0.value) }.map {
            $0.lowercased()
        }
    }

    /// Records the values that `request` (the fields sent to the origin for this answer)
    /// has for each field the answer's `Vary` names, so that a later request is matched
    /// against them (``matches(request:)``).
    package mutating func recordVaryingFields(of request: RequestHeaders) {
        let names = varyingFieldNames
        varyingRequestFields =
            names.isEmpty
            ? nil
            : names.map {
                ContentMetadata.HeaderField(name: $0, value: Self.normalizedValue(of: $0, in: request) ?? "")
            }
    }

    /// Whether a request with `request`'s fields may be answered with this stored answer as
    /// far as `Vary` goes (RFC 9111 §4.1): every field it names has the same value in both
    /// (absent in both counts as the same); `Vary: *` never matches. `Accept-Encoding` always
    /// matches: the cache asks the origin for the identity coding whatever the player sends.
    package func matches(request: RequestHeaders) -> Bool {
        // Most answers have no `Vary`: told without a lower-cased copy of every name.
        guard
            varyingRequestFields != nil
                || responseHeaders.contains(where: { $0.name.utf8.count == 4 && $0.name.lowercased() == "vary" })
        else {
            return true
        }
        let names = varyingFieldNames
        guard !names.isEmpty else { return true }
        guard !names.contains("*") else { return false }
        let recorded = varyingRequestFields ?? []
        // CMCD fields (CTA-5004) describe the player, not what it asks for: never a reason to differ.
        for name in names where name != "accept-encoding" && !name.hasPrefix("cmcd-") {
            let stored = recorded.first { $0.name == name }
            let value = Self.normalizedValue(of: name, in: request)
            // A field recorded as absent is stored as "" (absent and empty compare equal, as
            // RFC 9110 §5.3 lets a list's empty members go).
            guard (stored?.value ?? "") == (value ?? "") else { return false }
        }
        return true
    }

    /// The value of every line named `name` in `request`, joined as one list, each member's
    /// surrounding whitespace removed, and lower-cased for the fields whose values are
    /// case-insensitive (RFC 9111 §4.1 lets a cache normalise this way; the order of members
    /// stays, since in these fields it says a preference).
    private static func normalizedValue(of name: String, in request: RequestHeaders) -> String? {
        let lines = request.filter { $0.name.lowercased() == name }.map(\.value)
        guard !lines.isEmpty else { return nil }
        let joined = listMembers(lines.joined(separator: ",")).joined(separator: ", ")
        return caseInsensitiveFields.contains(name) ? joined.lowercased() : joined
    }

    /// Request fields whose values compare without regard to case: media ranges, charsets
    /// and language ranges (RFC 9110 §8.3.1, §12.5.1-12.5.4; RFC 4647 §2).
    private static let caseInsensitiveFields: Set<String> = ["accept", "accept-charset", "accept-language"]

    /// The members of a comma-separated field value (RFC 9110 §5.6.1), spaces and tabs
    /// around each removed, empty ones dropped; split on bytes, so a combining mark after a
    /// comma or a space stays in its member.
    private static func listMembers(_ value: String) -> [String] {
        value.utf8.split(separator: UInt8(ascii: ",")).compactMap { member in
            var slice = member
            while let first = slice.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                slice = slice.dropFirst()
            }
            while let last = slice.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") {
                slice = slice.dropLast()
            }
            return slice.isEmpty ? nil : String(decoding: slice, as: UTF8.self)
        }
    }

    /// Takes `other`'s recorded `Vary` values when it has a `Vary` of its own.
    mutating func takeVaryingFields(of other: ContentMetadata) {
        if other.varyingRequestFields != nil || !other.varyingFieldNames.isEmpty {
            varyingRequestFields = other.varyingRequestFields
        }
    }

    /// Whether the cached resource may be served at `now` without asking the origin.
    public func isFresh(at now: Date) -> Bool {
        freshUntil.map { now < $0 } ?? false
    }

    /// Whether at `now` the resource is stale but within its `stale-while-revalidate` window,
    /// so it may be served while a revalidation runs in the background (RFC 5861 §3); never
    /// when the origin said `must-revalidate` or `no-cache`.
    package func mayServeWhileRevalidating(at now: Date) -> Bool {
        guard let freshUntil, let window = staleWhileRevalidate, window > 0, !requiresRevalidation, now >= freshUntil
        else { return false }
        return now < freshUntil.addingTimeInterval(Double(window))
    }

    /// Whether the origin lets a cache store the resource (`Cache-Control: no-store` says
    /// no): when it does not, the bytes stream through to the player and nothing is written.
    public var isStorable: Bool {
        get { storable ?? true }
        set { storable = newValue ? nil : false }
    }

    /// Creates metadata; every field defaults to unknown.
    public init(
        length: Int64? = nil,
        mimeType: String? = nil,
        acceptsRanges: Bool = false,
        etag: String? = nil,
        lastModified: String? = nil
    ) {
        self.length = length
        self.mimeType = mimeType.map(MediaType.normalized(mimeType:))
        self.acceptsRanges = acceptsRanges
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The Uniform Type Identifier for `mimeType` (`public.mp3`, `public.mpeg-4`, …), if known.
    public var uniformTypeIdentifier: String? {
        mimeType.flatMap(MediaType.uniformTypeIdentifier(forMIMEType:))
    }

    /// The validator to send in `If-Range`: a strong ETag if there is one, else Last-Modified.
    ///
    /// RFC 9110 allows only strong entity tags in `If-Range`, so a weak ETag is skipped.
    public var ifRangeValidator: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    /// Why `other` cannot be an honest answer about the version `self` describes, or `nil`:
    /// a matching strong ETag or Last-Modified with a different length is a lie.
    public func contradiction(with other: ContentMetadata) -> String? {
        guard let a = length, let b = other.length, a != b else { return nil }
        if let etag, !etag.hasPrefix("W/"), etag == other.etag {
            return "gave a length of \(b) bytes for ETag \(etag.prefix(100)), which it gave before as \(a) bytes"
        }
        if etag == nil || other.etag == nil, let lastModified, lastModified == other.lastModified {
            return
                "gave a length of \(b) bytes for Last-Modified \(lastModified.prefix(100)), which it gave before as \(a) bytes"
        }
        return nil
    }

    /// Whether a validator both carry shows `other` to be the version `self` describes: the
    /// same strong ETag, or (neither carrying an ETag) the same Last-Modified, with lengths
    /// that agree. ``isSameVersion(as:)`` only says nothing contradicts it: two answers
    /// without validators never contradict each other, yet a stale entry's bytes cannot be
    /// kept on the strength of that (RFC 9111 §4.3.3 updates a stored answer only for a
    /// `304`; §3.4 combines parts only under one strong validator).
    package func isProvenSameVersion(as other: ContentMetadata) -> Bool {
        guard isSameVersion(as: other) else { return false }
        if let a = etag, let b = other.etag { return a == b && !a.hasPrefix("W/") }
        guard etag == nil, other.etag == nil, let a = lastModified, let b = other.lastModified else { return false }
        return a == b
    }

    /// Whether `other` describes the same version of the resource as `self`.
    ///
    /// Validators and lengths known on both sides must agree; a side that lacks one
    /// cannot contradict it.
    public func isSameVersion(as other: ContentMetadata) -> Bool {
        if let a = etag, let b = other.etag, a != b { return false }
        if let a = lastModified, let b = other.lastModified, a != b { return false }
        if let a = length, let b = other.length, a != b { return false }
        return true
    }
}

extension ContentMetadata {
    /// One header field of an origin's answer.
    public struct HeaderField: Hashable, Sendable, Codable {
        /// The field's name, as the origin spelled it.
        public var name: String
        /// The field's value.
        public var value: String

        /// Creates a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}

extension ContentMetadata.HeaderField {
    /// Response fields not kept with an entry: hop-by-hop ones (RFC 9110 §7.6.1), those the
    /// cache writes itself from what it serves (length, range, validators, `Age`; the
    /// `Content-Type` is kept as the origin spelled it),
    /// cookies (a replayed `Set-Cookie` would set a cookie again on every hit), `Content-Digest`
    /// (of one answer's body: a whole one is kept as ``ContentMetadata/wholeContentDigest``), and CORS
    /// fields (the proxy answers for its own listed web origins).
    package static let notStored: Set<String> = notPassedOn.union([
        "proxy-authenticate", "content-range", "accept-ranges", "etag", "last-modified", "age", "set-cookie",
        "set-cookie2", "location", "content-digest",
    ])

    /// Fields of an origin's answer that are not passed on with it: hop-by-hop ones (RFC
    /// 9110 §7.6.1) and the body's length (the proxy frames what it sends). CORS fields are
    /// dropped too, wherever they are (the proxy answers for its own listed web origins).
    package static let notPassedOn: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length",
    ]
}
