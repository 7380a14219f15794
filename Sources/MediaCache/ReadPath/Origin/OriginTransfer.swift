// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCacheHTTPFields
import NIOCore
import Synchronization

/// Moves one download's bytes from the origin into the store and to its readers: reads the
/// probe's answer (the player's range as asked) to its end, then asks for the rest in one
/// request (never for bytes the store has), paced by how far its readers are, checks each answer,
/// delivers what arrives to the ``SharedDownload`` (which wakes only the readers waiting for it)
/// while writing it to the store, and resumes a broken connection. Runs on the download's
/// own task, with what it is given: it does not call back into the ``CachingReader``.
struct OriginTransfer: Sendable {
    let store: CacheStore
    let fetcher: any OriginFetcher
    let configuration: CachingReader.Configuration
    /// Where the transfer records that the origin gave the entry's version, and the plays its
    /// requests keep to.
    let plays: Plays
    let download: SharedDownload
    /// An answer that was already asked for (the probe's), used for the first request.
    let firstResponse: OriginResponse?
    /// Where a transfer that serves no player gives way to players (see ``OriginPriority``).
    let priority: OriginPriority
    /// Whether a player's download goes on to the end of its file (``FillPolicy``).
    let fills: FillOnPlay
    /// The origin connections, which a fill no player reads lets go to a waiting player.
    var budget: ConnectionBudget? = nil

    private var url: URL { download.url }

    func run() async {
        let handle = download.stores ? try? store.openEntry(download.key) : nil
        defer {
            handle?.close()
            // Every way out ends the download, so no reader waits on a transfer that is gone.
            download.fail(CacheError(.originUnavailable, "The origin download of \(url.absoluteString) stopped."))
            download.transferEnded()
            fills.ended(download, whole: download.isCompleted)
        }
        var storeWorks = handle != nil
        var firstResponse = firstResponse
        var seen = priority.generation
        while !download.isFinished, !Task.isCancelled {
            let position = download.position
            if position >= download.end {
                download.complete()
                return
            }
            // One request for the rest of the download's range, which is the read's own (as
            // its player asked it): a request per window would cost a round trip each. How
            // far it reads ahead of its readers is paced (see `read`), not cut into requests.
            var requestEnd = download.end
            if let first = firstResponse {
                // The probe's answer, to the end it asked for: the read's own range.
                requestEnd = min(download.end, first.bodyEnd ?? download.end)
            }
            if !download.isFullBody, firstResponse == nil, let spans = try? handle?.spans() {
                // Never ask the origin for bytes the store has: another download may have
                // stored them since this one was planned.
                guard let hole = spans.holes(in: ByteRange(position, requestEnd)).first, hole.lowerBound == position
                else {
                    download.complete()
                    return
                }
                requestEnd = hole.upperBound
            }
            do {
                let stored = try handle?.metadata()
                let response: OriginResponse
                if let first = firstResponse {
                    response = first
                    firstResponse = nil
                } else {
                    await yieldToPlayers(&seen)
                    if download.isFinished || Task.isCancelled { return }
                    // A fill no player reads asks as the cache's own: within its share of the
                    // host's connections, behind players.
                    let isOwn = OriginPriority.isCachesOwn || (download.isFilling && !download.servesPlayer)
                    response = try await OriginPriority.$isCachesOwn.withValue(isOwn) {
                        try await download.sending {
                            try await fetchWithinPlay(
                                range: download.isFullBody ? nil : ByteRange(position, requestEnd), stored: stored)
                        }
                    }
                }
                try response.check(askedFrom: position, known: stored, url: url, logger: configuration.logger)
                if !response.metadata.isStorable { storeWorks = false }  // `no-store`: stream it through
                if let handle, let stored, !stored.isSameVersion(as: response.metadata) {
                    try handle.updateMetadata(response.metadata)
                    configuration.logger.warning(
                        "Resource changed at the origin while a read needed more of its version; dropped the cached version",
                        metadata: ["url": "\(url.absoluteString.prefix(200))"])
                    CacheMetrics.changedMidRead()
                    download.fail(
                        CacheError(
                            .resourceChanged, "\(url.absoluteString) changed at the origin while it was being read."))
                    return
                }
                try handle?.updateMetadata(response.metadata)
                plays.validated(download.key)
                download.responseReceived()
                if fillIfPlayed(response.metadata) {
                    // The answer in hand goes on past the player's range as far as it reaches.
                    requestEnd = min(download.end, response.bodyEnd ?? download.end)
                }
                switch try await receive(response, until: requestEnd, into: storeWorks ? handle : nil, seen: &seen) {
                case .done: break
                case .stop: return
                case .storeFailed: storeWorks = false
                case .yielded: continue  // the rest with a request of the cache's own
                }
                if download.position < requestEnd, !download.isFinished, !Task.isCancelled {
                    throw CacheError(
                        .originUnavailable, "The origin's response ended at \(download.position) before \(requestEnd).")
                }
            } catch {
                if download.isFinished || Task.isCancelled { return }
                let cacheError = error as? CacheError
                let retryable = cacheError.map { [.originUnavailable, .originTimedOut].contains($0.code) } ?? true
                let finalError =
                    cacheError
                    ?? CacheError(
                        .originUnavailable, "The origin connection failed and could not be resumed.",
                        underlyingError: error)
                guard
                    let attempt = download.requestFailed(
                        finalError, retryable: retryable, maxRetries: configuration.maxRetries)
                else { return }
                configuration.logger.warning(
                    "Resuming an origin download",
                    metadata: ["url": "\(url)", "at": "\(download.position)", "error": "\(error)"])
                CacheMetrics.retried(.resume)
                try? await Task.sleep(for: configuration.retryDelay * attempt)
                download.resuming()
            }
        }
    }

    /// Asks for `range` of this download's resource where its play goes (``PlayRoute``).
    private func fetchWithinPlay(range: ByteRange?, stored: ContentMetadata?) async throws -> OriginResponse {
        try await PlayRoute(fetcher: fetcher, plays: plays, logger: configuration.logger).fetch(
            url, key: download.key, stored: stored, range: range, ifRange: stored?.ifRangeValidator,
            headers: download.headers)
    }

    /// Makes a player's download fill its file to the end, when the policy covers it and the
    /// network allows (see ``FillPolicy``): the first answer goes on past the player's range.
    private func fillIfPlayed(_ metadata: ContentMetadata) -> Bool {
        // What cannot be stored (`no-store`, an entry that could not be opened) is not filled.
        guard download.isPlayers, download.stores, metadata.isStorable, !download.isFullBody, !download.isFilling,
            let length = metadata.length,
            fills.admits(metadata, url: url), download.fill(to: length)
        else { return false }
        fills.started(download, length: length)
        configuration.logger.debug(
            "Filling a played file to its end", metadata: ["url": "\(url.absoluteString.prefix(200))"])
        return true
    }

    /// Waits while players wait on the origin, when no player reads this download.
    private func yieldToPlayers(_ seen: inout UInt64) async {
        let started = ContinuousClock.now
        let before = seen
        // A fill that holds a connection a player waits for stops yielding to let it go.
        await priority.yieldToPlayers(seen: &seen) { download.servesPlayer || holdsWhatAPlayerWaitsFor }
        if seen != before, configuration.logger.logLevel <= .debug {
            configuration.logger.debug(
                "A transfer of the cache's own gave way to players",
                metadata: [
                    "url": "\(url.absoluteString.prefix(200))", "at": "\(download.position)",
                    "for": "\(ContinuousClock.now - started)",
                ])
        }
    }

    /// How far the transfer may be ahead of its fastest reader once it has delivered
    /// `delivered` bytes: ``CachingReader/Configuration/minimumRequest`` at first, then as
    /// much as it has delivered (doubling), up to ``CachingReader/Configuration/downloadLead``. A
    /// player that hangs up early so leaves little unread behind it, and one that keeps
    /// reading is soon far ahead.
    private func lead(delivered: Int64) -> Int64 {
        min(configuration.downloadLead, max(configuration.minimumRequest, delivered))
    }

    private enum BodyEnd {
        /// The body reached `requestEnd` or ended.
        case done
        /// The download is over (its readers left, or another download stored the rest).
        case stop
        /// A write failed: the rest goes to readers from memory only.
        case storeFailed
        /// A fill no player reads let its connection go to a player waiting for one: the
        /// download goes on with a new request, as the cache's own.
        case yielded
    }

    /// Delivers the body's bytes from the download's position up to `requestEnd` and stores them.
    ///
    /// Two stages: this task reads the body, delivers each chunk to the readers at once (as
    /// being written) and queues it in a ``ChunkQueue``; a child task takes everything queued
    /// at once and writes it to the store in one call. While a write is under way the next
    /// chunks gather, so a fast origin gets large writes and few thread hops per byte, and no
    /// reader waits for a write.
    private func receive(
        _ response: OriginResponse, until requestEnd: Int64, into handle: CacheEntryHandle?, seen: inout UInt64
    ) async throws -> BodyEnd {
        let start = download.position
        guard let handle else {
            return try await read(response, from: start, until: requestEnd, into: nil, checking: nil, seen: &seen)
        }
        let queue = ChunkQueue(limit: configuration.writeBatchLimit)
        return try await withThrowingTaskGroup(of: BodyEnd.self) { group in
            group.addTask { await self.store(from: queue, at: start, into: handle) }
            let received: BodyEnd
            do {
                received = try await read(
                    response, from: start, until: requestEnd, into: queue, checking: handle, seen: &seen)
            } catch {
                queue.finish()
                _ = try? await group.next()  // what was delivered is still stored
                throw error
            }
            queue.finish()
            let stored = try await group.next() ?? .stop
            if received == .stop, stored != .stop, !download.isFinished {
                // Another download had stored the rest: the readers go on from the store.
                download.complete()
            }
            if received == .yielded { return stored == .storeFailed ? .stop : .yielded }
            return received == .stop ? .stop : stored
        }
    }

    /// Reads the body, cut to `start ..< requestEnd`, delivering each chunk and queueing it
    /// for the store (if `queue`); `.stop` when the download ended or another download has
    /// stored the next bytes (in the entry `handle` writes to).
    private func read(
        _ response: OriginResponse, from start: Int64, until requestEnd: Int64, into queue: ChunkQueue?,
        checking handle: CacheEntryHandle?, seen: inout UInt64
    ) async throws -> BodyEnd {
        var offset = response.bodyOffset
        var next = start
        /// Ends the body early. Bytes the origin has sent are not thrown away when the
        /// download was let go by its readers (a read close behind finds them stored): the
        /// chunk in hand is stored, not delivered.
        func stop(keeping chunk: ByteBuffer?) async -> BodyEnd {
            if let chunk, chunk.readableBytes > 0, let queue, download.wasLetGo { _ = await queue.push(chunk) }
            return .stop
        }
        for try await var chunk in response.body {
            let chunkStart = offset
            offset += Int64(chunk.readableBytes)
            guard offset > next else {  // before what is wanted (a full body)
                if download.isFinished || Task.isCancelled { return .stop }
                continue
            }
            // The body is contiguous: every byte before `offset` was delivered or skipped.
            guard chunkStart <= next else { return .stop }
            chunk.moveReaderIndex(forwardBy: Int(next - chunkStart))
            if Int64(chunk.readableBytes) > requestEnd - next {
                chunk = chunk.getSlice(at: chunk.readerIndex, length: Int(requestEnd - next))!
            }
            if download.isFinished || Task.isCancelled { return await stop(keeping: chunk) }
            await download.pace(lead: lead(delivered: next - download.start))
            // A fill stops when the network turns metered: the download goes on for its readers.
            if download.isFilling, !fills.isAllowed { download.stopFilling() }
            // A fill no player reads does not park on a connection a player waits for: it
            // stores the chunk in hand and lets the connection go.
            var givesWay = isFillOthersNeed
            if !givesWay {
                await yieldToPlayers(&seen)
                givesWay = isFillOthersNeed
            }
            // A pinned download's rate caps (``DownloadPacer``); never on bytes a player reads.
            if !download.servesPlayer, let pacer = DownloadPacer.current { await pacer.take(chunk.readableBytes) }
            if download.isFinished || Task.isCancelled { return await stop(keeping: chunk) }
            if !download.isFullBody, (try? handle?.spans().span(containing: next)) != nil {
                return .stop  // another download stored these bytes first
            }
            guard let queue else {
                download.deliver(chunk, storage: .memoryOnly)
                next += Int64(chunk.readableBytes)
                if next >= requestEnd { break }
                continue
            }
            // Readers get the bytes while they are written (the store claims them only once
            // they are: its index never names a byte before that).
            download.deliver(chunk, storage: .writing)
            guard await queue.push(chunk) else { return .stop }  // the entry was replaced
            next += Int64(chunk.readableBytes)
            if next >= requestEnd { break }
            if givesWay { return .yielded }
        }
        return .done
    }

    /// Whether this download fills a file no player reads any more while a player waits for a
    /// connection to its host (logged and counted when it does).
    private var holdsWhatAPlayerWaitsFor: Bool {
        download.isFilling && !download.servesPlayer && budget?.playersWait(for: url) == true
    }

    /// Whether this download fills a file no player reads any more while a player waits for a
    /// connection to its host: the connection it holds is the player's to have.
    private var isFillOthersNeed: Bool {
        guard holdsWhatAPlayerWaitsFor else { return false }
        CacheMetrics.yieldedToPlayer()
        configuration.logger.debug(
            "A fill let its origin connection go to a waiting player",
            metadata: ["url": "\(url.absoluteString.prefix(200))", "at": "\(download.position)"])
        return true
    }

    /// Takes what `queue` holds and writes it to the store from `start` on, until the queue
    /// ends. Every queued byte was delivered, so every one is written (even when the readers
    /// have left since), unless the store refuses: then the rest stays in memory only. In an
    /// encrypted store writes end on a block's end: the bytes past the last one wait (copied,
    /// at most a block) for the next batch or the queue's end, so each block is sealed once
    /// instead of being opened and sealed again by the next write.
    private func store(from queue: ChunkQueue, at start: Int64, into handle: CacheEntryHandle) async -> BodyEnd {
        var handle: CacheEntryHandle? = handle
        let blockSize = handle?.cipher?.layout.blockSize
        var result = BodyEnd.done
        var offset = start
        /// Writes `part` at `offset`; `false` when the transfer must stop.
        func write(_ part: ByteBuffer) async -> Bool {
            let end = offset + Int64(part.readableBytes)
            defer { offset = end }
            guard let writer = handle else {
                download.writeFinished(upTo: end, stored: false)
                return true
            }
            do {
                try await writer.write(part, at: offset)
                download.writeFinished(upTo: end, stored: true)
            } catch let error as CacheError where error.code == .entryInvalidated {
                download.writeFinished(upTo: end, stored: false)
                download.fail(
                    CacheError(.resourceChanged, "\(url.absoluteString) changed at the origin while it was being read.")
                )
                queue.stop()
                return false
            } catch {
                download.writeFinished(upTo: end, stored: false)
                configuration.logger.warning(
                    "Cannot store fetched bytes; streaming them uncached",
                    metadata: ["url": "\(url)", "error": "\(error)"])
                handle = nil
                result = .storeFailed
            }
            return true
        }
        var carry: ByteBuffer?
        while var batch = await queue.takeAll() {
            guard let blockSize else {
                guard await write(batch) else { return .stop }
                continue
            }
            if var block = carry {
                // Complete the block the last batch ended in.
                let missing = blockSize - (offset + Int64(block.readableBytes)) % blockSize
                var head = batch.readSlice(length: Int(min(missing, Int64(batch.readableBytes))))!
                block.writeBuffer(&head)
                guard (offset + Int64(block.readableBytes)) % blockSize == 0 else {
                    carry = block
                    continue
                }
                carry = nil
                guard await write(block) else { return .stop }
            }
            let end = offset + Int64(batch.readableBytes)
            if end - end % blockSize > offset {
                guard await write(batch.readSlice(length: Int(end - end % blockSize - offset))!) else { return .stop }
            }
            if batch.readableBytes > 0 {
                var tail = ByteBufferAllocator().buffer(capacity: Int(blockSize))
                tail.writeBuffer(&batch)
                carry = tail
            }
        }
        if let carry, await !write(carry) { return .stop }
        return result
    }
}
