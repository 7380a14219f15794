// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Two storage classes: pinned and recorded entries are the user's data, kept with the index in
/// the store's folder; streaming entries are a cache, in ``Configuration/cacheDirectory``, which
/// the system or the user may empty. An entry's file moves when it is pinned or unpinned (a
/// rename, under the store's lock, on the blocking pool); a move a crash interrupted is finished
/// when the store opens. A data file that vanished (its folder emptied) is a miss, never a
/// read of bytes that are not there.
extension CacheStore {
    /// The two folders data files live in (the same one in a one-folder store).
    struct DataFolders {
        var pinned: String
        var cache: String

        var isOneFolder: Bool { pinned == cache }

        /// Where an entry's file is, by where it was put.
        func folder(pinned isInPinnedFolder: Bool) -> String { isInPinnedFolder ? pinned : cache }
    }

    var folders: DataFolders { DataFolders(pinned: dataDirectory, cache: cacheDataDirectory) }

    /// The path of `record`'s data file.
    func dataPath(of record: Record) -> String {
        folders.folder(pinned: record.isInPinnedFolder) + "/" + record.fileName
    }

    /// Moves the data files of `keys` to the folder of their class (pinned ones to the store's
    /// folder, the others to the cache folder), each by a rename under the store's lock, so a
    /// handle opening one meanwhile finds it in one place or the other, never in neither. A file
    /// that cannot be renamed there (another file system) stays where it is: the entry keeps its
    /// class all the same, and the next open tries again.
    func placeFiles(of keys: some Sequence<CacheKey>) async {
        guard !folders.isOneFolder else { return }
        let keys = Array(keys)
        _ = try? await BlockingIO.runToCompletion { [self] in
            for key in keys {
                state.withLock { state in
                    guard let record = state.records[key], record.isInPinnedFolder != record.isPinned else { return }
                    let from = dataPath(of: record)
                    let to = folders.folder(pinned: record.isPinned) + "/" + record.fileName
                    if rename(from, to) == 0 || errno == ENOENT {
                        // Moved (an open descriptor follows the file), or not made yet: made there.
                        state.records[key]!.isInPinnedFolder = record.isPinned
                    } else {
                        configuration.logger.notice(
                            "A data file stays in the other folder (it cannot be renamed there)",
                            metadata: ["file": "\(record.fileName)", "error": "\(String(cString: strerror(errno)))"])
                    }
                }
            }
        }
    }

    /// Opens the data file of the entry `key` as it is now (`fileName`): a file that vanished
    /// while the entry claims bytes (its folder emptied under the store) makes the entry empty
    /// and throws `.notCached`, so the read path fetches again; a folder that vanished is made
    /// again for a new file. Blocking: call it on the blocking pool.
    func openDataFile(of key: CacheKey, named fileName: String) throws -> EntryFile {
        for _ in 0..<3 {
            guard
                let (path, claims) = state.withLock({ state in
                    state.records[key].flatMap {
                        $0.fileName == fileName ? (dataPath(of: $0), !$0.spans.isEmpty) : nil
                    }
                })
            else { throw CacheError(.entryInvalidated, "The cache entry was replaced or removed.") }
            let mark = configuration.markCreated
            if !claims {
                // A new entry's file, made at once (a cold read makes one each time); its folders
                // looked for only when that fails.
                if let file = try? EntryFile(path: path) {
                    mark?(URL(fileURLWithPath: path))
                    return file
                }
                guard errno == ENOENT else { return try EntryFile(path: path) }  // says why
                let folder = (path as NSString).deletingLastPathComponent
                // The cache folder and its `data` folder, made again if the system emptied them.
                let missing: [String] =
                    mark == nil
                    ? [] : [(folder as NSString).deletingLastPathComponent, folder].filter { access($0, F_OK) != 0 }
                try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                for made in missing { mark?(URL(fileURLWithPath: made, isDirectory: true)) }
                let file = try EntryFile(path: path)
                mark?(URL(fileURLWithPath: path))
                return file
            }
            if let file = try? EntryFile(existingAt: path) { return file }
            guard errno == ENOENT else { return try EntryFile(path: path) }  // says why
            // Moved meanwhile (pinned or unpinned): asked again where it is now.
            let moved = state.withLock { state in state.records[key].map { dataPath(of: $0) != path } ?? false }
            if moved { continue }
            let dropped = state.withLock { state -> Int64 in
                guard var record = state.records[key], record.fileName == fileName else { return 0 }
                let bytes = record.spans.byteCount
                state.totalBytes -= bytes
                record.spans = SpanSet()
                record.isDirty = true
                state.records[key] = record
                return bytes
            }
            configuration.logger.warning(
                "A data file vanished (its folder was emptied); the entry is fetched again",
                metadata: ["file": "\(fileName)", "bytes": "\(dropped)"])
            throw CacheError(.notCached, "The cached bytes are gone from the cache folder.")
        }
        throw CacheError(.notCached, "The data file kept moving while it was opened.")
    }

    /// The files of a store's own (not its data files): moved to the store's folder when a
    /// store of one folder becomes one of two; the index last, so a move cut short is done again.
    static let homeFiles = ["index.sqlite-wal", "index.sqlite-shm", "settings.json", "entries", "jobs", "index.sqlite"]

    /// Makes a store kept in one folder (`old`, today's layout: index, records and every data
    /// file) a store of two classes with `home` (index, records, pinned files) and `old` (the
    /// streaming files, which stay): moves the index and the records to `home` when `home` has
    /// no index yet. The pinned entries' files follow when the store opens (``recover``). A
    /// process killed in the middle leaves the index in `old`, so the next open goes on.
    /// - Throws: `.storeLocked` when another process (an older `mediacache`) holds `old`.
    static func migrateOneFolderStore(from old: URL, to home: URL, logger: Logger) throws {
        guard access(old.appendingPathComponent("index.sqlite").path, F_OK) == 0,
            access(home.appendingPathComponent("index.sqlite").path, F_OK) != 0
        else { return }
        let lockPath = old.appendingPathComponent("lock").path
        let descriptor = openDescriptor(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return }
        defer { closeDescriptor(descriptor) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        guard fcntl(descriptor, F_SETLK, &lock) == 0 else {
            throw CacheError(
                .storeLocked,
                "The cache folder \(old.path) is in use by another process (an older mediacache?): stop it, and its store moves to \(home.path) at the next start."
            )
        }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try keepPrivate(folder: home.path)
        for name in homeFiles {
            let (from, to) = (old.appendingPathComponent(name).path, home.appendingPathComponent(name).path)
            guard access(from, F_OK) == 0 else { continue }
            if rename(from, to) == 0 { continue }
            // Another file system: copied beside, then put in place, then the original removed.
            let beside = to + ".moving"
            try? FileManager.default.removeItem(atPath: beside)
            try? FileManager.default.removeItem(atPath: to)
            try FileManager.default.copyItem(atPath: from, toPath: beside)
            guard rename(beside, to) == 0 else {
                throw CacheError(.cannotOpenStore, "Cannot move \(from) to \(to): \(String(cString: strerror(errno))).")
            }
            try FileManager.default.removeItem(atPath: from)
        }
        logger.notice(
            "The store's index and pinned entries moved to the data folder; streaming entries stay in the cache folder",
            metadata: ["data": "\(home.path)", "cache": "\(old.path)"])
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

extension CacheStore {
    /// Tells `mark` (``Configuration/markCreated``) of the store's folders and the files at
    /// the top of its own: what SQLite made at this open (the journal), the lock, a migration's
    /// files. Files made later are told as they are made; the data and record files of a store
    /// written before the hook are inside folders it is told of.
    func markAtOpen(_ mark: @Sendable (URL) -> Void) {
        var folders = [directory.path, dataDirectory, records.entriesDirectory, records.jobsDirectory]
        if cacheDataDirectory != dataDirectory {
            folders += [(cacheDataDirectory as NSString).deletingLastPathComponent, cacheDataDirectory]
        }
        for folder in folders {
            mark(URL(fileURLWithPath: folder, isDirectory: true))
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] {
            var isFolder: ObjCBool = false
            let path = directory.path + "/" + name
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue {
                mark(URL(fileURLWithPath: path))
            }
        }
    }
}
