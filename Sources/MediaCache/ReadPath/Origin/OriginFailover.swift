// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCacheHTTPFields
import NIOCore
import Synchronization

/// Origins that serve the same bytes as others, for when one fails (multi-CDN): a request
/// whose origin cannot be reached, is too slow or answers `5xx` is asked of the next alternate
/// at once, from the same byte, under the same cache entry; a body that breaks or stalls marks
/// its origin failing, so its resume goes to the next. The alternates are configured ones
/// (hosts) and those the streams' manifests name (``LearnedAlternates``, ``learn(_:)``). The transfer checks the answer
/// against the stored version (its length and, where both have one, its validator), so
/// alternates that turn out to differ are never spliced. A host that failed is tried last for
/// ``backOff``; each failover is logged at warning level and counted
/// (`mediacache_origin_failovers_total`).
final class OriginFailover: OriginFetcher {
    let base: any OriginFetcher
    /// For each origin (`host` or `host:port`, lower-cased), the ones that serve the same bytes.
    let alternates: [HostAndPort: [HostAndPort]]
    let backOff: Duration
    let clock: any WallClock
    let logger: Logger
    private let failing = Mutex<[HostAndPort: Date]>([:])
    private let learned = Mutex(LearnedAlternates())

    init(
        base: any OriginFetcher, alternates: [HostAndPort: [HostAndPort]], backOff: Duration = .seconds(30),
        clock: any WallClock, logger: Logger
    ) {
        (self.base, self.alternates, self.backOff, self.clock, self.logger) = (base, alternates, backOff, clock, logger)
    }

    /// Reads `serve --origin-fallback`'s `HOST[:PORT]=HOST2[:PORT]` pairs (repeatable; a host
    /// may have several alternates, tried in order). `nil` for one that is not such a pair.
    static func alternates(_ pairs: [String]) -> [HostAndPort: [HostAndPort]]? {
        var alternates: [HostAndPort: [HostAndPort]] = [:]
        for pair in pairs {
            let parts = pair.split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2, let from = HostAndPort(parsing: String(parts[0])),
                let to = HostAndPort(parsing: String(parts[1])), from != to
            else { return nil }
            alternates[from, default: []].append(to)
        }
        return alternates
    }

    /// Learns that `urls` serve the same bytes (see ``LearnedAlternates/learn(_:)``).
    func learn(_ urls: [URL]) {
        learned.withLock { $0.learn(urls) }
    }

    /// `url` and its alternates (the configured hosts', then the manifests'), those whose
    /// origin is not failing first (each in its order).
    func candidates(for url: URL) -> [URL] {
        var all = [url]
        if let origin = HostAndPort(authorityOf: url), let others = alternates[origin] {
            all += others.compactMap { Self.url(url, on: $0) }
        }
        for alternate in learned.withLock({ $0.groups.isEmpty ? [] : $0.alternates(of: url) })
        where !all.contains(alternate) {
            all.append(alternate)
        }
        guard all.count > 1 else { return all }
        let now = clock.now
        let down = failing.withLock { failing in
            all.map { HostAndPort(authorityOf: $0).flatMap { failing[$0] }.map { now < $0 } ?? false }
        }
        return all.indices.filter { !down[$0] }.map { all[$0] } + all.indices.filter { down[$0] }.map { all[$0] }
    }

    /// `url` with its host and port those of `origin`.
    static func url(_ url: URL, on origin: HostAndPort) -> URL? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        components.host = origin.name
        components.port = origin.port
        return components.url
    }

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse
    {
        try await failingOver(url) { candidate, hasAlternates in
            var response = try await base.fetch(candidate, range: range, ifRange: ifRange, headers: headers)
            if hasAlternates {
                response.body = FailingBody(base: response.body) { [self] error in
                    markFailing(candidate, reason: "its body broke: \(error.message)")
                }
            }
            return response
        }
    }

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        try await failingOver(url) { candidate, _ in try await base.contentInfo(for: candidate, headers: headers) }
    }

    /// Runs `ask` on `url`'s candidates in turn until one answers other than with an origin
    /// failure; the last one's failure is thrown.
    private func failingOver<T>(_ url: URL, _ ask: (URL, _ hasAlternates: Bool) async throws -> T) async throws -> T {
        let candidates = candidates(for: url)
        for (index, candidate) in candidates.enumerated() {
            do {
                return try await ask(candidate, candidates.count > 1)
            } catch let error as CacheError where error.isOriginFailure && index < candidates.count - 1 {
                guard HostAndPort(authorityOf: candidate) != nil else { throw error }
                markFailing(candidate, reason: nil)
                logger.warning(
                    "An origin failed; asking an alternate that serves the same bytes",
                    metadata: [
                        "url": "\(candidate.absoluteString.prefix(200))",
                        "alternate": "\(candidates[index + 1].absoluteString.prefix(200))",
                        "reason": "\(error.message)",
                    ])
                CacheMetrics.failedOver()
            }
        }
        throw CacheError(.originUnavailable, "No origin of \(url.absoluteString) answered.")
    }

    /// Marks the origin of `url` failing for ``backOff`` (its alternates are asked first), saying
    /// why when it is news (`reason`).
    private func markFailing(_ url: URL, reason: String?) {
        guard let origin = HostAndPort(authorityOf: url) else { return }
        failing.withLock { $0[origin] = clock.now.addingTimeInterval(Double(backOff.components.seconds)) }
        if let reason {
            logger.warning(
                "An origin with alternates failed; its resume goes to an alternate",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
            CacheMetrics.failedOver()
        }
    }

    func checkOrigin(_ url: URL) throws { try base.checkOrigin(url) }
    var securityWarning: String? { base.securityWarning }
    var cookieJar: CookieJar? { base.cookieJar }
    var connectionsPerHost: Int? { base.connectionsPerHost }
}

/// A body that reports an origin failure (the connection broke, or stalled past the read
/// timeout) before passing it on.
struct FailingBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: any AsyncSequence<ByteBuffer, any Error> & Sendable
    let failed: @Sendable (CacheError) -> Void

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), failed: failed)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: any AsyncIteratorProtocol<ByteBuffer, any Error>
        let failed: @Sendable (CacheError) -> Void

        mutating func next() async throws -> ByteBuffer? {
            do {
                return try await base.next()
            } catch let error as CacheError where error.isOriginFailure {
                failed(error)
                throw error
            }
        }
    }
}
