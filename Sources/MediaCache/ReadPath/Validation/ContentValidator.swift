// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import NIOCore
import Synchronization

/// Carries out ``Validation``'s decisions: gathers what is known of a resource, asks the pure
/// decision what to do, and does it — serves the stored version, shares one question to the
/// origin among the requests that may share it (a probe, a revalidation, a `HEAD`), revalidates
/// in the background, and adopts what the origin answers (stores its fields, turns its body into
/// a download readers join). It sees the read path only through ``ReadContext``; it never calls
/// back into the ``CachingReader`` that owns it.
final class ContentValidator: Sendable {
    let context: ReadContext
    /// Origin answers other than the resource's bytes that may be reused while fresh.
    let answers = AnswerMemory()
    /// The probes and revalidations under way, one per resource for requests that share them.
    let probes = Mutex<[CacheKey: Probe]>([:])
    /// Revalidations of entries served stale meanwhile (`stale-while-revalidate`), one per
    /// resource at a time; each removes itself when it ends, and ``shutDown()`` ends them.
    let backgroundRevalidations = Mutex<[CacheKey: Task<Void, Never>]>([:])
    /// How many calls wait on the origin for content information.
    let waitingForOrigin = Atomic<Int>(0)
    /// Bodies without a length that reads may join (``GrowingBody``), by resource.
    let growingBodies = Mutex<[CacheKey: GrowingBody]>([:])
    /// The folders of the live playlists and manifests the proxy rewrote lately (at most 64,
    /// the oldest forgotten first): a `404` under one may be a segment asked for before it is
    /// available, and is not remembered (``noteLive(_:)``).
    private let liveFolders = Mutex<[String]>([])

    /// A probe or revalidation that requests share, and what makes its origin request a
    /// player's when a player comes to wait on it (the cache's own asked first): a player never
    /// waits on a request that waits as the cache's own.
    struct Probe: Sendable {
        let task: SharedTask<ContentMetadata>
        let promotion: ConnectionBudget.Promotion
        /// Whether later requests join it (it is in ``probes``); one of a request's own ends
        /// with that request.
        let isShared: Bool
    }

    init(context: ReadContext) {
        self.context = context
    }

    var store: CacheStore { context.store }
    var configuration: CachingReader.Configuration { context.configuration }
    var scheduler: DownloadScheduler { context.scheduler }
    var now: Date { store.configuration.clock.now }

    /// Where a play's requests go (see ``PlayRoute``).
    var playRoute: PlayRoute {
        PlayRoute(fetcher: context.fetcher, plays: context.plays, logger: configuration.logger)
    }

    // MARK: What is known

    /// What is known of `key` for `request`, and the stored version and growing body it speaks of.
    /// - Parameter ignoringVaried: a stored version that varies on fields the request does not
    ///   match was dropped for it: one still stored (the store could not remove it) counts as
    ///   nothing stored, so the request goes on instead of dropping it again.
    private func held(_ key: CacheKey, for request: ContentRequest, ignoringVaried: Bool) -> (
        Validation.Held, stored: ContentMetadata?, growing: GrowingBody?
    ) {
        var held = Validation.Held()
        held.remembersAnswer = answers.answer(for: key, at: now) != nil
        held.isShutDown = scheduler.hasShutDown
        held.isOffline = configuration.isOffline
        held.probeRunning = probes.withLock { $0[key] != nil }
        var stored = store.metadata(for: key).flatMap { $0.length != nil ? $0 : nil }
        if ignoringVaried, let varied = stored, !varied.matches(request: request.headers) { stored = nil }
        var growing: GrowingBody?
        if let stored {
            held.stored = facts(of: stored, key: key, for: request)
        } else if let offset = request.offset, let body = growingBodies.withLock({ $0[key] }), body.isJoinable,
            body.bodyOffset == offset
        {
            held.growingBodyAtReadStart = true
            growing = body
        }
        return (held, stored, growing)
    }

    /// What is known of `stored`, the version of `key`, for `request`.
    private func facts(of stored: ContentMetadata, key: CacheKey, for request: ContentRequest) -> Validation.Stored {
        var facts = Validation.Stored()
        facts.varies = !stored.matches(request: request.headers)
        facts.isCurrent = isCurrent(stored)
        facts.isYoungEnough = request.maximumAge.map { isYoung(stored, key: key, within: $0) } ?? true
        facts.requiresRevalidation = stored.requiresRevalidation
        // What only a version that is not current is asked for is looked up only then.
        guard !facts.isCurrent || !(configuration.isOffline || facts.isYoungEnough) else { return facts }
        facts.isWholeInPlay = isWholeInPlay(stored, key: key, url: request.url)
        facts.mayServeWhileRevalidating = stored.mayServeWhileRevalidating(at: now)
        facts.hasIfRangeValidator = stored.ifRangeValidator != nil
        if let offset = request.offset, let total = stored.length, offset < total {
            let end = min(total, offset + min(request.length ?? total, total))
            facts.readMissesBytes = !store.spans(for: key).contains(ByteRange(offset, end))
        }
        return facts
    }

    /// Whether a stored entry may be used without asking the origin: it is fresh (RFC 9111
    /// §4.2; `no-cache` and `max-age=0` never are, so every use of them is validated), or the
    /// app prefers the cache.
    func isCurrent(_ metadata: ContentMetadata) -> Bool {
        configuration.prefersCache || configuration.isOffline || metadata.isFresh(at: now)
    }

    /// Whether the origin gave or confirmed the stored `metadata` less than `age` ago.
    func isYoung(_ metadata: ContentMetadata, key: CacheKey, within age: Duration) -> Bool {
        guard let last = context.plays.validations.date(of: key) ?? metadata.generatedAt else { return false }
        return Plays.isWithin(age, from: last, to: now)
    }

    /// Whether `metadata`, stored for `key`, is a media file whole on disk that a play under way
    /// began with (see ``Plays``). Playlists and manifests never are: they change as they are read.
    private func isWholeInPlay(_ metadata: ContentMetadata, key: CacheKey, url: URL) -> Bool {
        guard let total = metadata.length, total > 0, context.plays.isUnderWay(key),
            FillPolicy.isMedia(mimeType: metadata.mimeType, path: (metadata.finalURL ?? url).path)
        else { return false }
        return store.spans(for: key).contains(ByteRange(0, total))
    }

    // MARK: Deciding and doing

    /// The resource's content information, as ``Validation`` decides for `request`. Concurrent
    /// requests that may share one question to the origin share it.
    func contentInfo(_ request: ContentRequest) async throws -> ContentMetadata {
        let key = store.key(for: request.url)
        var hasYielded = false
        var droppedVaried = false
        while true {
            let (held, stored, growing) = held(key, for: request, ignoringVaried: droppedVaried)
            switch Validation.decide(held: held, asked: Validation.Asked(request, hasYielded: hasYielded)) {
            case .rememberedAnswer:
                // The origin's own answer (a `404`, a `301`), still fresh: given again, not asked for.
                if let remembered = answers.answer(for: key, at: now) {
                    throw CacheError(answer: remembered, url: request.url.absoluteString)
                }
            case .dropVariedVersion:
                // Stored for a request whose varying fields differ: a miss that fetches and replaces.
                configuration.logger.debug(
                    "The stored answer varies on fields this request does not match",
                    metadata: ["url": "\(request.url.absoluteString.prefix(200))"])
                try? await store.remove(key)
                droppedVaried = true
            case .joinGrowingBody:
                // The read joins the body coming for its start (``passThrough``) rather than asking again.
                if let growing { return growing.metadata }
            case .stored, .staleWholeInPlay, .staleWithIfRange:
                // Current; or stale but whole in a play that began with it (a play keeps to one
                // version: docs/http.md); or stale and the read misses bytes, whose request
                // carries `If-Range` with the stored validator (the read waits for that answer
                // before its first byte): a conditional request first would cost a second one.
                if let stored { return stored }
            case .storedAfterRunningProbe:
                // A probe or revalidation that stored this may not have started the download of
                // the bytes it asked for yet: a read that went on now would find neither them nor
                // a download to join, and ask a second time. Its result is shared instead.
                if let running = probes.withLock({ $0[key] }) {
                    if request.requester.isPlayer { running.promotion.promote() }
                    if let shared = try? await running.task.value() { return shared }
                }
                if let stored { return stored }
            case .staleWhileRevalidate:
                // Served as it is while one revalidation runs in the background (RFC 5861 §3).
                if let stored {
                    revalidateInBackground(
                        request.url, key: key, stored: stored, headers: request.headers.withoutConditions,
                        as: request.requester)
                    return stored
                }
            case .waitForPlayers:
                // The cache's own question waits while players wait on an origin, before any
                // shared task exists, so a player never waits on a task that waits for it. The
                // players may have stored the resource meanwhile: everything is looked at again.
                var seen = context.priority.generation
                await context.priority.yieldToPlayers(seen: &seen)
                hasYielded = true
            case .shutDown:
                throw DownloadScheduler.shutDownError
            case .joinRunningProbe:
                // Ended meanwhile: decided again.
                if let running = probes.withLock({ $0[key] }) {
                    return try await wait(on: running, for: request, key: key)
                }
            case .revalidate(let shared):
                if let stored { return try await ask(.revalidate(stored), shared: shared, for: request, key: key) }
            case .probe(let shared):
                if let offset = request.offset {
                    return try await ask(.probe(from: offset), shared: shared, for: request, key: key)
                }
            case .askHead(let shared):
                return try await ask(.head, shared: shared, for: request, key: key)
            }
            // What the decision spoke of changed meanwhile: decided again.
        }
    }

    /// What the origin is asked, as ``Validation/decide(held:asked:)`` said.
    private enum Question {
        /// Whether the stored version is current (a conditional ranged `GET`).
        case revalidate(ContentMetadata)
        /// The bytes the read wants, from `offset` (a ranged `GET`).
        case probe(from: Int64)
        /// The content information alone (a `HEAD`).
        case head
    }

    /// Asks the origin `question` for `request`: `shared`, in one question that later requests
    /// without conditions of their own join (a request carrying the player's own conditions
    /// may get the origin's `304` for it, and shares nothing).
    private func ask(_ question: Question, shared: Bool, for request: ContentRequest, key: CacheKey) async throws
        -> ContentMetadata
    {
        let started = probes.withLock { tasks in
            if shared, let running = tasks[key] { return running }
            let promotion = ConnectionBudget.Promotion()
            let task = SharedTask { [self] in
                do {
                    return try await ask(question, request, key: key, promotion: promotion)
                } catch let error as CacheError {
                    // An answer the origin lets a cache reuse (it carries its freshness) is kept for the next request.
                    if shared, let answer = error.originAnswer, answer.freshUntil != nil,
                        !isNotYetAvailable(answer, url: request.url)
                    {
                        answers.remember(answer, for: key, at: now)
                    }
                    throw error
                }
            }
            let started = Probe(task: task, promotion: promotion, isShared: shared)
            if shared { tasks[key] = started }
            return started
        }
        return try await wait(on: started, for: request, key: key)
    }

    /// Waits for the answer of `probe` for `request`; the first to have it takes the probe
    /// out of ``probes``, so a later request asks again.
    private func wait(on probe: Probe, for request: ContentRequest, key: CacheKey) async throws -> ContentMetadata {
        // A player who waits on a probe the cache's own work began makes its request a player's.
        if request.requester.isPlayer { probe.promotion.promote() }
        let task = probe.task
        defer { probes.withLock { if $0[key]?.task === task { $0[key] = nil } } }
        waitingForOrigin.add(1, ordering: .relaxed)
        defer { waitingForOrigin.subtract(1, ordering: .relaxed) }
        // A caller that is cancelled stops waiting at once; a shared task goes on for the
        // others and for the store, one of this caller's own is cancelled with it.
        return try await withTaskCancellationHandler {
            try await context.priority.whilePlayerWaits(request.requester) { try await task.value() }
        } onCancel: {
            if !probe.isShared { task.cancel() }
        }
    }

    /// The one question to the origin, carried out.
    private func ask(
        _ question: Question, _ request: ContentRequest, key: CacheKey, promotion: ConnectionBudget.Promotion
    ) async throws -> ContentMetadata {
        let (url, headers, requester) = (request.url, request.headers, request.requester)
        switch question {
        case .revalidate(let stored):
            return try await revalidate(
                url, key: key, stored: stored, offset: request.offset ?? 0,
                length: request.offset == nil ? nil : request.length ?? ByteRange.maximumOffset,
                headers: headers.withoutConditions, reserves: request.reserves, as: requester, promotion: promotion)
        case .head:
            return await storeGiven(
                try await context.fetcher.contentInfo(for: url, headers: headers, as: requester, promotion: promotion),
                key: key)
        case .probe(let offset):
            // The bytes the read asks for, in one request: an open-ended read asks to the end
            // (`bytes=a-`), which the origin streams as the player reads.
            let size = max(1, min(request.length ?? ByteRange.maximumOffset, ByteRange.maximumOffset - offset))
            return try await probe(
                url, key: key, offset: offset, size: size, headers: headers, reserves: request.reserves,
                as: requester, promotion: promotion)
        }
    }

    /// Starts a revalidation of `stored` on a task of its own unless one runs for `key`
    /// already (see ``backgroundRevalidations``); its result goes to the store only.
    func revalidateInBackground(
        _ url: URL, key: CacheKey, stored: ContentMetadata, headers: RequestHeaders, as requester: Requester
    ) {
        backgroundRevalidations.withLock { tasks in
            // Checked under the lock `shutDown()` takes to collect them: none starts after.
            guard tasks[key] == nil, !scheduler.hasShutDown else { return }
            configuration.logger.debug(
                "Serving a stale copy while it is revalidated (stale-while-revalidate)",
                metadata: ["url": "\(url.absoluteString.prefix(200))"])
            // Only this task removes `key`, and the lock held here makes it wait until it is in.
            tasks[key] = Task { [self] in
                defer { _ = backgroundRevalidations.withLock { $0.removeValue(forKey: key) } }
                _ = try? await revalidate(url, key: key, stored: stored, offset: 0, headers: headers, as: requester)
            }
        }
    }

    // MARK: Bodies without a length

    /// `response` (a body without a length) made shareable: registered for reads to join,
    /// with a reader of it for the caller.
    func sharing(_ response: OriginResponse, key: CacheKey) -> OriginResponse {
        let growing = GrowingBody(response) { [weak self] in
            // Ended, or closed to joiners: a later read asks the origin again.
            self?.growingBodies.withLock { bodies in
                if let current = bodies[key], !current.isJoinable { bodies[key] = nil }
            }
        }
        guard let reader = growing.subscribe() else { return response }
        growingBodies.withLock { $0[key] = growing }
        var shared = response
        shared.body = reader
        return shared
    }

    // MARK: Remembered answers

    /// Notes `folder` as where a live presentation's segments are (a live playlist's or a
    /// dynamic manifest's base): a segment there that does not exist yet gets a `404` that is
    /// not remembered, so the player's next try, once it is made, reaches the origin.
    func noteLive(_ folder: URL) {
        let text = folder.absoluteString
        liveFolders.withLock { folders in
            guard !folders.contains(text) else { return }
            if folders.count >= 64 { folders.removeFirst() }
            folders.append(text)
        }
    }

    /// Whether `answer` says `url` is missing where a live presentation's segments appear.
    private func isNotYetAvailable(_ answer: OriginAnswer, url: URL) -> Bool {
        guard answer.status == 404 || answer.status == 410 else { return false }
        let text = url.absoluteString
        return liveFolders.withLock { $0.contains { text.hasPrefix($0) } }
    }

    // MARK: Shutting down

    /// Ends every probe, revalidation and background revalidation, and returns once they have.
    func shutDown() async {
        let tasks = probes.withLock { tasks in
            defer { tasks = [:] }
            return Array(tasks.values)
        }
        for probe in tasks {
            probe.task.cancel()
            _ = await probe.task.result
        }
        for task in backgroundRevalidations.withLock({ Array($0.values) }) {
            task.cancel()
            _ = await task.result
        }
    }
}
