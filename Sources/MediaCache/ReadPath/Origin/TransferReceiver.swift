// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore

/// The body's stage of an ``OriginTransfer``: reads an answer's body from the download's
/// position, carries out what the transfer's ``TransferPolicy`` says of each chunk (give way,
/// keep to a rate, let the connection go, stop filling), delivers each chunk to the readers and
/// hands it to a ``TransferWriter`` for the store.
struct TransferReceiver: Sendable {
    let transfer: OriginTransfer

    private var download: SharedDownload { transfer.download }
    private var configuration: CachingReader.Configuration { transfer.configuration }
    private var url: URL { transfer.url }
    private var situation: TransferPolicy.Situation { transfer.situation }

    /// How far the transfer may be ahead of its fastest reader once it has delivered
    /// `delivered` bytes: ``CachingReader/Configuration/minimumRequest`` at first, then as
    /// much as it has delivered (doubling), up to ``CachingReader/Configuration/downloadLead``. A
    /// player that hangs up early so leaves little unread behind it, and one that keeps
    /// reading is soon far ahead.
    private func lead(delivered: Int64) -> Int64 {
        min(configuration.downloadLead, max(configuration.minimumRequest, delivered))
    }

    enum BodyEnd {
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
    func receive(
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
            group.addTask {
                switch await TransferWriter(download: download, logger: configuration.logger).write(
                    from: queue, at: start, into: handle)
                {
                case .done: .done
                case .stop: .stop
                case .storeFailed: .storeFailed
                }
            }
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
                transfer.stopFilling(reason)
                action = policy.chunkArrived(situation)
            case .awaitProof:
                await transfer.awaitProof(policy)
                if download.isFinished || Task.isCancelled { return false }
                action = policy.proofAwaited(situation)
            case .yield:
                await transfer.yieldToPlayers(&seen, policy)
                action = policy.yielded(situation)
            case .pace:
                if let pacer = download.startedBy.pacer {
                    await transfer.priority.pause(for: pacer.take(chunk.readableBytes)) { policy.endsWait(situation) }
                }
                action = policy.paced(situation)
            default: preconditionFailure("\(action) with a chunk in hand")
            }
        }
    }
}
