// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What to cache of an HLS asset ahead of playing it (see ``CachingReader/prefetchHLS(_:options:progress:)``).
public struct HLSPrefetchOptions: Sendable, Equatable {
    /// Which variant stream of a master playlist.
    public enum VariantChoice: Sendable, Equatable, Codable {
        /// The first listed (what most players start with).
        case first
        case lowestBandwidth
        case highestBandwidth
        /// The highest `BANDWIDTH` of at most this many bits per second; the lowest if none is.
        case atMost(bitsPerSecond: Int64)
        /// The tallest picture (`RESOLUTION`, DASH `height`) of at most this many lines, the
        /// highest `BANDWIDTH` of those; the shortest if none is; the first when none says.
        case atMostHeight(Int64)
    }

    /// The variants, audio and subtitle languages and trick-play playlists to store.
    public var renditions = RenditionChoice()

    /// The first of ``RenditionChoice/variants`` (setting it makes it the only one).
    public var variant: VariantChoice {
        get { renditions.variants.first ?? .first }
        set { renditions.variants = [newValue] }
    }
    /// How much of each media playlist, from its first segment: `nil` for all of it, else
    /// segments until their durations reach this many seconds.
    public var seconds: Double?
    /// How many resources are fetched at once.
    public var concurrency = 2
    /// Request fields for the origin (credentials, cookies).
    public var headers: RequestHeaders = []

    public init(variant: VariantChoice = .first, seconds: Double? = nil) {
        self.renditions = RenditionChoice(variants: [variant])
        self.seconds = seconds
    }

    /// The options of `renditions` and `seconds`.
    public init(renditions: RenditionChoice, seconds: Double? = nil) {
        self.renditions = renditions
        self.seconds = seconds
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.renditions == rhs.renditions && lhs.seconds == rhs.seconds && lhs.concurrency == rhs.concurrency
            && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
    }
}

/// How far a prefetch has got.
public struct PrefetchProgress: Sendable, Equatable, Codable {
    /// Media segments and init sections stored, of those chosen.
    public var resourcesDone = 0
    public var resourcesTotal = 0
    /// Bytes of the chosen resources stored (fetched now or already cached).
    public var bytesDone: Int64 = 0
    /// The chosen resources' bytes, once every one's length is known (byte-range segments
    /// are known from the playlist; whole files once they are reached).
    public var bytesTotal: Int64?
    /// Of ``bytesDone``, those of resources that were wholly cached before the prefetch.
    public var bytesAlreadyCached: Int64 = 0
    /// The media playlists chosen (one per rendition: the variant, its audio).
    public var playlists: [URL] = []

    public init() {}

    /// Whether every chosen resource is stored.
    public var isComplete: Bool { resourcesDone == resourcesTotal }
}

/// One resource a prefetch stores: a segment or init section, whole or a byte range of a file.
struct PrefetchItem: Hashable, Sendable {
    var url: URL
    var range: ByteRange?
}

/// A prefetch's progress, updated by its concurrent fetches and reported after each change.
final class PrefetchTracker: Sendable {
    private struct State {
        var progress = PrefetchProgress()
        /// The whole resources whose length is known.
        var known: Set<PrefetchItem> = []
        /// The bytes of the byte ranges and of the whole resources in `known`.
        var knownBytes: Int64 = 0
        /// How many whole resources have no known length yet.
        var unknown = 0
        /// How many changes there have been.
        var changes = 0
    }

    private let state: Mutex<State>
    /// The number of the last change reported: concurrent fetches change the progress in one
    /// order, and `onChange` hears them in that order, a change already overtaken left out (a
    /// progress bar never goes back).
    private let reported = Mutex<Int>(0)
    private let onChange: @Sendable (PrefetchProgress) -> Void

    init(items: [PrefetchItem], playlists: [URL], progress: @escaping @Sendable (PrefetchProgress) -> Void) {
        var initial = State()
        initial.progress.playlists = playlists
        initial.progress.resourcesTotal = items.count
        for item in items {
            if let range = item.range { initial.knownBytes += range.length } else { initial.unknown += 1 }
        }
        initial.progress.bytesTotal = initial.unknown == 0 ? initial.knownBytes : nil
        state = Mutex(initial)
        onChange = progress
        progress(initial.progress)
    }

    var progress: PrefetchProgress { state.withLock { $0.progress } }

    func report(_ change: (inout PrefetchProgress) -> Void) {
        publish { change(&$0.progress) }
    }

    /// Records the byte count of a whole resource (`item.range == nil`), once known.
    func learned(_ length: Int64, of item: PrefetchItem) {
        publish { state in
            if item.range == nil, state.known.insert(item).inserted {
                state.knownBytes += length
                state.unknown -= 1
                if state.unknown == 0 { state.progress.bytesTotal = state.knownBytes }
            }
        }
    }

    /// Applies `change` and reports the progress after it, unless a later change has been
    /// reported already.
    private func publish(_ change: (inout State) -> Void) {
        let (snapshot, number) = state.withLock { state in
            change(&state)
            state.changes += 1
            return (state.progress, state.changes)
        }
        reported.withLock { last in
            guard number > last else { return }
            last = number
            onChange(snapshot)
        }
    }
}

extension CachingReader {
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
        let plan = try await OriginPriority.$isCachesOwn.withValue(true) { try await prefetchPlan(url, options: options) }
        return try await prefetch(plan.items, playlists: plan.playlists, options: options, progress: progress)
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
        return try await prefetch([PrefetchItem(url: url, range: range)], playlists: [], options: options, progress: progress)
    }

    /// Stores `items`, `options.concurrency` at a time, reporting progress.
    func prefetch(
        _ items: [PrefetchItem], playlists: [URL], options: HLSPrefetchOptions,
        progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws -> PrefetchProgress {
        let tracker = PrefetchTracker(items: items, playlists: playlists, progress: progress)
        // A prefetch is the cache's own work (so are read-ahead and pinned downloads, which come
        // here): its origin transfers give way to players (``OriginPriority``).
        try await OriginPriority.$isCachesOwn.withValue(true) {
            try await prefetchAll(items, options: options, tracker: tracker)
        }
        return tracker.progress
    }

    private func prefetchAll(_ items: [PrefetchItem], options: HLSPrefetchOptions, tracker: PrefetchTracker) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var pending = items[...]
            func startNext() {
                guard let item = pending.popFirst() else { return }
                group.addTask { [self] in
                    try await prefetch(item, options: options) { length in
                        tracker.learned(length, of: item)
                    } stored: { bytes, wasCached in
                        tracker.report {
                            $0.bytesDone += bytes
                            if wasCached { $0.bytesAlreadyCached += bytes }
                        }
                    }
                    tracker.report { $0.resourcesDone += 1 }
                }
            }
            for _ in 0..<max(1, options.concurrency) { startNext() }
            while try await group.next() != nil { startNext() }
        }
    }

    /// What a prefetch of an HLS asset or a DASH presentation stores.
    struct PrefetchPlan {
        /// The media playlists chosen (a DASH manifest's own URL).
        var playlists: [URL]
        var items: [PrefetchItem]
        /// The chosen variant's `BANDWIDTH` times each segment's duration, for segments of
        /// unknown length (a media playlist named directly has none: `nil`).
        var estimatedBytes: Int64?
        /// Each rendition chosen and the resources it needs (an item may serve several).
        var renditions: [(rendition: ChosenRendition, items: [PrefetchItem])] = []
    }

    /// The media playlists and resources a prefetch of `url` stores.
    func prefetchPlan(_ url: URL, options: HLSPrefetchOptions, imports: [String: String] = [:]) async throws -> PrefetchPlan {
        let (entry, base) = try await parsedPlaylist(url, headers: options.headers, imports: imports)
        var chosen = [ChosenRendition(role: .variant, url: url, bandwidth: 0)]
        if entry.isMaster {
            do {
                chosen = try options.renditions.renditions(of: entry, base: base)
            } catch {
                throw CacheError(.outOfBounds, error.message)
            }
            guard chosen.contains(where: { $0.role == .variant }) else {
                throw CacheError(.originRejected, "The master playlist at \(url.absoluteString.prefix(200)) names no http(s) variant.")
            }
        }
        var items: [PrefetchItem] = []
        var seen: Set<PrefetchItem> = []
        var estimate: Int64 = 0
        var renditions: [(rendition: ChosenRendition, items: [PrefetchItem])] = []
        for rendition in chosen {
            let playlistURL = rendition.url
            let (media, mediaBase) =
                playlistURL == url ? (entry, base) : try await parsedPlaylist(playlistURL, headers: options.headers, imports: entry.definitions)
            var seconds = 0.0
            var own: [PrefetchItem] = []
            for segment in media.segments {
                if let limit = options.seconds, seconds >= limit { break }
                seconds += segment.duration
                if rendition.role == .variant, segment.byteRange == nil, rendition.bandwidth > 0 {
                    // BANDWIDTH covers every rendition of the variant (RFC 8216 §4.3.4.2).
                    estimate = Self.saturatingSum(estimate, Int64(min(1e15, Double(rendition.bandwidth) / 8 * max(0, segment.duration))))
                }
                if let section = segment.initSection, let sectionURL = HLSPlaylist.resolve(section.uri, base: mediaBase) {
                    own.append(PrefetchItem(url: sectionURL, range: section.byteRange))
                }
                if let segmentURL = HLSPlaylist.resolve(segment.uri, base: mediaBase) {
                    own.append(PrefetchItem(url: segmentURL, range: segment.byteRange))
                }
            }
            if store.isEncrypted {
                // The playlist's keys (rewriting is the one place URIs are found, with their tags).
                _ = media.rewritten(base: mediaBase) { uri, tag in
                    if let tag, HLSPlaylist.keyTags.contains(tag) { own.append(PrefetchItem(url: uri, range: nil)) }
                    return uri.absoluteString
                }
            }
            var ownSeen: Set<PrefetchItem> = []
            own = own.filter { ownSeen.insert($0).inserted }
            for item in own where seen.insert(item).inserted { items.append(item) }
            renditions.append((rendition, own))
        }
        estimate = items.reduce(estimate) { Self.saturatingSum($0, $1.range?.length ?? 0) }
        let unknown = items.contains { $0.range == nil }
        let estimated = chosen.contains { $0.role == .variant && $0.bandwidth > 0 }
        return PrefetchPlan(
            playlists: chosen.map(\.url), items: items, estimatedBytes: unknown && !estimated ? nil : estimate, renditions: renditions)
    }

    /// The playlist at `url`, read through the cache (its variables resolved, `imports` those of
    /// the multivariant playlist it was reached from), and the URL its relative URIs resolve against.
    private func parsedPlaylist(_ url: URL, headers: RequestHeaders, imports: [String: String] = [:]) async throws -> (HLSPlaylist, base: URL) {
        let (body, metadata) = try await playlistBody(url, headers: headers)
        do {
            return (try HLSPlaylist(parsing: body, url: url, imports: imports), metadata.finalURL ?? url)
        } catch let error as HLSPlaylistError {
            configuration.logger.warning("Rejected an origin playlist", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw CacheError(.originRejected, "The playlist at \(url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
    }

    /// `a + b` for non-negative counts, `Int64.max` where it would overflow (a hostile
    /// playlist may name any number of huge ranges).
    static func saturatingSum(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// The variant `choice` picks.
    static func choose(_ choice: HLSPrefetchOptions.VariantChoice, among variants: [HLSPlaylist.Variant]) -> HLSPlaylist.Variant? {
        switch choice {
        case .first: variants.first
        case .lowestBandwidth: variants.min { $0.bandwidth < $1.bandwidth }
        case .highestBandwidth: variants.max { $0.bandwidth < $1.bandwidth }
        case .atMost(let limit):
            variants.filter { $0.bandwidth <= limit }.max { $0.bandwidth < $1.bandwidth } ?? variants.min { $0.bandwidth < $1.bandwidth }
        case .atMostHeight(let limit):
            variants.filter { ($0.height ?? .max) <= limit }.max { ($0.height ?? 0, $0.bandwidth) < ($1.height ?? 0, $1.bandwidth) }
                ?? variants.filter { $0.height != nil }.min { ($0.height ?? 0, $0.bandwidth) < ($1.height ?? 0, $1.bandwidth) } ?? variants.first
        }
    }

    /// Stores `item`, telling `length` the resource's byte count once known and `stored`
    /// each run of bytes stored (and whether it was cached already).
    private func prefetch(
        _ item: PrefetchItem, options: HLSPrefetchOptions, length: (Int64) -> Void,
        stored: (Int64, _ wasCached: Bool) -> Void
    ) async throws {
        try Task.checkCancellation()
        // Already stored and current: nothing to fetch.
        if let metadata = cachedContentInfo(for: item.url), let total = metadata.length {
            let range = item.range.map { ByteRange($0.lowerBound, min($0.upperBound, total)) } ?? ByteRange(0, total)
            if range.isEmpty || storedLease(for: item.url)?.holds(range) == true {
                if item.range == nil { length(total) }
                stored(range.length, true)
                return
            }
        }
        // A pinned download waits for disk space rather than fetch what it cannot keep.
        try DownloadPacer.current?.admit(item.range?.length ?? DownloadQueue.piece)
        // One round trip for an uncached resource: its first GET gives the content
        // information, and its body is the download the read joins.
        _ = try await contentInfo(for: item.url, readingFrom: item.range?.lowerBound ?? 0, length: item.range?.length, headers: options.headers)
        let stream = try await read(item.url, offset: item.range?.lowerBound ?? 0, length: item.range?.length, headers: options.headers)
        defer { stream.cancel() }
        if item.range == nil { length(stream.range.length) }
        // Stored parts come as file regions, which need not be read at all.
        while let part = try await stream.nextPart() {
            switch part {
            case .bytes(let buffer): stored(Int64(buffer.readableBytes), false)
            case .file(let region): stored(region.range.length, false)
            }
        }
    }
}
