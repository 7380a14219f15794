// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

extension CacheStore {
    /// One entry as the store holds it in memory.
    struct Record {
        var fileName: String
        /// Changes whenever the entry is replaced by a new version; handles of an older
        /// generation can no longer read or write.
        var generation: UInt64
        var metadata: ContentMetadata
        var spans: SpanSet
        /// The stored blocks' checksums (an unencrypted store's; see ``BlockChecksums``).
        var checksums = BlockChecksums()
        /// Bytes dropped because their block failed its check and not stored again since: the
        /// entry shows as damaged while there are any.
        var damaged = SpanSet()
        /// Stored bytes whose blocks were checked (or written) by this process: these may go
        /// out by `sendfile` unchecked again. Never saved.
        var verified = SpanSet()
        var createdAt: Date
        var lastAccess: Date
        /// The handles that have this key open; an open entry is never evicted.
        var openBy: Set<UInt64> = []
        /// Whether the entry is pinned (``CacheStore/pin(_:)``): never evicted, its bytes
        /// counted against ``CacheStore/Configuration/maxPinnedBytes``.
        var isPinned = false
        /// Whether the data file is in the pinned entries' folder rather than the cache folder
        /// (the same folder in a one-folder store; see ``CacheStore/placeFiles(of:)``).
        var isInPinnedFolder = false
        /// The open data file, kept while the entry is open.
        var file: EntryFile?
        /// Whether the index row is older than this record.
        var isDirty: Bool
        /// Whether bytes were written since the file was last synchronised.
        var needsSync: Bool = false
    }

    /// Everything mutable in the store, behind one lock.
    struct State {
        var records: [CacheKey: Record] = [:]
        var totalBytes: Int64 = 0
        /// Bytes that writes in progress will add, counted against the limit before they land.
        var reservedBytes: Int64 = 0
        /// Every byte ever reserved: a measure of the disk that took a while knows from it
        /// what was reserved meanwhile (``CacheStore/note(_:since:)``).
        var reservedEver: Int64 = 0
        /// Bytes written since the last flush took its snapshot.
        var unflushedBytes: Int64 = 0
        var deletedKeys: Set<CacheKey> = []
        /// Index rows this store cannot read (sealed with another key), by data file name;
        /// their bytes count against the limit and they are evicted as any entry.
        var otherRows: [String: CacheIndex.OtherRow] = [:]
        /// Rows to delete by their key column (other rows).
        var deletedRowKeys: [Data] = []
        /// Data files to delete once the next commit no longer refers to them.
        var filesToUnlink: [String] = []
        var nextGeneration: UInt64 = 1
        /// Checks of whole entries against their origin's digests, running in the background.
        var digestChecks: [CacheKey: Task<CacheStore.DigestOutcome, Never>] = [:]
        var nextHandleID: UInt64 = 1
        var backgroundFlush: Task<Void, Never>?
        var isClosed = false
        /// The disk's free space, as last measured (``CacheStore/measureDisk()``).
        var disk: DiskSpace?
        /// Entries no handle pins whose data file is kept open, least recently let go first:
        /// a replayed range can then be sent without opening the file again (and without
        /// leaving the event loop). At most ``keptOpenFiles``.
        var unpinnedOpenFiles: [CacheKey] = []
        static let keptOpenFiles = 32

        /// Keeps `key`'s data file open after its last handle closed, closing the least
        /// recently let go beyond ``keptOpenFiles``.
        mutating func keepFileOpen(_ key: CacheKey) {
            unpinnedOpenFiles.removeAll { $0 == key }
            unpinnedOpenFiles.append(key)
            while unpinnedOpenFiles.count > Self.keptOpenFiles {
                let oldest = unpinnedOpenFiles.removeFirst()
                if records[oldest]?.openBy.isEmpty == true {
                    // Its blocks are checked again after the file is next opened.
                    records[oldest]!.file = nil
                    records[oldest]!.verified = SpanSet()
                }
            }
        }

        /// Runs `body` on `key`'s record where it is held: one look-up, and no copy of the
        /// record (a request looks its entry up several times); `nil` when there is none.
        mutating func withRecord<T>(_ key: CacheKey, _ body: (inout Record) throws -> T) rethrows -> T? {
            guard let index = records.index(forKey: key) else { return nil }
            return try body(&records.values[index])
        }

        /// The bytes stored in pinned entries.
        var pinnedBytes: Int64 {
            records.values.reduce(0) { $0 + ($1.isPinned ? $1.spans.byteCount : 0) }
        }

        mutating func makeGeneration() -> UInt64 {
            defer { nextGeneration += 1 }
            return nextGeneration
        }

        /// Forgets `key`: its row is deleted and its file unlinked at the next flush.
        mutating func drop(_ key: CacheKey) {
            guard let record = records.removeValue(forKey: key) else { return }
            totalBytes -= record.spans.byteCount
            disk?.takenSince -= record.spans.byteCount
            deletedKeys.insert(key)
            filesToUnlink.append(record.fileName)
        }

        /// Forgets an other row: its row is deleted and its file unlinked at the next flush.
        mutating func dropOtherRow(_ fileName: String) {
            guard let row = otherRows.removeValue(forKey: fileName) else { return }
            totalBytes -= row.byteCount
            disk?.takenSince -= row.byteCount
            deletedRowKeys.append(row.rowKey)
            filesToUnlink.append(fileName)
        }

        /// Removes the entries the evictor chooses (other rows among them); returns how many.
        @discardableResult
        mutating func evict(using evictor: Evictor, incomingBytes: Int64 = 0, now: Date) -> Int {
            var candidates = records.map { key, record in
                Evictor.Candidate(
                    key: key, byteCount: record.spans.byteCount, lastAccess: record.lastAccess,
                    isPinned: record.isPinned || !record.openBy.isEmpty)
            }
            // An other row takes part under a name no entry has: NUL and its file's random name.
            var otherNames: [CacheKey: String] = [:]
            for (name, row) in otherRows {
                let key = CacheKey("\u{0}" + name)
                otherNames[key] = name
                candidates.append(
                    Evictor.Candidate(key: key, byteCount: row.byteCount, lastAccess: row.lastAccess, isPinned: false))
            }
            let victims = evictor.victims(
                of: candidates, totalBytes: totalBytes + reservedBytes, incomingBytes: incomingBytes, now: now)
            guard !victims.isEmpty else { return 0 }
            let before = totalBytes
            for key in victims {
                if records[key] == nil, let name = otherNames[key] { dropOtherRow(name) } else { drop(key) }
            }
            CacheMetrics.evictions.increment(by: victims.count)
            CacheMetrics.evictedBytes.increment(by: Int(before - totalBytes))
            return victims.count
        }
    }
}

extension CacheStore {
    /// Notes on `key`'s entry that its body's start is neither a playlist nor a manifest
    /// (``ContentMetadata/startIsMedia``), when it still holds the version the look read.
    func noteStartIsMedia(of key: CacheKey, version: ContentMetadata) {
        let noted = state.withLock { state in
            state.withRecord(key) { record -> Bool in
                guard record.metadata.startIsMedia != true, record.metadata.isSameVersion(as: version),
                    record.metadata.length == version.length
                else { return false }
                record.metadata.startIsMedia = true
                record.isDirty = true
                return true
            } ?? false
        }
        if noted { scheduleFlush() }
    }
}
