// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import Synchronization

/// One read: the executor of its ``ReaderStateMachine``, with the download it waits on and
/// its open entry.
///
/// Each step observes the store and the download, asks the machine what to do, and does it.
/// The iterator calls ``next()`` from one task at a time; the lock makes the session safe
/// to hand to another task and to ``close()`` from anywhere.
final class ReadSession: Sendable {
    struct State {
        var machine: ReaderStateMachine
        var download: (download: SharedDownload, reader: UInt64)?
        /// The current download's ``SharedDownload/retries`` when this read joined it.
        var retriesAtJoin = 0
        var handle: CacheEntryHandle?
        var statistics = ReadStatistics()
        /// Bytes given from the store since the read last gave bytes from the origin (what its
        /// client may still be taking in when the read reaches a hole).
        var cachedRun: Int64 = 0
        /// What of the range was cached when the read started: bytes read from there
        /// count as from the cache, all others as from the origin.
        var cachedAtStart: SpanSet
        /// An encrypted entry's next chunk, being read and opened while the one before is
        /// sent (see ``openAhead(after:in:handle:chunkSize:)``).
        var openedAhead: (range: ByteRange, task: Task<ByteBuffer, any Error>)?

        var cursor: Int64 { machine.cursor }
        var isClosed: Bool { machine.isClosed }
    }

    enum FirstResponse {
        case ready
        case resourceChanged
        case failed(any Error)
    }

    let context: ReadContext
    let passThrough: PassThrough?
    let url: URL
    let key: CacheKey
    let range: ByteRange
    let headers: RequestHeaders
    /// Who reads: the downloads it starts are its, and it joins others as its reader.
    let requester: Requester
    private let state: Mutex<State>

    init(
        context: ReadContext, url: URL, key: CacheKey, range: ByteRange, headers: RequestHeaders,
        handle: CacheEntryHandle?, requester: Requester, resourceLength: Int64? = nil,
        passThrough: PassThrough? = nil, cached: SpanSet? = nil
    ) {
        (self.context, self.url, self.key, self.range, self.headers, self.passThrough) = (
            context, url, key, range, headers, passThrough
        )
        self.requester = requester
        // What was cached of the range when the read began (given when just looked up).
        let cached = cached ?? (try? handle?.spans(in: range)) ?? SpanSet()
        let machine = ReaderStateMachine(
            range: range,
            pausesAtHoles: context.configuration.holeDelay > .zero
                && ReaderStateMachine.pausesAtHoles(reading: range, of: resourceLength))
        state = Mutex(State(machine: machine, handle: handle, cachedAtStart: cached))
        context.openStreams.add(1, ordering: .relaxed)
    }

    deinit {
        close()
    }

    var statistics: ReadStatistics {
        let (statistics, download, retriesAtJoin) = state.withLock {
            ($0.statistics, $0.download?.download, $0.retriesAtJoin)
        }
        var result = statistics
        if let download { result.originRetries += download.retries - retriesAtJoin }
        return result
    }

    /// Lets go of the current download, counting its retries while this read waited on it.
    private static func leaveDownload(_ state: inout State) -> (download: SharedDownload, reader: UInt64)? {
        guard let current = state.download else { return nil }
        state.statistics.originRetries += current.download.retries - state.retriesAtJoin
        state.download = nil
        return current
    }

    /// Ends the read and lets go of its download and entry.
    func close() {
        if let writer = passThrough?.takeWriter() { finishWriting(writer, length: nil) }
        let (download, handle, wasOpen, cursor) = state.withLock { state in
            defer {
                state.machine.close()
                state.handle = nil
            }
            state.openedAhead?.task.cancel()
            state.openedAhead = nil
            return (Self.leaveDownload(&state), state.handle, !state.isClosed, state.cursor)
        }
        if wasOpen { context.openStreams.subtract(1, ordering: .relaxed) }
        // What a player read is played, for the eviction policy (before the entry is let go).
        if wasOpen, requester.isPlayer, cursor > range.lowerBound {
            context.store.notePlayed(key, from: range.lowerBound, through: cursor)
        }
        if let download { download.download.removeReader(download.reader) }
        handle?.close()
    }

    /// Joins the download held for this read (its probe's, see
    /// `CachingReader.contentInfoForRead`), if there is one for its first byte.
    func joinReservedDownload() {
        guard
            let reserved = context.scheduler.takeReservation(
                key, at: range.lowerBound, until: range.upperBound, for: requester)
        else { return }
        let stale = state.withLock { state -> Bool in
            guard !state.isClosed, state.download == nil else { return true }
            state.download = reserved
            state.retriesAtJoin = reserved.download.retries
            return false
        }
        if stale { reserved.download.removeReader(reserved.reader) }
    }

    /// Starts the download for the first missing byte and waits for the origin's answer,
    /// which confirms (or not) that the cached bytes are of the current version.
    func startFirstDownloadAndWaitForResponse() async -> FirstResponse {
        let (handle, cursor) = state.withLock { ($0.handle, $0.cursor) }
        var hole: ByteRange
        // A download that has ended may still be storing bytes of the hole: then look again.
        repeat {
            guard let first = try? handle?.spans().holes(in: ByteRange(cursor, range.upperBound)).first else {
                return .ready
            }
            hole = first
        } while await context.scheduler.waitForWrites(key, in: hole)
        // The probe's download, when the read holds it and it fetches the hole; else one joined.
        let held = state.withLock { state in
            state.download.flatMap {
                $0.download.start <= hole.lowerBound && hole.lowerBound < $0.download.end && !$0.download.isFinished
                    ? $0.download : nil
            }
        }
        let download = held ?? attach(at: hole.lowerBound, holeEnd: hole.upperBound)
        while true {
            let snapshot = download.snapshot(at: hole.lowerBound)
            if snapshot.hasResponse { return .ready }
            switch snapshot.state {
            case .completed, .cancelled: return .ready
            case .failed(let error):
                if (error as? CacheError)?.code == .resourceChanged { return .resourceChanged }
                return .failed(error)
            case .awaitingResponse, .receiving, .resuming: break
            }
            if Task.isCancelled { return .failed(CancellationError()) }
            await context.priority.whilePlayerWaits(requester) { await download.waitForResponse() }
        }
    }

    /// The next chunk, from disk or from the download that fetches it; `nil` at the end.
    /// With `fileRegions`, cached bytes come as a region of the data file instead.
    func next(fileRegions: Bool) async throws -> ReadPart? {
        do {
            return try await step(fileRegions: fileRegions)
        } catch {
            close()
            throw error
        }
    }

    private func step(fileRegions: Bool) async throws -> ReadPart? {
        while true {
            try Task.checkCancellation()
            let chunkSize = context.currentChunkSize
            let (cursor, handle, current) = state.withLock { ($0.cursor, $0.handle, $0.download) }
            let (seen, spans) = try await observe(
                at: cursor, handle: handle, download: current?.download, chunkSize: chunkSize)
            switch state.withLock({ $0.machine.next(seen) }) {
            case .finish(let storedUpTo):
                // What this read gave from a download's memory is in the store before the
                // read ends, so a replay right after finds it there.
                await current?.download.waitForStored(upTo: storedUpTo)
                close()
                return nil
            case .fail(let failure):
                throw error(for: failure)
            case .readPassThrough:
                guard let passThrough else { throw CacheError(.ioFailure, "A read took a body it does not have.") }
                return try await next(from: passThrough, cursor: cursor)
            case .takeHeld(let held):
                return .bytes(take(held, at: cursor, upTo: chunkSize))
            case .readStored(let span):
                guard let handle else { continue }
                if let part = try await readStored(
                    at: cursor, in: span, handle: handle, fileRegions: fileRegions, chunkSize: chunkSize)
                {
                    return part
                }
            case .pause:
                let cachedRun = state.withLock { state in
                    state.machine.paused()
                    return state.cachedRun
                }
                try await context.configuration.pauseTimer.sleep(
                    for: context.configuration.holePause(afterCached: cachedRun))
                if state.withLock({ $0.isClosed }) { throw CancellationError() }
            case .attach(let at):
                if let left = state.withLock({ Self.leaveDownload(&$0) }) { left.download.removeReader(left.reader) }
                let holeEnd = spans.holes(in: ByteRange(at, range.upperBound)).first?.upperBound ?? range.upperBound
                // A download that has ended may still be storing these bytes: then look again.
                if await context.scheduler.waitForWrites(key, in: ByteRange(at, holeEnd)) { continue }
                attach(at: at, holeEnd: holeEnd)
            case .waitForBytes:
                state.withLock { $0.statistics.stalls += 1 }
                if let download = current?.download {
                    await context.priority.whilePlayerWaits(requester) { await download.waitForBytes(at: cursor) }
                }
            case .lookAgain:
                continue
            }
        }
    }

    /// What the read sees at `cursor`: the stored span there, the bytes `download` holds
    /// there, and that download's progress; with the entry's spans.
    private func observe(at cursor: Int64, handle: CacheEntryHandle?, download: SharedDownload?, chunkSize: Int64)
        async throws
        -> (ReaderStateMachine.Observation, SpanSet)
    {
        if passThrough != nil { return (ReaderStateMachine.Observation(passesThrough: true), SpanSet()) }
        let encrypted = handle?.cipher != nil
        var view: ReaderStateMachine.DownloadView?
        if let download {
            let snapshot = download.snapshot(at: cursor)
            // An encrypted entry's reader takes the kept chunks joined into one part.
            let held = encrypted ? download.heldBytes(at: cursor, joiningUpTo: Int(chunkSize)) : snapshot.heldBytes
            view = ReaderStateMachine.DownloadView(
                start: download.start, end: download.end, position: snapshot.position,
                state: snapshot.state, held: held)
        }
        let spans = try await versioned { try handle?.spans() } ?? SpanSet()
        let seen = ReaderStateMachine.Observation(
            stored: spans.span(containing: cursor),
            storedBefore: cursor > 0 && spans.span(containing: cursor - 1) != nil,
            download: view, encrypted: encrypted, hasEntry: handle != nil)
        return (seen, spans)
    }

    /// The error a read ends with for `failure`.
    private func error(for failure: ReaderStateMachine.Failure) -> any Error {
        switch failure {
        case .closed: CancellationError()
        case .download(let error): Self.readerError(error, url: url)
        case .fruitless(let cursor):
            CacheError(.originUnavailable, "The origin keeps ending responses before byte \(cursor).")
        case .lost(let cursor):
            CacheError(.originUnavailable, "Bytes at \(cursor) were fetched but are neither stored nor held.")
        }
    }

    /// Stored bytes from `cursor` in `span`: a region of the data file (`fileRegions`, an
    /// unencrypted entry) or a chunk read (and opened) from it. `nil` when a sealed block
    /// failed its check and is a hole now: the next step fetches it.
    private func readStored(
        at cursor: Int64, in span: ByteRange, handle: CacheEntryHandle, fileRegions: Bool, chunkSize: Int64
    ) async throws -> ReadPart? {
        if fileRegions, handle.cipher == nil {
            let region = region(at: cursor, in: span)
            let stored: StoredRegion
            do {
                stored = try await versioned { try await handle.storedRegion(region) }
            } catch let error as CacheError where error.code == .notCached {
                return nil  // its file vanished (a cache folder emptied): fetched again
            }
            advance(to: region.upperBound)
            return .file(stored)
        }
        var end = chunkEnd(at: cursor, in: span, handle: handle, chunkSize: chunkSize)
        let bytes: ByteBuffer
        do {
            if let ahead = takeOpenedAhead(at: cursor) {
                end = ahead.range.upperBound
                bytes = try await versioned { try await ahead.task.value }
            } else {
                bytes = try await versioned { try await handle.read(ByteRange(cursor, end)) }
            }
        } catch let error as CacheError where error.code == .notCached {
            return nil
        }
        advance(to: end)
        if handle.cipher != nil { openAhead(after: end, in: span, handle: handle, chunkSize: chunkSize) }
        return .bytes(bytes)
    }

    /// Where a chunk read from the store at `cursor` ends: a chunk's length on, within the
    /// stored `span` and the read; for an encrypted entry at a block's end when it can, so no
    /// block is opened twice.
    private func chunkEnd(at cursor: Int64, in span: ByteRange, handle: CacheEntryHandle, chunkSize: Int64) -> Int64 {
        let end = min(cursor + chunkSize, span.upperBound, range.upperBound)
        guard let layout = handle.cipher?.layout, end - cursor > layout.blockSize else { return end }
        return end - end % layout.blockSize
    }

    /// Starts reading (and opening) the chunk after `end` of an encrypted entry, so that
    /// opening it overlaps with sending the one before; the next step takes it if the cursor
    /// is still there. One chunk per read at most.
    private func openAhead(after end: Int64, in span: ByteRange, handle: CacheEntryHandle, chunkSize: Int64) {
        guard end < min(span.upperBound, range.upperBound) else { return }
        let next = ByteRange(end, chunkEnd(at: end, in: span, handle: handle, chunkSize: chunkSize))
        let task = TaskPlacement.throwingTask { try await handle.read(next) }
        let stale = state.withLock { state -> Task<ByteBuffer, any Error>? in
            guard !state.isClosed else { return task }
            defer { state.openedAhead = (next, task) }
            return state.openedAhead?.task
        }
        stale?.cancel()
    }

    /// The chunk read ahead, if it starts at `cursor`; one that does not is dropped.
    private func takeOpenedAhead(at cursor: Int64) -> (range: ByteRange, task: Task<ByteBuffer, any Error>)? {
        let ahead = state.withLock { state in
            defer { state.openedAhead = nil }
            return state.openedAhead
        }
        guard let ahead, ahead.range.lowerBound == cursor else {
            ahead?.task.cancel()
            return nil
        }
        return ahead
    }

    /// Joins or starts the download for the hole at `cursor` and remembers it.
    @discardableResult
    private func attach(at cursor: Int64, holeEnd: Int64) -> SharedDownload {
        let acceptsRanges = context.store.metadata(for: key)?.acceptsRanges ?? true
        let stores = state.withLock { $0.handle != nil }
        let (download, readerID, isNew) = context.scheduler.join(
            url: url, key: key, cursor: cursor, holeEnd: holeEnd, readEnd: range.upperBound,
            acceptsRanges: acceptsRanges,
            stores: stores, headers: headers, requester: requester)
        if isNew { context.scheduler.start(download, transfer: context.transfer(for: download, firstResponse: nil)) }
        let retries = download.retries
        let stale = state.withLock { state -> Bool in
            guard !state.isClosed else { return true }
            state.download = (download, readerID)
            state.retriesAtJoin = retries
            return false
        }
        if stale { download.removeReader(readerID) }
        return download
    }

    /// The file region a read gives at `cursor`, in the stored `span`. No buffer is held for
    /// a region; its size is this stream's share of the region budget. The first of a longer
    /// read is small so that its first bytes leave at once; a read that fits in one region is
    /// sent in one.
    private func region(at cursor: Int64, in span: ByteRange) -> ByteRange {
        ByteRange(cursor, Self.regionEnd(at: cursor, of: range, in: span, context: context))
    }

    /// Where the region of a read of `range` that starts at `cursor`, in the stored `span`,
    /// ends: the read's share of the region budget, and a first region of a range longer
    /// than that only the minimum chunk (the player gets its first bytes sooner).
    static func regionEnd(at cursor: Int64, of range: ByteRange, in span: ByteRange, context: ReadContext) -> Int64 {
        let share = context.currentRegionSize
        let size =
            cursor == range.lowerBound && range.upperBound - cursor > share
            ? Int64(context.configuration.minimumChunkSize) : share
        return min(regionEnd(from: cursor, size: size), span.upperBound, range.upperBound)
    }

    /// Where a region of about `size` bytes from `cursor` ends when the budget cuts it (a region
    /// of a page or more): half-way into a page, so that the next region, and the `sendfile` that
    /// sends it, does not start on a page boundary. On Linux 6.18 here, sending 256 MiB over
    /// loopback in 1 MiB `sendfile` calls ran at 2.4 GB/s when each call started on a page
    /// boundary and at 3.5-3.9 GB/s when each started inside a page (medians of 15 rounds;
    /// the same for any receiver buffer): nginx's slice cache is fast here because its cache
    /// files begin with a header of 600-odd bytes.
    static func regionEnd(from cursor: Int64, size: Int64) -> Int64 {
        let page: Int64 = 4096
        let (end, overflow) = cursor.addingReportingOverflow(size)
        guard !overflow else { return .max }
        guard size >= page else { return end }
        return end / page * page + page / 2
    }

    /// Up to `limit` bytes of `held` (which starts at `cursor`), within the read's range;
    /// the cursor moves past them.
    private func take(_ held: ByteBuffer, at cursor: Int64, upTo limit: Int64) -> ByteBuffer {
        let length = min(Int64(held.readableBytes), limit, range.upperBound - cursor)
        advance(to: cursor + length)
        return held.getSlice(at: held.readerIndex, length: Int(length))!
    }

    func advance(to cursor: Int64) {
        let download = state.withLock { state -> (SharedDownload, UInt64)? in
            let given = ByteRange(state.cursor, cursor)
            let fromCache = state.cachedAtStart.byteCount(in: given)
            state.statistics.bytesFromCache += fromCache
            state.statistics.bytesFromOrigin += given.length - fromCache
            state.cachedRun = fromCache == given.length ? state.cachedRun + fromCache : 0
            state.machine.advance(to: cursor)
            return state.download
        }
        if let (download, reader) = download { download.moveReader(reader, to: cursor) }
    }

    /// The error a reader gets for a failed download.
    static func readerError(_ error: any Error, url: URL) -> any Error {
        guard let error = error as? CacheError, error.code == .resourceChanged else { return error }
        return changed(url)
    }

    static func changed(_ url: URL) -> CacheError {
        CacheError(
            .resourceChanged,
            "\(url.absoluteString) changed at the origin during the read; the bytes given so far are all of the old version. Read again for the new one."
        )
    }

    /// Runs `body`, reporting a replaced entry as a changed resource.
    private func versioned<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as CacheError where error.code == .entryInvalidated {
            throw Self.changed(url)
        }
    }
}
