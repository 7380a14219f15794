// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
package import MediaCache
import Metrics
import Synchronization

/// How a request was answered, like nginx's `$upstream_cache_status`.
public enum CacheResult: String, Sendable, Codable, CaseIterable {
    /// Every body byte came from the cache.
    case hit
    /// Some from the cache, some from the origin.
    case partial
    /// Every body byte came from the origin (and was stored).
    case miss
    /// Straight from the origin, not stored: `no-store`, a body without a length, an HLS key
    /// (memory only) or blocking reload.
    case passThrough = "pass-through"
    /// An error answer (4xx, 5xx).
    case error
    /// No body bytes (`HEAD`, `416`, an empty file, a rewritten playlist's own answer).
    case none = "-"

    /// The position in `allCases`.
    var index: Int {
        switch self {
        case .hit: 0
        case .partial: 1
        case .miss: 2
        case .passThrough: 3
        case .error: 4
        case .none: 5
        }
    }
}

/// Counts of what the proxy answered since it started (the status page, `mediacache stats`, `/metrics`).
public final class ProxyStatistics: Sendable {
    public struct Snapshot: Sendable, Codable, Equatable {
        /// Requests by ``CacheResult`` raw value.
        public var requests: [String: Int64] = [:]
        /// Body bytes served from the cache and from the origin.
        public var bytesFromCache: Int64 = 0
        public var bytesFromOrigin: Int64 = 0
        /// The most recent requests, newest last.
        public var recent: [RecentRequest] = []

        public init() {}

        /// The share of body bytes served from the cache, 0...1 (0 before any).
        public var byteHitRatio: Double {
            let total = bytesFromCache + bytesFromOrigin
            return total == 0 ? 0 : Double(bytesFromCache) / Double(total)
        }
    }

    /// One request as the status page lists it.
    public struct RecentRequest: Sendable, Codable, Equatable {
        public var at: Date
        public var method: String
        public var url: String
        public var range: String?
        public var status: Int
        public var result: String
        public var bytesFromCache: Int64
        public var bytesFromOrigin: Int64
    }

    static let recentLimit = 50

    /// Counts by result, and the recent requests in a ring (recording one costs no copying).
    private struct State {
        var counts = [Int64](repeating: 0, count: CacheResult.allCases.count)
        var bytesFromCache: Int64 = 0
        var bytesFromOrigin: Int64 = 0
        var recent: [RecentRequest] = []
        /// Where the next request goes once `recent` is full.
        var next = 0
        /// Bytes served not yet counted in the store's usage history, and the requests they
        /// came with: counted every ``lifetimeBatch`` requests, and before anyone reads it.
        var unreported: (cache: Int64, origin: Int64, requests: Int) = (0, 0, 0)
    }

    /// How many requests' bytes are counted in the store's history at once (a hot range's
    /// answer then takes no second lock).
    static let lifetimeBatch = 32

    private let state = Mutex(State())
    /// The store whose usage history counts the bytes served too (over its life).
    private let lifetime = Mutex<CacheStore?>(nil)

    public init() {}

    /// Counts the bytes served in `store`'s usage history as well (what it saved over its life).
    package func countsLifetime(in store: CacheStore) {
        lifetime.withLock { $0 = store }
    }

    public var snapshot: Snapshot {
        state.withLock { state in
            var snapshot = Snapshot()
            for (index, result) in CacheResult.allCases.enumerated() {
                snapshot.requests[result.rawValue] = state.counts[index]
            }
            snapshot.bytesFromCache = state.bytesFromCache
            snapshot.bytesFromOrigin = state.bytesFromOrigin
            snapshot.recent = Array(state.recent[state.next...] + state.recent[..<state.next])
            return snapshot
        }
    }

    /// Counts the bytes served since the last count in the store's usage history: before the
    /// history is read (the status page, `stats`).
    package func reportLifetime() {
        let unreported = state.withLock { state in
            defer { state.unreported = (0, 0, 0) }
            return state.unreported
        }
        lifetime.withLock { $0 }?.noteServed(fromCache: unreported.cache, fromOrigin: unreported.origin)
    }

    func record(_ request: RecentRequest, result: CacheResult) {
        let batch = state.withLock { state -> (cache: Int64, origin: Int64)? in
            state.counts[result.index] += 1
            state.bytesFromCache += request.bytesFromCache
            state.bytesFromOrigin += request.bytesFromOrigin
            if state.recent.count < Self.recentLimit {
                state.recent.append(request)
            } else {
                state.recent[state.next] = request
                state.next = (state.next + 1) % Self.recentLimit
            }
            state.unreported.cache += request.bytesFromCache
            state.unreported.origin += request.bytesFromOrigin
            state.unreported.requests += 1
            guard state.unreported.requests >= Self.lifetimeBatch else { return nil }
            defer { state.unreported = (0, 0, 0) }
            return (state.unreported.cache, state.unreported.origin)
        }
        if let batch { lifetime.withLock { $0 }?.noteServed(fromCache: batch.cache, fromOrigin: batch.origin) }
    }
}

/// The proxy's metrics, through swift-metrics (see the engine's for origin, store and
/// revalidation figures).
enum ProxyMetrics {
    /// By ``CacheResult/index`` (every request counts in one: no hashing).
    private static let requests = CacheResult.allCases.map {
        Counter(label: "mediacache_requests_total", dimensions: [("result", $0 == .none ? "none" : $0.rawValue)])
    }
    private static let bytesFromCache = Counter(
        label: "mediacache_served_bytes_total", dimensions: [("source", "cache")])
    private static let bytesFromOrigin = Counter(
        label: "mediacache_served_bytes_total", dimensions: [("source", "origin")])
    private static let duration = Metrics.Timer(label: "mediacache_request_duration_seconds")
    private static let refusals = Dictionary(
        uniqueKeysWithValues: ProxyRequestError.Refusal.allCases.map {
            ($0, Counter(label: "mediacache_refused_requests_total", dimensions: [("cause", $0.rawValue)]))
        })

    private static let listenerClosures = Counter(label: "mediacache_listener_closed_total")
    /// Connections accepted by each event loop (``ProxyConfiguration/eventLoops``), made as they come.
    private static let acceptedByLoop = Mutex<[Int: Counter]>([:])

    /// Counts a connection accepted by the `loop`-th event loop.
    static func accepted(onLoop loop: Int) {
        let counter = acceptedByLoop.withLock { counters in
            if let counter = counters[loop] { return counter }
            let counter = Counter(label: "mediacache_connections_accepted_total", dimensions: [("loop", "\(loop)")])
            counters[loop] = counter
            return counter
        }
        counter.increment()
    }

    /// Makes every metric now (an export then lists each, at 0 until something happens).
    static func register() {
        _ = (requests, bytesFromCache, bytesFromOrigin, duration, refusals, listenerClosures)
    }

    /// The listening socket closed under the proxy (which then listens again).
    static func listenerClosed() {
        listenerClosures.increment()
    }

    static func refused(_ cause: ProxyRequestError.Refusal) {
        refusals[cause]?.increment()
    }

    static func record(_ result: CacheResult, cache: Int64, origin: Int64, duration: Duration) {
        requests[result.index].increment()
        if cache > 0 { bytesFromCache.increment(by: Int(cache)) }
        if origin > 0 { bytesFromOrigin.increment(by: Int(origin)) }
        let (seconds, attoseconds) = duration.components
        self.duration.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
