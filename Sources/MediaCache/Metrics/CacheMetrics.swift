// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Metrics
import NIOCore
import Synchronization

/// The engine's metrics, through swift-metrics: whatever backend the app bootstraps gets them
/// (`mediacache serve` exports them at `/metrics` with swift-prometheus). Names follow
/// Prometheus: `mediacache_…`, base units, `_total` for counters; no URL is ever a label.
/// Each is made on first use, so a backend bootstrapped before the first request sees all.
package enum CacheMetrics {
    static let originRequests = Counter(label: "mediacache_origin_requests_total")
    /// Reads asked in pieces, and each piece after a read's first (`serve --origin-piece`).
    static let originPieces = Counter(label: "mediacache_origin_pieces_total")
    static let originBytes = Counter(label: "mediacache_origin_bytes_total")
    static let evictions = Counter(label: "mediacache_evictions_total")
    static let evictedBytes = Counter(label: "mediacache_evicted_bytes_total")
    static let downloadsInFlight = Gauge(label: "mediacache_downloads_in_flight")
    static let cacheSize = Gauge(label: "mediacache_cache_size_bytes")
    static let cacheLimit = Gauge(label: "mediacache_cache_limit_bytes")
    static let cacheEntries = Gauge(label: "mediacache_cache_entries")
    static let rejectedBlocks = Counter(label: "mediacache_rejected_blocks_total")
    static let indexRebuilds = Counter(label: "mediacache_index_rebuilds_total")
    static let refusedCookies = Counter(label: "mediacache_refused_cookies_total")
    static let refusedLANRedirects = Counter(label: "mediacache_refused_lan_redirects_total")

    /// A redirect of a LAN request was refused (``LANReach``).
    package static func refusedLANRedirect() { refusedLANRedirects.increment() }
    static let segmentsReadAhead = Counter(label: "mediacache_segments_read_ahead_total")
    static let yields = Counter(label: "mediacache_yields_to_players_total")
    static let connectionWaits = Counter(label: "mediacache_origin_connection_waits_total")
    static let preloadedBytes = Counter(label: "mediacache_preloaded_bytes_total")
    static let preloadHits = Counter(label: "mediacache_preload_hits_total")
    static let recordingReloadFailures = Counter(label: "mediacache_recording_reload_failures_total")
    static let recordingGaps = Counter(label: "mediacache_recording_gaps_total")

    /// A recording's reload of its playlist or manifest failed (it tries again).
    static func recordingReloadFailed() { recordingReloadFailures.increment() }

    /// A recording could not fetch a segment: it is a gap.
    static func recordingGapMarked() { recordingGaps.increment() }

    /// Why an origin request was made again.
    package enum Retry: String, CaseIterable, Sendable {
        /// A download resumed after its connection broke (`Range` from where it stopped).
        case resume
        /// A request whose pooled connection closed before it was answered, sent again.
        case connectionClosed = "connection-closed"
        /// The URL a play's redirects led to refused (a signed URL that expired): the
        /// player's URL asked again.
        case playURLRefused = "play-url-refused"
    }

    private static let retries = counters(Retry.self, label: "mediacache_origin_retries_total", dimension: "cause")

    /// Counts an origin request made again, by its cause.
    package static func retried(_ cause: Retry) {
        retries[cause]?.increment()
    }

    /// What became of stored blocks that failed their check.
    package enum DamagedBlock: String, CaseIterable, Sendable {
        /// Fetched again from the origin and stored right.
        case refetched
        /// Needed while the origin could not give them again: the read failed at them.
        case unrecoverable
    }

    private static let damagedBlockCounters = counters(
        DamagedBlock.self, label: "mediacache_damaged_blocks_total", dimension: "outcome")

    /// Counts `count` damaged blocks by what became of them.
    package static func damagedBlocks(_ outcome: DamagedBlock, count: Int = 1) {
        damagedBlockCounters[outcome]?.increment(by: count)
    }

    /// What checking a whole entry against its origin's digests found.
    package enum OriginDigestOutcome: String, CaseIterable, Sendable {
        /// Every digest the origin sent matched the stored bytes.
        case matched
        /// One did not: the stored representation was dropped.
        case mismatched
    }

    private static let originDigests = counters(
        OriginDigestOutcome.self, label: "mediacache_origin_digests_total", dimension: "outcome")

    /// Counts one check of a whole entry against its origin's digests.
    package static func originDigest(_ outcome: OriginDigestOutcome) {
        originDigests[outcome]?.increment()
    }

    /// The index was found damaged or missing at open and rebuilt from the entry records.
    static func indexRebuilt() {
        indexRebuilds.increment()
    }

    /// How a revalidation ended.
    enum Revalidation: String, CaseIterable {
        /// `304`: the cached version is current.
        case notModified = "not_modified"
        /// Another version: the entry is replaced.
        case changed
        /// The origin failed and the stale copy was served.
        case servedStale = "served_stale"
        /// The origin failed and nothing could be served.
        case failed
    }

    private static let revalidations = counters(Revalidation.self, label: "mediacache_revalidations_total")

    private static let downloadWaits = Dictionary(
        uniqueKeysWithValues: DownloadJob.Wait.allCases.map {
            ($0, Gauge(label: "mediacache_pinned_downloads_waiting", dimensions: [("reason", $0.rawValue)]))
        })
    static let diskFree = Gauge(label: "mediacache_disk_free_bytes")

    private static let evictedByReason = counters(
        EvictionPolicy.Reason.self, label: "mediacache_evicted_reason_bytes_total", dimension: "reason")

    /// Eviction let `bytes` go for `reason` (a trim: part of an entry; `entries`: whole ones).
    static func evicted(_ reason: EvictionPolicy.Reason, bytes: Int64, entries: Int) {
        evictedByReason[reason]?.increment(by: Int(bytes))
        if entries > 0 { evictions.increment(by: entries) }
    }

    /// How many pinned downloads wait now, by reason.
    static func recordWaiting(_ jobs: some Sequence<DownloadJob>) {
        var counts: [DownloadJob.Wait: Int] = [:]
        for job in jobs { if let reason = job.waiting { counts[reason, default: 0] += 1 } }
        for (reason, gauge) in downloadWaits { gauge.record(counts[reason] ?? 0) }
    }

    /// Makes every metric now (an export then lists each, at 0 until something happens).
    static func register() {
        _ = (
            originRequests, originBytes, evictions, evictedBytes, downloadsInFlight, cacheSize, cacheLimit,
            cacheEntries, rejectedBlocks, damagedBlockCounters, originDigests, revalidations,
            indexRebuilds, refusedCookies, segmentsReadAhead, retries, yields, connectionWaits, preloadedBytes,
            preloadHits, preloads, downloadWaits, fills, fillStops, changesMidRead, failovers, renewals,
            diskFree, backgroundTransfers, evictedByReason, refusedLANRedirects
        )
    }

    static func revalidated(_ outcome: Revalidation) {
        revalidations[outcome]?.increment()
    }

    /// One of the cache's own transfers stopped taking bytes so a waiting player goes first.
    static func yieldedToPlayer() {
        yields.increment()
    }

    /// How a preload item ended.
    enum Preload: String, CaseIterable {
        case done
        case failed
        /// Stopped for the byte budget.
        case overBudget = "over_budget"
        /// Dropped from the queue after it started.
        case stopped
    }

    private static let preloads = counters(Preload.self, label: "mediacache_preloads_total")

    static func preloaded(_ outcome: Preload) {
        preloads[outcome]?.increment()
    }

    private static let changesMidRead = Counter(label: "mediacache_changed_mid_read_total")
    private static let failovers = Counter(label: "mediacache_origin_failovers_total")

    /// An origin failed and an alternate that serves the same bytes was asked (``OriginFailover``).
    static func failedOver() {
        failovers.increment()
    }

    /// How the renewal of a signed URL went (``URLRenewal``).
    enum Renewal: String, CaseIterable {
        /// The refresh hook gave a fresh URL.
        case renewed
        /// The hook failed or gave no usable URL: the origin's answer went to the player.
        case failed
    }

    private static let renewals = counters(Renewal.self, label: "mediacache_url_renewals_total")

    /// Counts a renewal of a signed URL by its outcome.
    static func renewedURL(_ outcome: Renewal) {
        renewals[outcome]?.increment()
    }

    /// How a pinned download's transfer on a system session ended (``BackgroundTransfers``).
    enum BackgroundTransfer: String, CaseIterable {
        /// Its file was checked and stored.
        case imported
        /// Its file was not what was asked for (a wrong range, another version's length).
        case rejected
        /// It ended without a file.
        case failed
    }

    private static let backgroundTransfers = counters(
        BackgroundTransfer.self, label: "mediacache_background_transfers_total")

    static func backgroundTransfer(_ outcome: BackgroundTransfer) {
        backgroundTransfers[outcome]?.increment()
    }

    /// The origin answered another version while a read needed the rest of the stored one.
    static func changedMidRead() {
        changesMidRead.increment()
    }

    /// How a fill on play went (``FillPolicy``).
    enum Fill: String, CaseIterable {
        case started
        /// The file is whole.
        case completed
        /// Ended before: the origin failed, the store refused, the network turned metered, a
        /// shutdown.
        case stopped
    }

    private static let fills = counters(Fill.self, label: "mediacache_fills_total")

    static func fill(_ outcome: Fill) {
        fills[outcome]?.increment()
    }

    private static let fillStops = counters(FillStop.self, label: "mediacache_fill_stops_total", dimension: "reason")

    /// A fill ended before its file was whole, for `reason`.
    static func fillStopped(_ reason: FillStop) {
        fillStops[reason]?.increment()
    }

    /// A counter `label` for each outcome of `Outcome`, its dimension `dimension`.
    static func counters<Outcome: CaseIterable & RawRepresentable & Hashable>(
        _: Outcome.Type, label: String, dimension: String = "outcome"
    ) -> [Outcome: Counter] where Outcome.RawValue == String {
        Dictionary(
            uniqueKeysWithValues: Outcome.allCases.map {
                ($0, Counter(label: label, dimensions: [(dimension, $0.rawValue)]))
            })
    }
}
