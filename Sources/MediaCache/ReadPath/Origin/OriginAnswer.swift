// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// An origin's answer that is not the resource's bytes: a `404`, a `410`, a `503`, a
/// `204`, or a `304` to a player's own conditional request. The engine never stores it
/// as media; a front door passes it on to its player as the origin gave it (the proxy sends
/// the same status, end-to-end fields and body), so that "this file is gone" is never
/// confused with "the cache broke".
///
/// Carried by a ``CacheError`` with code ``CacheError/Code/originAnswered``.
public struct OriginAnswer: Sendable, Hashable {
    /// The most body bytes an answer carries; a longer body is refused as a whole.
    public static let maximumBodySize = 1 << 20

    /// The origin's status code (`404`, `503`, `304`, …).
    public var status: Int
    /// The origin's reason phrase, as sent (at most 100 bytes of it).
    public var reason: String
    /// The origin's end-to-end header fields, in order (hop-by-hop fields and the body's
    /// framing are not among them: the front door frames the body itself).
    public var headers: [ContentMetadata.HeaderField]
    /// The body, at most ``maximumBodySize`` bytes.
    public var body: [UInt8]
    /// Until when a cache may answer the same request with it without asking the origin
    /// (RFC 9111 §4.2: the origin said it is fresh, or its status allows a heuristic
    /// lifetime); `nil` when it may not be reused.
    package var freshUntil: Date?
    /// When the origin generated it (for the `Age` of a reuse), with ``freshUntil``.
    package var generatedAt: Date?

    /// Creates an answer.
    public init(status: Int, reason: String, headers: [ContentMetadata.HeaderField], body: [UInt8]) {
        self.status = status
        self.reason = String(reason.prefix(100))
        self.headers = headers
        self.body = body
    }

    /// Whether the origin says it cannot serve now (`5xx`): a failure like an unreachable
    /// origin, which is retried and may let a stale cached copy stand in.
    public var isServerError: Bool { (500...599).contains(status) }
}
