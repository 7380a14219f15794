// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Opening a store: its folder kept private, its index checked and, when damaged or
/// missing, rebuilt from the entry records.
extension CacheStore {
    /// Makes `folder` private to its owner (`0700`), or refuses it with the reason: the folder
    /// holds what the user played (URLs, bytes) and files the store trusts, so a folder another
    /// user owns or may write to (where they could plant an index or a link in place of a data
    /// file) is not used.
    static func keepPrivate(folder: String) throws {
        var info = stat()
        guard stat(folder, &info) == 0 else {
            throw CacheError(
                .cannotOpenStore, "Cannot read the cache folder \(folder): \(String(cString: strerror(errno))).")
        }
        let mode = info.st_mode & 0o777
        guard info.st_uid == geteuid() else {
            throw CacheError(
                .cannotOpenStore,
                "The cache folder \(folder) belongs to another user (uid \(info.st_uid)): they could read what is played and change what is served. Choose a folder of your own."
            )
        }
        guard mode & 0o022 == 0 else {
            throw CacheError(
                .cannotOpenStore,
                "Other users may write to the cache folder \(folder) (mode \(String(mode, radix: 8))): they could plant files the cache would serve or overwrite. Run chmod 700 on it, or choose another folder."
            )
        }
        if mode != 0o700, chmod(folder, 0o700) != 0 {
            throw CacheError(
                .cannotOpenStore,
                "Cannot make the cache folder \(folder) private (chmod 700): \(String(cString: strerror(errno))).")
        }
    }

    /// Gives the store's file at `path` mode `0600` (creating it first if `create`); a file
    /// that does not exist is left so.
    static func keepPrivate(file path: String, create: Bool) throws {
        if create {
            let descriptor = openDescriptor(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else {
                throw CacheError(
                    .cannotOpenStore,
                    "Cannot open \(path): \(String(cString: strerror(errno))). Check the cache folder's permissions.")
            }
            closeDescriptor(descriptor)
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw CacheError(
                .cannotOpenStore,
                "\(path) is not a file of yours: the cache folder was changed by someone else. Remove it, or choose another folder."
            )
        }
        if info.st_mode & 0o077 != 0, chmod(path, 0o600) != 0 {
            throw CacheError(
                .cannotOpenStore, "Cannot make \(path) private (chmod 600): \(String(cString: strerror(errno))).")
        }
    }

    /// Where the data file `name` of an entry of class `pinned` is, after moving it there when
    /// it was found in the other class's folder: `true` for the pinned folder. A file in
    /// neither is taken as in its class's folder (its entry then holds nothing).
    static func place(_ name: String, pinned: Bool, in folders: DataFolders, logger: Logger) -> Bool {
        guard !folders.isOneFolder else { return pinned }
        let (expected, other) = (
            folders.folder(pinned: pinned) + "/" + name, folders.folder(pinned: !pinned) + "/" + name
        )
        guard access(expected, F_OK) != 0, access(other, F_OK) == 0 else { return pinned }
        if rename(other, expected) == 0 { return pinned }
        logger.notice(
            "A data file stays in the other folder (it cannot be renamed there)",
            metadata: ["file": "\(name)", "error": "\(String(cString: strerror(errno)))"])
        return !pinned
    }

    func releaseLock() {
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
    static func openIndex(path: String, existed: Bool, records: EntryRecords, configuration: Configuration) throws
        -> CacheIndex
    {
        let sealer = configuration.encryptionKey.map(IndexSealer.init)
        let problem: String
        do {
            let index = try CacheIndex(path: path, sealer: sealer, records: records)
            if existed, let damage = index.damage() {
                try? index.close()
                problem = "its pages fail SQLite's check: \(damage)"
            } else if !existed, !records.isEmpty {
                return try rebuild(
                    index, from: records, because: "it was missing", movedTo: nil, configuration: configuration)
            } else {
                return index
            }
        } catch let error as CacheError where CacheIndex.isDamage(error.underlyingError) {
            problem = "SQLite cannot read it (\(String(describing: error.underlyingError!).prefix(200)))"
        }
        let aside = path + ".damaged-\(Int64(configuration.clock.now.timeIntervalSince1970))"
        for suffix in ["", "-wal", "-shm"] where rename(path + suffix, aside + suffix) != 0 && errno != ENOENT {
            throw CacheError(
                .indexFailure,
                "The cache index at \(path) is damaged (\(problem)) and cannot be moved aside: \(String(cString: strerror(errno)))."
            )
        }
        // Mode 0600, before SQLite makes it.
        let created = openDescriptor(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW)
        if created >= 0 { closeDescriptor(created) }
        return try rebuild(
            CacheIndex(path: path, sealer: sealer, records: records), from: records, because: problem, movedTo: aside,
            configuration: configuration)
    }

    /// Writes every entry record and job record into `index`, which is new.
    static func rebuild(
        _ index: CacheIndex, from records: EntryRecords, because problem: String, movedTo aside: String?,
        configuration: Configuration
    )
        throws -> CacheIndex
    {
        let (rows, unreadable) = records.load()
        let jobs = records.loadJobs()
        try index.rebuild(rows: rows, jobs: jobs)
        var metadata: Logger.Metadata = [
            "problem": "\(problem)", "entries": "\(rows.count)", "pinned": "\(rows.filter(\.isPinned).count)",
            "jobs": "\(jobs.count)",
            "unreadable records": "\(unreadable.count)",
        ]
        if let aside { metadata["moved to"] = "\(aside)" }
        configuration.logger.warning(
            "The cache index was damaged; rebuilt it from the entry records", metadata: metadata)
        CacheMetrics.indexRebuilt()
        return index
    }

    /// Loads the index and reconciles it with the data files on disk: an entry record whose
    /// row the index lacks (a row it could not decode) is taken back when its data file is
    /// there; a file in the other class's folder (a move a crash cut short) is moved where its
    /// entry's class keeps it; records and data files nothing names are removed.
    static func recover(
        index: CacheIndex, records: EntryRecords, folders: DataFolders, layout: BlockLayout?,
        configuration: Configuration,
        directory: URL
    ) throws -> State {
        var state = State()
        state.usage = index.loadUsage()
        var knownFiles: Set<String> = []
        var (rows, others) = try index.loadAll()
        let named = Set(rows.map(\.fileName) + others.map(\.fileName))
        let keys = Set(rows.map(\.key))
        var recordNames = Set<String>()
        var recorded: [String: CacheIndex.Row] = [:]
        for record in records.load().rows {
            recordNames.insert(record.fileName)
            recorded[record.fileName] = record
            guard !named.contains(record.fileName), !keys.contains(record.key),
                [folders.pinned, folders.cache].contains(where: { access($0 + "/" + record.fileName, F_OK) == 0 })
            else { continue }
            configuration.logger.warning(
                "An entry the cache index lost is taken back from its record", metadata: ["file": "\(record.fileName)"])
            rows.append(record)
        }
        if layout == nil, others.contains(where: { $0.kind == .sealed }) {
            throw CacheError(
                .encryptionKeyRequired, "The cache folder \(directory.path) is encrypted: open it with its key.")
        }
        for row in rows {
            var spans = row.spans
            if let record = recorded[row.fileName], record.key == row.key, record.spans != spans {
                // A row and its record claim different bytes: only what both claim is sure (a
                // record lags its row by at most one commit; a row garbled in place says more).
                spans = SpanSet(spans.spans.flatMap { record.spans.spans(in: $0) })
            }
            let isInPinnedFolder = Self.place(
                row.fileName, pinned: row.isPinned, in: folders, logger: configuration.logger)
            let path = folders.folder(pinned: isInPinnedFolder) + "/" + row.fileName
            var info = stat()
            let fileSize: Int64 = stat(path, &info) == 0 ? Int64(info.st_size) : 0
            let storable = layout?.plaintextLength(fileSize: fileSize) ?? fileSize
            if let last = spans.spans.last, last.upperBound > storable {
                // Only possible after a power loss with data synchronisation off.
                spans.remove(ByteRange(storable, last.upperBound))
            }
            var checksums = row.checksums
            if spans != row.spans, layout == nil {
                // A block that lost some of its claimed bytes has a checksum over more than it
                // holds now: the rest of its bytes go too, and are fetched again.
                for lost in row.spans.spans.flatMap({ spans.holes(in: $0) }) {
                    for block in BlockChecksums.blocks(overlapping: lost) {
                        spans.remove(BlockChecksums.range(ofBlock: block))
                        checksums[block] = nil
                    }
                }
            }
            knownFiles.insert(row.fileName)
            state.records[row.key] = Record(
                fileName: row.fileName, generation: state.makeGeneration(), metadata: row.metadata, spans: spans,
                checksums: checksums, damaged: row.damaged, createdAt: row.createdAt, lastAccess: row.lastAccess,
                isPinned: row.isPinned, isInPinnedFolder: isInPinnedFolder,
                isDirty: spans != row.spans || !named.contains(row.fileName))
            state.totalBytes += spans.byteCount
        }
        // The eviction policy's state, as the rows keep it. Rows of an earlier store have none:
        // they join its main queue in the order of their last access (as they went, by age).
        let byAccess = rows.sorted { ($0.lastAccess, $0.key.rawValue) < ($1.lastAccess, $1.key.rawValue) }
        for (rank, row) in byAccess.enumerated() {
            guard let record = state.records[row.key] else { continue }
            state.policy.restore(row.key, item: record.item(key: row.key), mark: row.mark, rank: UInt64(rank + 1))
        }
        state.persistPolicy()
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
        for folder in Set([folders.pinned, folders.cache]) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            where !knownFiles.contains(name) {
                unlink(folder + "/" + name)
            }
        }
        records.remove(fileNames: Array(recordNames.subtracting(knownFiles)))
        return state
    }
}
