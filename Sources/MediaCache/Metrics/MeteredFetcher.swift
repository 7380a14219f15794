// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import Synchronization

/// An origin fetcher that counts the requests and body bytes of the one it wraps, and
/// notes which origins failed when last asked.
struct MeteredFetcher: OriginFetcher {
    let base: any OriginFetcher
    /// Added to the requests of the cache's own work (``OriginPriority/isCachesOwn``).
    var ownRequestFields: RequestHeaders = []
    let reachability = OriginReachability()

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        CacheMetrics.originRequests.increment()
        return try await reachability.noting(url) { try await base.contentInfo(for: url, headers: marked(headers)) }
    }

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse {
        CacheMetrics.originRequests.increment()
        var response = try await reachability.noting(url) { try await base.fetch(url, range: range, ifRange: ifRange, headers: marked(headers)) }
        response.body = CountedBody(base: response.body)
        return response
    }

    /// `headers` with ``ownRequestFields`` when the request is the cache's own.
    private func marked(_ headers: RequestHeaders) -> RequestHeaders {
        ownRequestFields.isEmpty || !OriginPriority.isCachesOwn ? headers : headers + ownRequestFields
    }

    func checkOrigin(_ url: URL) throws {
        try base.checkOrigin(url)
    }

    var securityWarning: String? { base.securityWarning }

    var cookieJar: CookieJar? { base.cookieJar }
}

/// The origins (scheme, host and port) whose last answer was a failure: unreachable, too
/// slow, or a `5xx` (``CacheError/isOriginFailure``); any other answer clears it. At most
/// 256 are remembered (all forgotten when full: a forgotten one is asked again).
final class OriginReachability: Sendable {
    private let failing = Mutex<Set<String>>([])

    func isFailing(_ url: URL) -> Bool {
        failing.withLock { $0.contains(Self.origin(of: url)) }
    }

    /// `body`'s result, noting whether the origin of `url` answered or failed.
    func noting<T>(_ url: URL, _ body: () async throws -> T) async throws -> T {
        do {
            let result = try await body()
            if failing.withLock({ !$0.isEmpty }) { failing.withLock { _ = $0.remove(Self.origin(of: url)) } }
            return result
        } catch let error as CacheError where error.isOriginFailure {
            failing.withLock { set in
                if set.count >= 256 { set.removeAll() }
                set.insert(Self.origin(of: url))
            }
            throw error
        } catch let error as CacheError where error.code != .offline {
            // The origin answered (a 404, a 304 to the player's condition, a refused answer).
            if error.code == .originAnswered || error.code == .originRejected { failing.withLock { _ = $0.remove(Self.origin(of: url)) } }
            throw error
        }
    }

    static func origin(of url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? ""):\(url.port ?? -1)"
    }
}

/// A body that adds each chunk's size to ``CacheMetrics/originBytes``.
struct CountedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: any AsyncSequence<ByteBuffer, any Error> & Sendable

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator())
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: any AsyncIteratorProtocol<ByteBuffer, any Error>

        mutating func next() async throws -> ByteBuffer? {
            let chunk = try await base.next()
            if let chunk { CacheMetrics.originBytes.increment(by: chunk.readableBytes) }
            return chunk
        }
    }
}

/// One running origin download: the bytes `start..<end` of `url`, fetched up to `position`.
package struct DownloadSummary: Sendable, Codable, Equatable {
    public var url: String
    public var start: Int64
    public var end: Int64
    public var position: Int64
}
