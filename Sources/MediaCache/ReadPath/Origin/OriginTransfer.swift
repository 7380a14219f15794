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
///
/// Whose its requests are, when it gives way to players, lets its connection go, fills its file or
/// keeps to a pin's rate is decided by its ``TransferPolicy``, asked at each step with what the
/// transfer sees; this type carries out the answers and decides nothing of that itself.
struct OriginTransfer: Sendable {
    let store: CacheStore
    let fetcher: MeteredFetcher
    let configuration: CachingReader.Configuration
    /// Where the transfer records that the origin gave the entry's version, and the plays its
    /// requests keep to.
    let plays: Plays
    let download: SharedDownload
    /// An answer that was already asked for (the probe's), taken by the first request: held
    /// nowhere else, so that once the transfer is done with it nothing keeps its connection.
    let firstResponse: HeldResponse?
    /// Where a transfer that serves no player gives way to players (see ``OriginPriority``).
    let priority: OriginPriority
    /// The fills under way, and whether the network allows them (``FillPolicy``).
    let fills: FillOnPlay

    private var url: URL { download.url }

    func run() async {
        let handle = download.stores ? try? store.openEntry(download.key) : nil
        var policy = TransferPolicy(startedBy: download.startedBy, answered: firstResponse != nil)
        defer {
            handle?.close()
            // Every way out ends the download, so no reader waits on a transfer that is gone.
            download.fail(CacheError(.originUnavailable, "The origin download of \(url.absoluteString) stopped."))
            download.transferEnded()
            let whole = download.isCompleted
            fills.ended(download, whole: whole, reason: whole ? nil : download.fillEndReason)
        }
        var storeWorks = handle != nil
        var seen = priority.generation
        while !download.isFinished, !Task.isCancelled {
            let position = download.position
            if position >= download.end {
                download.complete()
                return
            }
            // The answer in hand (the probe's, to the end it asked for: the read's own range), or
            // one request for the rest of the download's range, which is the read's own (as its
            // player asked it): a request per window would cost a round trip each. How far it
            // reads ahead of its readers is paced (see `read`), not cut into requests.
            var response = firstResponse?.take()
            var requestEnd = download.end
            if let first = response {
                requestEnd = min(download.end, first.bodyEnd ?? download.end)
            } else if !download.isFullBody, let spans = try? handle?.spans() {
                // Never ask the origin for bytes the store has: another download may have
                // stored them since this one was planned.
                guard let hole = spans.holes(in: ByteRange(position, requestEnd)).first else {
                    download.complete()
                    return
                }
                if hole.lowerBound > position {
                    // A fill goes on at the next hole; another download has served its readers.
                    guard policy.goesOnPastStoredBytes(situation), download.skip(to: hole.lowerBound) else {
                        download.complete()
                        return
                    }
                    continue
                }
                requestEnd = hole.upperBound
            }
            do {
                let stored = try handle?.metadata()
                if response == nil {
                    guard let requester = await nextRequest(&policy, seen: &seen) else { return }
                    response = try await download.sending { promotion in
                        try await fetchWithinPlay(
                            range: download.isFullBody ? nil : ByteRange(position, requestEnd), stored: stored,
                            as: requester, promotion: promotion)
                    }
                }
                guard let answer = response else { return }
                try answer.check(askedFrom: position, known: stored, url: url, logger: configuration.logger)
                if !answer.metadata.isStorable { storeWorks = false }  // `no-store`: stream it through
                if let handle, let stored, !stored.isSameVersion(as: answer.metadata) {
                    try handle.updateMetadata(answer.metadata)
                    configuration.logger.warning(
                        "Resource changed at the origin while a read needed more of its version; dropped the cached version",
                        metadata: ["url": "\(url.absoluteString.prefix(200))"])
                    CacheMetrics.changedMidRead()
                    download.fail(
                        CacheError(
                            .resourceChanged, "\(url.absoluteString) changed at the origin while it was being read."))
                    return
                }
                try handle?.updateMetadata(answer.metadata)
                plays.validated(download.key)
                download.responseReceived()
                if fill(answer.metadata, &policy) {
                    // The answer in hand goes on past the player's range as far as it reaches.
                    requestEnd = min(download.end, answer.bodyEnd ?? download.end)
                }
                let received = try await receive(
                    answer, until: requestEnd, into: storeWorks ? handle : nil, policy: &policy, seen: &seen)
                // Done with the answer: held by nothing past this turn of the loop, so its connection
                // is let go before the next request and before any wait.
                response = nil
                switch received {
                case .done: policy.bodyEnded()
                case .storedAhead:
                    // Another download stored the next bytes: the readers go on from the store,
                    // and a fill at the next hole.
                    policy.bodyEnded()
                    if !policy.goesOnPastStoredBytes(situation) {
                        download.complete()
                        return
                    }
                    continue
                case .stop: return
                case .storeFailed:
                    policy.bodyEnded()
                    storeWorks = false
                case .yielded: continue  // the rest with a request of the cache's own
                }
                if download.position < requestEnd, !download.isFinished, !Task.isCancelled {
                    throw CacheError(
                        .originUnavailable, "The origin's response ended at \(download.position) before \(requestEnd).")
                }
            } catch {
                response = nil  // its connection is not kept through the pause before a retry
                policy.failed()
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

    /// What the policy sees now.
    private var situation: TransferPolicy.Situation {
        let held = fills.heldBy
        return TransferPolicy.Situation(
            servesPlayer: download.servesPlayer, isFilling: download.isFilling,
            playerWaitsForConnection: fetcher.budget.playersWait(for: url), fillsAllowed: held == nil,
            fillsHeldBy: held ?? .metered)
    }

    /// Whose the next request is, once the policy sends it (after giving way to players if it
    /// says so); `nil` when the download ended meanwhile.
    private func nextRequest(_ policy: inout TransferPolicy, seen: inout UInt64) async -> Requester? {
        var action = policy.next(situation)
        while true {
            switch action {
            case .send(let requester): return requester
            case .yield:
                await yieldToPlayers(&seen, policy)
                if download.isFinished || Task.isCancelled { return nil }
                action = policy.yielded(situation)
            case .stopFilling, .pace, .deliver, .deliverAndLetGo:
                preconditionFailure("\(action) before a request")
            }
        }
    }

    /// Asks for `range` of this download's resource where its play goes (``PlayRoute``).
    private func fetchWithinPlay(
        range: ByteRange?, stored: ContentMetadata?, as requester: Requester, promotion: ConnectionBudget.Promotion
    ) async throws -> OriginResponse {
        try await PlayRoute(fetcher: fetcher, plays: plays, logger: configuration.logger).fetch(
            url, key: download.key, stored: stored, range: range, ifRange: stored?.ifRangeValidator,
            headers: download.headers, as: requester, promotion: promotion)
    }

    /// Makes the download fill its file to the end when the policy says so and the download can
    /// (see ``FillPolicy``): the answer in hand goes on past the player's range.
    private func fill(_ metadata: ContentMetadata, _ policy: inout TransferPolicy) -> Bool {
        let answer = TransferPolicy.Answer(
            stores: download.stores, isStorable: metadata.isStorable, isFullBody: download.isFullBody,
            isFilling: download.isFilling, length: metadata.length, isCovered: fills.admits(metadata, url: url))
        guard policy.answered(answer), let length = metadata.length, download.fill(to: length) else { return false }
        fills.started(download, length: length)
        configuration.logger.debug(
            "Filling a played file to its end", metadata: ["url": "\(url.absoluteString.prefix(200))"])
        return true
    }

    /// Gives way to players: waits while players wait on the origin, until the policy ends the wait.
    private func yieldToPlayers(_ seen: inout UInt64, _ policy: TransferPolicy) async {
        let started = ContinuousClock.now
        let before = seen
        await priority.yieldToPlayers(seen: &seen) { policy.endsWait(situation) }
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
        /// The download is over (its readers left, its entry was replaced).
        case stop
        /// Another download stored the next bytes first (in the entry this one writes to).
        case storedAhead
        /// A write failed: the rest goes to readers from memory only.
        case storeFailed
        /// A transfer no player reads let its connection go to a player waiting for one: the
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
        _ response: OriginResponse, until requestEnd: Int64, into handle: CacheEntryHandle?,
        policy: inout TransferPolicy, seen: inout UInt64
    ) async throws -> BodyEnd {
        let start = download.position
        guard let handle else {
            return try await read(
                response, from: start, until: requestEnd, into: nil, checking: nil, policy: &policy, seen: &seen)
        }
        let queue = ChunkQueue(limit: configuration.writeBatchLimit)
        return try await withThrowingTaskGroup(of: BodyEnd.self) { group in
            group.addTask { await self.store(from: queue, at: start, into: handle) }
            let received: BodyEnd
            do {
                received = try await read(
                    response, from: start, until: requestEnd, into: queue, checking: handle, policy: &policy,
                    seen: &seen)
            } catch {
                queue.finish()
                _ = try? await group.next()  // what was delivered is still stored
                throw error
            }
            queue.finish()
            let stored = try await group.next() ?? .stop
            if received == .yielded { return stored == .storeFailed ? .stop : .yielded }
            if received == .storedAhead { return stored == .stop ? .stop : .storedAhead }
            return received == .stop ? .stop : stored
        }
    }

    /// Reads the body, cut to `start ..< requestEnd`, delivering each chunk and queueing it
    /// for the store (if `queue`); `.stop` when the download ended, `.storedAhead` when another
    /// download has stored the next bytes (in the entry `handle` writes to).
    private func read(
        _ response: OriginResponse, from start: Int64, until requestEnd: Int64, into queue: ChunkQueue?,
        checking handle: CacheEntryHandle?, policy: inout TransferPolicy, seen: inout UInt64
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
            let givesWay = await decide(about: chunk, &policy, seen: &seen)
            if download.isFinished || Task.isCancelled { return await stop(keeping: chunk) }
            if !download.isFullBody, (try? handle?.spans().span(containing: next)) != nil {
                return .storedAhead  // another download stored these bytes first
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

    /// Carries out what the policy says of `chunk` until it says to deliver it: whether the
    /// connection goes to a waiting player after it (logged and counted).
    private func decide(about chunk: ByteBuffer, _ policy: inout TransferPolicy, seen: inout UInt64) async -> Bool {
        var action = policy.chunkArrived(situation)
        while true {
            switch action {
            case .deliver:
                return false
            case .deliverAndLetGo:
                CacheMetrics.yieldedToPlayer()
                configuration.logger.debug(
                    "A transfer no player reads let its origin connection go to a waiting player",
                    metadata: ["url": "\(url.absoluteString.prefix(200))", "at": "\(download.position)"])
                return true
            case .stopFilling(let reason):
                download.stopFilling(reason)
                configuration.logger.debug(
                    "A fill stopped", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
                action = policy.chunkArrived(situation)
            case .yield:
                await yieldToPlayers(&seen, policy)
                action = policy.yielded(situation)
            case .pace:
                if let pacer = download.startedBy.pacer {
                    await priority.pause(for: pacer.take(chunk.readableBytes)) { policy.endsWait(situation) }
                }
                action = policy.paced(situation)
            case .send:
                preconditionFailure("\(action) with a chunk in hand")
            }
        }
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
            let own = !download.playerWants(offset)
            do {
                try await writer.write(part, at: offset, ownBytes: own)
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
                // The cache's own bytes (a fill's) finding no room of their kind is the policy's
                // answer, not a fault: they push out no player's. The fill stops (`store_refused`).
                let policy = own && (error as? CacheError)?.code == .capacityExceeded
                configuration.logger.log(
                    level: policy ? .debug : .warning,
                    policy
                        ? "The cache's own bytes find no room; the fill stops"
                        : "Cannot store fetched bytes; streaming them uncached",
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
