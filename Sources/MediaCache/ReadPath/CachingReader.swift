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
    /// Options for the read path.
    public struct Configuration: Sendable {
        /// The largest chunk a stream yields when reading from disk.
        package var chunkSize = 1 << 20
        /// The largest file region ``ReadStream/nextPart()`` gives for cached bytes (sent with
        /// `sendfile`, so no memory is held for it); the first region of a read is
        /// ``minimumChunkSize``, so its first bytes leave at once.
        package var fileRegionSize = 1 << 20
        /// About how many bytes the file regions of all open streams may span together: with
        /// `n` streams open a region is `fileRegionBudget / n`, within ``minimumChunkSize`` ...
        /// ``fileRegionSize``. A server sends a region with one `sendfile` call on its event
        /// loop, so with many clients smaller regions take turns sooner: a client that has
        /// just asked gets its first bytes without waiting behind megabytes sent to others.
        package var fileRegionBudget = 16 << 20
        /// The smallest chunk a stream yields from disk (unless fewer bytes are left).
        package var minimumChunkSize = 32 << 10
        /// About how much memory the chunks of all open streams may hold together: each
        /// open stream may have one chunk being read and two being sent, so with `n`
        /// streams open a chunk is `readBufferBudget / 3n`, within ``minimumChunkSize``
        /// ... ``chunkSize``. One stream gets large reads (few hops per byte); many get
        /// small ones, so memory stays flat as clients are added.
        package var readBufferBudget = 8 << 20
        /// The most bytes a download gathers for one write to the store: while a write is
        /// under way, the chunks that arrive are queued and then written (and delivered)
        /// together, up to this many; the origin waits while the queue is full.
        package var writeBatchLimit = 1 << 20
        /// How far a download may run ahead of its fastest reader.
        package var readAhead: Int64 = 4 << 20
        /// The first origin request of a download asks for at most this many bytes; each
        /// next one asks for as many as the download has delivered so far (doubling), up
        /// to ``maximumRequest``. A reader that goes away early so wastes little traffic,
        /// and one that keeps reading soon gets large requests.
        package var minimumRequest: Int64 = 256 << 10
        /// The most bytes one origin request asks for.
        package var maximumRequest: Int64 = 8 << 20
        /// A reader joins a download whose next byte is at most this far before its cursor,
        /// rather than starting its own.
        package var joinDistance: Int64 = 1 << 20
        /// How many times a broken origin connection is resumed (without progress between).
        public var maxRetries = 3
        /// The wait before a resume, multiplied by the attempt number.
        package var retryDelay: Duration = .milliseconds(100)
        /// A read with missing bytes first asks the origin whether the cached bytes are still
        /// current, before it yields any, unless the origin confirmed them this recently.
        /// Within the interval a read serves cached bytes at once; if the origin then turns
        /// out to have a new version, the read ends with `.resourceChanged` after old bytes
        /// only (never a mix). `.zero` checks every time.
        public var revalidationInterval: Duration = .seconds(60)
        /// How many resources' last validation is remembered (see ``ValidationMemory``).
        package var validationMemoryLimit = 10_000
        /// Never contact an origin: cached bytes are served whatever their freshness, and
        /// anything else fails with ``CacheError/Code/offline`` (a proxy answers `504`, as
        /// RFC 9111 §5.2.1.7 has a cache answer `only-if-cached`). For a flight, with pinned
        /// downloads (``DownloadQueue``).
        public var isOffline = false
        /// Serve cached resources without asking the origin whatever their freshness (a
        /// music app streaming from its own CDN wants zero traffic on every replay). The
        /// trade: a file changed at the origin is noticed only when a read reaches bytes
        /// that are not cached.
        public var prefersCache = false
        /// When a stale resource cannot be revalidated because the origin cannot be reached
        /// (or answers 5xx), serve the cached copy anyway (and log a warning) — unless the
        /// origin said `must-revalidate` or `no-cache` (``ContentMetadata/requiresRevalidation``).
        public var servesStaleOnOriginFailure = true
        /// When a read that has been giving cached bytes reaches missing ones, it waits this
        /// long before asking the origin for them. A player that cancels once it has what
        /// it needs sends the cancel while earlier bytes are still in flight (socket buffers
        /// hold megabytes); the wait lets the cancel arrive first, so a replayed session
        /// does not fetch bytes nobody takes. `.zero` never waits.
        package var holeDelay: Duration = .milliseconds(20)
        /// What ``holeDelay`` is waited on: real time, or a test's ``PauseTimer``.
        package var pauseTimer: any PauseTimer = SystemPauseTimer()
        /// Where the read path logs.
        public var logger = Logger(label: "mediacache.read", factory: { _ in SwiftLogNoOpLogHandler() })

        /// Creates the default configuration.
        public init() {}
    }

    /// The store bytes are kept in.
    public let store: CacheStore
    /// The read path's options.
    public let configuration: Configuration
    let fetcher: any OriginFetcher
    let scheduler: DownloadScheduler
    /// How many streams are open (see ``Configuration/readBufferBudget``).
    let openStreams = Atomic<Int>(0)
    /// When the origin last confirmed each resource, on the store's clock.
    let validations: ValidationMemory
    /// Origin answers other than the resource's bytes that may be reused while fresh.
    let answers = AnswerMemory()
    private let contentInfoTasks = Mutex<[CacheKey: Task<ContentMetadata, any Error>]>([:])
    /// Revalidations of entries served stale meanwhile (`stale-while-revalidate`), one per
    /// resource at a time; each removes itself when it ends, and ``shutDown()`` ends them.
    private let backgroundRevalidations = Mutex<[CacheKey: Task<Void, Never>]>([:])
    private let waitingForOrigin = Atomic<Int>(0)
    /// How many calls wait on the origin for content information (probes and validations,
    /// shared or not): tests wait on it to know that requests are sharing one.
    package var contentInfoWaiters: Int { waitingForOrigin.load(ordering: .relaxed) }
    /// Resources whose body without a length a read is writing to the store.
    let passThroughWriters = Mutex<Set<CacheKey>>([])
    /// Bodies kept in memory only (see ``memoryOnlyBody(of:headers:)``).
    let memoryBodies = Mutex(MemoryBodies())

    /// Creates a read path over `store` that fetches missing bytes with `fetcher`.
    public init(store: CacheStore, fetcher: any OriginFetcher, configuration: Configuration = Configuration()) {
        self.store = store
        CacheMetrics.register()
        self.fetcher = MeteredFetcher(base: configuration.isOffline ? OfflineFetcher(base: fetcher) : fetcher)
        self.configuration = configuration
        scheduler = DownloadScheduler(configuration: configuration)
        validations = ValidationMemory(limit: configuration.validationMemoryLimit)
    }

    /// A transfer for `download`, given what it needs (it does not call back into the reader).
    func transfer(for download: Download, firstResponse: OriginResponse?) -> OriginTransfer {
        OriginTransfer(
            store: store, fetcher: fetcher, configuration: configuration, validations: validations,
            download: download, firstResponse: firstResponse)
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

    private func contentInfo(
        for url: URL, readingFrom offset: Int64?, length: Int64?, headers: RequestHeaders,
        maximumAge: Duration?, reserves: Bool
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
        if let stored, isCurrent(stored, key: key), configuration.isOffline || (maximumAge.map({ isYoung(stored, key: key, within: $0) }) ?? true) {
            return stored
        }
        if let stored, maximumAge == nil, !headers.hasConditions, !scheduler.hasShutDown, stored.mayServeWhileRevalidating(at: store.configuration.clock.now) {
            // Stale, within the origin's `stale-while-revalidate`: served as it is while one
            // revalidation runs in the background (RFC 5861 §3).
            revalidateInBackground(url, key: key, stored: stored, headers: headers.withoutConditions)
            return stored
        }
        // A request carrying the player's own conditions may get the origin's `304` for it:
        // such a request shares no task with others.
        let shares = !headers.hasConditions
        if scheduler.hasShutDown { throw DownloadScheduler.shutDownError }
        let task = contentInfoTasks.withLock { tasks in
            if shares, let running = tasks[key] { return running }
            let task = Task { [self, stored] in
                do {
                    if let stored { return try await revalidate(url, key: key, stored: stored, offset: offset ?? 0, headers: headers.withoutConditions) }
                    guard let offset else { return await store(try await fetcher.contentInfo(for: url, headers: headers), key: key) }
                    // The bytes the read asks for, in one request: an open-ended read asks to
                    // the end (`bytes=a-`), which the origin streams as the player reads.
                    let size = max(1, min(length ?? ByteRange.maximumOffset, ByteRange.maximumOffset - offset))
                    return try await probe(url, key: key, offset: offset, size: size, headers: headers, reserves: reserves)
                } catch let error as CacheError {
                    // An answer the origin lets a cache reuse (it carries its freshness) is kept for the next request.
                    if shares, let answer = error.originAnswer, answer.freshUntil != nil {
                        answers.remember(answer, for: key, at: store.configuration.clock.now)
                    }
                    throw error
                }
            }
            if shares { tasks[key] = task }
            return task
        }
        defer { contentInfoTasks.withLock { if $0[key] == task { $0[key] = nil } } }
        waitingForOrigin.add(1, ordering: .relaxed)
        defer { waitingForOrigin.subtract(1, ordering: .relaxed) }
        // A caller that is cancelled stops waiting at once; a shared task goes on for the
        // others and for the store, one of this caller's own is cancelled with it.
        return try await withTaskCancellationHandler {
            try await Self.value(of: task)
        } onCancel: {
            if !shares { task.cancel() }
        }
    }

    /// Starts a revalidation of `stored` on a task of its own unless one runs for `key`
    /// already (see ``backgroundRevalidations``); its result goes to the store only.
    private func revalidateInBackground(_ url: URL, key: CacheKey, stored: ContentMetadata, headers: RequestHeaders) {
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
    }

    /// The value of `task`, or `CancellationError` as soon as the calling task is cancelled,
    /// whether or not `task` has ended.
    private static func value<T: Sendable>(of task: Task<T, any Error>) async throws -> T {
        let waiter = Waiter<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                waiter.set(continuation)
                if Task.isCancelled { waiter.resume(with: .failure(CancellationError())) }
                Task { waiter.resume(with: await task.result) }
            }
        } onCancel: {
            waiter.resume(with: .failure(CancellationError()))
        }
    }

    /// One continuation, resumed by whichever comes first: the result or a cancel.
    private final class Waiter<T: Sendable>: Sendable {
        private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)

        func set(_ continuation: CheckedContinuation<T, any Error>) {
            self.continuation.withLock { $0 = continuation }
        }

        func resume(with result: Result<T, any Error>) {
            continuation.withLock { $0.take() }?.resume(with: result)
        }
    }

    /// The content information when the store alone can give it now: the entry's length is
    /// known and it may be used without asking the origin (see ``contentInfo(for:readingFrom:headers:)``);
    /// `nil` otherwise. Never waits.
    /// - Parameter headers: the player's request fields, matched against the stored answer's `Vary`.
    package func cachedContentInfo(for url: URL, headers: RequestHeaders = []) -> ContentMetadata? {
        let key = store.key(for: url)
        guard let stored = store.metadata(for: key), stored.length != nil, isCurrent(stored, key: key), stored.matches(request: headers) else { return nil }
        return stored
    }

    /// A read of `range` when the store alone can serve it: every byte is stored and the
    /// entry may be used without asking the origin (a read with no missing bytes is never
    /// revalidated, as in ``read(_:offset:length:headers:)``); `nil` otherwise. Never waits.
    package func cachedRead(_ url: URL, range: ByteRange, headers: RequestHeaders = []) -> ReadStream? {
        guard let metadata = cachedContentInfo(for: url, headers: headers), metadata.isStorable, let total = metadata.length,
            range.upperBound <= total, !range.isEmpty
        else { return nil }
        let key = store.key(for: url)
        guard let handle = try? store.openEntry(key) else { return nil }
        guard (try? handle.spans())?.contains(range) == true else {
            handle.close()
            return nil
        }
        let session = ReadSession(reader: self, url: url, key: key, range: range, headers: headers, handle: handle)
        return ReadStream(metadata: (try? handle.metadata()) ?? metadata, range: range, session: session)
    }

    /// Stores `metadata` for `key` (the store may keep validators it already had) and
    /// returns what the entry now holds; `metadata` itself when the store refuses.
    /// `version` can say how it relates to the stored version (see ``VersionChange``).
    private func store(_ metadata: ContentMetadata, key: CacheKey, version: VersionChange = .compare) async -> ContentMetadata {
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

    /// The fetcher's ``OriginFetcher/securityWarning``.
    package var securityWarning: String? { fetcher.securityWarning }

    /// Whether `url` may be fetched at all (see ``OriginFetcher/checkOrigin(_:)``).
    /// - Throws: ``CacheError`` with ``CacheError/Code/originNotAllowed`` and the reason.
    package func checkOrigin(_ url: URL) throws {
        try fetcher.checkOrigin(url)
    }

    // MARK: Reading

    /// Starts reading `length` bytes at `offset` (to the end when `length` is `nil`).
    ///
    /// Returns once the content information is known and, if bytes are missing, the origin
    /// has confirmed the cached bytes are current, so ``ReadStream/metadata`` and
    /// ``ReadStream/range`` can be sent to a player before the first byte.
    /// - Throws: `.rangeNotSatisfiable` (with ``CacheError/resourceLength``) when `offset`
    ///   is at or past the end; origin errors.
    /// - Parameter url: the resource.
    /// - Parameter offset: the first byte to read.
    /// - Parameter length: how many bytes to read; `nil` for all to the end.
    /// - Parameter headers: the player's request headers, sent with the origin requests this
    ///   read starts (a download shared by several reads carries those of the read that
    ///   started it: one cache serves one user).
    /// - Parameter planned: the content information the caller just got from
    ///   ``contentInfo(for:readingFrom:length:headers:maximumAge:)`` for this same request: the
    ///   read plans from it instead of asking again, so a resource that must be validated on
    ///   every use (`no-cache`) or is never stored (`no-store`) costs one origin request, not two.
    public func read(
        _ url: URL, offset: Int64 = 0, length: Int64? = nil, headers: RequestHeaders = [],
        planned: ContentMetadata? = nil
    ) async throws -> ReadStream {
        guard (0...ByteRange.maximumOffset).contains(offset), (length ?? 0) >= 0 else {
            throw CacheError(.rangeNotSatisfiable, "A read needs an offset between 0 and \(ByteRange.maximumOffset) and a non-negative length.")
        }
        // Lengths past the bound mean "to the end" (no resource is that long), and the
        // bound keeps `offset + length` from overflowing.
        let length = length.map { min($0, ByteRange.maximumOffset) }
        return try await read(url, headers: headers, planned: planned, lengthless: (offset, length)) { total in
            guard offset < total || (offset == 0 && total == 0) else { return nil }
            return ByteRange(offset, length.map { min(total, offset + $0) } ?? total)
        }
    }

    /// Starts reading the bytes `resolve` picks from the resource's length, in the version
    /// the read finds: when the origin turns out to hold another version than `planned`, the
    /// range is resolved again from the new length, so ``ReadStream/metadata`` and
    /// ``ReadStream/range`` always agree (a front door writes its head from them alone). The
    /// one place a read plans again, at most three times.
    /// - Parameter lengthless: the offset and length to read when the resource has no length.
    /// - Parameter resolve: the bytes to read of a resource of the given length; `nil` when
    ///   none can be (`.rangeNotSatisfiable`, with ``CacheError/resourceLength``).
    package func read(
        _ url: URL, headers: RequestHeaders, planned: ContentMetadata?, lengthless: (offset: Int64, length: Int64?),
        resolving resolve: (Int64) -> ByteRange?
    ) async throws -> ReadStream {
        let key = store.key(for: url)
        var planned = planned
        for _ in 0..<3 {
            let metadata: ContentMetadata
            if let known = planned {
                metadata = known
                planned = nil  // a version that changed under the read is asked for again
            } else {
                metadata = try await contentInfo(for: url, headers: headers)
            }
            guard let total = metadata.length else {
                return try await passThrough(url, key: key, offset: lengthless.offset, length: lengthless.length, headers: headers)
            }
            guard let range = resolve(total) else {
                var error = CacheError(.rangeNotSatisfiable, "The range is outside the \(total)-byte resource.")
                error.resourceLength = total
                throw error
            }
            let handle = metadata.isStorable ? try? store.openEntry(key) : nil
            if configuration.isOffline, !range.isEmpty, (try? handle?.spans())?.contains(range) != true {
                handle?.close()
                throw OfflineFetcher.error(url, "bytes \(range.lowerBound)-\(range.upperBound - 1) of it are not all cached")
            }
            let session = ReadSession(reader: self, url: url, key: key, range: range, headers: headers, handle: handle)
            if !metadata.isStorable { session.joinReservedDownload() }
            if needsValidation(key, range: range, handle: handle) {
                switch await session.startFirstDownloadAndWaitForResponse() {
                case .ready:
                    break
                case .resourceChanged:
                    // The entry now holds the new version's metadata; plan again from it.
                    session.close()
                    continue
                case .failed(let error):
                    session.close()
                    throw error
                }
            }
            let current = (try? handle?.metadata()) ?? metadata
            guard current.length == total, current.isSameVersion(as: metadata) else {
                session.close()  // another version was stored meanwhile: plan again from it
                continue
            }
            return ReadStream(metadata: current, range: range, session: session)
        }
        throw CacheError(.resourceChanged, "\(url.absoluteString) kept changing at the origin while being read; try again later.")
    }

    /// A read of a resource whose length the origin does not say (a chunked or
    /// close-delimited body: internet radio, a generated file, a low-latency HLS segment
    /// still being made): one `GET`, streamed straight to this reader from `offset` until the
    /// body ends, shared with no other read. It asks for the read's range, so an origin that
    /// serves a growing resource by range (`206` with `bytes a-b/*`) sends the bytes from
    /// `offset` as they are made; one that answers whole is read from its start. A whole read
    /// of a storable body is also written to a new entry, which becomes complete when the body
    /// ends. The stream's range then ends at ``ByteRange/maximumOffset`` or the part's end.
    private func passThrough(_ url: URL, key: CacheKey, offset: Int64, length: Int64?, headers: RequestHeaders) async throws -> ReadStream {
        let asked = ByteRange(offset, length.map { min(offset + $0, ByteRange.maximumOffset) } ?? ByteRange.maximumOffset)
        let response: OriginResponse
        if let held = scheduler.takeReservedBody(key), held.bodyOffset == 0 || held.bodyOffset == offset {
            response = held  // the probe's, held for this read (see `contentInfoForRead`)
        } else {
            let range = asked == ByteRange(0, ByteRange.maximumOffset) || asked.isEmpty ? nil : asked
            response = try await fetcher.fetch(url, range: range, ifRange: nil, headers: headers)
        }
        try response.check(askedFrom: offset, known: nil, url: url, logger: configuration.logger)
        let end = min(asked.upperBound, response.metadata.length ?? ByteRange.maximumOffset, response.bodyEnd ?? ByteRange.maximumOffset)
        guard offset < end || (offset == 0 && end == 0) else {
            var error = CacheError(.rangeNotSatisfiable, "The range starts at \(offset), past the end of the resource.")
            error.resourceLength = response.metadata.length
            throw error
        }
        let range = ByteRange(offset, end)
        // A whole read of a storable body writes it to a new entry as it passes; the entry
        // gets its length when the body ends (see `ReadSession.PassThrough`). One such
        // writer per resource at a time. (Not a part of a resource of unknown length: where
        // a part ends says nothing of where the resource does.)
        var writer: CacheEntryHandle?
        if offset == 0, length == nil, response.bodyEnd == nil, response.metadata.isStorable, passThroughWriters.withLock({ $0.insert(key).inserted }) {
            // An entry without a length is the leftover of a writer that did not finish.
            if let stale = store.metadata(for: key), stale.length == nil { try? await store.remove(key) }
            if store.metadata(for: key) == nil, let handle = try? store.openEntry(key), (try? handle.updateMetadata(response.metadata)) != nil {
                writer = handle
            } else {
                passThroughWriters.withLock { _ = $0.remove(key) }
            }
        }
        configuration.logger.info("Streaming an answer without a length through", metadata: ["url": "\(url.absoluteString.prefix(200))", "stores": "\(writer != nil)"])
        let session = ReadSession(
            reader: self, url: url, key: key, range: range, headers: headers, handle: nil,
            passThrough: ReadSession.PassThrough(body: response.body, offset: response.bodyOffset, writer: writer))
        var stream = ReadStream(metadata: response.metadata, range: range, session: session)
        stream.isPartOfUnknownLength = response.metadata.length == nil && response.bodyEnd != nil
        return stream
    }

    private func needsValidation(_ key: CacheKey, range: ByteRange, handle: CacheEntryHandle?) -> Bool {
        guard let spans = try? handle?.spans(), !spans.contains(range) else { return false }
        let last = validations.date(of: key)
        return last.map { !Self.isWithin(configuration.revalidationInterval, from: $0, to: store.configuration.clock.now) } ?? true
    }

    /// What each running origin download fetches (the status page).
    package var activeDownloadSummaries: [DownloadSummary] {
        scheduler.summaries
    }

    /// Records the gauges of the metrics (downloads in flight, and the store's size, limit and
    /// entries) as they are now: call it before an export.
    public func recordMetrics() {
        CacheMetrics.downloadsInFlight.record(scheduler.count)
        let summary = store.summary()
        CacheMetrics.cacheSize.record(summary.bytes)
        CacheMetrics.cacheEntries.record(summary.entries)
        CacheMetrics.cacheLimit.record(summary.limit)
    }

    /// How many origin downloads are running (each one may serve several readers).
    public var activeDownloads: Int {
        scheduler.count
    }

    /// The chunk size for a stream now, given how many are open.
    var currentChunkSize: Int64 {
        share(of: configuration.readBufferBudget / 3, upTo: configuration.chunkSize)
    }

    /// The file region size for a stream now, given how many are open.
    var currentRegionSize: Int64 {
        share(of: configuration.fileRegionBudget, upTo: configuration.fileRegionSize)
    }

    /// One open stream's share of `budget`, in whole 16 KiB, within ``Configuration/minimumChunkSize`` ... `maximum`.
    private func share(of budget: Int, upTo maximum: Int) -> Int64 {
        let open = max(1, openStreams.load(ordering: .relaxed))
        let share = budget / open / (16 << 10) * (16 << 10)
        return Int64(min(maximum, max(configuration.minimumChunkSize, share)))
    }

    func markValidated(_ key: CacheKey) {
        validations.record(key, at: store.configuration.clock.now)
        answers.forget(key)  // the resource's own answer replaces any other the origin gave
    }

    /// How many resources' last validation the read path remembers (at most
    /// ``Configuration/validationMemoryLimit``).
    package var rememberedValidations: Int { validations.count }

    /// Whether the origin gave or confirmed the stored version of `url` less than `age` ago.
    package func wasConfirmed(_ url: URL, within age: Duration) -> Bool {
        let key = store.key(for: url)
        guard let stored = store.metadata(for: key) else { return false }
        return isYoung(stored, key: key, within: age)
    }

    /// Whether the origin gave or confirmed the stored `metadata` less than `age` ago.
    private func isYoung(_ metadata: ContentMetadata, key: CacheKey, within age: Duration) -> Bool {
        guard let last = validations.date(of: key) ?? metadata.generatedAt else { return false }
        return Self.isWithin(age, from: last, to: store.configuration.clock.now)
    }

    /// Whether a stored entry may be used without asking the origin: it is fresh (RFC 9111
    /// §4.2; `no-cache` and `max-age=0` never are, so every use of them is validated), or the
    /// app prefers the cache. Requests that arrive while a validation runs share it
    /// (``contentInfo(for:readingFrom:length:headers:maximumAge:)``).
    func isCurrent(_ metadata: ContentMetadata, key: CacheKey) -> Bool {
        configuration.prefersCache || configuration.isOffline || metadata.isFresh(at: store.configuration.clock.now)
    }

    /// Whether `now` is less than `interval` after `start` (and not before it).
    private static func isWithin(_ interval: Duration, from start: Date, to now: Date) -> Bool {
        let elapsed = now.timeIntervalSince(start)
        let limit = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        return elapsed >= 0 && elapsed < limit
    }

    /// Asks the origin whether the stored version is current, with `If-None-Match` /
    /// `If-Modified-Since` on a ranged GET from `offset`: "not modified" refreshes the
    /// entry's freshness at no body cost; any other answer is a version to adopt (a new one
    /// replaces the entry). An origin that cannot be reached leaves the stale entry in use
    /// (``Configuration/servesStaleOnOriginFailure``).
    private func revalidate(_ url: URL, key: CacheKey, stored: ContentMetadata, offset: Int64, headers: RequestHeaders) async throws -> ContentMetadata {
        var conditional = headers
        if let etag = stored.etag { conditional.append((name: "If-None-Match", value: etag)) }
        if let modified = stored.lastModified { conditional.append((name: "If-Modified-Since", value: modified)) }
        let start = min(offset, max(0, (stored.length ?? 1) - 1))
        let response: OriginResponse
        do {
            response = try await fetcher.fetch(url, range: ByteRange(start, start + configuration.minimumRequest), ifRange: nil, headers: conditional)
        } catch let error as CacheError where error.isOriginFailure {
            let logMetadata: Logger.Metadata = ["url": "\(url.absoluteString.prefix(200))", "error": "\(error.message)"]
            guard configuration.servesStaleOnOriginFailure else {
                CacheMetrics.revalidated(.failed)
                throw error
            }
            guard !stored.requiresRevalidation else {
                CacheMetrics.revalidated(.failed)
                configuration.logger.warning(
                    "Not serving the stale cached copy (the origin said must-revalidate or no-cache): the origin failed to revalidate it", metadata: logMetadata)
                throw error
            }
            configuration.logger.warning("Serving a stale cached copy: the origin failed to revalidate it", metadata: logMetadata)
            CacheMetrics.revalidated(.servedStale)
            return stored
        }
        guard !response.isNotModified else {
            CacheMetrics.revalidated(.notModified)
            configuration.logger.debug("The origin confirmed the stored version", metadata: ["url": "\(url.absoluteString.prefix(200))"])
            let metadata = await store(stored.refreshed(by: response.metadata), key: key, version: .confirms(stored))
            markValidated(key)
            return metadata
        }
        // A full answer: another version, or the same one from an origin that ignores
        // conditions. Only a validator both carry shows it is the same: an answer without one
        // (a live playlist from an origin that sends neither `ETag` nor `Last-Modified`) is a
        // new version even when its length is the old one's, and the stored bytes go.
        let same = response.metadata.isProvenSameVersion(as: stored)
        CacheMetrics.revalidated(same ? .notModified : .changed)
        if !same, response.metadata.isSameVersion(as: stored) {
            configuration.logger.debug("A stale entry without a shared validator is replaced by the origin's answer", metadata: ["url": "\(url.absoluteString.prefix(200))"])
        }
        return try await adopt(response, url: url, key: key, offset: start, size: configuration.minimumRequest, headers: headers, version: same ? .compare : .new)
    }

    /// Asks for the first `size` bytes at `offset` and turns the answer into a
    /// download that readers can join; returns the content information it carries.
    private func probe(_ url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders, reserves: Bool) async throws -> ContentMetadata {
        let response: OriginResponse
        do {
            response = try await fetcher.fetch(url, range: ByteRange(offset, offset + size), ifRange: nil, headers: headers)
        } catch let error as CacheError where error.code == .rangeNotSatisfiable {
            // Nothing at `offset` (an empty file, or a read past the end): the content
            // information is all there is to learn, and a 416 does not carry all of it.
            return await store(try await fetcher.contentInfo(for: url, headers: headers), key: key)
        }
        if response.isNotModified {
            // Nothing was stored, so the cache sent no condition: the `304` answers the player's own.
            throw CacheError(answer: response.answer ?? OriginAnswer(status: 304, reason: "Not Modified", headers: [], body: []), url: url.absoluteString)
        }
        return try await adopt(response, url: url, key: key, offset: offset, size: size, headers: headers.withoutConditions, reserves: reserves)
    }

    /// Stores what an origin answer for bytes from `offset` says of the resource (a new
    /// version replaces the entry) and turns its body (`size` bytes asked for) into a download that readers join.
    private func adopt(
        _ response: OriginResponse, url: URL, key: CacheKey, offset: Int64, size: Int64, headers: RequestHeaders,
        reserves: Bool = false, version: VersionChange = .compare
    ) async throws -> ContentMetadata {
        try response.check(askedFrom: offset, known: nil, url: url, logger: configuration.logger)
        let metadata = await store(response.metadata, key: key, version: version)
        markValidated(key)
        guard let total = metadata.length else {
            // No length: the read streams the body through (`passThrough`); the probe's is
            // held for the read that asked, so it costs no second request.
            if reserves, response.bodyOffset == 0 || response.bodyOffset == offset { scheduler.reserve(body: response, for: key) }
            return metadata
        }
        guard response.bodyOffset <= offset, offset < total else { return metadata }
        let download =
            metadata.acceptsRanges
            ? scheduler.makeDownload(
                url: url, key: key, start: offset, end: min(total, offset + size), isFullBody: false,
                stores: metadata.isStorable, headers: headers)
            : scheduler.makeDownload(url: url, key: key, start: 0, end: total, isFullBody: true, stores: metadata.isStorable, headers: headers)
        // Bytes that are not stored are held for the read that asked (see `contentInfoForRead`).
        if reserves, !metadata.isStorable { scheduler.reserve(download) }
        scheduler.start(download, transfer: transfer(for: download, firstResponse: response))
        return metadata
    }
}

/// The names of a request's conditional fields (RFC 9110 §13.1), lower-case.
package let conditionalFieldNames: Set<String> = ["if-match", "if-unmodified-since", "if-none-match", "if-modified-since", "if-range"]

extension [(name: String, value: String)] {
    /// The fields less the player's own conditions (``conditionalFieldNames``): the cache's
    /// own requests carry its own.
    package var withoutConditions: RequestHeaders {
        filter { !Self.isConditional($0.name) }
    }

    /// Whether any field is one of the player's conditions.
    package var hasConditions: Bool {
        contains { Self.isConditional($0.name) }
    }

    /// Whether `name` is a conditional field's; every one starts with `If-`, so most names
    /// are told apart without a lower-cased copy.
    package static func isConditional(_ name: String) -> Bool {
        let bytes = name.utf8
        guard bytes.count >= 7, bytes.first.map({ $0 | 0x20 }) == UInt8(ascii: "i") else { return false }
        return conditionalFieldNames.contains(name.lowercased())
    }
}
