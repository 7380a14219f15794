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

    var url: URL { download.url }

    func run() async {
        let handle = download.stores ? try? store.openEntry(download.key) : nil
        var policy = TransferPolicy(
            startedBy: download.startedBy, answered: firstResponse != nil, maxRetries: configuration.maxRetries)
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
            } else {
                switch nextHole(from: position, in: handle, policy) {
                case .some(let hole?): requestEnd = hole
                case .some(nil): continue  // moved past stored bytes
                case nil:
                    download.complete()
                    return
                }
            }
            let action: TransferPolicy.Action?
            var failure: (any Error)?
            do {
                let stored = try handle?.metadata()
                if response == nil {
                    guard let requester = await nextRequest(&policy, seen: &seen) else { return }
                    requestEnd = policy.requestEnd(
                        from: position, holeEnd: requestEnd, playersEnd: download.playersEnd, situation)
                    response = try await download.sending { promotion in
                        try await fetchWithinPlay(
                            range: download.isFullBody ? nil : ByteRange(position, requestEnd), stored: stored,
                            as: requester, promotion: promotion)
                    }
                }
                guard let answer = response else { return }
                action = try await take(
                    answer, from: position, until: requestEnd, stored: stored, handle: handle,
                    storeWorks: &storeWorks, policy: &policy, seen: &seen)
            } catch {
                if download.isFinished || Task.isCancelled { return }
                failure = error
                action = policy.failed((error as? CacheError)?.code)
            }
            // Done with the answer: held by nothing past this point, so its connection is let go
            // before the next request and before any wait.
            response = nil
            guard let action, await carryOut(action, after: failure) else { return }
        }
    }

    /// Where the next request ends: at the end of the first hole from `position`; `.some(nil)`
    /// when the download moved past stored bytes to the next hole (a fill); `nil` when nothing
    /// is left to ask for. Never asks the origin for bytes the store has: another download may
    /// have stored them since this one was planned.
    private func nextHole(from position: Int64, in handle: CacheEntryHandle?, _ policy: TransferPolicy) -> Int64?? {
        guard !download.isFullBody, let spans = try? handle?.spans() else { return .some(download.end) }
        guard let hole = spans.holes(in: ByteRange(position, download.end)).first else { return nil }
        guard hole.lowerBound > position else { return .some(hole.upperBound) }
        // A fill goes on at the next hole; another download has served its readers.
        guard policy.goesOnPastStoredBytes(situation), download.skip(to: hole.lowerBound) else { return nil }
        return .some(nil)
    }

    /// Checks the answer, carries out what the policy says of it, and reads its body: what the
    /// policy says next, or `nil` when the download is over.
    private func take(
        _ answer: OriginResponse, from position: Int64, until end: Int64, stored: ContentMetadata?,
        handle: CacheEntryHandle?, storeWorks: inout Bool, policy: inout TransferPolicy, seen: inout UInt64
    ) async throws -> TransferPolicy.Action? {
        try answer.check(askedFrom: position, known: stored, url: url, logger: configuration.logger)
        if !answer.metadata.isStorable { storeWorks = false }  // `no-store`: stream it through
        let metadata = answer.metadata
        let facts = TransferPolicy.Answer(
            stores: download.stores, isStorable: metadata.isStorable, isFullBody: download.isFullBody,
            isFilling: download.isFilling, length: metadata.length, isCovered: fills.admits(metadata, url: url),
            isOtherVersion: stored.map { !$0.isSameVersion(as: metadata) } ?? false)
        let action = policy.answered(facts)
        try handle?.updateMetadata(metadata)
        guard case .receive(let filling) = action else { return action }
        plays.validated(download.key)
        download.responseReceived()
        var requestEnd = end
        if filling, let length = metadata.length, download.fill(to: length) {
            fills.started(download, length: length)
            configuration.logger.debug(
                "Filling a played file to its end", metadata: ["url": "\(url.absoluteString.prefix(200))"])
            // The answer in hand goes on past the player's range as far as it reaches.
            requestEnd = min(download.end, answer.bodyEnd ?? download.end)
        }
        let received = try await TransferReceiver(transfer: self).receive(
            answer, until: requestEnd, into: storeWorks ? handle : nil, policy: &policy, seen: &seen)
        switch received {
        case .stop: return nil
        case .storedAhead: return policy.bodyEnded(.storedAhead, situation)
        case .yielded: return policy.bodyEnded(.letGo, situation)
        case .done, .storeFailed:
            if received == .storeFailed { storeWorks = false }
            if download.position < requestEnd, !download.isFinished, !Task.isCancelled {
                throw CacheError(
                    .originUnavailable, "The origin's response ended at \(download.position) before \(requestEnd).")
            }
            return policy.bodyEnded(.whole, situation)
        }
    }

    /// Carries out what the policy said after an answer or a failure; `false` when the transfer
    /// is over.
    private func carryOut(_ action: TransferPolicy.Action, after failure: (any Error)?) async -> Bool {
        switch action {
        case .requestNext:
            return true
        case .complete:
            download.complete()
            return false
        case .dropVersion:
            configuration.logger.warning(
                "Resource changed at the origin while a read needed more of its version; dropped the cached version",
                metadata: ["url": "\(url.absoluteString.prefix(200))"])
            CacheMetrics.changedMidRead()
            download.fail(
                CacheError(.resourceChanged, "\(url.absoluteString) changed at the origin while it was being read."))
            return false
        case .retry(let attempt):
            configuration.logger.warning(
                "Resuming an origin download",
                metadata: ["url": "\(url)", "at": "\(download.position)", "error": "\(failure.map { "\($0)" } ?? "")"])
            CacheMetrics.retried(.resume)
            download.retrying(attempt: attempt)
            try? await Task.sleep(for: configuration.retryDelay * attempt)
            download.resuming()
            return true
        case .giveUp:
            download.fail(
                failure as? CacheError
                    ?? CacheError(
                        .originUnavailable, "The origin connection failed and could not be resumed.",
                        underlyingError: failure))
            return false
        case .yield, .send, .stopFilling, .awaitProof, .pace, .deliver, .deliverAndLetGo, .receive:
            preconditionFailure("\(action) after an answer")
        }
    }

    /// What the policy sees now.
    var situation: TransferPolicy.Situation {
        let held = fills.heldBy
        let isFilling = download.isFilling
        let play: TransferPolicy.PlayProof =
            switch isFilling ? fills.standing(of: download) : .proven {
            case .proven: .proven
            case .pending: .pending
            case .skipped: .skipped
            }
        return TransferPolicy.Situation(
            servesPlayer: download.servesPlayer, isFilling: isFilling,
            playerWaitsForConnection: fetcher.budget.playersWait(for: url), fillsAllowed: held == nil,
            fillsHeldBy: held ?? .metered, play: play)
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
            case .awaitProof:
                await awaitProof(policy)
                if download.isFinished || Task.isCancelled { return nil }
                action = policy.proofAwaited(situation)
            case .stopFilling(let reason):
                stopFilling(reason)
                if download.isFinished || Task.isCancelled { return nil }
                action = policy.next(situation)
            default: preconditionFailure("\(action) before a request")
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

    /// Waits until no player has read the fill for the probation (its play is then proven or
    /// skipped: ``FillOnPlay/standing(of:)``), or the policy ends the wait (a player reads the
    /// download, or waits for its connection).
    func awaitProof(_ policy: TransferPolicy) async {
        guard fills.standing(of: download) == .pending else { return }
        if await priority.wait(configuration.fillProbation, unless: { policy.endsWait(situation) }) {
            fills.wasQuiet(download)
        }
    }

    /// Ends the download's fill for `reason` (it goes on for its readers only).
    func stopFilling(_ reason: FillStop) {
        download.stopFilling(reason)
        configuration.logger.debug(
            "A fill stopped", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
    }

    /// Gives way to players: waits while players wait on the origin, until the policy ends the wait.
    func yieldToPlayers(_ seen: inout UInt64, _ policy: TransferPolicy) async {
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
}
