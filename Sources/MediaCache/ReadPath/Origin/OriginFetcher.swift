// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
public import NIOCore

/// Header fields of a player's request that the origin should see (credentials, cookies,
/// referer, user agent), in order. The core passes them through untouched; a front door
/// decides which fields of its client's request they are.
public typealias RequestHeaders = [(name: String, value: String)]

/// Fetches a resource's content information and bytes from its origin.
///
/// `MediaCacheHTTP` provides two, on AsyncHTTPClient and on URLSession; the read path depends only on this
/// protocol. Implementations throw ``CacheError`` with an origin code
/// (`.originUnavailable`, `.originTimedOut`, `.originRejected`, `.rangeNotSatisfiable`), or
/// `.originAnswered` with the origin's own answer when it is not the resource's bytes.
public protocol OriginFetcher: Sendable {
    /// The resource's length, type, range support and validators, without its body.
    /// - Parameter url: the resource.
    /// - Parameter headers: the player's request headers to send along.
    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata

    /// Starts a `GET` and returns once the response head has arrived.
    /// - Parameters:
    ///   - url: the resource.
    ///   - range: the bytes wanted, or `nil` for the whole body without a `Range` header.
    ///   - ifRange: a validator for `If-Range`: if the resource changed, the origin answers
    ///     with the whole new body instead of the range.
    ///   - headers: the player's request headers to send along.
    /// - Returns: the response; its body must start at ``OriginResponse/bodyOffset`` and
    ///   never past `range.lowerBound`. Dropping the body's iterator cancels the request.
    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse

    /// Whether `url` may be fetched at all (scheme, host, an allow-list). A front door
    /// calls it before it starts a read, so a refused URL is told apart from a failing origin.
    /// - Throws: ``CacheError`` with ``CacheError/Code/originNotAllowed`` and the reason.
    func checkOrigin(_ url: URL) throws

    /// A warning every request's log line must carry while the fetcher runs in a mode that
    /// weakens what the cache guarantees (certificates not verified), or `nil`.
    var securityWarning: String? { get }

    /// The cookies the fetcher keeps for its origins and sends with its requests, or `nil`
    /// when it keeps none. Download jobs keep the cookies their stream needs in the jar's
    /// stead, so a pinned stream behind signed cookies resumes after a restart.
    var cookieJar: CookieJar? { get }

    /// How many requests to one host the fetcher's client can have under way without making
    /// one wait for a connection; `nil`: as many as the reader allows
    /// (``CachingReader/Configuration/originConnectionsPerHost``).
    var connectionsPerHost: Int? { get }
}

extension OriginFetcher {
    /// Accepts every URL.
    public func checkOrigin(_ url: URL) throws {}

    /// None.
    public var securityWarning: String? { nil }

    /// None.
    public var cookieJar: CookieJar? { nil }

    /// No limit of the fetcher's own.
    public var connectionsPerHost: Int? { nil }
}

extension OriginResponse {
    /// Checks what the read path relies on, whatever fetcher produced the answer: the body
    /// starts within the bounds and no later than `offset` asked for, the length is within
    /// ``ByteRange/maximumOffset``, and the answer does not contradict `known` (the same
    /// validator with another length is a lie, not a new version).
    /// - Throws: ``CacheError/Code/originRejected`` with the reason, which is logged to
    ///   `logger` at warning level.
    func check(askedFrom offset: Int64, known: ContentMetadata?, url: URL, logger: Logger) throws {
        do {
            try check(askedFrom: offset, known: known, url: url)
        } catch let error as CacheError {
            logger.warning(
                "Rejected an origin answer",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw error
        }
    }

    private func check(askedFrom offset: Int64, known: ContentMetadata?, url: URL) throws {
        func reject(_ reason: String) -> CacheError {
            CacheError(
                .originRejected,
                "The origin of \(url.absoluteString.prefix(200)) \(reason); nothing of the answer is used.")
        }
        guard bodyOffset >= 0, bodyOffset <= offset else {
            throw reject("sent bytes from \(bodyOffset) when asked for \(offset)")
        }
        if let length = metadata.length, !(0..<ByteRange.maximumOffset).contains(length) {
            throw reject("gave a length of \(length) bytes")
        }
        if let known, let reason = known.contradiction(with: metadata) { throw reject(reason) }
    }
}

/// An origin's answer to ``OriginFetcher/fetch(_:range:ifRange:headers:)``.
public struct OriginResponse: Sendable {
    /// What the response says of the resource (total length, type, validators).
    public var metadata: ContentMetadata
    /// The offset in the resource of the body's first byte: the range start for a 206,
    /// 0 for a 200.
    public var bodyOffset: Int64
    /// For a `206`, the offset just past the last byte its `Content-Range` names. Of a
    /// resource whose length is unknown (`bytes a-b/*`: one that grows while it is read,
    /// such as a low-latency HLS segment), the body may end sooner; it never goes further.
    public var bodyEnd: Int64?
    /// The body, in chunks as they arrive.
    public var body: any AsyncSequence<ByteBuffer, any Error> & Sendable
    /// Whether the origin answered a conditional request with "not modified": the cached
    /// version is current, ``metadata`` holds its refreshed freshness, the body is empty.
    public var isNotModified = false
    /// With ``isNotModified``, the origin's `304` as it is: the answer a player gets when the
    /// condition was its own (the cache had nothing stored to validate).
    public var answer: OriginAnswer?

    /// Creates a response.
    public init(metadata: ContentMetadata, bodyOffset: Int64, body: any AsyncSequence<ByteBuffer, any Error> & Sendable)
    {
        self.metadata = metadata
        self.bodyOffset = bodyOffset
        self.body = body
    }
}

/// The fetcher of a read path that is offline: it never contacts the origin, and says so.
struct OfflineFetcher: OriginFetcher {
    let base: any OriginFetcher

    static func error(_ url: URL, _ what: String) -> CacheError {
        CacheError(.offline, "Offline: \(url.absoluteString.prefix(200)) is not served from the origin, and \(what).")
    }

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        throw Self.error(url, "the cache does not know it")
    }

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse
    {
        let bytes = range.map {
            "bytes \($0.lowerBound)-" + ($0.upperBound >= ByteRange.maximumOffset ? "" : "\($0.upperBound - 1)")
        }
        throw Self.error(url, "the cache does not hold " + (bytes ?? "it"))
    }

    func checkOrigin(_ url: URL) throws {
        try base.checkOrigin(url)
    }

    var securityWarning: String? { base.securityWarning }

    var cookieJar: CookieJar? { base.cookieJar }
}
