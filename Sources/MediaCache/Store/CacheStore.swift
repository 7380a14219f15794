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
        /// Maps a resource URL to its cache key; by default ``CacheKey/init(url:)``. Setting
        /// ``keyRule`` sets it.
        public var keyFunction: @Sendable (URL) -> CacheKey = { CacheKey(url: $0) }
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
        /// Whether data files are flushed to disk (`fdatasync`) before the index claims their
        /// bytes. With it, the index is right even after a power loss; without it, only after
        /// a process crash. Writers never wait for it: flushes run in the background.
        public var synchronizesData = true
        /// How many written bytes trigger a background flush of the index.
        public var flushThreshold: Int64 = 16 << 20
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

        /// The most bytes one entry may hold (see ``maxEntryFraction``).
        var maxEntryBytes: Int64 {
            Int64(Double(maxBytes) * min(1, max(0, maxEntryFraction)))
        }

        /// ``maxPinnedBytes`` as it applies: within `0...maxBytes`.
        public var pinnedQuota: Int64 {
            min(maxBytes, max(0, maxPinnedBytes ?? maxBytes / 2))
        }

        var evictor: Evictor {
            Evictor(maxBytes: maxBytes, maxAge: maxAge.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 })
        }
    }

    /// The folder the store lives in.
    public let directory: URL
    /// How an encrypted store lays out its data files; `nil` when the store is not encrypted.
    let blockLayout: BlockLayout?
    /// The store's options.
    public let configuration: Configuration

    let state: Mutex<State>
    /// The download jobs, as saved (see ``loadJobs()``).
    private let jobs: Mutex<[String: Data]>
    let index: CacheIndex
    /// Each entry's row and each job, said again beside the data (see ``EntryRecords``).
    let records: EntryRecords
    /// The keys ``key(for:)`` computed lately.
    private let recentKeys = Mutex<[URL: CacheKey]>([:])
    let dataDirectory: String
    let allocator = ByteBufferAllocator()
    /// See ``sealLock(for:)``.
    let sealLocks = (0..<64).map { _ in SealLock() }
    /// Sealed blocks that failed their check since the store opened.
    let rejectedBlocks = Atomic<Int>(0)
    /// Held open (with a record lock) while the store is open, so one process at a time uses the folder.
    private let lockDescriptor: Mutex<CInt?>
    private let lockPathKey: String
    /// The lock files of the stores open in this process.
    private static let openFolders = Mutex<Set<String>>([])

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
        // Each folder is checked before anything is made in it.
        for folder in [directory.path, dataDirectory] {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                throw CacheError(.cannotOpenStore, "Cannot create the cache folder \(folder). Choose a folder you can write to.", underlyingError: error)
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
            throw CacheError(.storeLocked, "The cache folder \(directory.path) is already open in this process. Use the open store.")
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
                throw CacheError(.storeLocked, "The cache folder \(directory.path) is in use by another process. Stop it or choose another folder.")
            }
            throw CacheError(.cannotOpenStore, "Cannot lock \(lockPath): \(String(cString: strerror(reason))).")
        }
        self.lockPathKey = lockPathKey
        self.lockDescriptor = Mutex(lockDescriptor)
        let records = EntryRecords(folder: directory, sealer: configuration.encryptionKey.map(IndexSealer.init))
        self.records = records
        do {
            try records.prepare()
            index = try Self.openIndex(path: indexPath, existed: hadIndex, records: records, configuration: configuration)
            // A job the index lost (a journal gone with its last commits) comes back from its record.
            var known = Dictionary(try index.loadJobs(), uniquingKeysWith: { $1 })
            for job in records.loadJobs() where known[job.id] == nil { known[job.id] = job.body }
            jobs = Mutex(known)
            state = Mutex(
                try CacheStore.recover(
                    index: index, records: records, dataDirectory: dataDirectory, layout: blockLayout, configuration: configuration,
                    directory: directory))
        } catch {
            closeDescriptor(lockDescriptor)
            _ = CacheStore.openFolders.withLock { $0.remove(lockPathKey) }
            throw error
        }
    }

    deinit {
        releaseLock()
    }

    /// Makes `folder` private to its owner (`0700`), or refuses it with the reason: the folder
    /// holds what the user played (URLs, bytes) and files the store trusts, so a folder another
    /// user owns or may write to (where they could plant an index or a link in place of a data
    /// file) is not used.
    private static func keepPrivate(folder: String) throws {
        var info = stat()
        guard stat(folder, &info) == 0 else {
            throw CacheError(.cannotOpenStore, "Cannot read the cache folder \(folder): \(String(cString: strerror(errno))).")
        }
        let mode = info.st_mode & 0o777
        guard info.st_uid == geteuid() else {
            throw CacheError(
                .cannotOpenStore,
                "The cache folder \(folder) belongs to another user (uid \(info.st_uid)): they could read what is played and change what is served. Choose a folder of your own.")
        }
        guard mode & 0o022 == 0 else {
            throw CacheError(
                .cannotOpenStore,
                "Other users may write to the cache folder \(folder) (mode \(String(mode, radix: 8))): they could plant files the cache would serve or overwrite. Run chmod 700 on it, or choose another folder."
            )
        }
        if mode != 0o700, chmod(folder, 0o700) != 0 {
            throw CacheError(.cannotOpenStore, "Cannot make the cache folder \(folder) private (chmod 700): \(String(cString: strerror(errno))).")
        }
    }

    /// Gives the store's file at `path` mode `0600` (creating it first if `create`); a file
    /// that does not exist is left so.
    private static func keepPrivate(file path: String, create: Bool) throws {
        if create {
            let descriptor = openDescriptor(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else {
                throw CacheError(.cannotOpenStore, "Cannot open \(path): \(String(cString: strerror(errno))). Check the cache folder's permissions.")
            }
            closeDescriptor(descriptor)
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw CacheError(.cannotOpenStore, "\(path) is not a file of yours: the cache folder was changed by someone else. Remove it, or choose another folder.")
        }
        if info.st_mode & 0o077 != 0, chmod(path, 0o600) != 0 {
            throw CacheError(.cannotOpenStore, "Cannot make \(path) private (chmod 600): \(String(cString: strerror(errno))).")
        }
    }

    private func releaseLock() {
        let released = lockDescriptor.withLock { descriptor -> Bool in
            defer { descriptor = nil }
            guard let open = descriptor else { return false }
            closeDescriptor(open)
            return true
        }
        if released { _ = CacheStore.openFolders.withLock { $0.remove(lockPathKey) } }
    }

    /// Opens the index at `path`. One that SQLite cannot read or whose pages fail its check,
    /// or that is missing while entry records are there, is moved aside (kept as
    /// `index.sqlite.damaged-<time>`) and rebuilt from the records (``EntryRecords``): every
    /// entry with its key, validators, spans and pin, and every download job. The store then
    /// starts, and says what it did once, at warning level.
    private static func openIndex(path: String, existed: Bool, records: EntryRecords, configuration: Configuration) throws -> CacheIndex {
        let sealer = configuration.encryptionKey.map(IndexSealer.init)
        let problem: String
        do {
            let index = try CacheIndex(path: path, sealer: sealer, records: records)
            if existed, let damage = index.damage() {
                try? index.close()
                problem = "its pages fail SQLite's check: \(damage)"
            } else if !existed, !records.isEmpty {
                return try rebuild(index, from: records, because: "it was missing", movedTo: nil, configuration: configuration)
            } else {
                return index
            }
        } catch let error as CacheError where CacheIndex.isDamage(error.underlyingError) {
            problem = "SQLite cannot read it (\(String(describing: error.underlyingError!).prefix(200)))"
        }
        let aside = path + ".damaged-\(Int64(configuration.clock.now.timeIntervalSince1970))"
        for suffix in ["", "-wal", "-shm"] where rename(path + suffix, aside + suffix) != 0 && errno != ENOENT {
            throw CacheError(.indexFailure, "The cache index at \(path) is damaged (\(problem)) and cannot be moved aside: \(String(cString: strerror(errno))).")
        }
        let created = openDescriptor(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW)  // mode 0600, before SQLite makes it
        if created >= 0 { closeDescriptor(created) }
        return try rebuild(CacheIndex(path: path, sealer: sealer, records: records), from: records, because: problem, movedTo: aside, configuration: configuration)
    }

    /// Writes every entry record and job record into `index`, which is new.
    private static func rebuild(_ index: CacheIndex, from records: EntryRecords, because problem: String, movedTo aside: String?, configuration: Configuration)
        throws -> CacheIndex
    {
        let (rows, unreadable) = records.load()
        let jobs = records.loadJobs()
        try index.rebuild(rows: rows, jobs: jobs)
        var metadata: Logger.Metadata = [
            "problem": "\(problem)", "entries": "\(rows.count)", "pinned": "\(rows.filter(\.isPinned).count)", "jobs": "\(jobs.count)",
            "unreadable records": "\(unreadable.count)",
        ]
        if let aside { metadata["moved to"] = "\(aside)" }
        configuration.logger.warning("The cache index was damaged; rebuilt it from the entry records", metadata: metadata)
        CacheMetrics.indexRebuilt()
        return index
    }

    /// Loads the index and reconciles it with the data files on disk: an entry record whose
    /// row the index lacks (a row it could not decode) is taken back when its data file is
    /// there; records and data files nothing names are removed.
    private static func recover(
        index: CacheIndex, records: EntryRecords, dataDirectory: String, layout: BlockLayout?, configuration: Configuration,
        directory: URL
    ) throws -> State {
        var state = State()
        var knownFiles: Set<String> = []
        var (rows, others) = try index.loadAll()
        let named = Set(rows.map(\.fileName) + others.map(\.fileName))
        let keys = Set(rows.map(\.key))
        var recordNames = Set<String>()
        var recorded: [String: CacheIndex.Row] = [:]
        for record in records.load().rows {
            recordNames.insert(record.fileName)
            recorded[record.fileName] = record
            guard !named.contains(record.fileName), !keys.contains(record.key), access(dataDirectory + "/" + record.fileName, F_OK) == 0 else { continue }
            configuration.logger.warning("An entry the cache index lost is taken back from its record", metadata: ["file": "\(record.fileName)"])
            rows.append(record)
        }
        if layout == nil, others.contains(where: { $0.kind == .sealed }) {
            throw CacheError(.encryptionKeyRequired, "The cache folder \(directory.path) is encrypted: open it with its key (--encryption-key-file).")
        }
        for row in rows {
            var spans = row.spans
            if let record = recorded[row.fileName], record.key == row.key, record.spans != spans {
                // A row and its record claim different bytes: only what both claim is sure (a
                // record lags its row by at most one commit; a row garbled in place says more).
                spans = SpanSet(spans.spans.flatMap { record.spans.spans(in: $0) })
            }
            let path = dataDirectory + "/" + row.fileName
            var info = stat()
            let fileSize: Int64 = stat(path, &info) == 0 ? Int64(info.st_size) : 0
            let storable = layout?.plaintextLength(fileSize: fileSize) ?? fileSize
            if let last = spans.spans.last, last.upperBound > storable {
                // Only possible after a power loss with data synchronisation off.
                spans.remove(ByteRange(storable, last.upperBound))
            }
            knownFiles.insert(row.fileName)
            state.records[row.key] = Record(
                fileName: row.fileName, generation: state.makeGeneration(), metadata: row.metadata, spans: spans,
                createdAt: row.createdAt, lastAccess: row.lastAccess, isPinned: row.isPinned, isDirty: spans != row.spans || !named.contains(row.fileName))
            state.totalBytes += spans.byteCount
        }
        var unsealed = 0
        for other in others {
            switch other.kind {
            case .sealed:
                // Sealed with another key: a miss for this store, but kept (counted against the
                // limit, evicted as any entry) so that the right key finds it again.
                knownFiles.insert(other.fileName)
                state.otherRows[other.fileName] = other
                state.totalBytes += other.byteCount
            case .unsealed:
                // An entry stored before the store was encrypted: nothing unencrypted may stay.
                state.deletedRowKeys.append(other.rowKey)
                unsealed += 1
            }
        }
        if !state.otherRows.isEmpty {
            configuration.logger.warning(
                "Cache entries sealed with another key are misses for this key; they stay until evicted",
                metadata: ["entries": "\(state.otherRows.count)", "folder": "\(directory.path)"])
        }
        if unsealed > 0 {
            configuration.logger.notice(
                "The cache was not encrypted before: its unencrypted entries are removed",
                metadata: ["entries": "\(unsealed)", "folder": "\(directory.path)"])
        }
        // Files the index does not name were written after the last commit or belong to a
        // removed entry: nothing refers to them.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dataDirectory)) ?? [] where !knownFiles.contains(name) {
            unlink(dataDirectory + "/" + name)
        }
        for name in recordNames.subtracting(knownFiles) { records.remove(fileName: name) }
        return state
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
        state.withLock { $0.records[key]?.metadata }
    }

    /// The spans cached for `key` (empty when there is no entry).
    package func spans(for key: CacheKey) -> SpanSet {
        state.withLock { $0.records[key]?.spans ?? SpanSet() }
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
            if state.records[key] == nil {
                state.records[key] = Record(
                    fileName: Self.newFileName(), generation: state.makeGeneration(), metadata: ContentMetadata(),
                    spans: SpanSet(), createdAt: now, lastAccess: now, isDirty: true)
            }
            state.records[key]!.openBy.insert(id)
            state.records[key]!.lastAccess = now
            return (id, state.records[key]!.generation)
        }
        return CacheEntryHandle(store: self, key: key, id: id, generation: generation)
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

    // MARK: Pins

    /// Pins the entries for `keys` (creating empty ones for keys with none, so the bytes
    /// that arrive later are pinned too): they are never evicted by size or age, and their
    /// bytes count against ``Configuration/pinnedQuota``. Removing an entry (``remove(_:)``)
    /// still removes it. The pin is committed before this returns.
    public func pin(_ keys: some Sequence<CacheKey>) async throws {
        let now = configuration.clock.now
        try state.withLock { state in
            guard !state.isClosed else { throw CacheError(.storeClosed, "The cache store is closed.") }
            for key in keys {
                if state.records[key] == nil {
                    state.records[key] = Record(
                        fileName: Self.newFileName(), generation: state.makeGeneration(), metadata: ContentMetadata(),
                        spans: SpanSet(), createdAt: now, lastAccess: now, isDirty: true)
                }
                state.records[key]!.isPinned = true
                state.records[key]!.isDirty = true
            }
        }
        try await flush()
    }

    /// Gives the entries for `keys` back to the least-recently-used policy (their bytes stay
    /// until it evicts them); empty entries are removed. Then trims the store.
    public func unpin(_ keys: some Sequence<CacheKey>) async throws {
        state.withLock { state in
            for key in keys where state.records[key]?.isPinned == true {
                state.records[key]!.isPinned = false
                state.records[key]!.isDirty = true
                if state.records[key]!.spans.isEmpty, state.records[key]!.openBy.isEmpty { state.drop(key) }
            }
        }
        try await trim()
    }

    /// Whether the entry for `key` is pinned.
    public func isPinned(_ key: CacheKey) -> Bool {
        state.withLock { $0.records[key]?.isPinned ?? false }
    }

    /// The bytes stored in pinned entries.
    public var pinnedBytes: Int64 {
        state.withLock { $0.pinnedBytes }
    }

    /// The download jobs kept with the store (JSON bodies, by id), from memory: read from the
    /// index when the store opened, and kept as they are saved since.
    func loadJobs() throws -> [(id: String, body: Data)] {
        jobs.withLock { $0.sorted { $0.key < $1.key }.map { (id: $0.key, body: $0.value) } }
    }

    /// Keeps the job `id` with the store as `body` gives it then (JSON), or forgets it when
    /// `body` gives `nil` (see ``CacheIndex/saveJob(_:body:)``).
    func saveJob(_ id: String, body: @escaping @Sendable () throws -> Data?) async throws {
        guard !state.withLock({ $0.isClosed }) else { throw CacheError(.storeClosed, "The cache store is closed.") }
        // The body is taken on the index's queue, in call order; memory follows the same order.
        try await index.saveJob(id) { [self] in
            let saved = try body()
            self.jobs.withLock { $0[id] = saved }
            return saved
        }
    }

    /// Evicts expired entries and, if the store is over its limit, the least recently used
    /// ones, then flushes.
    public func trim() async throws {
        let now = configuration.clock.now
        state.withLock { _ = $0.evict(using: configuration.evictor, now: now) }
        try await flush()
    }

    // MARK: Persistence

    /// Commits every change so far to the index: spans written (after flushing their data
    /// to disk when ``Configuration/synchronizesData`` is on), metadata, access times and
    /// removals. Files of removed entries are deleted after the commit.
    public func flush() async throws {
        try await index.commit { [self] in
            // Runs on the index's serial queue, so snapshots are committed in the order taken.
            var toSync: [(name: String, file: EntryFile?)] = []
            var changes = self.state.withLock { state in
                var changes = CacheIndex.Changes()
                for (key, record) in state.records where record.isDirty {
                    changes.rows.append(
                        CacheIndex.Row(
                            key: key, fileName: record.fileName, metadata: record.metadata, spans: record.spans,
                            createdAt: record.createdAt, lastAccess: record.lastAccess, isPinned: record.isPinned))
                    if record.needsSync, configuration.synchronizesData {
                        toSync.append((record.fileName, record.file))
                    }
                    state.records[key]!.isDirty = false
                    state.records[key]!.needsSync = false
                }
                changes.deletedKeys = Array(state.deletedKeys)
                state.deletedKeys = []
                changes.deletedRowKeys = state.deletedRowKeys
                state.deletedRowKeys = []
                let files = state.filesToUnlink
                state.filesToUnlink = []
                state.unflushedBytes = 0
                CacheMetrics.cacheSize.record(state.totalBytes)
                CacheMetrics.cacheEntries.record(state.records.count)
                changes.onCommit = { [dataDirectory, records] in
                    // Nothing committed refers to these files any more.
                    for name in files {
                        unlink(dataDirectory + "/" + name)
                        records.remove(fileName: name)
                    }
                }
                return changes
            }
            changes.onRollback = { [self, changes] in self.restore(changes) }
            do {
                for (name, file) in toSync {
                    try (file ?? EntryFile(path: dataDirectory + "/" + name)).synchronize()
                }
            } catch {
                restore(changes)
                throw error
            }
            return changes
        }
    }

    /// Puts back a snapshot whose commit failed, so the next flush tries again.
    private func restore(_ changes: CacheIndex.Changes) {
        state.withLock { state in
            for row in changes.rows where state.records[row.key]?.fileName == row.fileName {
                state.records[row.key]!.isDirty = true
                state.records[row.key]!.needsSync = true
            }
            state.deletedKeys.formUnion(changes.deletedKeys)
            state.deletedRowKeys += changes.deletedRowKeys
        }
        // Files queued for deletion stay on disk until the next open removes them as orphans.
    }

    /// Starts a flush in the background unless one is already waiting to start.
    func scheduleFlush() {
        state.withLock { state in
            guard state.backgroundFlush == nil, !state.isClosed else { return }
            state.backgroundFlush = Task {
                do {
                    try await self.flush()
                } catch {
                    self.configuration.logger.error("Background flush of the cache index failed", metadata: ["error": "\(error)"])
                }
                self.state.withLock { $0.backgroundFlush = nil }
            }
        }
    }

    /// Commits everything, waits for background work and closes the index. Handles fail
    /// with `.storeClosed` afterwards.
    public func close() async throws {
        let pending = state.withLock { state -> Task<Void, Never>? in
            state.isClosed = true
            return state.backgroundFlush
        }
        await pending?.value
        defer { releaseLock() }
        try await flush()
        // Closing checkpoints SQLite's journal into the index (reads, writes, a sync): work for
        // a thread made for blocking, not one of the cooperative pool's.
        try await BlockingIO.runToCompletion { [index] in try index.close() }
    }

    /// A new data file's name: 128 random bits as 32 hex digits, from the system's random
    /// source without opening a device (Foundation's `UUID()` opens `/dev/urandom` on Linux,
    /// a blocking call on whichever thread makes it).
    static func newFileName() -> String {
        var generator = SystemRandomNumberGenerator()
        return [generator.next(), generator.next()].map { (value: UInt64) in
            let hex = String(value, radix: 16, uppercase: true)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}
