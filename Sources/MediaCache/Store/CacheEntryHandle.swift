// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
package import MediaCacheHTTPFields
package import NIOCore
import Synchronization

/// How an answer's metadata relates to the version an entry holds (see
/// ``CacheEntryHandle/updateMetadata(_:version:)``).
package enum VersionChange: Sendable {
    /// Told by validators and length: a contradiction is a new version.
    case compare
    /// The version described by the associated metadata, confirmed (a `304`): if the entry
    /// still holds it, its bytes stay whatever validators the answer brings.
    case confirms(ContentMetadata)
    /// A version the stored one cannot be shown to be: its bytes go.
    case new
}

/// An open entry of a ``CacheStore``: reads and writes its bytes and metadata.
///
/// While a handle is open its entry is not evicted. Close it with ``close()`` when done
/// (it also closes when released). If the entry is removed, or replaced because the
/// resource changed, the handle's calls throw `.entryInvalidated`.
package final class CacheEntryHandle: Sendable {
    /// The entry's key.
    public let key: CacheKey
    let store: CacheStore
    let id: UInt64
    private let generation: Mutex<UInt64?>
    /// Seals and opens the entry's blocks when the store is encrypted.
    let cipher: EntryCipher?

    init(store: CacheStore, key: CacheKey, id: UInt64, generation: UInt64) {
        self.store = store
        self.key = key
        self.id = id
        self.generation = Mutex(generation)
        cipher = store.configuration.encryptionKey.map {
            EntryCipher(masterKey: $0, cacheKey: key, layout: store.blockLayout!)
        }
    }

    deinit {
        close()
    }

    /// The entry's metadata.
    /// - Throws: `.entryInvalidated` or `.storeClosed`.
    public func metadata() throws -> ContentMetadata {
        try withRecord { $0.metadata }
    }

    /// The entry's cached spans.
    /// - Throws: `.entryInvalidated` or `.storeClosed`.
    public func spans() throws -> SpanSet {
        try withRecord { $0.spans }
    }

    /// What a read of `range` starts from, under one lock: the metadata and the cached spans
    /// within `range`, cut to it; `nil` unless every byte of `range` is cached.
    package func cachedWhole(_ range: ByteRange) -> (metadata: ContentMetadata, spans: SpanSet)? {
        try? withRecord { record in
            record.spans.contains(range) ? (record.metadata, record.spans.clipped(to: range)) : nil
        }
    }

    /// The cached spans within `range`, cut to it.
    /// - Throws: `.entryInvalidated` or `.storeClosed`.
    package func spans(in range: ByteRange) throws -> SpanSet {
        try withRecord { $0.spans.clipped(to: range) }
    }

    /// Records what the origin said about the resource.
    ///
    /// If `metadata` describes the same version as what is stored (validators and length
    /// agree where both are known), unknown fields are filled in and the cached bytes stay.
    /// Otherwise the resource has changed: every cached byte of the old version is dropped
    /// and this handle moves to the new version, while other handles become invalid.
    /// `version` can say it instead of the validators: `.new` for an answer that cannot be
    /// shown to be the stored version, `.confirms` for a `304` that confirmed the version
    /// asked about (its new validators are taken, the bytes kept).
    /// - Returns: `true` when the old version's bytes were dropped.
    @discardableResult
    public func updateMetadata(_ metadata: ContentMetadata, version: VersionChange = .compare) throws -> Bool {
        let replaced = try store.state.withLock { state -> Bool in
            let record = try currentRecord(in: &state)
            var updated = record.metadata
            let same =
                switch version {
                case .compare: updated.isSameVersion(as: metadata)
                case .confirms(let asked): updated.isSameVersion(as: asked)
                case .new: false
                }
            guard same else {
                state.totalBytes -= record.spans.byteCount
                state.filesToUnlink.append(record.fileName)
                let generation = state.makeGeneration()
                var fresh = record
                fresh.fileName = CacheStore.newFileName()
                fresh.isInPinnedFolder = fresh.isPinned
                fresh.generation = generation
                fresh.file = nil
                fresh.spans = SpanSet()
                fresh.checksums = BlockChecksums()
                fresh.damaged = SpanSet()
                fresh.verified = SpanSet()
                fresh.metadata = metadata
                fresh.isDirty = true
                fresh.needsSync = false
                state.records[key] = fresh
                self.generation.withLock { $0 = generation }
                return true
            }
            updated.length = metadata.length ?? updated.length
            updated.mimeType = metadata.mimeType ?? updated.mimeType
            updated.etag = metadata.etag ?? updated.etag
            updated.lastModified = metadata.lastModified ?? updated.lastModified
            updated.freshUntil = metadata.freshUntil ?? updated.freshUntil
            updated.generatedAt = metadata.generatedAt ?? updated.generatedAt
            if !metadata.responseHeaders.isEmpty { updated.responseHeaders = metadata.responseHeaders }
            updated.requiresRevalidation = metadata.requiresRevalidation
            updated.staleWhileRevalidate = metadata.staleWhileRevalidate
            updated.acceptsRanges = metadata.acceptsRanges
            updated.finalURL = metadata.finalURL
            updated.sourceURL = metadata.sourceURL ?? updated.sourceURL
            updated.takeVaryingFields(of: metadata)
            updated.wholeContentDigest = metadata.wholeContentDigest ?? updated.wholeContentDigest
            if updated.digestsMatched != nil,
                updated.responseHeaders != record.metadata.responseHeaders
                    || updated.wholeContentDigest != record.metadata.wholeContentDigest,
                updated.originDigests != record.metadata.originDigests
            {
                updated.digestsMatched = nil  // other digests: checked again
            }
            if updated != record.metadata {
                state.records[key]!.metadata = updated
                state.records[key]!.isDirty = true
            }
            return false
        }
        if replaced { store.scheduleFlush() }
        return replaced
    }

    /// Writes `bytes` at `offset` and adds the range to the entry's spans.
    ///
    /// If the store would go over its limit, entries that are not open are evicted first.
    /// - Throws: `.outOfBounds` past the known length; `.capacityExceeded` when the entry
    ///   would pass its share of the store (``CacheStore/Configuration/maxEntryFraction``) or
    ///   even eviction cannot make room; `.ioFailure` when the disk refuses the write (the
    ///   index and the bytes already stored stay intact); `.entryInvalidated`.
    public func write(_ bytes: ByteBuffer, at offset: Int64) async throws {
        try await write(bytes, at: offset, ownBytes: false)
    }

    /// ``write(_:at:)``, saying whether the bytes are the cache's own (`ownBytes`: a fill's past
    /// its player, a read-ahead's, a prefetch's, a preload's, that no player waits for): room
    /// for those is made of other such bytes only, never of what players read
    /// (``EvictionPolicy``), and they are refused (`.capacityExceeded`) when there is none.
    package func write(_ bytes: ByteBuffer, at offset: Int64, ownBytes: Bool) async throws {
        try await write([bytes], at: offset, ownBytes: ownBytes)
    }

    /// ``write(_:at:ownBytes:)`` of consecutive buffers (the chunks an origin body came in),
    /// not joined: one `pwritev` of them in an unencrypted store.
    package func write(_ parts: [ByteBuffer], at offset: Int64, ownBytes: Bool) async throws {
        let bytes = GatheredBytes(parts)
        guard bytes.count > 0 else { return }
        guard offset >= 0 else {
            throw CacheError(.outOfBounds, "Cannot write at negative offset \(offset).")
        }
        let range = ByteRange(offset: offset, length: Int64(bytes.count))
        await waitForCut(before: range.upperBound)
        let now = store.configuration.clock.now
        let floor = store.configuration.minFreeDiskBytes
        let (openFile, fileName, incoming, evicted) = try store.state.withLock { state in
            let record = try currentRecord(in: &state)
            if let length = record.metadata.length, range.upperBound > length {
                throw CacheError(.outOfBounds, "Cannot write \(range) into a resource of \(length) bytes.")
            }
            let incoming = range.length - record.spans.byteCount(in: range)
            // Checked before evicting: a resource past its share must not push others out.
            if incoming > 0, record.isPinned {
                let quota = store.configuration.pinnedQuota
                let pinned = state.pinnedBytes
                if pinned + incoming > quota {
                    throw CacheError(
                        .capacityExceeded,
                        "Pinned entries would hold more than their quota (\(pinned + incoming) of \(quota) bytes).",
                        remedy: CacheError.Remedy(.raisePinnedQuota))
                }
            } else if incoming > 0, record.spans.byteCount + incoming > store.configuration.maxEntryBytes {
                let share = store.configuration.maxEntryBytes
                throw CacheError(
                    .capacityExceeded,
                    "The resource would take more than its share of the cache (\(share) bytes); the rest of it is not cached."
                )
            }
            if let end = state.cutting[key], range.upperBound > end {  // cut again since the wait
                throw CacheError(.ioFailure, "The entry's file is being cut short; these bytes are not stored.")
            }
            if incoming > 0 {
                if state.policy.marks[key] == nil { state.policy.stored(key, item: record.item(key: key)) }
                if ownBytes { state.ownWritten.insert(key) }
                // Bytes past a trim not yet cut from the file: the cut must not take them.
                state.trimmedFiles.removeAll { $0.key == key && $0.end < range.upperBound }
            }
            var evicted = 0
            let limit = store.configuration.maxBytes
            if state.totalBytes + state.reservedBytes + incoming > limit {
                evicted = state.evict(
                    incomingBytes: incoming, limit: limit, maxAge: store.configuration.maxAgeSeconds, now: now,
                    ownBytes: ownBytes)
                if state.totalBytes + state.reservedBytes + incoming > limit {
                    throw CacheError(
                        .capacityExceeded,
                        ownBytes
                            ? "The cache is full of what players read (limit \(limit) bytes); the cache's own bytes are not stored in its place."
                            : "The cache is full of entries in use (limit \(limit) bytes); the bytes are not cached.")
                }
            }
            // The disk keeps its floor of free space: streaming entries go first, then the write is refused.
            evicted += try state.makeDiskRoom(for: incoming, floor: floor ?? state.disk?.defaultFloor ?? 0, now: now)
            state.reservedBytes += incoming
            state.reservedEver += incoming
            state.disk?.takenSince += incoming
            return (record.file, record.fileName, incoming, evicted)
        }
        if evicted > 0 { store.scheduleFlush() }
        let shouldFlush: Bool
        do {
            // A file not open yet is opened in the same call as the write: a miss's first bytes
            // then cost one trip to the thread pool, not two.
            if let cipher {
                // Sealing and claiming happen in one step under the entry's seal lock: the
                // next write to a shared block, and a reader, see the block and the spans agree.
                shouldFlush = try await BlockingIO.runToCompletion {
                    let file = try openFile ?? self.openAndKeep(fileName)
                    return try self.writeSealed(
                        bytes.joined, range: range, file: file, fileName: fileName, incoming: incoming, cipher: cipher)
                }
            } else {
                // Checksums are computed and claimed with the bytes under the same lock.
                shouldFlush = try await BlockingIO.runToCompletion {
                    let file = try openFile ?? self.openAndKeep(fileName)
                    return try self.writeChecked(
                        bytes, range: range, file: file, fileName: fileName, incoming: incoming)
                }
            }
        } catch {
            store.state.withLock { state in
                state.reservedBytes -= incoming
                state.disk?.takenSince -= incoming
            }
            throw error
        }
        if shouldFlush { store.scheduleFlush() }
    }

    /// Adds `range`, just written, to the entry's spans (less `lost`, stored bytes found
    /// wrong meanwhile) with the checksums of the blocks it changed (`checksums`, by block;
    /// the bytes of `verified` were checked or written now) and releases its reservation;
    /// returns whether a flush is due.
    func claim(
        _ range: ByteRange, fileName: String, incoming: Int64, lost: [ByteRange] = [],
        checksums: [(block: Int64, value: UInt32)] = [], verified: [ByteRange] = []
    ) -> Bool {
        let (due, healed) = store.state.withLock { state -> (Bool, Int) in
            state.reservedBytes -= incoming
            // A write that raced with a replacement of the entry is not claimed.
            guard let index = state.records.index(forKey: key), state.records.values[index].fileName == fileName
            else { return (false, 0) }
            let before = state.records.values[index].spans.byteCount
            let healed = state.records.values[index].claim(
                range, lost: lost, checksums: checksums, verified: verified)
            state.records.values[index].isDirty = true
            state.records.values[index].needsSync = true
            let after = state.records.values[index].spans.byteCount
            state.totalBytes += after - before
            state.unflushedBytes += range.length
            let metadata = state.records.values[index].metadata
            if after != before, after == metadata.length {
                state.entryBecameWhole(key, metadata: metadata, store: store)
            }
            return (state.unflushedBytes >= store.configuration.flushThreshold, healed)
        }
        if healed > 0 { store.healed(blocks: healed, of: key, range: range) }
        return due
    }

    /// Reads the bytes of `range`, which must be cached.
    /// In an encrypted store, a block that fails its check is dropped from the entry's spans
    /// (logged, counted) and the read throws `.notCached`: read the spans again and fetch
    /// the hole.
    /// - Throws: `.notCached` if any byte of `range` is missing; `.ioFailure`;
    ///   `.entryInvalidated`.
    public func read(_ range: ByteRange) async throws -> ByteBuffer {
        guard !range.isEmpty else {
            _ = try cachedFile(for: range)
            return store.allocator.buffer(capacity: 0)
        }
        let (openFile, fileName, checked) = try cachedFile(for: range)
        let file = try await resolve(openFile, fileName)
        if let cipher {
            return try await BlockingIO.run {
                try self.readSealed(range, file: file, fileName: fileName, cipher: cipher)
            }
        }
        let allocator = store.allocator
        return try await BlockingIO.run {
            if !checked { try self.check(range, file: file, fileName: fileName) }
            return try file.read(at: range.lowerBound, length: Int(range.length), allocator: allocator)
        }
    }

    /// `range` (which must be cached) of the entry's data file, to send with `sendfile`; the
    /// bytes of a resource sit at their own offsets. What it reads never changes: a new
    /// version of the resource gets a new file, and a removed file stays readable while the
    /// region is held.
    /// - Throws: `.notCached` if any byte of `range` is missing; `.ioFailure`;
    ///   `.entryInvalidated`.
    /// The blocks under `range` are checked against their checksums first unless this process
    /// checked them since the file was opened; a block that fails is dropped from the spans
    /// (logged, counted) and this throws `.notCached`.
    /// An encrypted store's data files hold sealed blocks, never the bytes themselves: there
    /// this throws `.ioFailure`; use ``read(_:)``.
    package func storedRegion(_ range: ByteRange) async throws -> StoredRegion {
        guard cipher == nil else {
            throw CacheError(
                .ioFailure,
                "An encrypted cache's data files hold sealed blocks; read the bytes instead of sending the file.")
        }
        let (openFile, fileName, checked) = try cachedFile(for: range)
        let file = try await resolve(openFile, fileName)
        if !checked { try await BlockingIO.run { try self.check(range, file: file, fileName: fileName) } }
        return StoredRegion(file: file, range: range)
    }

    /// The entry's open file (if open), file name and whether this process checked every block
    /// under `range`, after checking `range` is cached; counts as an access for eviction.
    private func cachedFile(for range: ByteRange) throws -> (EntryFile?, String, checked: Bool) {
        let now = store.configuration.clock.now
        return try store.state.withLock { state in
            try withCurrentRecord(in: &state) { record in
                guard record.spans.contains(range) else {
                    throw CacheError(.notCached, "The bytes \(range) are not cached.")
                }
                record.lastAccess = now
                record.isDirty = true
                return (record.file, record.fileName, cipher != nil || record.verified.contains(range))
            }
        }
    }

    /// Unpins the entry. Further calls throw `.entryInvalidated`. Safe to call twice.
    public func close() {
        guard
            generation.withLock({ generation in
                defer { generation = nil }
                return generation != nil
            })
        else { return }
        store.state.withLock { state in
            let keepsFile = state.withRecord(key) { record in
                record.openBy.remove(id)
                return record.openBy.isEmpty && record.file != nil
            }
            if keepsFile == true { state.keepFileOpen(key) }
            state.wakeAloneWaiters(of: key)
        }
    }

    /// Records that the stored bytes match the origin's `digests` (``ContentMetadata/digestsMatched``:
    /// `algorithms`), unless the entry or its digests changed meanwhile.
    func recordDigestsMatched(_ algorithms: [String], of digests: [OriginDigest]) throws {
        try store.state.withLock { state in
            try withCurrentRecord(in: &state) { record in
                guard record.metadata.originDigests == digests else { return }
                record.metadata.digestsMatched = algorithms
                record.isDirty = true
            }
        }
        store.scheduleFlush()
    }

    // MARK: Helpers

    /// The record this handle may use, checked under the store's lock.
    private func currentRecord(in state: inout CacheStore.State) throws -> CacheStore.Record {
        try withCurrentRecord(in: &state) { $0 }
    }

    /// Runs `body` on the record this handle may use, in place (see ``currentRecord(in:)``):
    /// one look-up, no copy.
    private func withCurrentRecord<T>(in state: inout CacheStore.State, _ body: (inout CacheStore.Record) throws -> T)
        throws -> T
    {
        guard !state.isClosed else { throw CacheError(.storeClosed, "The cache store is closed.") }
        let key = key
        func invalidated() -> CacheError {
            CacheError(
                .entryInvalidated, "The cache entry \(key) was removed or replaced by a newer version; open it again.")
        }
        guard let generation = generation.withLock({ $0 }), let index = state.records.index(forKey: key) else {
            throw invalidated()
        }
        // Checked in place: reading the record out of the dictionary would copy all of it.
        func current(_ record: inout CacheStore.Record) throws -> T {
            guard record.generation == generation else { throw invalidated() }
            return try body(&record)
        }
        return try current(&state.records.values[index])
    }

    private func withRecord<T: Sendable>(_ body: (CacheStore.Record) -> T) throws -> T {
        try store.state.withLock { state in try withCurrentRecord(in: &state) { body($0) } }
    }

    /// The entry's data file, opened if it was not, and its name.
    func openedFile() async throws -> (EntryFile, String) {
        let (openFile, fileName) = try store.state.withLock { state in
            try withCurrentRecord(in: &state) { ($0.file, $0.fileName) }
        }
        return (try await resolve(openFile, fileName), fileName)
    }

    func resolve(_ openFile: EntryFile?, _ fileName: String) async throws -> EntryFile {
        if let openFile { return openFile }
        return try await file(named: fileName)
    }

    /// Opens the data file off the cooperative executor and keeps it for the other handles.
    private func file(named fileName: String) async throws -> EntryFile {
        try await BlockingIO.runToCompletion { try self.openAndKeep(fileName) }
    }

    /// Opens the data file (a blocking call: on a thread made for them) and keeps it for the
    /// other handles; the one kept already when another handle was first.
    private func openAndKeep(_ fileName: String) throws -> EntryFile {
        let opened = try store.openDataFile(of: key, named: fileName)
        return store.state.withLock { state in
            guard let record = state.records[key], record.fileName == fileName else { return opened }
            if let existing = record.file { return existing }
            state.records[key]!.file = opened
            return opened
        }
    }
}
