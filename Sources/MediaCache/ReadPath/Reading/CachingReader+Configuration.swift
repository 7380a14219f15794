// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Logging

extension CachingReader {
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
        /// How far a download may run ahead of its fastest reader, at most.
        package var downloadLead: Int64 = 4 << 20
        /// Which files a play fills: once a player reads one, the cache fetches it on to its end
        /// on the same origin response, as its own work. Default ``FillPolicy/audio``: audio
        /// files up to 512 MiB.
        public var fillOnPlay = FillPolicy.audio
        /// How many fills run at once: a new play's fill takes the place of the oldest (one no
        /// player reads first), which goes on only as far as its readers read (see ``FillOnPlay``).
        /// Default 4, the own share of a host's connections at the default 16.
        package var concurrentFills = 4
        /// How long no player must have read a fill before it fetches past what its players ask
        /// (on ``quietTimer``), unless they read ``fillProofBytes`` of the file first; a play left
        /// for another one before then (a skip) ends its fill (``FillPolicy``). Default 1 second.
        package var fillProbation: Duration = .seconds(1)
        /// How much a play's players read before its fill goes on at once. Default 1 MiB.
        package var fillProofBytes: Int64 = 1 << 20
        /// How long a play lasts without a read: a play (a player's reads of one URL, until
        /// none has read it, and the origin has not given or confirmed its version, for this
        /// long) keeps to the version it began with. Its requests for missing ranges go to the
        /// URL the redirects led to, not through them again (trackers in front of a podcast host
        /// that picks another file per visit); its reads past byte 0 read a whole stored file as
        /// it is though it turned stale (unless the origin said `no-cache` or `must-revalidate`),
        /// and are refused when the file changed since the play began (docs/http.md). A read from
        /// byte 0 begins a new play. Default 10 minutes.
        public var playWindow: Duration = .seconds(600)
        /// How far a download may run ahead of its readers at first; then as far as it has
        /// delivered (doubling), up to ``downloadLead``. A reader that goes away early so
        /// leaves little unread behind it, and one that keeps reading is soon far ahead.
        /// Also the size of the range a revalidation asks for with the cached bytes' validator.
        package var minimumRequest: Int64 = 256 << 10
        /// A reader joins a download whose next byte is at most this far before its cursor,
        /// rather than starting its own.
        package var joinDistance: Int64 = 1 << 20
        /// How many segments are stored ahead of a player playing through an HLS media
        /// playlist or a DASH representation the proxy served (see ``SegmentReadAhead``); 0
        /// reads none ahead.
        package var segmentReadAhead = 1
        /// How many origin requests to one host may be under way at once (each holds a
        /// connection until its body is read or dropped); at most the fetcher's own limit
        /// (``OriginFetcher/connectionsPerHost``). Players wait for nothing else: the cache's
        /// own fetches hold at most a quarter of them, and players go first for every one that
        /// comes free.
        public var originConnectionsPerHost = 16
        /// How many of a host's connections the cache's own fetches (read-ahead, prefetch,
        /// preload, pinned downloads, recordings) may hold at once: a quarter by default.
        package var ownConnectionsPerHost: Int?
        /// Origins that serve the same bytes as others (multi-CDN): for each origin (`host` or
        /// `host:port`), its alternates in order. A request whose origin cannot be reached, is too
        /// slow or answers `5xx` goes on at once from the next alternate, at the same byte, under
        /// the same entry (an alternate whose answer is not the stored version is not spliced);
        /// a failed origin is tried last for 30 seconds. Logged and counted
        /// (`mediacache_origin_failovers_total`). `serve --origin-fallback`.
        public var originFallbacks: [String: [String]] = [:]
        /// Hosts that slow long requests down (some video hosts past about 10 MB), each with the
        /// most bytes a request to it asks for: a longer read is asked in consecutive ranged
        /// requests of that size, one version across them (`If-Range`), the next asked before
        /// the current one ends so the read does not pause. Sizes below 64 KiB count as 64 KiB.
        /// `serve --origin-piece HOST=SIZE`.
        public var originPieces: [String: Int64] = [:]
        /// Gives a fresh URL for a signed one that expired (a signing service, `yt-dlp -g`):
        /// called with the URL the player asked for when the URL's stated expiry (`exp`,
        /// `Expires`, `X-Amz-Expires`, an Akamai token's `exp`) has passed or the origin refuses
        /// it with `401`, `403` or `410`. The read goes on from the fresh URL under the same
        /// entry, and every URL signed with the same parameter values is renewed with it (the
        /// segments of a stream whose playlists carry one token), so the hook is called once per
        /// expiry. A hook that throws, or whose URL is refused too, is not asked for that
        /// signature again for 30 seconds, and the origin's refusal goes to the player. Logged
        /// and counted (`mediacache_url_renewals_total`). `serve --refresh-command`.
        public var freshURL: (@Sendable (URL) async throws -> URL)?
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
        /// How many resources' last validation is remembered (see ``RecentDates``).
        package var validationMemoryLimit = 10_000
        /// Never contact an origin: cached bytes are served whatever their freshness, and
        /// anything else fails with ``CacheError/Code/offline`` (a proxy answers `504`, as
        /// RFC 9111 §5.2.1.7 has a cache answer `only-if-cached`). For a flight, with pinned
        /// downloads (``DownloadQueue``).
        public var isOffline = false
        /// Fields added to the origin requests the cache makes for itself (prefetch, preload,
        /// read-ahead, pinned downloads), not for a waiting player: `serve --cmcd` marks them
        /// with a CMCD custom key, so that a CDN can tell them from player demand.
        public var ownRequestFields: RequestHeaders = []
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
        /// does not fetch bytes nobody takes. A read waits only until it first waits on the
        /// origin: after that its client takes bytes as they come. Only a read to the
        /// resource's end waits: a closed range that stops short of it names the bytes its
        /// client wants. `.zero` never waits.
        package var holeDelay: Duration = .milliseconds(20)
        /// The rate a client is assumed to take cached bytes at, at most: a read that reaches a
        /// hole after giving `n` cached bytes in a row waits `n` at this rate (within
        /// ``holeDelay`` ... ``maximumHolePause``), since its client needs that long to take
        /// them in and hang up if it has what it wants (a player that stops after the first
        /// seconds of a preloaded item). 5 MiB/s is 40 Mbit/s, beyond what a player plays in
        /// real time: one that goes on playing still holds those bytes' seconds of media.
        package var holePauseBytesPerSecond: Int64 = 5 << 20
        /// The longest pause at a hole.
        package var maximumHolePause: Duration = .milliseconds(500)
        /// What ``holeDelay`` is waited on: real time, or a test's ``PauseTimer``.
        package var pauseTimer: any PauseTimer = SystemPauseTimer()
        /// How long players must have stopped waiting on the origin before the cache's own
        /// fetches (read-ahead, prefetch, preload, pinned downloads) take bytes again (see
        /// ``OriginPriority``): a playing player waits chunk by chunk, so a short quiet means
        /// it has what it needs.
        package var playerQuietPeriod: Duration = .milliseconds(250)
        /// What ``playerQuietPeriod`` is waited on: real time, or a test's ``PauseTimer``.
        package var quietTimer: any PauseTimer = SystemPauseTimer()
        /// The most bytes one preload queue fetches from origins (see ``CachingReader/preload(_:)``);
        /// each new queue has its own.
        public var preloadBudget: Int64 = 256 << 20
        /// How many preload items are fetched at once.
        public var preloadConcurrency = 1
        /// Where the read path logs.
        public var logger = Logger(label: "mediacache.read", factory: { _ in SwiftLogNoOpLogHandler() })

        /// Creates the default configuration.
        public init() {}

        /// How long a read pauses at a hole after giving `cachedRun` cached bytes in a row.
        func holePause(afterCached cachedRun: Int64) -> Duration {
            let limit =
                Double(maximumHolePause.components.seconds) + Double(maximumHolePause.components.attoseconds) * 1e-18
            let seconds = min(limit, Double(max(0, cachedRun)) / Double(max(1, holePauseBytesPerSecond)))
            return max(holeDelay, .seconds(seconds))
        }
    }
}
