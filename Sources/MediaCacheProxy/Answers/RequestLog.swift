// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache

/// The one log line per request: method, range, status, bytes from cache and origin, time
/// to first byte.
struct RequestLog: Sendable {
    /// What is known when the request comes and never changes, held once: a log is handed
    /// along with its answer by value, and copying each of these every time cost a few
    /// percent of a cached range's answer.
    private final class Request: Sendable {
        let method: String
        let range: String?
        let started: ContinuousClock.Instant
        let logger: Logger
        let warning: String?
        let statistics: ProxyStatistics?

        init(
            method: String, range: String?, started: ContinuousClock.Instant, logger: Logger, warning: String?,
            statistics: ProxyStatistics?
        ) {
            (self.method, self.range, self.started, self.logger, self.warning, self.statistics) = (
                method, range, started, logger, warning, statistics
            )
        }
    }

    private let request: Request
    var method: String { request.method }
    var range: String? { request.range }
    var started: ContinuousClock.Instant { request.started }
    var logger: Logger { request.logger }
    /// The fetcher's security warning, carried by every line (``OriginFetcher/securityWarning``).
    var warning: String? { request.warning }
    /// Where the request is counted.
    var statistics: ProxyStatistics? { request.statistics }
    var url = "-"
    /// Answered straight from the origin without storing (see ``CacheResult/passThrough``).
    var passesThrough = false
    /// The spans stored when the request came, and where the body starts: when set, the
    /// body's bytes within those spans count as from the cache and the others as from the origin.
    var storedAtArrival: StoredAtArrival?
    /// (A type of its own: an optional tuple is copied and destroyed through the runtime's
    /// generic value witnesses, and a log is copied along with every answer.)
    struct StoredAtArrival {
        var spans: SpanSet
        var start: Int64
    }
    var status = 0
    var firstByte: ContinuousClock.Instant?

    init(
        method: String, range: String?, started: ContinuousClock.Instant, logger: Logger, warning: String?,
        statistics: ProxyStatistics?
    ) {
        request = Request(
            method: method, range: range, started: started, logger: logger, warning: warning, statistics: statistics)
    }

    /// Logs an answer made without reading (an error, a `HEAD`, a `416`), with the error's
    /// reason if it is one.
    func finish(_ response: ProxyResponse, error: (any Error)? = nil) -> ProxyResponse {
        var line = self
        line.status = Int(response.status.code)
        line.firstByte = ContinuousClock.now
        line.end(ReadStatistics(), error: error)
        return response
    }

    /// How the request was answered, from its status and where its bytes came from.
    func result(_ read: ReadStatistics) -> CacheResult {
        if status >= 400 || status == 0 { return .error }
        if passesThrough { return .passThrough }
        switch (read.bytesFromCache > 0, read.bytesFromOrigin > 0) {
        case (true, false): return .hit
        case (true, true): return .partial
        case (false, true): return .miss
        case (false, false): return .none
        }
    }

    func end(_ read: ReadStatistics, error: (any Error)?) {
        var statistics = read
        if let arrival = storedAtArrival {
            let sent = read.bytesFromCache + read.bytesFromOrigin
            statistics.bytesFromCache = arrival.spans.byteCount(in: ByteRange(arrival.start, arrival.start + sent))
            statistics.bytesFromOrigin = sent - statistics.bytesFromCache
        }
        let result = result(statistics)
        ProxyMetrics.record(
            result, cache: statistics.bytesFromCache, origin: statistics.bytesFromOrigin,
            duration: ContinuousClock.now - started)
        self.statistics?.record(
            ProxyStatistics.RecentRequest(
                at: Date(), method: method, url: url.utf8.count > 300 ? String(url.prefix(300)) : url, range: range,
                status: status, result: result.rawValue, bytesFromCache: statistics.bytesFromCache,
                bytesFromOrigin: statistics.bytesFromOrigin), result: result)
        guard logger.logLevel <= .info else { return }  // the line is a visible part of a hot request's cost
        let ttfb =
            firstByte.map {
                ($0 - started).formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1)))
            } ?? "-"
        var metadata: Logger.Metadata = [
            "range": "\(range ?? "-")", "status": "\(status)", "result": "\(result.rawValue)",
            "cache": "\(statistics.bytesFromCache)",
            "origin": "\(statistics.bytesFromOrigin)", "retries": "\(statistics.originRetries)", "ttfb": "\(ttfb)",
            "url": "\(url)",
        ]
        if let error { metadata["error"] = "\((error as? ProxyRequestError)?.message ?? "\(error)")" }
        if let warning { metadata["warning"] = "\(warning)" }
        logger.info("\(method)", metadata: metadata)
    }
}
