// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import Synchronization

/// One origin download of a range of one resource, shared by every reader that wants its
/// bytes (coalescing).
///
/// Its lifecycle is a ``DownloadStateMachine`` run under a lock; this class adds what a
/// value cannot hold: the suspended readers' continuations and the transfer's task. The
/// transfer (``OriginTransfer``) delivers bytes here while it writes them to the store. A
/// reader takes delivered bytes from memory while they are kept (those being written, the
/// latest stored ones, and all of them when the store refused a write) and from the store
/// otherwise, and is woken only when a byte it waits for arrives. The download runs at most `downloadLead` bytes ahead of its readers,
/// so a paused player pauses the origin too, and it stops when its last reader leaves; a
/// fill on play (``fill(to:)``, see ``FillPolicy``) goes on to its file's end instead.
final class SharedDownload: Sendable {
    private struct Locked {
        var machine: DownloadStateMachine
        var continuations: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var task: Task<Void, Never>?
        /// The readers that are players, not the cache's own fetches (``Requester``), with where
        /// each one's read ends.
        var players: [UInt64: Int64] = [:]
        /// The request the transfer is sending, while it may wait for a connection as the
        /// cache's own: a player that joins makes it a player's.
        var promotion: ConnectionBudget.Promotion?
        /// Where the download ends: its read's range, or the file's end once it fills.
        var end: Int64
        /// The furthest a player's read has taken its bytes.
        var playedTo: Int64?

        /// See ``SharedDownload/servesPlayer``.
        func servesPlayer(startedByPlayer: Bool) -> Bool {
            players.values.contains { $0 > machine.position } || (startedByPlayer && !machine.hasHadReaders)
        }
    }

    /// What a reader sees at one moment.
    struct Snapshot {
        var position: Int64
        var hasResponse: Bool
        var state: DownloadStateMachine.State
        /// The kept chunk holding the reader's cursor, if any, cut to start at the cursor.
        var heldBytes: ByteBuffer?
    }

    let url: URL
    let key: CacheKey
    let start: Int64
    /// Where it ends: its read's range, or the file's end once it fills (``fill(to:)``).
    var end: Int64 { locked.withLock { $0.end } }
    /// Whether the request carries no `Range` (an origin without range support): the body
    /// starts at 0 and bytes before `start` are stored too.
    let isFullBody: Bool
    /// Whether fetched bytes go to the store; if not (`no-store`, or no entry could be
    /// opened), they are kept in memory until every reader has passed them.
    let stores: Bool
    /// The request headers of the read that started the download, sent with each request.
    let headers: RequestHeaders
    /// Who started it: a player's request (its probe or revalidation, or its read at a
    /// hole), or the cache's own work. Until a reader joins, it is the player's.
    let startedBy: Requester
    /// Whether a player's request started it.
    var isPlayers: Bool { startedBy.isPlayer }
    private let locked: Mutex<Locked>

    init(
        url: URL, key: CacheKey, start: Int64, end: Int64, isFullBody: Bool, stores: Bool, headers: RequestHeaders,
        keptBytes: Int64, startedBy: Requester
    ) {
        self.stores = stores
        self.headers = headers
        self.url = url
        self.key = key
        self.start = isFullBody ? 0 : start
        self.isFullBody = isFullBody
        self.startedBy = startedBy
        locked = Mutex(
            Locked(
                machine: DownloadStateMachine(position: isFullBody ? 0 : start, storedChunkLimit: keptBytes),
                end: end))
    }

    var isFinished: Bool { locked.withLock { $0.machine.isFinished } }
    var wasLetGo: Bool { locked.withLock { $0.machine.wasLetGo } }
    var position: Int64 { locked.withLock { $0.machine.position } }
    var holdsUnstoredBytes: Bool { locked.withLock { $0.machine.holdsUnstoredBytes } }
    /// Whether it has ended and bytes of `range` it fetched are still being written.
    func isFinishedAndWriting(in range: ByteRange) -> Bool {
        locked.withLock { $0.machine.isFinished && $0.machine.isWriting(in: range) }
    }
    /// How many times the origin request was resumed after a failure.
    var retries: Int { locked.withLock { $0.machine.retries } }

    // MARK: Readers

    /// Adds a reader of `requester`'s at `cursor`, whose read ends at `end`; `nil` if the
    /// download has already ended.
    func addReader(at cursor: Int64, until end: Int64, for requester: Requester) -> UInt64? {
        let isPlayer = requester.isPlayer
        let (id, promotion) = locked.withLock { locked in
            let id = locked.machine.addReader(at: cursor)
            if isPlayer, let id { locked.players[id] = end }
            return (id, isPlayer ? locked.promotion : nil)
        }
        promotion?.promote()
        return id
    }

    /// Runs `send` (the transfer's next origin request) with a ``ConnectionBudget/Promotion``
    /// a player who joins calls (see ``asks(under:)``).
    func sending<T>(_ send: (ConnectionBudget.Promotion) async throws -> T) async rethrows -> T {
        let promotion = ConnectionBudget.Promotion()
        asks(under: promotion)
        return try await send(promotion)
    }

    /// Makes `promotion` the one of the request the download reads now (its next, or the probe's
    /// whose answer it begins with), which a player who joins calls, so the request never waits
    /// as the cache's own for a player; one that serves a player already is a player's at once.
    /// It stays the download's until its next request, past the answer's head: a request asked
    /// in pieces takes a connection for each piece while its body flows (``PiecedFetcher``), and
    /// a player who joins then makes the pieces still to come players'.
    func asks(under promotion: ConnectionBudget.Promotion) {
        let servesPlayer = locked.withLock { locked in
            locked.promotion = promotion
            return locked.servesPlayer(startedByPlayer: isPlayers)
        }
        if servesPlayer { promotion.promote() }
    }

    /// Makes the download go on to `length`, the file's end, whatever its readers do (a fill on
    /// play); `false` when it cannot (it ended, or holds bytes only in memory).
    func fill(to length: Int64) -> Bool {
        locked.withLock { locked in
            guard locked.machine.fill() else { return false }
            locked.end = max(locked.end, length)
            return true
        }
    }

    /// Ends the fill for `reason`: the download goes on for its readers only (see
    /// ``DownloadStateMachine/stopFilling(_:)``).
    func stopFilling(_ reason: FillStop) {
        perform { $0.stopFilling(reason) }
    }

    /// Once it has ended: why its fill did not complete (``DownloadStateMachine/fillEndReason``).
    var fillEndReason: FillStop? { locked.withLock { $0.machine.fillEndReason } }

    /// Whether every byte of its range arrived.
    var isCompleted: Bool {
        locked.withLock { if case .completed = $0.machine.state { true } else { false } }
    }

    /// Whether it goes on to the file's end whatever its readers do.
    var isFilling: Bool { locked.withLock { $0.machine.isFilling } }

    /// Removes a reader; the last one to leave cancels the origin request (not a fill's).
    func removeReader(_ id: UInt64) {
        perform { $0.removeReader(id) }
        locked.withLock { _ = $0.players.removeValue(forKey: id) }
    }

    /// Whether a player reads from it and wants bytes it has not delivered yet (its read ends
    /// past the position), or a player started it and no one has joined yet (a probe's download
    /// before the player's read joins it); else it is the cache's own, and yields to players (a
    /// fill's request for the rest of a file past its player's range is the cache's own, even
    /// while that player still takes its last bytes). (A player's download that waited for its own player's read parked,
    /// holding its origin connection, while other players waited: under load every connection
    /// of the pool was so held, and players got `getConnectionFromPoolTimeout`.)
    var servesPlayer: Bool {
        locked.withLock { $0.servesPlayer(startedByPlayer: isPlayers) }
    }

    /// Whether a player's read wants the bytes at `offset` (its range goes past it): else they
    /// are the cache's own (a fill's past its player, a read-ahead's), stored as such.
    func playerWants(_ offset: Int64) -> Bool {
        locked.withLock { $0.players.values.contains { $0 > offset } }
    }

    /// Makes reader `id` (a reservation's) the reader of `requester`'s read from `cursor` to `end`.
    func claim(_ id: UInt64, at cursor: Int64, until end: Int64, for requester: Requester) {
        locked.withLock { $0.players[id] = requester.isPlayer ? end : nil }
        moveReader(id, to: cursor)
    }

    /// Records that reader `id` has taken everything before `cursor`.
    func moveReader(_ id: UInt64, to cursor: Int64) {
        performLocked { locked in
            if locked.players[id] != nil { locked.playedTo = max(locked.playedTo ?? cursor, cursor) }
            return locked.machine.moveReader(id, to: cursor)
        }
    }

    /// How far into the file players have read from it (what a fill's play proved; 0 before
    /// their first bytes).
    var playerProgress: Int64 {
        locked.withLock { $0.playedTo ?? 0 }
    }

    /// Where the furthest read of its players ends; `nil` when no player reads it.
    var playersEnd: Int64? {
        locked.withLock { $0.players.values.max() }
    }

    /// The kept bytes from `cursor` on, up to `limit`, in one buffer: the consecutive chunks
    /// there joined (copied, outside the lock), so a reader behind the download's front
    /// takes them in one part instead of chunk by chunk.
    func heldBytes(at cursor: Int64, joiningUpTo limit: Int) -> ByteBuffer? {
        let parts = locked.withLock { $0.machine.bytes(from: cursor, upTo: limit) }
        guard parts.count > 1 else { return parts.first }
        var joined = ByteBufferAllocator().buffer(capacity: min(limit, parts.reduce(0) { $0 + $1.readableBytes }))
        for part in parts where joined.readableBytes < limit {
            joined.writeImmutableBuffer(
                part.getSlice(at: part.readerIndex, length: min(part.readableBytes, limit - joined.readableBytes))!)
        }
        return joined
    }

    func snapshot(at cursor: Int64) -> Snapshot {
        locked.withLock { locked in
            let machine = locked.machine
            return Snapshot(
                position: machine.position, hasResponse: machine.hasResponse, state: machine.state,
                heldBytes: machine.bytes(at: cursor))
        }
    }

    /// Waits until a byte at `cursor` has arrived, the download ends, or the task is cancelled.
    func waitForBytes(at cursor: Int64) async {
        await wait(for: .bytes(at: cursor))
    }

    /// Waits until no byte before `end` is still being written to the store, the download
    /// ends, or the task is cancelled.
    func waitForStored(upTo end: Int64) async {
        await wait(for: .stored(upTo: end))
    }

    /// Waits until the origin has answered, the download ends, or the task is cancelled.
    func waitForResponse() async {
        await wait(for: .response)
    }

    // MARK: The transfer's side

    /// Makes `task` the transfer; cancels it at once if the download has already ended.
    func attach(_ task: Task<Void, Never>) {
        let ended = locked.withLock { locked in
            locked.task = task
            return locked.machine.isFinished
        }
        if ended { task.cancel() }
    }

    /// Waits while the download is `lead` bytes ahead of its readers.
    func pace(lead: Int64) async {
        await wait(for: .room(lead: lead))
    }

    func responseReceived() {
        perform { $0.responseReceived() }
    }

    /// Publishes the next bytes, at the position: being written, already stored, or only in memory.
    func deliver(_ bytes: ByteBuffer, storage: DownloadStateMachine.Chunk.Storage) {
        perform { $0.bytesArrived(bytes, storage: storage) }
    }

    /// The write of the bytes delivered as `.writing` before `end` ended, stored or not.
    func writeFinished(upTo end: Int64, stored: Bool) {
        perform { $0.writeFinished(upTo: end, stored: stored) }
    }

    /// Moves the position over bytes the store has, to `offset` (see
    /// ``DownloadStateMachine/skip(to:)``); `false` when it cannot.
    func skip(to offset: Int64) -> Bool {
        var skipped = false
        perform { machine in
            let (done, actions) = machine.skip(to: offset)
            skipped = done
            return actions
        }
        return skipped
    }

    func complete() {
        perform { $0.allBytesArrived() }
    }

    func fail(_ error: any Error) {
        perform { $0.fail(error) }
    }

    /// The transfer's task is ending: see ``DownloadStateMachine/transferEnded()``.
    func transferEnded() {
        perform { $0.transferEnded() }
    }

    /// Ends the download with `error` and cancels its transfer; returns once the transfer's
    /// task has ended (at once if it never started).
    func stop(_ error: any Error) async {
        fail(error)
        let task = locked.withLock { $0.task }
        task?.cancel()
        await task?.value
    }

    /// A failed request is asked again, the `attempt`-th in a row.
    func retrying(attempt: Int) {
        locked.withLock { $0.machine.retrying(attempt: attempt) }
    }

    /// The request asked again is about to be sent.
    func resuming() {
        locked.withLock { $0.machine.resuming() }
    }

    // MARK: Private

    /// Runs an event on the machine and carries out its actions outside the lock.
    private func perform(_ event: (inout DownloadStateMachine) -> DownloadStateMachine.Actions) {
        performLocked { event(&$0.machine) }
    }

    private func performLocked(_ event: (inout Locked) -> DownloadStateMachine.Actions) {
        let (wake, task) = locked.withLock { locked -> ([CheckedContinuation<Void, Never>], Task<Void, Never>?) in
            let actions = event(&locked)
            return (
                actions.wake.compactMap { locked.continuations.removeValue(forKey: $0) },
                actions.cancelsTransfer ? locked.task : nil
            )
        }
        task?.cancel()
        wake.forEach { $0.resume() }
    }

    private func wait(for condition: DownloadStateMachine.Condition) async {
        let id = locked.withLock { $0.machine.makeWaiterID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let suspended = locked.withLock { locked -> Bool in
                    guard !Task.isCancelled, locked.machine.wait(id, for: condition) else { return false }
                    locked.continuations[id] = continuation
                    return true
                }
                if !suspended { continuation.resume() }
            }
        } onCancel: {
            let continuation = locked.withLock { locked -> CheckedContinuation<Void, Never>? in
                _ = locked.machine.removeWaiter(id)
                return locked.continuations.removeValue(forKey: id)
            }
            continuation?.resume()
        }
    }
}
