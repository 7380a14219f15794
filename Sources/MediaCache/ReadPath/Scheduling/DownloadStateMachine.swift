// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore

/// The lifecycle of one origin download as a value without I/O: events go in (a reader
/// joins, the origin answers, bytes arrive, a request fails, the last reader leaves), and
/// what must be done comes out (which waiters to wake, whether to cancel the transfer, whether
/// to retry). ``SharedDownload`` runs it under a lock and carries out what it returns; the
/// transfer (``OriginTransfer``) feeds it. Tested on its own in `DownloadStateMachineTests`.
///
/// ```
///            responseReceived          bytesArrived (position moves)
///  awaitingResponse ──────────▶ receiving ◀──┐
///     ▲      │                     │  └──────┘
///     │      │ requestFailed       │ requestFailed (retryable, under the limit)
///     │      ▼ (retryable)         ▼
///     └── resuming(failures) ◀─────┘
///
///  any of them ── allBytesArrived ──▶ completed
///              ── requestFailed (final) ──▶ failed(error)
///              ── last reader leaves ──▶ cancelled
/// ```
struct DownloadStateMachine {
    enum State {
        /// A request is out and its answer has not come.
        case awaitingResponse
        /// The origin answered; its body is arriving.
        case receiving
        /// A request failed (`failures` in a row without a byte arriving between); the next
        /// one starts after a pause.
        case resuming(failures: Int)
        /// Every byte up to the end arrived.
        case completed
        /// The download gave up; readers get the error.
        case failed(any Error)
        /// The last reader left before the end.
        case cancelled

        var isTerminal: Bool {
            switch self {
            case .completed, .failed, .cancelled: true
            case .awaitingResponse, .receiving, .resuming: false
            }
        }
    }

    /// What a waiter waits for.
    enum Condition: Equatable {
        /// A byte at this offset: the position passes it.
        case bytes(at: Int64)
        /// The origin's first answer.
        case response
        /// The transfer's own wait: until it is less than `lead` ahead of its readers.
        case room(lead: Int64)
        /// Until no byte before this offset is still being written (a read that ends makes
        /// sure what it gave is in the store, so a replay finds it there).
        case stored(upTo: Int64)
    }

    /// What the caller must do after an event.
    struct Actions: Equatable {
        /// The waiters to resume, in the order they began waiting.
        var wake: [UInt64] = []
        /// Whether the transfer's task must be cancelled (nobody wants its bytes).
        var cancelsTransfer = false
    }

    /// A delivered chunk kept in memory.
    struct Chunk {
        enum Storage: Equatable {
            /// Being written to the store: kept whatever the readers do, until the write ends.
            case writing
            /// In the store too: kept (up to a limit) so that readers at the download's front
            /// get fresh bytes without reading them back.
            case stored
            /// Only here (the store refused them, or the download does not store): kept until
            /// every reader has passed them.
            case memoryOnly
        }

        var offset: Int64
        var bytes: ByteBuffer
        var storage: Storage
        var end: Int64 { offset + Int64(bytes.readableBytes) }
    }

    private(set) var state: State = .awaitingResponse
    /// Bytes before `position` have been delivered (stored, or kept in memory).
    private(set) var position: Int64
    /// Whether the origin has answered at least once.
    private(set) var hasResponse = false
    /// Whether a delivered chunk is or was only in memory (the store refused it, or the
    /// download does not store): bytes before the position may then be nowhere but in the
    /// readers that took them, and a reader can only join at or after the position.
    private(set) var holdsUnstoredBytes = false
    /// Whether it goes on to its end whatever its readers do (a fill on play): its last
    /// reader leaving does not end it, and it is not paced by them. Only while every byte it
    /// delivered is stored (what only memory holds must wait for its readers).
    private(set) var fills = false
    /// Why a fill ended before the download did (``stopFilling(_:)``, or a byte the store refused).
    private(set) var fillStop: FillStop?
    /// How many times a request was resumed after a failure.
    private(set) var retries = 0
    /// Requests failed since a byte last arrived.
    private(set) var chunks: [Chunk] = []
    /// Each reader's cursor.
    private(set) var readers: [UInt64: Int64] = [:]
    private var nextReader: UInt64 = 0
    /// Whether a reader was ever added.
    var hasHadReaders: Bool { nextReader > 0 }
    private var waiters: [(id: UInt64, condition: Condition)] = []
    private var nextWaiter: UInt64 = 0
    /// How many bytes of stored chunks are kept for readers.
    let storedChunkLimit: Int64

    init(position: Int64, storedChunkLimit: Int64) {
        self.position = position
        self.storedChunkLimit = storedChunkLimit
    }

    var isFinished: Bool { state.isTerminal }
    /// Whether the download ended because its last reader left (not completed, not failed).
    var wasLetGo: Bool {
        if case .cancelled = state { return true }
        return false
    }
    var waiterCount: Int { waiters.count }

    // MARK: Readers

    /// Adds a reader at `cursor`; `nil` once the download has ended.
    mutating func addReader(at cursor: Int64) -> UInt64? {
        guard !state.isTerminal else { return nil }
        defer { nextReader += 1 }
        readers[nextReader] = cursor
        return nextReader
    }

    /// Records that reader `id` has taken every byte before `cursor`.
    mutating func moveReader(_ id: UInt64, to cursor: Int64) -> Actions {
        guard readers[id] != nil else { return Actions() }
        readers[id] = cursor
        trimChunks()
        return Actions(wake: takeSatisfiedWaiters(where: Self.isRoom))
    }

    /// Makes the download a fill (see ``fills``); `false` once it has ended, or when a
    /// delivered byte is only in memory.
    mutating func fill() -> Bool {
        guard !state.isTerminal, !holdsUnstoredBytes else { return false }
        fills = true
        return true
    }

    /// Ends the fill for `reason`: the download goes on for its readers, and ends now if it has
    /// none.
    mutating func stopFilling(_ reason: FillStop) -> Actions {
        guard fills else { return Actions() }
        fills = false
        fillStop = reason
        guard readers.isEmpty, !state.isTerminal else { return Actions() }
        state = .cancelled
        return Actions(wake: takeAllWaiters(), cancelsTransfer: true)
    }

    /// Once the download has ended without every byte: why its fill (if it was one) did not
    /// complete. Its ``fillStop`` when the fill was ended; else what ended the download.
    var fillEndReason: FillStop? {
        if let fillStop { return fillStop }
        switch state {
        case .completed, .awaitingResponse, .receiving, .resuming: return nil
        case .cancelled: return .shutDown
        case .failed(let error):
            switch (error as? CacheError)?.code {
            case .resourceChanged?, .entryInvalidated?: return .entryRemoved
            case .storeClosed?: return .shutDown
            default: return .originFailed
            }
        }
    }

    /// Whether it fills now: a fill whose bytes are all stored.
    var isFilling: Bool { fills && !holdsUnstoredBytes }

    /// Removes reader `id`; the last one to leave before the end cancels the download, unless
    /// it fills.
    mutating func removeReader(_ id: UInt64) -> Actions {
        guard readers.removeValue(forKey: id) != nil else { return Actions() }
        trimChunks()
        if readers.isEmpty, !state.isTerminal, !isFilling {
            state = .cancelled
            return Actions(wake: takeAllWaiters(), cancelsTransfer: true)
        }
        return Actions(wake: takeSatisfiedWaiters(where: Self.isRoom))
    }

    /// The kept chunk holding `cursor`, cut to start there.
    func bytes(at cursor: Int64) -> ByteBuffer? {
        chunkIndex(holding: cursor).map { slice(of: $0, from: cursor) }
    }

    /// The kept chunks from `cursor` on, the first cut to start there, each the next one's
    /// neighbour: as many as hold `limit` bytes (or all there are), at least one when any
    /// holds `cursor`.
    func bytes(from cursor: Int64, upTo limit: Int) -> [ByteBuffer] {
        guard var index = chunkIndex(holding: cursor) else { return [] }
        var parts = [slice(of: index, from: cursor)]
        var total = parts[0].readableBytes
        while total < limit, index + 1 < chunks.count, chunks[index + 1].offset == chunks[index].end {
            index += 1
            parts.append(chunks[index].bytes)
            total += chunks[index].bytes.readableBytes
        }
        return parts
    }

    private func chunkIndex(holding cursor: Int64) -> Int? {
        chunks.lastIndex { $0.offset <= cursor && cursor < $0.end }
    }

    private func slice(of index: Int, from cursor: Int64) -> ByteBuffer {
        let bytes = chunks[index].bytes
        let skip = Int(cursor - chunks[index].offset)
        return bytes.getSlice(at: bytes.readerIndex + skip, length: bytes.readableBytes - skip)!
    }

    // MARK: Waiting

    /// A new waiter's identity (take it before suspending, so a cancellation can name it).
    mutating func makeWaiterID() -> UInt64 {
        defer { nextWaiter += 1 }
        return nextWaiter
    }

    /// Registers waiter `id` for `condition`; `false` when it holds already (or the
    /// download has ended: except for `.stored`, which holds once the writes under way have
    /// ended, see ``transferEnded()``), so the caller does not suspend.
    mutating func wait(_ id: UInt64, for condition: Condition) -> Bool {
        guard !state.isTerminal || Self.isStored(condition), !isSatisfied(condition) else { return false }
        waiters.append((id, condition))
        return true
    }

    /// Removes waiter `id` (its task was cancelled); whether it was waiting.
    mutating func removeWaiter(_ id: UInt64) -> Bool {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return false }
        waiters.remove(at: index)
        return true
    }

    // MARK: The transfer's events

    /// The origin answered a request (the first, or a resume).
    mutating func responseReceived() -> Actions {
        switch state {
        case .awaitingResponse, .resuming:
            state = .receiving
            hasResponse = true
            return Actions(wake: takeSatisfiedWaiters { $0 == .response })
        case .receiving, .completed, .failed, .cancelled:
            return Actions()
        }
    }

    /// The next bytes arrived, at the position: being written to the store, already in it,
    /// or only in memory. Wakes only the readers waiting for a byte among them.
    mutating func bytesArrived(_ bytes: ByteBuffer, storage: Chunk.Storage) -> Actions {
        guard case .receiving = state, bytes.readableBytes > 0 else { return Actions() }
        chunks.append(Chunk(offset: position, bytes: bytes, storage: storage))
        if storage == .memoryOnly { refuseStorage() }
        position += Int64(bytes.readableBytes)
        trimChunks()
        return Actions(wake: takeSatisfiedWaiters(where: Self.isBytes))
    }

    /// The write of the chunks delivered as `.writing` before `end` ended: they are now in
    /// the store, or (when it failed) only in memory.
    mutating func writeFinished(upTo end: Int64, stored: Bool) -> Actions {
        var changed = false
        for index in chunks.indices where chunks[index].storage == .writing && chunks[index].end <= end {
            chunks[index].storage = stored ? .stored : .memoryOnly
            changed = true
        }
        guard changed else { return Actions() }
        if !stored { refuseStorage() }
        trimChunks()
        return Actions(wake: takeSatisfiedWaiters { Self.isRoom($0) || Self.isStored($0) })
    }

    /// The bytes from the position to `offset` are in the store already (another download stored
    /// them): a fill goes on from `offset`. Readers waiting for a byte before it are woken (they
    /// read it from the store). `false` when it cannot (it ended, or holds bytes only in memory).
    mutating func skip(to offset: Int64) -> (skipped: Bool, actions: Actions) {
        guard !state.isTerminal, !holdsUnstoredBytes, offset > position else { return (false, Actions()) }
        position = offset
        trimChunks()
        return (true, Actions(wake: takeSatisfiedWaiters(where: Self.isBytes)))
    }

    /// Every byte the download was for has arrived (or is in the store already).
    mutating func allBytesArrived() -> Actions {
        guard !state.isTerminal else { return Actions() }
        state = .completed
        return Actions(wake: takeAllWaiters())
    }

    /// A request failed and is asked again (the ``TransferPolicy``'s decision): the `attempt`-th
    /// in a row. Readers keep waiting through it.
    mutating func retrying(attempt: Int) {
        guard !state.isTerminal else { return }
        state = .resuming(failures: attempt)
        retries += 1
    }

    /// The transfer gives up (its failures in a row, a resource that changed, a store that
    /// refused the entry): the download fails with `error` at once.
    mutating func fail(_ error: any Error) -> Actions {
        guard !state.isTerminal else { return Actions() }
        state = .failed(error)
        return Actions(wake: takeAllWaiters())
    }

    /// The transfer has ended: every write it started has ended, so chunks still marked as
    /// being written never will be (the entry was replaced, the store stopped): they are in
    /// memory only, and whoever waits for them to be stored stops waiting.
    mutating func transferEnded() -> Actions {
        writeFinished(upTo: .max, stored: false)
    }

    /// A resumed request is about to be sent.
    mutating func resuming() {
        if case .resuming = state { state = .awaitingResponse }
    }

    /// A delivered byte is only in memory: a fill ends (what memory holds must wait for readers).
    private mutating func refuseStorage() {
        holdsUnstoredBytes = true
        if fills, !state.isTerminal {
            fills = false
            fillStop = .storeRefused
        }
    }

    // MARK: Pacing

    /// How far the download is ahead of the readers it paces by: the fastest one, or the
    /// slowest while bytes exist only in memory (they must not be dropped before it takes them).
    var lead: Int64? {
        guard !readers.isEmpty, !isFilling else { return nil }
        let reference = holdsUnstoredBytes ? readers.values.min()! : readers.values.max()!
        return position - reference
    }

    // MARK: Private

    private static func isBytes(_ condition: Condition) -> Bool {
        if case .bytes = condition { return true }
        return false
    }

    private static func isRoom(_ condition: Condition) -> Bool {
        if case .room = condition { return true }
        return false
    }

    private static func isStored(_ condition: Condition) -> Bool {
        if case .stored = condition { return true }
        return false
    }

    private func isSatisfied(_ condition: Condition) -> Bool {
        switch condition {
        case .bytes(let cursor): position > cursor
        case .response: hasResponse
        case .room(let limit): (lead ?? 0) < limit
        case .stored(let end): !chunks.contains { $0.storage == .writing && $0.offset < end }
        }
    }

    /// Removes and returns the waiters of the kind `include` picks whose condition holds now.
    private mutating func takeSatisfiedWaiters(where include: (Condition) -> Bool) -> [UInt64] {
        let now = self
        var taken: [UInt64] = []
        waiters.removeAll { waiter in
            guard include(waiter.condition), now.isSatisfied(waiter.condition) else { return false }
            taken.append(waiter.id)
            return true
        }
        return taken
    }

    /// The waiters an ended download wakes: all but those waiting for writes still under
    /// way (a finished download's bytes go on being written; ``transferEnded()`` ends that).
    private mutating func takeAllWaiters() -> [UInt64] {
        let now = self
        var taken: [UInt64] = []
        waiters.removeAll { waiter in
            guard !Self.isStored(waiter.condition) || now.isSatisfied(waiter.condition) else { return false }
            taken.append(waiter.id)
            return true
        }
        return taken
    }

    /// Whether bytes of `range` are being written to the store.
    func isWriting(in range: ByteRange) -> Bool {
        chunks.contains { $0.storage == .writing && $0.offset < range.upperBound && range.lowerBound < $0.end }
    }

    /// Drops chunks every reader has passed, then stored chunks beyond the limit (oldest
    /// first; readers read those from the store). Chunks being written stay until the write
    /// ends: until then the store does not have them.
    private mutating func trimChunks() {
        guard !chunks.isEmpty else { return }
        let slowest = readers.values.min() ?? .max
        chunks.removeAll { $0.end <= slowest && $0.storage != .writing }
        var keptStored = chunks.reduce(Int64(0)) { $0 + ($1.storage == .stored ? Int64($1.bytes.readableBytes) : 0) }
        while keptStored > storedChunkLimit, let index = chunks.firstIndex(where: { $0.storage == .stored }) {
            keptStored -= Int64(chunks[index].bytes.readableBytes)
            chunks.remove(at: index)
        }
    }
}
