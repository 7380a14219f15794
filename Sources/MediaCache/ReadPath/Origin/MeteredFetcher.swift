// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import Synchronization

/// The read path's way to its origins: counts the requests and body bytes of the fetcher it
/// wraps, notes which origins failed when last asked, and sends a request only when its host's
/// ``ConnectionBudget`` gives it a connection for the ``Requester`` it is for, held until its
/// body is read or dropped. Every request says who it is for: there is no default.
struct MeteredFetcher: Sendable {
    let base: any OriginFetcher
    /// Added to the requests of the cache's own work.
    var ownRequestFields: RequestHeaders = []
    let budget: ConnectionBudget
    /// Where a request for a URL is sent first (``OriginFailover/candidates(for:)``): the
    /// connection is taken of that host's budget (``OriginStack``).
    var route: @Sendable (URL) -> URL = { $0 }
    let reachability = OriginReachability()

    /// The content information of `url` (a `HEAD`), asked for `requester` (see
    /// ``fetch(_:range:ifRange:headers:as:promotion:)`` for `promotion`).
    func contentInfo(
        for url: URL, headers: RequestHeaders, as requester: Requester, promotion: ConnectionBudget.Promotion? = nil
    ) async throws -> ContentMetadata {
        let hold = try await budget.acquire(for: route(url), isOwn: !requester.isPlayer, promotion: promotion)
        defer { hold.release() }
        CacheMetrics.originRequests.increment()
        return try await reachability.noting(url) {
            try await base.contentInfo(for: url, headers: marked(headers, requester))
        }
    }

    /// A `GET` of `range` of `url` for `requester`; a request of the cache's own that a player
    /// comes to need is made a player's through `promotion` (``ConnectionBudget/Promotion``).
    func fetch(
        _ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders, as requester: Requester,
        promotion: ConnectionBudget.Promotion? = nil
    ) async throws -> OriginResponse {
        let hold = try await budget.acquire(for: route(url), isOwn: !requester.isPlayer, promotion: promotion)
        CacheMetrics.originRequests.increment()
        // The task-local holds the first connection weakly: a task started inside the request
        // inherits it, and must not keep the connection from going when the body is dropped.
        let further = FurtherRequests(releaseFirst: { [weak hold] in hold?.release() }) { [budget, route] url in
            let hold = try await budget.acquire(for: route(url), isOwn: !requester.isPlayer, promotion: promotion)
            CacheMetrics.originRequests.increment()
            return hold
        }
        do {
            var response = try await Self.$further.withValue(further) {
                try await reachability.noting(url) {
                    try await base.fetch(url, range: range, ifRange: ifRange, headers: marked(headers, requester))
                }
            }
            response.body = CountedBody(base: response.body, hold: hold)
            return response
        } catch {
            hold.release()
            throw error
        }
    }

    /// How a layer below makes one answer of several requests (``PiecedFetcher``) and keeps
    /// the rule that one connection of the budget is one request: the first request's
    /// connection, to let go when that request's body ends, and the way to take a connection
    /// for each further request, for the same requester. Set while ``fetch`` asks its base.
    @TaskLocal static var further: FurtherRequests?

    struct FurtherRequests: Sendable {
        /// Lets the first request's connection go (a second time is harmless).
        let releaseFirst: @Sendable () -> Void
        /// A connection for a further request to `url`, waited for as the first was.
        let acquire: @Sendable (URL) async throws -> ConnectionBudget.Hold
    }

    /// `headers` with ``ownRequestFields`` when the request is the cache's own.
    private func marked(_ headers: RequestHeaders, _ requester: Requester) -> RequestHeaders {
        ownRequestFields.isEmpty || requester.isPlayer ? headers : headers + ownRequestFields
    }

    /// See ``OriginFetcher/checkOrigin(_:)``.
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
        // Asked before every origin request, when nearly always no origin is failing: the
        // origin's name is worked out only when one is.
        failing.withLock { !$0.isEmpty && $0.contains(Self.origin(of: url)) }
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
            if error.code == .originAnswered || error.code == .originRejected {
                failing.withLock { _ = $0.remove(Self.origin(of: url)) }
            }
            throw error
        }
    }

    static func origin(of url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? ""):\(url.port ?? -1)"
    }
}

/// A body that adds each chunk's size to ``CacheMetrics/originBytes``, and lets its
/// request's connection go (``ConnectionBudget/Hold``) when it ends, fails, or is dropped.
struct CountedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: any AsyncSequence<ByteBuffer, any Error> & Sendable
    let hold: ConnectionBudget.Hold
    /// Whether its bytes are counted (a part of a body counted as a whole is not).
    var countsBytes = true

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), hold: hold, countsBytes: countsBytes)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: any AsyncIteratorProtocol<ByteBuffer, any Error>
        let hold: ConnectionBudget.Hold
        let countsBytes: Bool

        mutating func next() async throws -> ByteBuffer? {
            do {
                guard let chunk = try await base.next() else {
                    hold.release()
                    return nil
                }
                if countsBytes { CacheMetrics.originBytes.increment(by: chunk.readableBytes) }
                return chunk
            } catch {
                hold.release()
                throw error
            }
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
