// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Logging
import NIOCore
import Synchronization

/// The read path: serves byte ranges of remote resources from the store where they are
/// cached and from the origin where they are not, storing what it fetches.
///
/// ```swift
/// let reader = CachingReader(store: store, fetcher: HTTPOriginFetcher())
/// let stream = try await reader.read(url, offset: 0, length: nil)
/// for try await chunk in stream { player.feed(chunk) }
/// ```
/// Readers that want the same missing bytes share one origin download; a reader that
/// stops iterating cancels the origin request nobody else waits on.
public final class CachingReader: Sendable {
    /// The store bytes are kept in.
    public let store: CacheStore
    /// The read path's options.
    public let configuration: Configuration
    let fetcher: MeteredFetcher
    let scheduler: DownloadScheduler
    /// What the reads it opens work with.
    let context: ReadContext
    /// When the origin last confirmed each resource, on the store's clock.
    let validations: ValidationMemory
    /// Origin answers other than the resource's bytes that may be reused while fresh.
    let answers = AnswerMemory()
    /// The probes and revalidations under way, one per resource for requests that share them.
    private let contentInfoTasks = Mutex<[CacheKey: SharedTask<ContentMetadata>]>([:])
    /// Revalidations of entries served stale meanwhile (`stale-while-revalidate`), one per
    /// resource at a time; each removes itself when it ends, and ``shutDown()`` ends them.
    private let backgroundRevalidations = Mutex<[CacheKey: Task<Void, Never>]>([:])
    private let waitingForOrigin = Atomic<Int>(0)
    /// How many calls wait on the origin for content information (probes and validations,
    /// shared or not): tests wait on it to know that requests are sharing one.
    package var contentInfoWaiters: Int { waitingForOrigin.load(ordering: .relaxed) }
    /// The read path's other tasks: removals of unfinished entries and segment read-aheads
    /// (``shutDown()`` ends them too).
    let owned = OwnedTasks()
    /// The HLS and DASH segments to store ahead of players (see ``readAhead(of:headers:)``).
    package let segmentReadAhead: SegmentReadAhead
    /// The folders of the live playlists and manifests the proxy rewrote lately (at most 64,
    /// the oldest forgotten first): a `404` under one may be a segment asked for before it is
    /// available, and is not remembered (``noteLive(_:)``).
    let liveFolders = Mutex<[String]>([])
    /// Bodies without a length that reads may join (``GrowingBody``), by resource.
    let growingBodies = Mutex<[CacheKey: GrowingBody]>([:])
    /// Bodies kept in memory only (see ``memoryOnlyBody(of:headers:)``).
    let memoryBodies = Mutex(MemoryBodies())
    /// Where the cache's own fetches give way to players waiting on the origin.
    let priority: OriginPriority
    /// The fetcher's ``OriginFetcher/securityWarning``, taken once: every request's log line
    /// carries it.
    package let securityWarning: String?
    /// The preload queue and its runner (see ``preload(_:)``).
    let preloader: Preloader

    /// Creates a read path over `store` that fetches missing bytes with `fetcher`.
    public init(store: CacheStore, fetcher: any OriginFetcher, configuration: Configuration = Configuration()) {
        self.store = store
        CacheMetrics.register()
        let connections = max(1, min(configuration.originConnectionsPerHost, fetcher.connectionsPerHost ?? .max))
        let budget = ConnectionBudget(
            limit: connections, ownLimit: configuration.ownConnectionsPerHost ?? max(1, connections / 4), logger: configuration.logger)
        self.fetcher = MeteredFetcher(
            base: configuration.isOffline ? OfflineFetcher(base: fetcher) : fetcher, ownRequestFields: configuration.ownRequestFields, budget: budget)
        self.configuration = configuration
        securityWarning = fetcher.securityWarning
        scheduler = DownloadScheduler(configuration: configuration)
        validations = ValidationMemory(limit: configuration.validationMemoryLimit)
        segmentReadAhead = SegmentReadAhead(depth: configuration.segmentReadAhead)
        priority = OriginPriority(grace: configuration.playerQuietPeriod, timer: configuration.quietTimer)
        preloader = Preloader(
            maxBytes: configuration.preloadBudget, maxConcurrent: configuration.preloadConcurrency, owned: owned, logger: configuration.logger)
        context = ReadContext(
            store: store, configuration: configuration, fetcher: self.fetcher, scheduler: scheduler, validations: validations, priority: priority,
            owned: owned)
    }

    /// A transfer for `download`, given what it needs (it does not call back into the reader).
    func transfer(for download: SharedDownload, firstResponse: OriginResponse?) -> OriginTransfer {
        context.transfer(for: download, firstResponse: firstResponse)
    }

    // MARK: Prefetches

    /// Stores an HLS asset ahead of playing it: the playlist at `url` (a master playlist's
    /// chosen variant and the default rendition of its audio group, or a media playlist
    /// itself), then every init section and media segment `options` choose, each a cache
    /// entry as if a player had read it. Keys are stored only in an encrypted store (sealed,
    /// so the asset plays offline); otherwise they stay in memory, fetched when played.
    ///
    /// Cancel the calling task to stop: what arrived stays cached, and the error is
    /// `CancellationError`. `progress` is called after each resource and each chunk.
    /// - Returns: the final progress.
    /// - Throws: ``CacheError`` for a playlist that cannot be had or read, or an origin failure.
    @discardableResult
    public func prefetchHLS(
        _ url: URL, options: HLSPrefetchOptions = HLSPrefetchOptions(),
        progress: @escaping @Sendable (PrefetchProgress) -> Void = { _ in }
    ) async throws -> PrefetchProgress {
        let plan = try await OriginPriority.$isCachesOwn.withValue(true) { try await planner.hlsPlan(url, options: options) }
        return try await Prefetcher(reader: self).run(plan.items, playlists: plan.playlists, options: options, progress: progress)
    }

    /// Stores a DASH presentation ahead of playing it: the manifest at `url`, then in each
    /// period the representation `options.variant` chooses in each adaptation set (by
    /// `bandwidth`, as for HLS variants), its initialization and its segments for
    /// `options.seconds` or all of them, each a cache entry as if a player had read it.
    /// Cancel the calling task to stop: what arrived stays cached.
    /// - Returns: the final progress.
    /// - Throws: ``CacheError`` for a manifest that cannot be had or read (a live one, whose
    ///   segments have no end, among them), or an origin failure.
    @discardableResult
    public func prefetchDASH(
        _ url: URL, options: HLSPrefetchOptions = HLSPrefetchOptions(),
        progress: @escaping @Sendable (PrefetchProgress) -> Void = { _ in }
    ) async throws -> PrefetchProgress {
        let plan = try await OriginPriority.$isCachesOwn.withValue(true) { try await planner.dashPlan(url, options: options) }
        return try await Prefetcher(reader: self).run(plan.items, playlists: plan.playlists, options: options, progress: progress)
    }

    /// Stores `range` of the file at `url` (all of it when `nil`) ahead of playing it, as a
    /// player's read would. Cancel the calling task to stop; what arrived stays cached.
    /// - Returns: the final progress (one resource).
    @discardableResult
    public func prefetch(
        _ url: URL, range: ByteRange? = nil, headers: RequestHeaders = [],
        progress: @escaping @Sendable (PrefetchProgress) -> Void = { _ in }
    ) async throws -> PrefetchProgress {
        var options = HLSPrefetchOptions()
        options.headers = headers
        return try await Prefetcher(reader: self).run([PrefetchItem(url: url, range: range)], playlists: [], options: options, progress: progress)
    }

    /// What the assets' plans are made by (see ``AssetPlanner``).
    var planner: AssetPlanner { AssetPlanner(reader: self) }

    /// What the store holds of assets, as an offline player may be shown them (see ``HeldAssets``).
    package var held: HeldAssets { HeldAssets(reader: self) }

    /// This read path as an offline one: the store alone, every stored entry current.
    package var offlineTwin: CachingReader {
        var offline = configuration
        offline.isOffline = true
        return CachingReader(store: store, fetcher: fetcher, configuration: offline)
    }

    // MARK: Preloads

    /// Replaces the preload queue with `items`: the first seconds of each, in order, stored
    /// ahead of the user (the next items of a feed, a playlist, an episode list). Returns at
    /// once; the work goes on in the background.
    ///
    /// Items of the previous queue that had not started are dropped; a started one goes on if
    /// `items` names it, else it stops at its next boundary (a segment, or a piece of at most
    /// 1 MiB of a file). ``Configuration/preloadConcurrency`` items are fetched at once,
    /// and each queue fetches at most ``Configuration/preloadBudget`` bytes from origins;
    /// nothing stored is fetched again. A preload never makes a player wait: its origin
    /// transfers pause while a player waits on an origin. An item that cannot be preloaded is
    /// logged and the queue goes on. Call with `[]` to empty the queue.
    ///
    /// - Parameter items: media files (MP4 with `moov` first or last, fragmented MP4, MP3, AAC,
    ///   WAV; others by an estimate), HLS playlists and DASH manifests, with their seconds; the
    ///   first ``maximumPreloadItems`` with a positive number of seconds and an http(s) URL count.
    public func preload(_ items: [PreloadItem]) {
        preloader.replace(with: items, from: self)
    }

    /// The preload queue's items and where each is.
    public var preloadStatus: [PreloadItemStatus] { preloader.status }

    /// The most items a preload queue holds: it is what plays next, not a library.
    public static let maximumPreloadItems = Preloader.maximumItems

    /// Writes what the cache holds of `url` at `destination` without contacting the origin
    /// (see ``Exporter``); `renditions` and `seconds` choose what of an HLS or DASH asset, as a
    /// pin does, else every rendition wholly held is written.
    @discardableResult
    package func export(_ url: URL, to destination: URL, renditions: RenditionChoice = RenditionChoice(), seconds: Double? = nil) async throws -> ExportSummary {
        try await Exporter(reading: self).export(url, to: destination, renditions: renditions, seconds: seconds)
    }

    // MARK: Content information

    /// The resource's content information: from the store when its length is known there
    /// and it is fresh (RFC 9111 §4.2; see ``Configuration/prefersCache``), else from the
    /// origin: a stale entry is revalidated with a conditional request (a "not modified"
    /// answer costs no body bytes and refreshes it; a new version replaces it), an unknown
    /// one is asked for. Concurrent calls share one origin request.
    ///
    /// - Parameter url: the resource.
    /// - Parameter offset: where a read will start, if one follows. For an uncached
    ///   resource the origin is then asked with a ranged `GET` from there instead of a
    ///   `HEAD`: its head gives the content information and its body becomes the first
    ///   download, which the read joins, so the first byte costs one round trip, not two.
    /// - Parameter length: how many bytes that read wants, if it says: the `GET` then asks
    ///   for no more than that (at most 256 KiB).
    /// - Parameter headers: the player's request headers to send to the origin (see
    ///   ``RequestHeaders``); they do not change the cache key.
    /// - Throws: ``CacheError`` with an origin code when the origin fails.
    /// - Parameter maximumAge: when given, a stored entry the origin gave or confirmed longer
    ///   ago than this is revalidated whatever its freshness and ``Configuration/prefersCache``
    ///   say (a live HLS playlist: RFC 8216 §6.3.4 has a client reload it after at most its
    ///   target duration, and a cache in front must not make it older).
    public func contentInfo(
        for url: URL, readingFrom offset: Int64? = nil, length: Int64? = nil, headers: RequestHeaders = [],
        maximumAge: Duration? = nil
    ) async throws -> ContentMetadata {
        try await contentInfo(for: url, readingFrom: offset, length: length, headers: headers, maximumAge: maximumAge, reserves: false)
    }

    /// ``contentInfo(for:readingFrom:length:headers:maximumAge:)`` for a caller that reads
    /// next: when the answer is not stored (`no-store`) or has no length, the probe's bytes
    /// are held for that read, so the probe's request is the read's (one origin request, not
    /// two). The caller calls ``releaseReservation(for:)`` when it is done, read or not.
    package func contentInfoForRead(_ url: URL, from offset: Int64, length: Int64?, headers: RequestHeaders) async throws -> ContentMetadata {
        try await contentInfo(for: url, readingFrom: offset, length: length, headers: headers, maximumAge: nil, reserves: true)
    }

    /// Lets go of the probe bytes held for a read of `url` that did not take them.
    package func releaseReservation(for url: URL) {
        scheduler.releaseReservation(store.key(for: url))
    }

    func contentInfo(
        for url: URL, readingFrom offset: Int64?, length: Int64?, headers: RequestHeaders,
        maximumAge: Duration?, reserves: Bool, yielded: Bool = false
    ) async throws -> ContentMetadata {
        let offset = offset.map { min(max(0, $0), ByteRange.maximumOffset) }
        let key = store.key(for: url)
        if !headers.hasConditions, let remembered = answers.answer(for: key, at: store.configuration.clock.now) {
            // The origin's own answer (a `404`, a `301`), still fresh: given again, not asked for.
            throw CacheError(answer: remembered, url: url.absoluteString)
        }
        var stored = store.metadata(for: key).flatMap { $0.length != nil ? $0 : nil }
        if let varied = stored, !varied.matches(request: headers) {
            // Stored for a request whose varying fields differ: a miss that fetches and replaces.
            configuration.logger.debug("The stored answer varies on fields this request does not match", metadata: ["url": "\(url.absoluteString.prefix(200))"])
            try? await store.remove(key)
            stored = nil
        }
        if stored == nil, let offset, let growing = growingBodies.withLock({ $0[key] }), growing.isJoinable, growing.bodyOffset == offset {
            // A body without a length is coming from the origin for this read's start: the
            // read joins it (``passThrough``) rather than asking again.
            return growing.metadata
        }
        if let stored, isCurrent(stored, key: key), configuration.isOffline || (maximumAge.map({ isYoung(stored, key: key, within: $0) }) ?? true) {
            // A probe or revalidation that stored this metadata may not have started the
            // download of the bytes it asked for yet: a read that went on now would find
            // neither them nor a download to join, and ask the origin a second time. Its
            // result is shared instead (it ends once the download is there).
            if !headers.hasConditions, !configuration.isOffline, let running = contentInfoTasks.withLock({ $0[key] }),
                let shared = try? await running.value()
            {
                return shared
            }
            return stored
        }
        if let stored, maximumAge == nil, !headers.hasConditions, !scheduler.hasShutDown, stored.mayServeWhileRevalidating(at: store.configuration.clock.now) {
            // Stale, within the origin's `stale-while-revalidate`: served as it is while one
            // revalidation runs in the background (RFC 5861 §3).
            revalidateInBackground(url, key: key, stored: stored, headers: headers.withoutConditions)
            return stored
        }
        if let stored, let offset, let total = stored.length, maximumAge == nil, !headers.hasConditions, stored.ifRangeValidator != nil,
            offset < total, !store.spans(for: key).contains(ByteRange(offset, min(total, offset + min(length ?? total, total))))
        {
            // Stale, and the read misses bytes: its request for the first of them carries
            // `If-Range` with the stored validator, and the read waits for that answer before
            // its first byte (`needsValidation`, a stale version). The answer validates the
            // stored version and brings the bytes at once: a conditional request first would
            // cost the read a second origin request.
            return stored
        }
        // A request carrying the player's own conditions may get the origin's `304` for it:
        // such a request shares no task with others.
        let shares = !headers.hasConditions
        if OriginPriority.isCachesOwn, !yielded, contentInfoTasks.withLock({ $0[key] == nil }) {
            // The cache's own question waits while players wait on an origin: before any shared
            // task exists, so a player never waits on a task that waits for it. The players may
            // have fetched and stored the resource meanwhile (a segment read ahead of a player
            // that asked for it first): everything is looked at again, never asked from what was
            // seen before the wait.
            var seen = priority.generation
            await priority.yieldToPlayers(seen: &seen)
            return try await contentInfo(
                for: url, readingFrom: offset, length: length, headers: headers, maximumAge: maximumAge, reserves: reserves, yielded: true)
        }
        if scheduler.hasShutDown { throw DownloadScheduler.shutDownError }
        let task = contentInfoTasks.withLock { tasks in
            if shares, let running = tasks[key] { return running }
            let task = SharedTask { [self, stored] in
                do {
                    if let stored {
                        return try await revalidate(
                            url, key: key, stored: stored, offset: offset ?? 0, length: offset == nil ? nil : length ?? ByteRange.maximumOffset,
                            headers: headers.withoutConditions, reserves: reserves)
                    }
                    guard let offset else { return await store(try await fetcher.contentInfo(for: url, headers: headers), key: key) }
                    // The bytes the read asks for, in one request: an open-ended read asks to
                    // the end (`bytes=a-`), which the origin streams as the player reads.
                    let size = max(1, min(length ?? ByteRange.maximumOffset, ByteRange.maximumOffset - offset))
                    return try await probe(url, key: key, offset: offset, size: size, headers: headers, reserves: reserves)
                } catch let error as CacheError {
                    // An answer the origin lets a cache reuse (it carries its freshness) is kept for the next request.
                    if shares, let answer = error.originAnswer, answer.freshUntil != nil, !isNotYetAvailable(answer, url: url) {
                        answers.remember(answer, for: key, at: store.configuration.clock.now)
                    }
                    throw error
                }
            }
            if shares { tasks[key] = task }
            return task
        }
        defer { contentInfoTasks.withLock { if $0[key] === task { $0[key] = nil } } }
        waitingForOrigin.add(1, ordering: .relaxed)
        defer { waitingForOrigin.subtract(1, ordering: .relaxed) }
        // A caller that is cancelled stops waiting at once; a shared task goes on for the
        // others and for the store, one of this caller's own is cancelled with it.
        return try await withTaskCancellationHandler {
            try await priority.whilePlayerWaits { try await task.value() }
        } onCancel: {
            if !shares { task.cancel() }
        }
    }

    /// Starts a revalidation of `stored` on a task of its own unless one runs for `key`
    /// already (see ``backgroundRevalidations``); its result goes to the store only.
    func revalidateInBackground(_ url: URL, key: CacheKey, stored: ContentMetadata, headers: RequestHeaders) {
        backgroundRevalidations.withLock { tasks in
            // Checked under the lock `shutDown()` takes to collect them: none starts after.
            guard tasks[key] == nil, !scheduler.hasShutDown else { return }
            configuration.logger.debug("Serving a stale copy while it is revalidated (stale-while-revalidate)", metadata: ["url": "\(url.absoluteString.prefix(200))"])
            // Only this task removes `key`, and the lock held here makes it wait until it is in.
            tasks[key] = Task { [self] in
                defer { _ = backgroundRevalidations.withLock { $0.removeValue(forKey: key) } }
                _ = try? await revalidate(url, key: key, stored: stored, offset: 0, headers: headers)
            }
        }
    }

    /// How many background revalidations run (tests wait on it).
    package var backgroundRevalidationCount: Int { backgroundRevalidations.withLock { $0.count } }

    /// Stops the origin work the read path does on its own tasks: every download (a
    /// prefetch's too) and every probe or revalidation, and returns once they have ended, so
    /// a store closed afterwards has no writer left. Reads waiting on them fail; reads started
    /// afterwards are answered from the store alone. Call it when the app or server stops,
    /// before ``CacheStore/close()``.
    public func shutDown() async {
        await scheduler.shutDown()
        let tasks = contentInfoTasks.withLock { tasks in
            defer { tasks = [:] }
            return Array(tasks.values)
        }
        for task in tasks {
            task.cancel()
            _ = await task.result
        }
        for task in backgroundRevalidations.withLock({ Array($0.values) }) {
            task.cancel()
            _ = await task.result
        }
        await owned.cancelAndWait()
    }

    /// The content information when the store alone can give it now: the entry's length is
    /// known and it may be used without asking the origin (see ``contentInfo(for:readingFrom:headers:)``);
    /// `nil` otherwise. Never waits.
    /// - Parameter headers: the player's request fields, matched against the stored answer's `Vary`.
    func cachedContentInfo(for url: URL, headers: RequestHeaders = []) -> ContentMetadata? {
        cachedContentInfo(key: store.key(for: url), headers: headers)
    }

    private func cachedContentInfo(key: CacheKey, headers: RequestHeaders) -> ContentMetadata? {
        guard let stored = store.metadata(for: key), stored.length != nil, isCurrent(stored, key: key), stored.matches(request: headers) else { return nil }
        return stored
    }

    /// What is stored of `url` now (the proxy counts a body's bytes within it as from the cache).
    package func storedSpans(of url: URL) -> SpanSet {
        store.spans(for: store.key(for: url))
    }

    /// Whether a version of `url` whose length is known is stored, fresh or not (the cache can
    /// then answer a player's conditions itself, RFC 9111 §4.3.2).
    package func holdsVersion(of url: URL) -> Bool {
        store.metadata(for: store.key(for: url))?.length != nil
    }

    /// Now, on the store's clock (which tests set).
    package var now: Date { store.configuration.clock.now }

    /// Stores `metadata` for `key` (the store may keep validators it already had) and
    /// returns what the entry now holds; `metadata` itself when the store refuses.
    /// `version` can say how it relates to the stored version (see ``VersionChange``).
    func store(_ metadata: ContentMetadata, key: CacheKey, version: VersionChange = .compare) async -> ContentMetadata {
        // Without a length the bytes stream through uncached (see `passThrough`).
        guard metadata.length != nil || store.metadata(for: key)?.length != nil else { return metadata }
        guard metadata.isStorable else {
            // `no-store`: nothing of it is kept, not even what an earlier answer allowed.
            if store.metadata(for: key) != nil { try? await store.remove(key) }
            return metadata
        }
        guard let handle = try? store.openEntry(key) else { return metadata }
        defer { handle.close() }
        _ = try? handle.updateMetadata(metadata, version: version)
        return (try? handle.metadata()) ?? metadata
    }

    /// Whether `url` may be fetched at all (see ``OriginFetcher/checkOrigin(_:)``).
    /// - Throws: ``CacheError`` with ``CacheError/Code/originNotAllowed`` and the reason.
    package func checkOrigin(_ url: URL) throws {
        try fetcher.checkOrigin(url)
    }

}
