// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

// MARK: Persistence

extension CacheStore {
    /// Commits every change so far to the index: spans written (after flushing their data
    /// to disk when ``Configuration/synchronizesData`` is on), metadata, access times and
    /// removals. Files of removed entries are deleted after the commit.
    public func flush() async throws {
        try await index.commit { [self] in
            // Runs on the index's serial queue, so snapshots are committed in the order taken.
            var toSync: [(path: String, file: EntryFile?)] = []
            var changes = self.state.withLock { state in
                var changes = CacheIndex.Changes()
                state.persistPolicy()
                // Found first, changed after: a change while iterating would copy every record.
                let dirty = state.records.indices.filter { state.records.values[$0].isDirty }
                for index in dirty {
                    let (key, record) = (state.records.keys[index], state.records.values[index])
                    changes.rows.append(
                        CacheIndex.Row(
                            key: key, fileName: record.fileName, metadata: record.metadata, spans: record.spans,
                            createdAt: record.createdAt, lastAccess: record.lastAccess, isPinned: record.isPinned,
                            checksums: record.checksums, damaged: record.damaged, mark: state.policy.marks[key]))
                    if record.needsSync, configuration.synchronizesData {
                        toSync.append((dataPath(of: record), record.file))
                    }
                    state.records.values[index].isDirty = false
                    state.records.values[index].needsSync = false
                }
                changes.deletedKeys = Array(state.deletedKeys)
                state.deletedKeys = []
                changes.deletedRowKeys = state.deletedRowKeys
                state.deletedRowKeys = []
                if state.usageChanged { changes.usage = state.usage }
                state.usageChanged = false
                let files = state.filesToUnlink
                state.filesToUnlink = []
                // Trims this commit writes: their files are cut once it is done.
                let trims = state.trimmedFiles
                state.unflushedBytes = 0
                CacheMetrics.cacheSize.record(state.totalBytes)
                CacheMetrics.cacheEntries.record(state.records.count)
                changes.onCommit = { [self, records] in
                    cutTrimmedFiles(trims)
                    // Nothing committed refers to these files any more (in either folder).
                    for name in files {
                        for folder in Set([dataDirectory, cacheDataDirectory]) { unlink(folder + "/" + name) }
                    }
                    records.remove(fileNames: files)
                    // The disk's free space, measured again now that they are gone.
                    let before = reservations
                    if let measured = configuration.diskSpace(cacheDataDirectory) { self.note(measured, since: before) }
                }
                return changes
            }
            changes.onRollback = { [self, changes] in self.restore(changes) }
            do {
                try dataSync.synchronize(toSync)
            } catch {
                restore(changes)
                throw error
            }
            return changes
        }
    }

    /// Cuts the data files of `trims` (committed) at their ends, where each is still due: no
    /// write went past its end since (such a write cancels it), and no region of the file is
    /// held (a region being sent, or sent with `sendfile` and not yet read by its client: a cut
    /// would zero, in place, pages the socket still sends from); such a file waits for the next
    /// flush. The cut itself runs outside the store's lock (a truncation can wait on the disk's
    /// discard), the entry marked as being cut meanwhile: a write past the end waits until it
    /// is done (``CacheEntryHandle/waitForCut(before:)``). On the index's queue, not the cooperative pool.
    fileprivate func cutTrimmedFiles(_ trims: [Trimmed]) {
        guard !trims.isEmpty else { return }
        let cuts = state.withLock { state -> [(key: CacheKey, file: EntryFile?, path: String, end: Int64)] in
            var cuts: [(key: CacheKey, file: EntryFile?, path: String, end: Int64)] = []
            for trim in trims {
                guard
                    let due = state.trimmedFiles.firstIndex(where: {
                        $0.key == trim.key && $0.generation == trim.generation && $0.end == trim.end
                    })
                else { continue }
                let cut =
                    state.withRecord(trim.key) { record -> (file: EntryFile?, path: String)?? in
                        guard record.generation == trim.generation else { return .some(nil) }
                        if record.file != nil, !isKnownUniquelyReferenced(&record.file) { return nil }
                        return .some((record.file, dataPath(of: record)))
                    } ?? .some(nil)
                guard let cut else { continue }  // a region is being sent: the next flush cuts it
                state.trimmedFiles.remove(at: due)
                guard let (file, path) = cut else { continue }
                let end = blockLayout.map { $0.slotOffset(trim.end / $0.blockSize) } ?? trim.end
                state.cutting[trim.key] = trim.end
                cutsUnderWay.add(1, ordering: .relaxed)
                cuts.append((trim.key, file, path, end))
            }
            return cuts
        }
        for cut in cuts {
            if let file = cut.file {
                _ = ftruncate(file.descriptor, off_t(cut.end))
            } else {
                _ = truncate(cut.path, off_t(cut.end))
            }
        }
        guard !cuts.isEmpty else { return }
        let waiters = state.withLock { state in
            cutsUnderWay.subtract(cuts.count, ordering: .relaxed)
            return state.endCuts(of: cuts.map(\.key))
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Puts back a snapshot whose commit failed, so the next flush tries again.
    fileprivate func restore(_ changes: CacheIndex.Changes) {
        state.withLock { state in
            for row in changes.rows where state.records[row.key]?.fileName == row.fileName {
                state.records[row.key]!.isDirty = true
                state.records[row.key]!.needsSync = true
            }
            state.deletedKeys.formUnion(changes.deletedKeys)
            state.deletedRowKeys += changes.deletedRowKeys
            if changes.usage != nil { state.usageChanged = true }
        }
        // Files queued for deletion stay on disk until the next open removes them as orphans.
    }

    /// How long a background flush waits for more changes before it commits: the misses of a
    /// burst (a play's segments, a page of thumbnails, a player's first ranges) then share one
    /// transaction, one sync and one write of the records file, instead of paying one each (a
    /// commit per miss: about a third of a cold 64 KiB miss's context switches). A crash within
    /// it forgets those entries, whose files the next open removes, as a crash before any commit.
    static let flushDelay: Duration = .milliseconds(50)

    /// Starts a flush in the background, ``flushDelay`` from now, unless one is already waiting
    /// to start.
    func scheduleFlush() {
        state.withLock { state in
            guard state.backgroundFlush == nil, !state.isClosed else { return }
            state.backgroundFlush = Task {
                try? await Task.sleep(for: Self.flushDelay)
                // A change from here on schedules the next flush: this one may commit before it.
                self.state.withLock { $0.backgroundFlush = nil }
                do {
                    try await self.flush()
                } catch {
                    self.configuration.logger.error(
                        "Background flush of the cache index failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
