import Foundation
import NIOCore
import Synchronization

/// The state of one read: its cursor, the download it waits on, its open entry.
///
/// The iterator calls ``next()`` from one task at a time; the lock makes the session safe
/// to hand to another task and to ``close()`` from anywhere.
final class ReadSession: Sendable {
    struct State {
        var cursor: Int64
        var download: (download: Download, reader: UInt64)?
        /// The current download's ``Download/retries`` when this read joined it.
        var retriesAtJoin = 0
        var handle: CacheEntryHandle?
        var statistics = ReadStatistics()
        /// What of the range was cached when the read started: bytes read from there
        /// count as from the cache, all others as from the origin.
        var cachedAtStart: SpanSet
        /// Downloads that ended without reaching the cursor, in a row.
        var fruitlessDownloads = 0
        /// The hole the read last paused at (see ``pauseAtHole(_:handle:)``).
        var pausedAt: Int64?
        /// An encrypted entry's next chunk, being read and opened while the one before is
        /// sent (see ``readAhead(after:in:handle:)``).
        var readAhead: (range: ByteRange, task: Task<ByteBuffer, any Error>)?
        var isClosed = false
    }

    enum FirstResponse {
        case ready
        case resourceChanged
        case failed(any Error)
    }

    /// An origin body a read takes straight from the origin (see `CachingReader.passThrough`).
    /// Only the session's iterator uses it, one call at a time.
    final class PassThrough: @unchecked Sendable {
        private var iterator: any AsyncIteratorProtocol<ByteBuffer, any Error>
        /// The resource offset of the next byte the body gives.
        var offset: Int64
        /// The new entry the body is written to as it passes, while every byte so far is in
        /// it; whoever takes it (the end of the body, a failed write, the read's close) ends
        /// the write.
        private let writer: Mutex<CacheEntryHandle?>

        init(body: any AsyncSequence<ByteBuffer, any Error> & Sendable, offset: Int64, writer: CacheEntryHandle?) {
            iterator = body.makeAsyncIterator()
            self.offset = offset
            self.writer = Mutex(writer)
        }

        var currentWriter: CacheEntryHandle? { writer.withLock { $0 } }

        func takeWriter() -> CacheEntryHandle? {
            writer.withLock { writer in defer { writer = nil }; return writer }
        }

        func next() async throws -> ByteBuffer? {
            try await iterator.next()
        }
    }

    let reader: CachingReader
    let passThrough: PassThrough?
    let url: URL
    let key: CacheKey
    let range: ByteRange
    let headers: RequestHeaders
    private let state: Mutex<State>

    init(reader: CachingReader, url: URL, key: CacheKey, range: ByteRange, headers: RequestHeaders, handle: CacheEntryHandle?,
         passThrough: PassThrough? = nil) {
        self.passThrough = passThrough
        self.headers = headers
        self.reader = reader
        self.url = url
        self.key = key
        self.range = range
        let cached = SpanSet((try? handle?.spans())?.spans(in: range) ?? [])
        state = Mutex(State(cursor: range.lowerBound, handle: handle, cachedAtStart: cached))
        reader.openStreams.add(1, ordering: .relaxed)
    }

    deinit {
        close()
    }

    var statistics: ReadStatistics {
        let (statistics, download, retriesAtJoin) = state.withLock { ($0.statistics, $0.download?.download, $0.retriesAtJoin) }
        var result = statistics
        if let download { result.originRetries += download.retries - retriesAtJoin }
        return result
    }

    /// Lets go of the current download, counting its retries while this read waited on it.
    private static func leaveDownload(_ state: inout State) -> (download: Download, reader: UInt64)? {
        guard let current = state.download else { return nil }
        state.statistics.originRetries += current.download.retries - state.retriesAtJoin
        state.download = nil
        return current
    }

    /// Ends the read and lets go of its download and entry.
    func close() {
        if let writer = passThrough?.takeWriter() { finishWriting(writer, length: nil) }
        let (download, handle, wasOpen) = state.withLock { state in
            defer { state.isClosed = true; state.handle = nil }
            state.readAhead?.task.cancel()
            state.readAhead = nil
            return (Self.leaveDownload(&state), state.handle, !state.isClosed)
        }
        if wasOpen { reader.openStreams.subtract(1, ordering: .relaxed) }
        if let download { download.download.removeReader(download.reader) }
        handle?.close()
    }

    /// Joins the download whose bytes were held for this read (a `no-store` probe's, see
    /// `CachingReader.contentInfoForRead`), if there is one for its first byte.
    func joinReservedDownload() {
        guard let reserved = reader.scheduler.takeReservation(key, at: range.lowerBound) else { return }
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
        guard let spans = try? handle?.spans(), let hole = spans.holes(in: ByteRange(cursor, range.upperBound)).first else { return .ready }
        let download = attach(at: hole.lowerBound, holeEnd: hole.upperBound)
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
            await download.waitForResponse()
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
            let chunkSize = reader.currentChunkSize
            let (cursor, handle, current, isClosed) = state.withLock {
                ($0.cursor, $0.handle, $0.download, $0.isClosed)
            }
            if isClosed { throw CancellationError() }
            try Task.checkCancellation()
            guard cursor < range.upperBound else {
                // What this read gave from a download's memory is in the store before the
                // read ends, so a replay right after finds it there.
                await current?.download.waitForStored(upTo: cursor)
                close()
                return nil
            }
            if let passThrough { return try await next(from: passThrough, cursor: cursor) }

            // Just fetched, at the download's front: the download still holds it in memory
            // (no read back from the store). A reader further behind reads the longer stored
            // span from the store in one part instead of chunk by chunk, unless the store is
            // encrypted: there every byte read back is opened again, so memory wins, the kept
            // chunks joined into one part.
            let held = handle?.cipher != nil ? current?.download.heldBytes(at: cursor, joiningUpTo: Int(chunkSize))
                : current?.download.snapshot(at: cursor).heldBytes
            let span = try await versioned { try handle?.spans() }?.span(containing: cursor)
            if let held, handle?.cipher != nil || (span?.upperBound ?? 0) - cursor <= Int64(held.readableBytes) {
                return .bytes(take(held, at: cursor, upTo: chunkSize))
            }

            // Cached: read it from disk.
            if let handle, let span {
                if fileRegions, handle.cipher == nil {
                    let region = region(at: cursor, in: span)
                    let descriptor = try await versioned { try await handle.duplicateDescriptor(for: region) }
                    advance(to: region.upperBound)
                    return .file(descriptor: descriptor, range: region)
                }
                var end = chunkEnd(at: cursor, in: span, handle: handle, chunkSize: chunkSize)
                let bytes: ByteBuffer
                do {
                    if let ahead = takeReadAhead(at: cursor) {
                        end = ahead.range.upperBound
                        bytes = try await versioned { try await ahead.task.value }
                    } else {
                        bytes = try await versioned { try await handle.read(ByteRange(cursor, end)) }
                    }
                } catch let error as CacheError where error.code == .notCached {
                    continue  // a sealed block failed its check and is a hole now: fetch it
                }
                advance(to: end)
                if handle.cipher != nil { readAhead(after: end, in: span, handle: handle, chunkSize: chunkSize) }
                return .bytes(bytes)
            }

            // Missing: wait on the download that fetches it.
            var download = current?.download
            if let state = download?.snapshot(at: cursor).state, case .failed(let error) = state {
                throw Self.readerError(error, url: url)
            }
            // A download that has ended may still hold the bytes at the cursor (those it does not store).
            let ended = download.map { $0.isFinished && $0.snapshot(at: cursor).heldBytes == nil } ?? true
            if download == nil || ended || cursor < download!.start || cursor >= download!.end {
                if try await pauseAtHole(cursor, handle: handle) {
                    continue  // bytes may have been stored during the pause: look again
                }
                if let left = state.withLock({ Self.leaveDownload(&$0) }) { left.download.removeReader(left.reader) }
                let spans = (try? handle?.spans()) ?? SpanSet()
                let holeEnd = spans.holes(in: ByteRange(cursor, range.upperBound)).first?.upperBound ?? range.upperBound
                download = attach(at: cursor, holeEnd: holeEnd)
            }
            let snapshot = download!.snapshot(at: cursor)
            if let held = snapshot.heldBytes {
                return .bytes(take(held, at: cursor, upTo: chunkSize))
            }
            if snapshot.position > cursor {
                // Stored while we looked: read it from disk on the next turn.
                if handle == nil { throw CacheError(.originUnavailable, "Bytes at \(cursor) were fetched but are neither stored nor held.") }
                continue
            }
            switch snapshot.state {
            case .failed(let error):
                throw Self.readerError(error, url: url)
            case .completed, .cancelled:
                // It ended before our cursor (its bytes were fetched by another download).
                let tooMany = state.withLock { state -> Bool in
                    state.fruitlessDownloads += 1
                    return state.fruitlessDownloads > 3
                }
                if tooMany { throw CacheError(.originUnavailable, "The origin keeps ending responses before byte \(cursor).") }
                continue
            case .awaitingResponse, .receiving, .resuming:
                state.withLock { $0.statistics.stalls += 1 }
                await download!.waitForBytes(at: cursor)
            }
        }
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
    private func readAhead(after end: Int64, in span: ByteRange, handle: CacheEntryHandle, chunkSize: Int64) {
        guard end < min(span.upperBound, range.upperBound) else { return }
        let next = ByteRange(end, chunkEnd(at: end, in: span, handle: handle, chunkSize: chunkSize))
        let task = Task { try await handle.read(next) }
        let stale = state.withLock { state -> Task<ByteBuffer, any Error>? in
            guard !state.isClosed else { return task }
            defer { state.readAhead = (next, task) }
            return state.readAhead?.task
        }
        stale?.cancel()
    }

    /// The chunk read ahead, if it starts at `cursor`; one that does not is dropped.
    private func takeReadAhead(at cursor: Int64) -> (range: ByteRange, task: Task<ByteBuffer, any Error>)? {
        let ahead = state.withLock { state in
            defer { state.readAhead = nil }
            return state.readAhead
        }
        guard let ahead, ahead.range.lowerBound == cursor else {
            ahead?.task.cancel()
            return nil
        }
        return ahead
    }

    /// The next chunk of a body streamed through, cut to the read's range; `nil` where the
    /// body or the range ends.
    private func next(from passThrough: PassThrough, cursor: Int64) async throws -> ReadPart? {
        while let chunk = try await passThrough.next() {
            let chunkStart = passThrough.offset
            passThrough.offset += Int64(chunk.readableBytes)
            if let writer = passThrough.currentWriter {
                do {
                    try await writer.write(chunk, at: chunkStart)
                } catch {
                    // Past its share of the store, or the disk refused: it streams on uncached.
                    reader.configuration.logger.warning("Cannot store an answer without a length; streaming it uncached",
                                                        metadata: ["url": "\(url.absoluteString.prefix(200))", "error": "\(error)"])
                    if let taken = passThrough.takeWriter() { finishWriting(taken, length: nil) }
                }
            }
            let upper = min(passThrough.offset, range.upperBound)
            guard upper > cursor else { continue }  // before the read's offset
            let bytes = chunk.getSlice(at: chunk.readerIndex + Int(cursor - chunkStart), length: Int(upper - cursor))!
            advance(to: upper)
            return .bytes(bytes)
        }
        if let writer = passThrough.takeWriter() { finishWriting(writer, length: passThrough.offset) }
        close()
        return nil
    }

    /// Ends a pass-through write: with the body's `length` the entry is complete; without
    /// (the body did not end, or a write failed) it is removed, since bytes of a resource
    /// whose length is unknown cannot serve a later read. The resource is then free for
    /// another writer.
    private func finishWriting(_ writer: CacheEntryHandle, length: Int64?) {
        let reader = reader
        let key = key
        if let length, var metadata = try? writer.metadata(), (try? writer.spans())?.contains(ByteRange(0, length)) == true {
            metadata.length = length
            _ = try? writer.updateMetadata(metadata)
            writer.close()
            reader.passThroughWriters.withLock { _ = $0.remove(key) }
            return
        }
        writer.close()
        Task {
            try? await reader.store.remove(key)
            reader.passThroughWriters.withLock { _ = $0.remove(key) }
        }
    }

    /// Waits ``CachingReader/Configuration/holeDelay`` when the read has just given cached
    /// bytes and reached missing ones: a player that hangs up after taking what it needed
    /// often does so while its earlier bytes are still in flight, and its cancel, arriving
    /// during the wait, then costs no origin request.
    /// - Returns: whether it paused (once per cursor).
    private func pauseAtHole(_ cursor: Int64, handle: CacheEntryHandle?) async throws -> Bool {
        let delay = reader.configuration.holeDelay
        guard delay > .zero, cursor > range.lowerBound, let spans = try? handle?.spans(), spans.span(containing: cursor - 1) != nil else { return false }
        let first = state.withLock { state in
            defer { state.pausedAt = cursor }
            return state.pausedAt != cursor
        }
        guard first else { return false }
        try await Task.sleep(for: delay)
        if state.withLock({ $0.isClosed }) { throw CancellationError() }
        return true
    }

    /// Joins or starts the download for the hole at `cursor` and remembers it.
    private func attach(at cursor: Int64, holeEnd: Int64) -> Download {
        let acceptsRanges = reader.store.metadata(for: key)?.acceptsRanges ?? true
        let stores = state.withLock { $0.handle != nil }
        let (download, readerID, isNew) = reader.scheduler.join(url: url, key: key, cursor: cursor, holeEnd: holeEnd, acceptsRanges: acceptsRanges,
                                                                stores: stores, headers: headers)
        if isNew { reader.scheduler.start(download, transfer: OriginTransfer(reader: reader, download: download, firstResponse: nil)) }
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
        let share = reader.currentRegionSize
        let size = cursor == range.lowerBound && range.upperBound - cursor > share ? Int64(reader.configuration.minimumChunkSize) : share
        return ByteRange(cursor, min(cursor + size, span.upperBound, range.upperBound))
    }

    /// See ``ReadStream/nextPartWithoutWaiting()``.
    func fileRegionWithoutWaiting() -> ReadPart? {
        let (cursor, handle, isClosed) = state.withLock { ($0.cursor, $0.handle, $0.isClosed) }
        guard !isClosed, passThrough == nil, cursor < range.upperBound, let handle, handle.cipher == nil,
              let span = (try? handle.spans())?.span(containing: cursor) else { return nil }
        let region = region(at: cursor, in: span)
        guard let descriptor = try? handle.duplicateDescriptorIfOpen(for: region) else { return nil }
        advance(to: region.upperBound)
        return .file(descriptor: descriptor, range: region)
    }

    /// Up to `limit` bytes of `held` (which starts at `cursor`), within the read's range;
    /// the cursor moves past them.
    private func take(_ held: ByteBuffer, at cursor: Int64, upTo limit: Int64) -> ByteBuffer {
        let length = min(Int64(held.readableBytes), limit, range.upperBound - cursor)
        advance(to: cursor + length)
        return held.getSlice(at: held.readerIndex, length: Int(length))!
    }

    private func advance(to cursor: Int64) {
        let download = state.withLock { state -> (Download, UInt64)? in
            let given = ByteRange(state.cursor, cursor)
            let fromCache = state.cachedAtStart.spans(in: given).reduce(0) { $0 + $1.length }
            state.statistics.bytesFromCache += fromCache
            state.statistics.bytesFromOrigin += given.length - fromCache
            state.cursor = cursor
            state.fruitlessDownloads = 0
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
        CacheError(.resourceChanged, "\(url.absoluteString) changed at the origin during the read; the bytes given so far are all of the old version. Read again for the new one.")
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
