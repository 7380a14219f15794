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

        /// The item the entry ages with in the eviction policy: its rendition for a media
        /// segment, else itself (``EvictionPolicy/item(of:mimeType:)``).
        func item(key: CacheKey) -> String {
            EvictionPolicy.item(of: metadata.sourceURL?.absoluteString ?? "", mimeType: metadata.mimeType)
                ?? key.rawValue
        }
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
        /// What starts for an entry when it becomes whole (``CacheStore/startWhenWhole(_:)``).
        var wholeEntryWork: CacheStore.WholeEntryWork?
        /// That work, running in the background, by entry.
        var wholeEntryTasks: [CacheKey: Task<Void, Never>] = [:]
        var nextHandleID: UInt64 = 1
        /// Handles waiting to be the only one open on their entry, by handle
        /// (``CacheEntryHandle/untilAlone()``).
        var aloneWaiters: [UInt64: (key: CacheKey, continuation: CheckedContinuation<Void, Never>)] = [:]
        var backgroundFlush: Task<Void, Never>?
        var isClosed = false
        /// The disk's free space, as last measured (``CacheStore/measureDisk()``).
        var disk: DiskSpace?
        /// Which stored bytes go first when room is needed, and its state of each entry.
        var policy = EvictionPolicy()
        /// Data files trimmed in the index whose bytes past the end are still on disk: cut once
        /// the commit that trims them is done (``CacheStore/cutTrimmedFiles(_:)``).
        var trimmedFiles: [Trimmed] = []
        /// Entries whose data file is being cut at the end given, outside the lock: a write past
        /// it waits until the cut is done (``cutWaiters``).
        var cutting: [CacheKey: Int64] = [:]
        /// Writes waiting for their entry's cut to end.
        var cutWaiters: [CacheKey: [CheckedContinuation<Void, Never>]] = [:]
        /// The entries the cache's own work wrote bytes to (the only ones that can hold bytes
        /// no player read), until they go.
        var ownWritten: Set<CacheKey> = []
        /// What players got from the cache and the origin, day by day, and what eviction let
        /// go, over the store's life.
        var usage = UsageHistory()
        /// Whether ``usage`` changed since the last flush.
        var usageChanged = false
        /// Entries no handle pins whose data file is kept open (see ``KeptOpenFiles``).
        var keptOpen = KeptOpenFiles(limit: KeptOpenFiles.forThisProcess)

        /// Keeps `key`'s data file open after its last handle closed, closing those of the
        /// entries let go longest ago beyond the limit.
        mutating func keepFileOpen(_ key: CacheKey) {
            for oldest in keptOpen.keep(key) where records[oldest]?.openBy.isEmpty == true {
                // A file a region still holds (being sent, or sent and not yet read) stays
                // open: a trim's cut looks at it to wait (``CacheStore/cutTrimmedFiles(_:)``).
                guard withRecord(oldest, { isKnownUniquelyReferenced(&$0.file) }) == true else { continue }
                // Its blocks are checked again after the file is next opened.
                records[oldest]!.file = nil
                records[oldest]!.verified = SpanSet()
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
            policy.removed(key)
            ownWritten.remove(key)
            keptOpen.forget(key)
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

        /// Makes room for `incoming` bytes under `limit`: entries unread for longer than
        /// `maxAge` go, sealed rows of another key next, then what ``EvictionPolicy`` chooses of
        /// the entries neither open nor pinned (with `ownBytes`, the room for the cache's own
        /// work: other bytes no player read only). `reason` names the room made for the disk.
        /// Returns how many entries it removed or trimmed.
        @discardableResult
        mutating func evict(
            incomingBytes: Int64 = 0, limit: Int64, maxAge: TimeInterval?, now: Date, ownBytes: Bool = false,
            reason: EvictionPolicy.Reason? = nil
        ) -> Int {
            let before = totalBytes
            var count = 0
            func remove(_ key: CacheKey, _ why: EvictionPolicy.Reason) {
                let bytes = records[key]?.spans.byteCount ?? 0
                drop(key)
                usage.evicted(bytes, for: why)
                usageChanged = true
                CacheMetrics.evicted(why, bytes: bytes, entries: 1)
                count += 1
            }
            if let maxAge {
                let expired = records.filter {
                    !$0.value.isPinned && $0.value.openBy.isEmpty && now.timeIntervalSince($0.value.lastAccess) > maxAge
                }
                for key in expired.keys { remove(key, .expired) }
                for (name, row) in otherRows where now.timeIntervalSince(row.lastAccess) > maxAge { dropOtherRow(name) }
            }
            // Rows sealed with another key are misses for this one: the first to go.
            for (name, _) in otherRows.sorted(by: { $0.value.lastAccess < $1.value.lastAccess })
            where !ownBytes && totalBytes + reservedBytes + incomingBytes > limit {
                dropOtherRow(name)
            }
            let need = totalBytes + reservedBytes + incomingBytes - limit
            if need > 0 {
                // A little more than is needed goes: a full store then decides once per so many
                // writes, not on every one (a soak of 64 MiB spent a tenth of its time deciding,
                // under the store's lock).
                let slack = ownBytes ? 0 : EvictionPolicy.slack(limit: limit)
                let start = ByteRange(0, policy.settings.startBytes)
                // By index, each record read in place: copying the records cost more than deciding.
                var holdings: [EvictionPolicy.Holding] = []
                for index in records.indices {
                    guard !records.values[index].isPinned, records.values[index].openBy.isEmpty else { continue }
                    let spans = records.values[index].spans
                    guard !spans.isEmpty else { continue }
                    let key = records.keys[index]
                    // What a trim to the played bytes keeps: a whole block more at most (`trim`).
                    let playedEnd = max(start.upperBound, policy.marks[key]?.playedEnd ?? 0)
                    let played = ByteRange(0, min(ByteRange.maximumOffset, Self.blockEnd(playedEnd)))
                    holdings.append(
                        EvictionPolicy.Holding(
                            key: key, item: policy.item(of: key) ?? records.values[index].item(key: key),
                            bytes: spans.byteCount, startBytes: spans.byteCount(in: start),
                            playedBytes: spans.byteCount(in: played)))
                }
                let actions = policy.makeRoom(need, slack: slack, holdings: holdings, forOwnBytes: ownBytes)
                for action in actions {
                    switch action {
                    case .remove(let key, let why):
                        remove(key, reason ?? why)
                    case .trim(let key, let keeping, let why):
                        let freed = trim(key, keeping: keeping)
                        usage.evicted(freed, for: reason ?? why)
                        usageChanged = true
                        CacheMetrics.evicted(reason ?? why, bytes: freed, entries: 0)
                        count += 1
                    }
                }
            }
            persistPolicy()
            if before > totalBytes { CacheMetrics.evictedBytes.increment(by: Int(before - totalBytes)) }
            return count
        }

        /// Keeps the first bytes of `key`'s entry, to `keeping` rounded up to a whole block;
        /// the data file is cut after the commit that says so. Returns the bytes it let go.
        mutating func trim(_ key: CacheKey, keeping: Int64) -> Int64 {
            let end = Self.blockEnd(keeping)
            let cut =
                withRecord(key) { record -> (freed: Int64, generation: UInt64)? in
                    guard let last = record.spans.spans.last, last.upperBound > end else { return nil }
                    let cut = ByteRange(end, last.upperBound)
                    let before = record.spans.byteCount
                    record.spans.remove(cut)
                    record.damaged.remove(cut)
                    record.verified.remove(cut)
                    for block in BlockChecksums.blocks(overlapping: cut) { record.checksums[block] = nil }
                    record.isDirty = true
                    return (before - record.spans.byteCount, record.generation)
                } ?? nil
            guard let cut else { return 0 }
            trimmedFiles.append(Trimmed(key: key, generation: cut.generation, end: end))
            let freed = cut.freed
            totalBytes -= freed
            disk?.takenSince -= freed
            return freed
        }

        /// `offset` rounded up to a whole block (a trim keeps whole blocks: their checksums hold).
        static func blockEnd(_ offset: Int64) -> Int64 {
            let blockSize = BlockChecksums.blockSize
            return offset >= ByteRange.maximumOffset - blockSize
                ? offset : (offset + blockSize - 1) / blockSize * blockSize
        }

        /// The cuts of `keys` are done: the writes that waited for them, to wake outside the lock.
        mutating func endCuts(of keys: [CacheKey]) -> [CheckedContinuation<Void, Never>] {
            keys.flatMap { key in
                cutting[key] = nil
                return cutWaiters.removeValue(forKey: key) ?? []
            }
        }

        /// A player read `key`'s entry from `start` up to `end` (excluded).
        mutating func notePlayed(_ key: CacheKey, from start: Int64, through end: Int64) {
            guard let record = records[key] else { return }
            policy.played(key, item: { record.item(key: key) }, from: start, through: end)
        }

        /// Marks the rows whose eviction state changed, for the next flush.
        mutating func persistPolicy() {
            for (key, _) in policy.takeChanged() where records[key] != nil { records[key]!.isDirty = true }
        }
    }

    /// A data file trimmed in the index, to be cut at `end` (plaintext) once that is committed.
    struct Trimmed: Sendable {
        var key: CacheKey
        var generation: UInt64
        var end: Int64
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
