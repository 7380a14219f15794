// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Crypto
public import Foundation
public import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A size-limited, crash-safe store of media bytes, kept sparse by byte range.
///
/// Each resource is an entry under a ``CacheKey`` with its ``ContentMetadata`` and the
/// byte ranges (spans) cached so far. Bytes live in one file per entry, written at their
/// offsets; an SQLite index records which spans each file holds. A span enters the index
/// only after its bytes are written (and, by default, flushed to disk), so after a crash
/// the index never claims bytes that are not there.
///
/// A ``CachingReader`` reads and writes the entries; an entry being read is never evicted.
/// Call ``close()`` when done with the store.
public final class CacheStore: Sendable {
    /// Options for a store.
    public struct Configuration: Sendable {
        /// The most bytes the store keeps; least recently used entries are evicted beyond it.
        public var maxBytes: Int64 = 1 << 30
        /// The largest part of ``maxBytes`` one entry may hold (default: half). Bytes of a
        /// larger resource past its share are refused, so playing one huge file streams the
        /// rest uncached instead of evicting every other entry.
        public var maxEntryFraction = 0.5
        /// The most bytes pinned entries (``CacheStore/pin(_:)``) may hold together, within
        /// ``maxBytes``; `nil` (the default) for half of ``maxBytes``. Pinned entries are never
        /// evicted; the least-recently-used entries share what pinned bytes leave of ``maxBytes``.
        public var maxPinnedBytes: Int64?
        /// How long an entry may go unread before it is evicted; `nil` keeps entries until
        /// space is needed.
        public var maxAge: Duration?
        /// Maps a resource URL to its cache key; by default ``CacheKey/init(url:)`` of the URL
        /// without ``CacheKeyRule/alwaysIgnoredQueryParameters``. Setting ``keyRule`` sets it.
        public var keyFunction: @Sendable (URL) -> CacheKey = { CacheKeyRule.standard.key(for: $0) }
        /// Query parameters left out of keys (a CDN's signature, see ``CacheKeyRule``); the
        /// origin still gets them. Setting it sets ``keyFunction``.
        public var keyRule = CacheKeyRule() {
            didSet {
                let rule = keyRule
                keyFunction = { rule.key(for: $0) }
            }
        }
        /// The clock for last-access times and age-based eviction.
        package var clock: any WallClock = SystemClock()
        /// Whether data files are flushed to disk (`fdatasync`, or on Linux one `syncfs` for a
        /// commit of several files in a folder) before the index claims their bytes. With it,
        /// the index is right even after a power loss; without it, only after a process crash.
        /// Writers never wait for it: flushes run in the background.
        public var synchronizesData = true
        /// How many written bytes trigger a background flush of the index.
        public var flushThreshold: Int64 = 16 << 20
        /// The free space the store leaves on its disk: past it, least recently used streaming
        /// entries are evicted, and bytes that would still cross it are not stored (a pinned
        /// download waits for space). `nil`: 5 % of the volume, at most 1 GiB.
        public var minFreeDiskBytes: Int64?
        /// Where streaming entries' data files go: a folder the system or the user may empty
        /// (the platform's caches). Pinned and recorded entries' files stay in the store's folder
        /// with the index, where the platform keeps data; an entry moves when it is pinned or
        /// unpinned. `nil`: the store's folder holds both.
        public var cacheDirectory: URL?
        /// Called with each folder and file the store makes, right after it makes it, on the
        /// thread that did (one made for blocking), and at each open with its folders and the
        /// files at their top (the index, its journal, the lock). On Apple platforms the adapter's
        /// `excludingFromBackup()` sets it to keep the store out of the device's backup.
        public var markCreated: (@Sendable (URL) -> Void)?
        /// Measures the free space of the file system holding a path (`statvfs`).
        package var diskSpace: @Sendable (String) -> DiskSpace? = { CacheStore.diskSpace(at: $0) }
        /// Where the store logs.
        public var logger = Logger(label: "mediacache.store", factory: { _ in SwiftLogNoOpLogHandler() })
        /// The 256-bit master key that encrypts the store at rest, or `nil` (the default) for
        /// an unencrypted store. With a key, every block of every data file is sealed
        /// (AES-256-GCM, a key per entry) and the index hides URLs and
        /// metadata; a block that fails its check is fetched again, never served. Keep the key
        /// out of the cache folder (on Apple platforms, in the Keychain). An encrypted folder
        /// opened without a key is refused; opened with another key, its entries are misses
        /// (kept until evicted, so the right key finds them again); an unencrypted folder
        /// opened with a key loses its unencrypted entries.
        public var encryptionKey: SymmetricKey? {
            get { encryptionKeyBox?.key }
            set { encryptionKeyBox = newValue.map { KeyBox(key: $0) } }
        }
        private var encryptionKeyBox: KeyBox?

        /// Creates the default configuration.
        public init() {}
    }

    /// The folder the store lives in.
    public let directory: URL
    /// How an encrypted store lays out its data files; `nil` when the store is not encrypted.
    let blockLayout: BlockLayout?
    /// The store's options.
    public let configuration: Configuration

    let state: Mutex<State>
    /// How many data files are being cut now (``State/cutting``): a write checks it without
    /// the lock, and takes the lock to wait only when a cut is under way.
    let cutsUnderWay = Atomic<Int>(0)
    /// The download jobs, as saved (see ``loadJobs()``).
    let jobs: Mutex<[String: Data]>
    let index: CacheIndex
    /// Each entry's row and each job, said again beside the data (see ``EntryRecords``).
    let records: EntryRecords
    /// The keys ``key(for:)`` computed lately.
    private let recentKeys = Mutex<[URL: CacheKey]>([:])
    /// Where pinned and streaming entries' data files are (the same in a one-folder store).
    let (dataDirectory, cacheDataDirectory): (String, String)
    /// Forces data files to the disk before a commit claims them.
    let dataSync: DataSync
    let allocator = ByteBufferAllocator()
    /// See ``entryLock(for:)``.
    let sealLocks = (0..<64).map { _ in SealLock() }
    /// Stored blocks that failed their check (a checksum or a seal) since the store opened.
    let rejectedBlocks = Atomic<Int>(0)
    /// Held open (with a record lock) while the store is open, so one process at a time uses the folder.
    let lockDescriptor: Mutex<CInt?>
    let lockPathKey: String
    /// The lock files of the stores open in this process.
    static let openFolders = Mutex<Set<String>>([])

    /// Opens the store in `directory`, creating it if needed.
    ///
    /// Claims in the index are checked against the data files (a span past a file's end is
    /// dropped), files the index does not know are deleted, and expired or excess entries
    /// are evicted.
    /// - Parameters:
    ///   - directory: the store's folder; one process at a time may use it.
    ///   - configuration: limits, key function, clock and logger.
    /// - Throws: ``CacheError`` with `.cannotOpenStore`, `.storeLocked` or `.indexFailure`.
    public static func open(directory: URL, configuration: Configuration = Configuration()) async throws -> CacheStore {
        let store = try await BlockingIO.run { try CacheStore(directory: directory, configuration: configuration) }
        CacheMetrics.cacheLimit.record(configuration.maxBytes)
        try await store.trim()
        return store
    }

    private init(directory: URL, configuration: Configuration) throws {
        self.directory = directory
        self.configuration = configuration
        blockLayout = configuration.encryptionKey == nil ? nil : BlockLayout()
        let dataDirectory = directory.appendingPathComponent("data").path
        self.dataDirectory = dataDirectory
        let cacheDataDirectory = configuration.cacheDirectory?.appendingPathComponent("data").path ?? dataDirectory
        self.cacheDataDirectory = cacheDataDirectory
        if let old = configuration.cacheDirectory {
            try Self.migrateOneFolderStore(from: old, to: directory, logger: configuration.logger)
        }
        // Each folder is checked before anything is made in it.
        for folder in [directory.path, dataDirectory, cacheDataDirectory] {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                throw CacheError(
                    .cannotOpenStore, "Cannot create the cache folder \(folder). Choose a folder you can write to.",
                    underlyingError: error)
            }
            try Self.keepPrivate(folder: folder)
        }
        let indexPath = directory.appendingPathComponent("index.sqlite").path
        let hadIndex = access(indexPath, F_OK) == 0
        for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "server.json", "settings.json"] {
            // SQLite gives its -wal and -shm files the index's mode; an index it creates gets the umask's.
            try Self.keepPrivate(file: directory.appendingPathComponent(name).path, create: name == "index.sqlite")
        }
        let lockPath = directory.appendingPathComponent("lock").path
        let lockDescriptor = openDescriptor(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW)
        guard lockDescriptor >= 0 else {
            throw CacheError(.cannotOpenStore, "Cannot create \(lockPath): \(String(cString: strerror(errno))).")
        }
        // A POSIX record lock keeps other processes out; unlike flock, a child process
        // spawned meanwhile does not inherit it. Within this process a registry does the same.
        let lockPathKey = URL(fileURLWithPath: lockPath).standardizedFileURL.path
        guard CacheStore.openFolders.withLock({ $0.insert(lockPathKey).inserted }) else {
            closeDescriptor(lockDescriptor)
            throw CacheError(
                .storeLocked, "The cache folder \(directory.path) is already open in this process. Use the open store.")
        }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        var locked = fcntl(lockDescriptor, F_SETLK, &lock)
        while locked != 0, errno == EINTR { locked = fcntl(lockDescriptor, F_SETLK, &lock) }
        guard locked == 0 else {
            let reason = errno
            closeDescriptor(lockDescriptor)
            _ = CacheStore.openFolders.withLock { $0.remove(lockPathKey) }
            if reason == EACCES || reason == EAGAIN {
                throw CacheError(
                    .storeLocked,
                    "The cache folder \(directory.path) is in use by another process. Stop it or choose another folder."
                )
            }
            throw CacheError(.cannotOpenStore, "Cannot lock \(lockPath): \(String(cString: strerror(reason))).")
        }
        self.lockPathKey = lockPathKey
        self.lockDescriptor = Mutex(lockDescriptor)
        dataSync = DataSync(folders: [dataDirectory, cacheDataDirectory])
        let records = EntryRecords(
            folder: directory, sealer: configuration.encryptionKey.map(IndexSealer.init),
            markCreated: configuration.markCreated)
        self.records = records
        do {
            try records.prepare()
            index = try Self.openIndex(
                path: indexPath, existed: hadIndex, records: records, configuration: configuration)
            // A job the index lost (a journal gone with its last commits) comes back from its record.
            var known = Dictionary(try index.loadJobs(), uniquingKeysWith: { $1 })
            for job in records.loadJobs() where known[job.id] == nil { known[job.id] = job.body }
            jobs = Mutex(known)
            state = Mutex(
                try CacheStore.recover(
                    index: index, records: records,
                    folders: DataFolders(pinned: dataDirectory, cache: cacheDataDirectory),
                    layout: blockLayout, configuration: configuration, directory: directory))
        } catch {
            closeDescriptor(lockDescriptor)
            _ = CacheStore.openFolders.withLock { $0.remove(lockPathKey) }
            throw error
        }
        if let disk = configuration.diskSpace(cacheDataDirectory) { note(disk, since: (0, 0)) }
        if let mark = configuration.markCreated { markAtOpen(mark) }
    }

    deinit {
        releaseLock()
    }

    // MARK: Queries

    /// The cache key for `url`, from the configured key function. The keys of recent URLs
    /// are remembered (a player asks for the same URL many times, and the default key
    /// parses and hashes it), so the key function must give the same key for the same URL.
    public func key(for url: URL) -> CacheKey {
        if let known = recentKeys.withLock({ $0[url] }) { return known }
        let key = configuration.keyFunction(url)
        recentKeys.withLock { keys in
            if keys.count >= Self.recentKeyLimit { keys.removeAll(keepingCapacity: true) }
            keys[url] = key
        }
        return key
    }

    /// How many URLs' keys ``key(for:)`` remembers.
    static let recentKeyLimit = 512

    /// The metadata stored for `key`, or `nil` when there is no entry.
    public func metadata(for key: CacheKey) -> ContentMetadata? {
        state.withLock { $0.withRecord(key) { $0.metadata } }
    }

    /// The spans cached for `key` (empty when there is no entry).
    package func spans(for key: CacheKey) -> SpanSet {
        state.withLock { $0.withRecord(key) { $0.spans } ?? SpanSet() }
    }

    /// The keys of every entry.
    public var keys: [CacheKey] {
        state.withLock { Array($0.records.keys) }
    }

    /// Whether the store encrypts its data files and index (``Configuration/encryptionKey``).
    public var isEncrypted: Bool { blockLayout != nil }

    /// The number of cached bytes in all entries.
    public var totalBytes: Int64 {
        state.withLock { $0.totalBytes }
    }

    // MARK: Entries

    /// Opens the entry for `key`, creating an empty one if there is none, and pins it so it
    /// is not evicted until the handle is closed.
    /// - Throws: ``CacheError`` `.storeClosed` after ``close()``.
    package func openEntry(_ key: CacheKey) throws -> CacheEntryHandle {
        let now = configuration.clock.now
        let (id, generation) = try state.withLock { state in
            guard !state.isClosed else { throw CacheError(.storeClosed, "The cache store is closed.") }
            let id = state.nextHandleID
            state.nextHandleID += 1
            let found = state.withRecord(key) { record in
                record.openBy.insert(id)
                record.lastAccess = now
                return record.generation
            }
            if let found { return (id, found) }
            let generation = state.makeGeneration()
            state.records[key] = Record(
                fileName: Self.newFileName(), generation: generation, metadata: ContentMetadata(),
                spans: SpanSet(), createdAt: now, lastAccess: now, openBy: [id], isDirty: true)
            return (id, generation)
        }
        return CacheEntryHandle(store: self, key: key, id: id, generation: generation)
    }

    /// What is stored for `key` now, read under one lock without opening the entry: its
    /// content information when its length is known (`nil` otherwise), and, when `start` gives
    /// an offset for that length, the store does not encrypt and the data file is open, the
    /// stored span that contains the offset with the file (then it counts as an access, for
    /// eviction). The span and the information describe one version. Only bytes whose blocks
    /// this process checked (``CacheStore/Record/verified``) are in the span: they go out as they are in
    /// the file, so others take the read path, which checks them.
    /// - Parameter played: whether a player reads (then the range `resolve` gives, every byte of
    ///   it stored, counts as played for the eviction policy).
    func storedSnapshot(_ key: CacheKey, played: Bool, resolve: (_ length: Int64) -> ByteRange?) -> StoredSnapshot? {
        let now = configuration.clock.now
        let sendsFromFile = configuration.encryptionKey == nil
        return state.withLock { state in
            let snapshot =
                state.withRecord(key) {
                    record -> (StoredSnapshot, played: ByteRange?)? in
                    guard let length = record.metadata.length else { return nil }
                    guard sendsFromFile, let range = resolve(length), let file = record.file,
                        let span = record.verified.span(containing: range.lowerBound)
                    else {
                        return (StoredSnapshot(metadata: record.metadata, region: nil), nil)
                    }
                    record.lastAccess = now
                    record.isDirty = true
                    let snapshot = StoredSnapshot(metadata: record.metadata, region: StoredSpan(span: span, file: file))
                    return (snapshot, played && span.upperBound >= range.upperBound ? range : nil)
                } ?? nil
            if let range = snapshot?.played, !state.policy.isPlayed(key, through: range.upperBound) {
                state.notePlayed(key, from: range.lowerBound, through: range.upperBound)
            }
            return snapshot?.0
        }
    }

    /// Counts bytes a player got from the cache and from the origin, in the store's usage history.
    package func noteServed(fromCache cache: Int64, fromOrigin origin: Int64) {
        guard cache > 0 || origin > 0 else { return }
        let now = configuration.clock.now
        state.withLock { state in
            state.usage.served(fromCache: cache, fromOrigin: origin, at: now)
            state.usageChanged = true
        }
    }

    /// What players got from the cache and from the origin over the store's life, day by day,
    /// and what eviction let go, by reason.
    package var usage: UsageHistory { state.withLock { $0.usage } }

    /// Whether the cache's own work may store `wanted` bytes now: the room under the limit,
    /// and the bytes no player read that eviction would let go for them (``EvictionPolicy``'s
    /// first tier).
    package func roomForOwnBytes(atLeast wanted: Int64) -> Bool {
        let limit = configuration.maxBytes
        return state.withLock { state in
            let start = state.policy.settings.startBytes
            var room = limit - state.totalBytes - state.reservedBytes
            // Only entries the cache's own work wrote can hold bytes no player read: a fill's
            // admission must not read every record of a full store (a tenth of a soak's time).
            for key in state.ownWritten where room < wanted {
                guard let record = state.records[key], !record.isPinned, record.openBy.isEmpty else { continue }
                let playedEnd = max(start, state.policy.marks[key]?.playedEnd ?? 0)
                let kept = ByteRange(0, min(ByteRange.maximumOffset, State.blockEnd(playedEnd)))
                room += record.spans.byteCount - record.spans.byteCount(in: kept)
            }
            return room >= wanted
        }
    }

    /// A player read `key`'s entry from `start` up to `end` (excluded): a play, for the
    /// eviction policy.
    func notePlayed(_ key: CacheKey, from start: Int64, through end: Int64) {
        state.withLock { $0.notePlayed(key, from: start, through: end) }
    }

    /// Removes the entry for `key` and its bytes. Open handles on it fail from then on
    /// with `.entryInvalidated`; a read already under way still returns the old bytes.
    public func remove(_ key: CacheKey) async throws {
        state.withLock { $0.drop(key) }
        try await flush()
    }

    /// Removes every entry.
    public func removeAll() async throws {
        state.withLock { state in
            for key in Array(state.records.keys) { state.drop(key) }
            for name in Array(state.otherRows.keys) { state.dropOtherRow(name) }
        }
        try await flush()
    }

    /// Commits everything, waits for background work and closes the index. Handles fail
    /// with `.storeClosed` afterwards.
    public func close() async throws {
        let (pending, checks) = state.withLock { state in
            state.isClosed = true
            return (state.backgroundFlush, state.wholeEntryTasks.values)
        }
        for check in checks { check.cancel() }
        for check in checks { _ = await check.value }
        await pending?.value
        defer { releaseLock() }
        try await flush()
        // Closing checkpoints SQLite's journal into the index (reads, writes, a sync): work for
        // a thread made for blocking, not one of the cooperative pool's.
        try await BlockingIO.runToCompletion { [index] in try index.close() }
    }
}
