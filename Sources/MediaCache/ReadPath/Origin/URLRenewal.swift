// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import Synchronization

/// Signed URLs renewed in the middle of a play: when a request's URL states an expiry that has
/// passed (``SignedURL/expiry(of:)``), or the origin refuses it with `401`, `403` or `410`, the
/// refresh hook (``CachingReader/Configuration/freshURL``, `serve --refresh-command`) is asked
/// for a fresh URL and the request goes there, under the same cache entry: the player never
/// sees the refusal. One renewal per signature at a time (requests that expired together wait
/// for it), and what it teaches renews every URL signed alike (``URLRenewals``). A renewal
/// that fails, or whose URL is refused too, rests for ``backOff``: meanwhile the origin's
/// answer goes to the player. Each renewal is logged at warning level with its cause and
/// counted (`mediacache_url_renewals_total`).
final class URLRenewal: OriginFetcher {
    typealias Hook = @Sendable (URL) async throws -> URL
    let base: any OriginFetcher
    let hook: Hook
    let backOff: Duration
    let clock: any WallClock
    let logger: Logger
    private let renewals = Mutex(URLRenewals())
    /// The renewals under way, by the signature they renew.
    private let running = Mutex<[String: Task<URL?, Never>]>([:])

    init(
        base: any OriginFetcher, hook: @escaping Hook, backOff: Duration = .seconds(30), clock: any WallClock,
        logger: Logger
    ) {
        (self.base, self.hook, self.backOff, self.clock, self.logger) = (base, hook, backOff, clock, logger)
    }

    /// The statuses that say a signed URL is no longer good.
    static let refusals: Set<Int> = [401, 403, 410]

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse
    {
        try await renewing(url) { try await base.fetch($0, range: range, ifRange: ifRange, headers: headers) }
    }

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        try await renewing(url) { try await base.contentInfo(for: $0, headers: headers) }
    }

    /// Runs `ask` on the URL the player's `url` stands for now, renewing it first when its
    /// stated expiry has passed, or once after the origin refused it.
    private func renewing<T>(_ url: URL, _ ask: (URL) async throws -> T) async throws -> T {
        var target = renewals.withLock { $0.current(url) }
        var renewed = false
        if let expiry = SignedURL.expiry(of: target), expiry <= clock.now,
            let fresh = await renew(url, expired: target, cause: "its stated expiry has passed")
        {
            (target, renewed) = (fresh, true)
        }
        do {
            return try await ask(target)
        } catch let error as CacheError where Self.isRefusal(error) {
            if renewed {
                // The fresh URL is refused too: the hook's URLs are not good; rest.
                renewals.withLock { $0.rest(target, until: restEnd) }
                throw error
            }
            guard let fresh = await renew(url, expired: target, cause: "the origin refused it (\(error.message))")
            else { throw error }
            do {
                return try await ask(fresh)
            } catch let again as CacheError where Self.isRefusal(again) {
                renewals.withLock { $0.rest(fresh, until: restEnd) }
                throw again
            }
        }
    }

    static func isRefusal(_ error: CacheError) -> Bool {
        error.code == .originAnswered && error.originAnswer.map { refusals.contains($0.status) } == true
    }

    private var restEnd: Date { clock.now.addingTimeInterval(Double(backOff.components.seconds)) }

    /// A fresh URL for the player's `url`, asked for as `expired`, or `nil` when the hook
    /// failed or its signature rests. Requests whose URLs share `expired`'s signature share one
    /// renewal.
    private func renew(_ url: URL, expired: URL, cause: String) async -> URL? {
        let signature = URLRenewals.signature(of: expired)
        let now = clock.now
        let task = running.withLock { running -> Task<URL?, Never>? in
            if let task = running[signature] { return task }
            guard renewals.withLock({ $0.mayRenew(expired, now: now) }) else { return nil }
            let task = Task { await self.askHook(url, expired: expired, cause: cause) }
            running[signature] = task
            return task
        }
        guard let task else { return nil }
        let fresh = await task.value
        running.withLock { running in
            if running[signature] == task { running[signature] = nil }
        }
        // A request that joined a renewal of another URL signed alike goes where it taught
        // (nowhere new when its signature differed after all).
        guard fresh != nil else { return nil }
        let next = renewals.withLock { $0.current(url) }
        return next == expired ? nil : next
    }

    private func askHook(_ url: URL, expired: URL, cause: String) async -> URL? {
        let shown = ["url": Logger.MetadataValue.string(String(url.absoluteString.prefix(200))), "cause": "\(cause)"]
        do {
            let fresh = try await hook(url)
            guard fresh.scheme == "http" || fresh.scheme == "https", fresh.host != nil else {
                throw CacheError(
                    .originNotAllowed, "The refresh hook gave \(fresh.absoluteString.prefix(200)), not an http(s) URL.")
            }
            renewals.withLock { $0.learn(original: url, expired: expired, fresh: fresh) }
            logger.warning("A signed URL was renewed", metadata: shown)
            CacheMetrics.renewedURL(.renewed)
            return fresh
        } catch {
            renewals.withLock { $0.rest(expired, until: restEnd) }
            var metadata = shown
            metadata["error"] = "\((error as? CacheError)?.message ?? "\(error)")"
            logger.warning(
                "A signed URL could not be renewed; the origin's answer goes to the player", metadata: metadata)
            CacheMetrics.renewedURL(.failed)
            return nil
        }
    }

    func checkOrigin(_ url: URL) throws { try base.checkOrigin(url) }
    var securityWarning: String? { base.securityWarning }
    var cookieJar: CookieJar? { base.cookieJar }
    var connectionsPerHost: Int? { base.connectionsPerHost }
}
