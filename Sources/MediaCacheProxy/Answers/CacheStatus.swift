// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import RawStructuredFieldValues
import Synchronization

/// What the cache did for one answer, as RFC 9211's `Cache-Status` field says it: a hit, with
/// the freshness left (`ttl`, negative when served stale), or why the request went on to the
/// origin (`fwd`) with the origin's status (`fwd-status`) and whether the answer is being
/// stored. Every answer of the proxy carries one, after any the origin's answer had (each cache
/// on the way adds its own member), so a web player (a page listed with
/// `--cors-origin`) can leave hits out of its bandwidth estimate. Pure.
struct CacheStatus: Sendable, Hashable {
    /// Why the request went to the origin (RFC 9211 §2.2).
    enum Forward: String, Sendable {
        /// Nothing of the resource was stored.
        case uriMiss = "uri-miss"
        /// A stale answer was stored: the origin was asked whether it is current.
        case stale
        /// Part of the resource was stored: the rest was asked for.
        case partial
        /// The cache does not keep this kind of answer (`no-store`, a key, a stream without a
        /// length, a blocking reload): it passed through.
        case bypass
    }

    var hit = false
    var forward: Forward?
    /// The origin's status, when it is known to be this answer's reason (`304` for a
    /// revalidation, an error page's).
    var forwardStatus: Int?
    /// Whether the origin's answer is being stored.
    var stored = false
    /// Seconds of freshness left when served from the cache (negative: stale).
    var ttl: Int?
    /// What else is worth saying, as a token (`refused`, `origin-unavailable`, `local`).
    var detail: String?

    /// The field's value: this cache's member of the list (RFC 9211 §2), its name and its
    /// parameters, written by the structured-field serializer once per distinct status and
    /// remembered (a hot range's answer is the same status again and again, its `ttl` changing
    /// once a second; serializing each time cost about 12,000 instructions per answer).
    var headerValue: String {
        if let known = Self.written.withLock({ $0[self] }) { return known }
        let value = serialized
        Self.written.withLock { written in
            if written.count >= 1024 { written.removeAll(keepingCapacity: true) }
            written[self] = value
        }
        return value
    }

    /// The values written so far, by status.
    private static let written = Mutex<[CacheStatus: String]>([:])

    /// ``headerValue``, written now.
    var serialized: String {
        var parameters = OrderedMap<String, RFC9651BareItem>()
        if hit { parameters["hit"] = .bool(true) }
        if let forward { parameters["fwd"] = .token(forward.rawValue) }
        if let forwardStatus { parameters["fwd-status"] = .integer(Int64(forwardStatus)) }
        if stored { parameters["stored"] = .bool(true) }
        if let ttl { parameters["ttl"] = .integer(Int64(ttl)) }
        if let detail { parameters["detail"] = detail.structuredHeadersIsValidToken ? .token(detail) : .string(detail) }
        var serializer = StructuredFieldValueSerializer()
        let member = Item(bareItem: .token("MediaCache"), parameters: parameters)
        // Refused only for a string outside printable ASCII, which no detail of ours is.
        guard let bytes = try? serializer.writeListFieldValue([.item(member)]) else { return "MediaCache" }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A hit whose stored answer is fresh until `freshUntil` (unknown: no `ttl`).
    static func hit(freshUntil: Date?, now: Date) -> CacheStatus {
        CacheStatus(hit: true, ttl: freshUntil.map { Int(($0.timeIntervalSince(now)).rounded(.down)) })
    }

    /// An answer the proxy passed through without storing it.
    static let bypass = CacheStatus(forward: .bypass)

    /// An answer made by the proxy itself (an admin page, a preflight, a refusal).
    static func local(_ detail: String) -> CacheStatus { CacheStatus(detail: detail) }

    /// What the store held for a resource when a request came, and when the origin had last
    /// given or confirmed it.
    struct Before: Sendable {
        var metadata: ContentMetadata?
        var spans: SpanSet
        var validated: Date?
    }

    /// The status of an answer through the cache: `before` what the store held when the
    /// request came, `answered` the version the answer carries, `range` its body's bytes (`nil`:
    /// none), `validated` when the origin last gave or confirmed the version once the answer
    /// was made (a later date than before: the origin was asked for this request).
    static func judge(
        before: Before, answered: ContentMetadata, range: ByteRange?, validated: Date?, passesThrough: Bool, now: Date
    ) -> CacheStatus {
        if passesThrough || !answered.isStorable { return .bypass }
        let held = before.metadata
        let holdsRange = range.map { $0.isEmpty || before.spans.contains($0) } ?? (held != nil)
        let asked = validated.map { date in before.validated.map { date > $0 } ?? true } ?? false
        if held == nil || before.spans.isEmpty && !holdsRange {
            return CacheStatus(forward: .uriMiss, stored: true)
        }
        if let held, asked || !held.isSameVersion(as: answered) {
            let sameVersion = held.isProvenSameVersion(as: answered)
            if !held.isFresh(at: now) || !sameVersion {
                // Revalidated: `304` when it held what the answer sends, else the bytes came with
                // the confirmation (`206`), or another version came whole.
                let status = sameVersion ? (holdsRange ? 304 : 206) : 200
                return CacheStatus(forward: .stale, forwardStatus: status, stored: true)
            }
        }
        guard holdsRange else { return CacheStatus(forward: .partial, stored: true) }
        return .hit(freshUntil: answered.freshUntil ?? held?.freshUntil, now: now)
    }
}
