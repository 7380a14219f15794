// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
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
    /// When the origin last confirmed each resource and a player last read it, on the store's
    /// clock: the plays under way.
    let plays: Plays
    /// Whether a stored version may serve, and what the origin is asked otherwise.
    let validator: ContentValidator
    /// How many calls wait on the origin for content information (probes and validations,
    /// shared or not): tests wait on it to know that requests are sharing one.
    package var contentInfoWaiters: Int { validator.waitingForOrigin.load(ordering: .relaxed) }
    /// The read path's other tasks: removals of unfinished entries and segment read-aheads
    /// (``shutDown()`` ends them too).
    let owned = OwnedTasks()
    /// The HLS and DASH segments to store ahead of players (see ``PlaylistLearning/readAhead(of:headers:)``).
    package let segmentReadAhead: SegmentReadAhead
    /// Bodies kept in memory only (see ``bodies.memoryOnlyBody(of:headers:)``).
    let memoryBodies = Mutex(MemoryBodies())
    /// Where the cache's own fetches give way to players waiting on the origin.
    let priority: OriginPriority
    /// The alternates of origins that fail, configured and learned from manifests.
    let failover: OriginFailover
    /// The fetcher's ``OriginFetcher/securityWarning``, taken once: every request's log line
    /// carries it.
    package let securityWarning: String?
    /// The preload queue and its runner (see ``preload(_:)``).
    let preloader: Preloader

    /// Creates a read path over `store` that fetches missing bytes with `fetcher`.
    public init(store: CacheStore, fetcher: any OriginFetcher, configuration: Configuration = Configuration()) {
        self.store = store
        CacheMetrics.register()
        // What the store holds whole is checked against its origin's digests, if it sent any.
        OriginDigestCheck.start(in: store)
        let connections = max(1, min(configuration.originConnectionsPerHost, fetcher.connectionsPerHost ?? .max))
        let priority = OriginPriority(grace: configuration.playerQuietPeriod, timer: configuration.quietTimer)
        self.priority = priority
        let budget = ConnectionBudget(
            limit: connections, ownLimit: configuration.ownConnectionsPerHost ?? max(1, connections / 4),
            logger: configuration.logger, onPlayerWait: { priority.wake() })
        (self.fetcher, failover) = OriginStack.compose(
            fetcher, configuration: configuration, budget: budget, clock: store.configuration.clock)
        self.configuration = configuration
        securityWarning = fetcher.securityWarning
        scheduler = DownloadScheduler(configuration: configuration)
        plays = Plays(
            limit: configuration.validationMemoryLimit, window: configuration.playWindow,
            clock: store.configuration.clock)
        segmentReadAhead = SegmentReadAhead(depth: configuration.segmentReadAhead)
        preloader = Preloader(
            maxBytes: configuration.preloadBudget, maxConcurrent: configuration.preloadConcurrency, owned: owned,
            logger: configuration.logger)
        context = ReadContext(
            store: store, configuration: configuration, fetcher: self.fetcher, scheduler: scheduler,
            plays: plays, priority: priority,
            owned: owned,
            fills: FillOnPlay(
                policy: configuration.fillOnPlay, capacity: configuration.concurrentFills,
                storeLimit: store.configuration.maxBytes, proofBytes: configuration.fillProofBytes, plays: plays,
                room: { [store] in store.roomForOwnBytes(atLeast: $0) }))
        validator = ContentValidator(context: context)
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
        try await prefetch(.hls, url, options: options, progress: progress)
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
        try await prefetch(.dash, url, options: options, progress: progress)
    }

    /// Plans the asset of `kind` at `url` as the cache's own work, and stores what the plan takes.
    private func prefetch(
        _ kind: ManifestKind, _ url: URL, options: HLSPrefetchOptions,
        progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws -> PrefetchProgress {
        let plan = try await planner(for: .own(.prefetch)).plan(url, kind: kind, options: options)
        return try await Prefetcher(reader: self, requester: .own(.prefetch)).run(
            plan.items, playlists: plan.playlists, options: options, progress: progress)
    }

    /// Stores `range` of the file at `url` (all of it when `nil`) ahead of playing it, as a
    /// player's read would. Cancel the calling task to stop; what arrived stays cached.
    /// - Returns: the final progress (one resource).
    @discardableResult
    public func prefetch(
        _ url: URL, range: ByteRange? = nil, headers: RequestHeaders = [],
        progress: @escaping @Sendable (PrefetchProgress) -> Void = { _ in }
    ) async throws -> PrefetchProgress {
        try await prefetch(url, range: range, headers: headers, as: .own(.prefetch), progress: progress)
    }

    /// ``prefetch(_:range:headers:progress:)`` as `requester`'s work (a pin's, a preload's, a
    /// read-ahead's, a recording's).
    @discardableResult
    func prefetch(
        _ url: URL, range: ByteRange? = nil, headers: RequestHeaders = [], as requester: Requester,
        progress: @escaping @Sendable (PrefetchProgress) -> Void = { _ in }
    ) async throws -> PrefetchProgress {
        var options = HLSPrefetchOptions()
        options.headers = headers
        return try await Prefetcher(reader: self, requester: requester).run(
            [PrefetchItem(url: url, range: range)], playlists: [], options: options, progress: progress)
    }

    /// What the assets' plans are made by for `requester` (see ``AssetPlanner``).
    func planner(for requester: Requester) -> AssetPlanner { AssetPlanner(reader: self, requester: requester) }

    /// What the store holds of assets, as an offline player may be shown them (see ``HeldAssets``).
    package var held: HeldAssets { HeldAssets(source: self) }

    /// This read path as an offline one: the store alone, every stored entry current. One per
    /// reader, made when first asked for (exports, held assets) and shut down with it.
    package var offlineTwin: CachingReader {
        guard !configuration.isOffline else { return self }
        return twin.withLock { twin in
            if let twin { return twin }
            var offline = configuration
            offline.isOffline = true
            let made = CachingReader(store: store, fetcher: fetcher.base, configuration: offline)
            twin = made
            return made
        }
    }
    private let twin = Mutex<CachingReader?>(nil)

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
    public var preloadStatus: [PreloadItem.Status] { preloader.status }

    /// Holds the preloads for `reason` (`"power"`), or lets them go on (`nil`): the download
    /// queue does, as the device's power changes.
    func holdPreloads(_ reason: PreloadHold?) {
        preloader.hold(reason?.rawValue, from: self)
    }

    /// Why preloads wait.
    enum PreloadHold: String {
        case power
    }

    /// The most items a preload queue holds: it is what plays next, not a library.
    public static let maximumPreloadItems = Preloader.maximumItems

    /// Stops the origin work the read path does on its own tasks: every download (a
    /// prefetch's too) and every probe or revalidation, and returns once they have ended, so
    /// a store closed afterwards has no writer left. Reads waiting on them fail; reads started
    /// afterwards are answered from the store alone. Call it when the app or server stops,
    /// before ``CacheStore/close()``.
    public func shutDown() async {
        await scheduler.shutDown()
        await validator.shutDown()
        await owned.cancelAndWait()
        await twin.withLock { $0 }?.shutDown()
    }

    /// What is stored of `url` now (the proxy counts a body's bytes within it as from the cache).
    package func storedSpans(of url: URL) -> SpanSet {
        store.spans(for: store.key(for: url))
    }

    /// Whether `url` may be fetched at all (see ``OriginFetcher/checkOrigin(_:)``).
    /// - Throws: ``CacheError`` with ``CacheError/Code/originNotAllowed`` and the reason.
    package func checkOrigin(_ url: URL) throws {
        try fetcher.checkOrigin(url)
    }

}

extension CachingReader {
    /// What kind of manifest a resource is.
    public enum ManifestKind: String, Sendable, Equatable, Codable {
        /// An HLS playlist.
        case hls
        /// A DASH manifest (MPD).
        case dash
    }

    /// Whether the resource is an HLS playlist or a DASH manifest: by its media type, or (for
    /// a small resource of no particular type) by how its body starts, read through the cache.
    /// - Parameter planned: see ``read(_:offset:length:headers:planned:)``.
    /// - Parameter requester: who reads.
    package func manifestKind(
        _ url: URL, _ metadata: ContentMetadata, headers: RequestHeaders = [], planned: ContentMetadata? = nil,
        as requester: Requester
    ) async throws -> ManifestKind? {
        guard ManifestLook.mayBePlaylist(metadata) else { return nil }
        if let declared = ManifestLook.declaredKind(metadata) { return declared }
        let key = store.key(for: url)
        // The probe's bytes in memory, when it fetched the start: the look waits for no write.
        let length = min(metadata.length ?? ManifestLook.sniffedLength, ManifestLook.sniffedLength)
        if length > 0,
            let first = await scheduler.reservedStart(
                of: key, length: length, waiting: { wait in await priority.whilePlayerWaits(requester, wait) })
        {
            let kind = ManifestLook.sniffedKind(first)
            if kind == nil { store.noteStartIsMedia(of: key, version: planned ?? metadata) }
            return kind
        }
        // A look, not the read that answers: the probe's download stays held for that one.
        let stream = try await read(
            url, headers: headers, planned: planned, lengthless: (0, ManifestLook.sniffedLength),
            takesReservation: false, as: requester
        ) { total in
            ByteRange(0, min(total, ManifestLook.sniffedLength))
        }
        var first: [UInt8] = []
        for try await chunk in stream { first += chunk.readableBytesView }
        let kind = ManifestLook.sniffedKind(first)
        // Kept with the version: its next ranges need no look (the store's fast road).
        if kind == nil, first.count == min(metadata.length ?? 0, ManifestLook.sniffedLength) {
            store.noteStartIsMedia(of: key, version: stream.metadata)
        }
        return kind
    }

    /// Whether a read from `firstByte` is known to be of media without a look at the body's
    /// start: the type (or an earlier look) says so, or the read starts past 0 of a resource
    /// whose type names no playlist and whose start is not stored (a player opens a playlist
    /// from its start, and the look would cost a second origin request). The proxy's fast
    /// road and its general path ask the same.
    package func isMediaWithoutLook(_ url: URL, _ metadata: ContentMetadata, from firstByte: Int64) -> Bool {
        guard ManifestLook.mayBePlaylist(metadata) else { return true }
        return firstByte > 0 && ManifestLook.declaredKind(metadata) == nil && !holdsStart(of: url, metadata)
    }

    /// Whether the bytes a look at the body's start reads (``ManifestLook/sniffedLength``) are stored, so
    /// that the look costs no origin request.
    package func holdsStart(of url: URL, _ metadata: ContentMetadata) -> Bool {
        guard let length = metadata.length else { return false }
        return length == 0 || storedSpans(of: url).contains(ByteRange(0, min(length, ManifestLook.sniffedLength)))
    }

    /// Whether the resource `metadata` describes is an HLS playlist: by its media type, or
    /// (for a small resource of no particular type) by a body that starts with `#EXTM3U`,
    /// read through the cache.
    /// - Parameter planned: see ``read(_:offset:length:headers:planned:)``.
    /// - Parameter requester: who reads.
    package func isPlaylist(
        _ url: URL, _ metadata: ContentMetadata, headers: RequestHeaders = [], planned: ContentMetadata? = nil,
        as requester: Requester
    ) async throws -> Bool {
        try await manifestKind(url, metadata, headers: headers, planned: planned, as: requester) == .hls
    }
}

/// What the cache holds written outside it, with no network: as a folder (``Exporter``) or as one
/// playable file (``FileExport``).
extension CachingReader {
    /// Writes what the cache holds of `url` at `destination` without contacting the origin
    /// (see ``Exporter``); `renditions` and `seconds` choose what of an HLS or DASH asset, as a
    /// pin does, else every rendition wholly held is written.
    @discardableResult
    package func export(
        _ url: URL, to destination: URL, renditions: RenditionChoice = RenditionChoice(), seconds: Double? = nil
    ) async throws -> ExportSummary {
        try await Exporter(reading: self).export(url, to: destination, renditions: renditions, seconds: seconds)
    }

    /// Writes the held rendition of the HLS asset or DASH presentation at `url` as one playable
    /// file at `destination`, without contacting the origin: fragmented MP4 segments as one MP4
    /// (video and the chosen audio as two tracks; `.m4a` for audio alone), MPEG-TS segments as
    /// one `.ts` (a separate audio rendition in the same programme), AES-128 segments deciphered
    /// with their held keys. Chosen WebVTT subtitles are written beside it as
    /// `<name>.<language>.vtt`. `renditions` chooses as a pin does; when it names no variant,
    /// the variant of the highest bandwidth wholly held is written. Memory stays flat however
    /// long the asset.
    /// - Throws: ``CacheError``: `.offline` naming a rendition or key that is not held (remedy
    ///   ``CacheError/Remedy/Action/pinFirst``); `.originRejected` for what cannot be one file
    ///   (`SAMPLE-AES`, a DRM system's keys, packed audio, an init section that changes midway);
    ///   `.outOfBounds` for a plain file, or a name whose extension is another container's;
    ///   `.ioFailure` when `destination` exists or cannot be written. A failed export leaves no file.
    @discardableResult
    public func exportFile(_ url: URL, to destination: URL, renditions: RenditionChoice = RenditionChoice())
        async throws -> ExportSummary
    {
        try await FileExport(reading: self).export(url, to: destination, renditions: renditions)
    }
}
