// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import NIOCore
import Synchronization

/// Serves one asset's loading requests through the read path.
///
/// In-flight requests live in a table keyed by request, so they may start and be
/// cancelled in any order. Content information is answered from the cache when known. A
/// data request is answered from ``LoadingRequest/DataRequest/requestedOffset`` (or from where an earlier
/// answer left off) in order: cached bytes at once, the rest as it arrives. Cancelling a
/// request, or ``cancelAll()`` when the asset goes away or a queue moves on, cancels the
/// origin work nobody else shares.
@_spi(Adapter) public final class ResourceLoaderEngine<RequestID: Hashable & Sendable>: Sendable {
    /// The resource's origin URL.
    public let url: URL
    /// The read path that serves the requests.
    public let reader: CachingReader
    /// The requests in flight, each with a token of its own: a finished task removes its
    /// entry only if a newer request with the same id has not taken the place.
    private let tasks = Mutex<(nextToken: UInt64, entries: [RequestID: (token: UInt64, task: Task<Void, Never>)])>(
        (0, [:]))
    private let eventContinuation: AsyncStream<ResourceLoaderEvent>.Continuation
    private let completed = Mutex(false)

    /// Events about this asset's loading: bytes from cache and network, stalls, completion.
    public let events: AsyncStream<ResourceLoaderEvent>

    /// Creates an engine for `url` served by `reader`.
    public init(url: URL, reader: CachingReader) {
        self.url = url
        self.reader = reader
        (events, eventContinuation) = AsyncStream.makeStream(
            of: ResourceLoaderEvent.self, bufferingPolicy: .bufferingNewest(1024))
    }

    deinit {
        cancelAll()
        eventContinuation.finish()
    }

    /// The number of requests in flight.
    public var activeRequestCount: Int {
        tasks.withLock { $0.entries.count }
    }

    /// Starts answering `request`, identified by `id`, through `responder`.
    public func start(_ id: RequestID, _ request: LoadingRequest, responder: some LoadingRequest.Responder) {
        // The task is made and entered under the lock, so even one that ends at once finds
        // its entry to remove (made outside, a fast task once removed nothing and its entry
        // stayed for good).
        let previous = tasks.withLock { tasks -> Task<Void, Never>? in
            let token = tasks.nextToken
            tasks.nextToken += 1
            let task = Task { [self] in
                await serve(request, responder: responder)
                self.tasks.withLock { tasks in
                    if tasks.entries[id]?.token == token { tasks.entries[id] = nil }
                }
            }
            defer { tasks.entries[id] = (token, task) }
            return tasks.entries[id]?.task
        }
        previous?.cancel()
    }

    /// Stops answering the request `id`: the player cancelled it.
    public func cancel(_ id: RequestID) {
        tasks.withLock { $0.entries.removeValue(forKey: id) }?.task.cancel()
    }

    /// Stops every request: the asset is going away or its queue moved on.
    public func cancelAll() {
        let all = tasks.withLock { tasks in
            defer { tasks.entries = [:] }
            return tasks.entries.values.map(\.task)
        }
        all.forEach { $0.cancel() }
    }

    private func serve(_ request: LoadingRequest, responder: some LoadingRequest.Responder) async {
        do {
            if request.wantsContentInformation {
                let metadata = try await reader.contentInfo(for: url)
                responder.fill(
                    LoadingRequest.ContentInformation(
                        contentLength: metadata.length ?? 0,
                        contentType: metadata.uniformTypeIdentifier
                            ?? MediaType.uniformTypeIdentifier(forPathExtension: url.pathExtension),
                        // The cache can answer any range, even for an origin that cannot.
                        isByteRangeAccessSupported: true))
            }
            if let data = request.data {
                try await serve(data, responder: responder)
            }
            try Task.checkCancellation()
            responder.finishLoading()
        } catch is CancellationError {
            // The player cancelled: it expects no answer.
        } catch {
            if Task.isCancelled { return }
            responder.finishLoading(with: error)
        }
    }

    private func serve(_ data: LoadingRequest.DataRequest, responder: some LoadingRequest.Responder) async throws {
        // Offsets and lengths come from the player: clamped into 0...maximumOffset first
        // (AVPlayer asks for lengths near Int.max), the subtractions cannot overflow.
        func bounded(_ value: Int64) -> Int64 { min(max(0, value), ByteRange.maximumOffset) }
        let requested = bounded(data.requestedOffset)
        let current = bounded(data.currentOffset)
        let given = max(0, current - requested)
        let length: Int64? = data.requestsAllDataToEndOfResource ? nil : bounded(data.requestedLength) - given
        if let length, length <= 0 { return }
        let stream = try await reader.read(url, offset: current, length: length)
        var reported = ReadStatistics()
        for try await chunk in stream {
            try Task.checkCancellation()
            responder.respond(with: chunk)
            // A player that has enough cancels from inside `respond`: stop before the next
            // chunk, which could start an origin request nobody wants.
            try Task.checkCancellation()
            let now = stream.statistics
            if now.bytesFromCache > reported.bytesFromCache {
                eventContinuation.yield(.bytesFromCache(now.bytesFromCache - reported.bytesFromCache))
            }
            if now.bytesFromOrigin > reported.bytesFromOrigin {
                eventContinuation.yield(.bytesFromNetwork(now.bytesFromOrigin - reported.bytesFromOrigin))
            }
            if now.stalls > reported.stalls { eventContinuation.yield(.stalled) }
            reported = now
        }
        reportCompletionIfCached(length: stream.metadata.length)
    }

    private func reportCompletionIfCached(length: Int64?) {
        guard let length else { return }
        let spans = reader.store.spans(for: reader.store.key(for: url))
        guard spans.contains(ByteRange(0, length)) else { return }
        let first = completed.withLock { done in
            defer { done = true }
            return !done
        }
        if first { eventContinuation.yield(.resourceCompleted) }
    }
}
