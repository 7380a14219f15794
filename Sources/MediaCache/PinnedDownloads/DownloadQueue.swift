// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Logging
import Synchronization

/// Pinned downloads: a queue of ``DownloadJob``s kept with the store, at most
/// ``Configuration/maxConcurrent`` downloading at once.
///
/// ```swift
/// let downloads = try DownloadQueue(reader: reader)
/// downloads.start()                                   // resumes what a restart cut
/// let job = try await downloads.pin(filmURL)          // refused at once if it cannot fit
/// for await update in downloads.updates() { screen.show(update) }
/// ```
/// A pinned resource is read as any other (play while it downloads); it is never evicted
/// until it is unpinned, and its bytes count against ``CacheStore/Configuration/pinnedQuota``.
public final class DownloadQueue: Sendable {
    /// Options for the queue.
    public struct Configuration: Sendable {
        /// How many jobs download at once; the others wait, queued.
        public var maxConcurrent = 2
        /// A downloading job has the store commit its bytes after about this many, so a
        /// job cut by a crash or `kill -9` fetches at most about this much again.
        public var commitInterval: Int64 = 1 << 20
        /// The rules every job follows unless it sets its own (``setRules(_:_:)``): a daily
        /// window, the networks allowed (by default unmetered only) and a rate cap for all the
        /// downloads together. A download a player is reading is never held back.
        public var rules = DownloadRules()
        /// The battery level, 0...1, below which the power counts as low (``DownloadRules/Power/notLow``)
        /// when the device is not charging: by default 20 %.
        public var lowBatteryLevel = 0.2
        /// The time zone a daily window is read in.
        package var timeZone = TimeZone.current
        /// How often a queue with unfinished jobs looks at the disk's free space and the time again.
        package var checkInterval: Duration = .seconds(5)
        /// Asked for a new URL when a job's origin refuses its URL (`401`, `403`, `410`: a
        /// signed URL that expired): the job goes on from the URL given (``replaceURL(_:with:)``),
        /// or fails as before when `nil` comes back.
        public var freshURL: (@Sendable (DownloadJob) async -> URL?)?
        /// A system session that runs the jobs' transfers while the app does not (iOS's
        /// background `URLSession`, through `MediaCacheAVFoundation`'s `BackgroundPinSession`):
        /// every piece a pinned resource misses is handed to it instead of fetched in the app;
        /// `nil` (the default) fetches in the app. A recording always runs in the app.
        public var backgroundTransfers: BackgroundTransfers?
        /// The background check of pinned entries (``PinScrubber``), which runs while the
        /// queue is started.
        package var scrub = PinScrubber.Configuration()
        /// Where the queue logs.
        public var logger = Logger(label: "mediacache.downloads", factory: { _ in SwiftLogNoOpLogHandler() })

        /// Creates the default configuration.
        public init() {}
    }

    /// A change of the queue, as ``updates()`` tells it.
    public enum Update: Sendable, Equatable {
        /// A job was added, or its state or progress changed.
        case changed(DownloadJob)
        /// A job was cancelled or unpinned: its bytes went back to the streaming cache.
        case removed(id: String)
    }

    /// The read path the jobs download through.
    public let reader: CachingReader
    /// The queue's options.
    public let configuration: Configuration

    /// Why a running job's task was cancelled.
    enum Stop: Equatable {
        case pause, cancel, shutDown
        /// Queued again: its rules stop it now (the reason), or others come first (`nil`).
        case wait(DownloadJob.Wait?)
    }

    struct Running {
        var task: Task<Void, Never>?
        var startedAt = ContinuousClock.now
        /// The job's bytes when the store last committed.
        var committedBytes: Int64 = 0
        var stop: Stop?
        /// An asset's renditions and their resources, once planned.
        var plan: [(rendition: ChosenRendition, items: [PrefetchItem])] = []
        /// Its download has ended and its state is being written: it is not cancelled, and
        /// ``shutDown()`` waits for the write.
        var isSettling = false
    }

    struct State {
        var jobs: [String: DownloadJob] = [:]
        var running: [String: Running] = [:]
        var subscribers: [UInt64: AsyncStream<Update>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        var isShutDown = false
        var isStarted = false
        /// What the system says of the network, and what the user says over it.
        var network = DownloadRules.NetworkConditions.unknown
        var power = DownloadRules.PowerConditions.unknown
        var networkOverride = DownloadRules.NetworkOverride.auto
        /// Looks at the rules again while jobs are unfinished (``watch()``).
        var watcher: Task<Void, Never>?
        /// The reconciliation with the system's transfer service at launch, stopped by ``shutDown()``.
        var reconciling: Task<Void, Never>?
        /// When a window next opens or closes.
        var nextCheck: Date?

        /// Tells every subscriber; called under the lock, so updates arrive in the order of the changes.
        func publish(_ update: Update) {
            for subscriber in subscribers.values { subscriber.yield(update) }
        }

        /// The jobs in the queue's order: by rank (``DownloadQueue/move(_:toFront:)``), then as they were added.
        var ordered: [DownloadJob] {
            jobs.values.sorted { ($0.rank ?? 0, $0.createdAt, $0.id) < ($1.rank ?? 0, $1.createdAt, $1.id) }
        }
    }

    let state = Mutex(State())
    var store: CacheStore { reader.store }
    /// The rate cap every job shares (``Configuration/maxBytesPerSecond``).
    let rate: DownloadRate?
    /// Checks the pinned entries again now and then.
    package let scrubber: PinScrubber

    /// The queue of `reader`'s store, with the jobs kept there. A job that was downloading
    /// when the store was last closed is queued again; call ``start()`` to run them.
    /// - Throws: ``CacheError`` `.indexFailure` when the jobs cannot be read.
    public init(reader: CachingReader, configuration: Configuration = Configuration()) throws {
        self.reader = reader
        self.configuration = configuration
        rate = configuration.rules.maxBytesPerSecond.map { DownloadRate(bytesPerSecond: $0) }
        scrubber = PinScrubber(reader: reader, configuration: configuration.scrub)
        var jobs: [String: DownloadJob] = [:]
        for (id, body) in try reader.store.loadJobs() {
            // An unreadable job (a newer layout, a damaged row) stays in the index, untouched.
            let read = Result { try JSONDecoder().decode(DownloadJob.self, from: body) }
            guard case .success(var job) = read, job.id == id else {
                let reason = (try? read.get()).map { _ in "its ID differs" } ?? "\(read)".prefix(300)
                configuration.logger.warning(
                    "Skipped a download job the index holds in an unreadable form",
                    metadata: ["job": "\(id.prefix(40))", "reason": "\(reason)"])
                continue
            }
            if job.state == .downloading { job.state = .queued }
            // Its cookies go back to the jar, from which every request and write takes them.
            if let kept = job.cookies {
                reader.fetcher.cookieJar?.restore(kept, now: reader.store.configuration.clock.now)
            }
            job.cookies = nil
            job.bytesPerSecond = nil
            job.secondsLeft = nil
            if job.state == .completed, let vanished = Self.vanished(job, in: reader.store) {
                // The system cleaned the folder (a phone's cache directory): said, and resumable.
                job.state = .failed
                job.failure = vanished
                job.remedy = CacheError.Remedy(.resumeJob, job: id)
                configuration.logger.warning(
                    "A pinned download's files vanished", metadata: ["job": "\(id)", "reason": "\(vanished)"])
            }
            jobs[id] = job
        }
        state.withLock { $0.jobs = jobs }
    }

    /// Starts downloading the queued jobs (those a restart cut among them).
    public func start() {
        state.withLock { $0.isStarted = true }
        schedule()
        scrubber.start()
        if configuration.backgroundTransfers != nil {
            let task = Task { await reconcileBackgroundAtLaunch() }
            let late = state.withLock { state in
                state.reconciling = task
                return state.isShutDown
            }
            if late { task.cancel() }
        }
    }

    /// Every job, in the order they were added.
    public var jobs: [DownloadJob] {
        state.withLock { $0.ordered }
    }

    /// The job whose id is `text`, or whose URL is `text`, or that pins the entry of that URL.
    public func job(matching text: String) -> DownloadJob? {
        let key = URL(string: text).map(store.key(for:))
        return state.withLock { state in
            state.jobs[text]
                ?? state.ordered.first { $0.url.absoluteString == text || ($0.keys.first.map { $0 == key } ?? false) }
        }
    }

    /// The changes of every job from now on, until ``shutDown()``.
    public func updates() -> AsyncStream<Update> {
        let (stream, continuation) = AsyncStream.makeStream(of: Update.self, bufferingPolicy: .bufferingNewest(1024))
        let id = state.withLock { state -> UInt64? in
            guard !state.isShutDown else { return nil }
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    // MARK: Pinning

    /// Pins `url` and queues its download: a file, or, when `url` is an HLS playlist or a
    /// DASH manifest, the asset `variant` and `seconds` choose, with its default audio
    /// (``pin(_:renditions:seconds:rules:)`` chooses languages, subtitles and trick play too). Pinning
    /// a URL that has a job already returns that job (resumed if it was paused or failed).
    @discardableResult
    public func pin(_ url: URL, variant: HLSPrefetchOptions.VariantChoice = .first, seconds: Double? = nil) async throws
        -> DownloadJob
    {
        if let existing = job(matching: url.absoluteString) { return try await resumed(existing) }
        return try await pin(url, renditions: RenditionChoice(variants: [variant]), seconds: seconds)
    }

    /// Pins `url` and queues its download: a file, or, when `url` is an HLS playlist or a
    /// DASH manifest, the renditions `renditions` choose (a part left unsaid takes its default:
    /// the first variant, the default audio, no subtitles) and `seconds` of each. Asking for
    /// the content information (a `HEAD`, or the playlists) is all it fetches before it
    /// decides; a pin that cannot fit the pinned quota is refused then, saying how much it
    /// needs and how much is free.
    ///
    /// Pinning an asset that has a job already adds what `renditions` names to the job's
    /// choice (another audio language, say): only the new renditions' resources are fetched,
    /// what is stored already is not. With nothing new, the job is returned as it is (resumed
    /// if it was paused or failed).
    /// - Throws: ``CacheError``: `.capacityExceeded` with the numbers; `.outOfBounds` for a
    ///   language the asset does not have; `.originRejected` for a resource of unknown length
    ///   or one the origin forbids storing; origin errors.
    ///
    /// `rules` are the job's own (``setRules(_:_:)``), in force before it first runs; a job
    /// that exists already takes them too.
    @discardableResult
    public func pin(
        _ url: URL, renditions: RenditionChoice, seconds: Double? = nil, rules: DownloadRules = DownloadRules()
    ) async throws -> DownloadJob {
        try reader.checkOrigin(url)
        let key = store.key(for: url)
        if let existing = job(matching: url.absoluteString) {
            if !rules.isEmpty { try await setRules(existing.id, rules) }
            if let asset = existing.asset, !renditions.isEmpty {
                let merged = asset.renditions.adding(renditions)
                if merged != asset.renditions { return try await rechoose(existing.id, merged) }
            }
            return try await resumed(existing)
        }
        let metadata = try await reader.contentInfo(for: url, as: .own(.pin))
        var job = DownloadJob(id: Self.makeID(), url: url, state: .queued, createdAt: store.configuration.clock.now)
        job.rules = rules.isEmpty ? nil : rules
        var keys = [key]
        if let kind = try await reader.manifestKind(url, metadata, as: .own(.pin)) {
            let asset = DownloadJob.AssetChoice(format: kind, renditions: renditions, seconds: seconds)
            let plan = try await reader.planner(for: .own(.pin)).plan(
                url, kind: kind, options: HLSPrefetchOptions(renditions: asset.renditions, seconds: seconds))
            keys += Self.keys(of: plan, in: store)
            job.asset = asset
            job.bytesTotal = plan.estimatedBytes
            job.totalIsEstimate = plan.items.contains { $0.range == nil }
            job.resourcesTotal = plan.items.count
            job.renditions = renditionStates(plan)
        } else {
            guard let length = metadata.length else {
                throw CacheError(
                    .originRejected,
                    "The origin does not say how long \(url.absoluteString.prefix(200)) is, so it cannot be pinned.")
            }
            guard metadata.isStorable else {
                throw CacheError(
                    .originRejected,
                    "The origin forbids storing \(url.absoluteString.prefix(200)) (no-store), so it cannot be pinned.")
            }
            job.bytesTotal = length
            job.resourcesTotal = 1
        }
        var seen: Set<CacheKey> = []
        job.keys = keys.filter { seen.insert($0).inserted }
        try checkRoom(for: job)
        try await store.pin(job.keys)
        state.withLock { state in
            state.jobs[job.id] = job
            state.publish(.changed(job))
        }
        configuration.logger.info(
            "Pinned",
            metadata: [
                "job": "\(job.id)", "url": "\(url.absoluteString.prefix(200))",
                "bytes": "\(job.bytesTotal.map(String.init) ?? "unknown")",
            ])
        try await persist(job.id)
        schedule()
        return job
    }

    /// `job`, resumed if it was paused or failed.
    private func resumed(_ job: DownloadJob) async throws -> DownloadJob {
        if job.state == .paused || job.state == .failed { return try await resume(job.id) }
        return job
    }

    /// The keys of a plan's playlists and resources.
    static func keys(of plan: PrefetchPlan, in store: CacheStore) -> [CacheKey] {
        plan.playlists.map(store.key(for:)) + plan.items.map { store.key(for: $0.url) }
    }

    /// Refuses `job` when what it still needs exceeds what the pinned quota has free, the
    /// outstanding bytes of the other unfinished jobs counted as taken.
    func checkRoom(for job: DownloadJob) throws {
        guard let total = job.bytesTotal else { return }
        let quota = store.configuration.pinnedQuota
        let pinned = store.pinnedBytes
        let alreadyPinned = job.keys.reduce(Int64(0)) { $0 + (store.isPinned($1) ? store.spans(for: $1).byteCount : 0) }
        let promised = state.withLock { state in
            state.jobs.values.filter { $0.state != .completed && $0.id != job.id }.reduce(Int64(0)) {
                $0 + max(0, ($1.bytesTotal ?? 0) - $1.bytesDone)
            }
        }
        let needed = max(0, total - alreadyPinned)
        let free = max(0, quota - pinned - promised)
        guard needed <= free else {
            let about = job.totalIsEstimate ? "about " : ""
            let error = CacheError(
                .capacityExceeded,
                "Pinning \(job.url.absoluteString.prefix(200)) needs \(about)\(ByteCountText.format(needed)) (\(needed) bytes), "
                    + "but only \(ByteCountText.format(free)) (\(free) bytes) of the \(ByteCountText.format(quota)) pinned quota is free "
                    + "(\(ByteCountText.format(pinned)) pinned, \(ByteCountText.format(promised)) promised to unfinished downloads).",
                remedy: CacheError.Remedy(.raisePinnedQuota))
            configuration.logger.warning(
                "Refused a pin over the quota",
                metadata: ["url": "\(job.url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw error
        }
    }

    /// Unpins `url`: its job (if any) stops and is forgotten, and its entries go back to the
    /// streaming cache. Returns whether anything was pinned.
    @discardableResult
    public func unpin(_ url: URL) async throws -> Bool {
        if let job = job(matching: url.absoluteString) {
            try await cancel(job.id)
            return true
        }
        let key = store.key(for: url)
        let wasPinned = store.isPinned(key)
        try await store.unpin([key])
        return wasPinned
    }

    // MARK: Helpers

    /// Writes the job as it is, with the cookies its stream's host has in the fetcher's jar:
    /// a stream behind signed cookies resumes after a restart, when the jar is empty.
    func persist(_ id: String) async throws {
        try await store.saveJob(id) { [self] in
            guard var job = state.withLock({ $0.jobs[id] }) else { return nil }
            if let jar = reader.fetcher.cookieJar, let host = job.url.host {
                let cookies = jar.cookies(for: host, now: store.configuration.clock.now)
                job.cookies = cookies.isEmpty ? nil : cookies
            }
            return try JSONEncoder().encode(job)
        }
    }

    func current(_ id: String) throws -> DownloadJob {
        guard let job = state.withLock({ $0.jobs[id] }) else { throw DownloadJob.missing(id) }
        return job
    }

    /// Eight hexadecimal digits.
    static func makeID() -> String {
        let hex = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
