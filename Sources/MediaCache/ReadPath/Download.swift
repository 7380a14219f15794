import Foundation
import Logging
import NIOCore
import Synchronization

/// One origin download of a range of one resource, shared by every reader that wants its
/// bytes (coalescing).
///
/// The download writes each chunk to the store as it arrives and then advances
/// ``State/position``; readers wait for the position to pass their cursor and read the
/// bytes from disk. If the store refuses a write, chunks are kept in memory instead until
/// every reader has passed them. The download runs at most `readAhead` bytes ahead of its
/// fastest reader (of its slowest one while chunks are held in memory), so a paused
/// player pauses the origin too, and it stops when its last reader leaves.
final class Download: Sendable {
    enum Outcome: Sendable {
        case completed
        case failed(any Error)
    }

    struct State {
        /// Bytes `start ..< position` have been delivered (stored, or held in `memory`).
        var position: Int64
        /// Delivered chunks that are not in the store, in order.
        var memory: [(offset: Int64, bytes: ByteBuffer)] = []
        var storeFailed = false
        var hasResponse = false
        var outcome: Outcome?
        /// Each reader's cursor.
        var readers: [UInt64: Int64] = [:]
        var nextReader: UInt64 = 0
        /// Bumped on every change readers may wait for.
        var changeCount: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var task: Task<Void, Never>?
        var isCancelled = false
        /// How many times the origin request was resumed after a failure.
        var retries = 0

        mutating func changed() -> [CheckedContinuation<Void, Never>] {
            changeCount += 1
            defer { waiters = [:] }
            return Array(waiters.values)
        }
    }

    /// What a reader sees at one moment.
    struct Snapshot {
        var position: Int64
        var changeCount: UInt64
        var hasResponse: Bool
        var outcome: Outcome?
        /// The held chunk holding the reader's cursor, if any, cut to start at the cursor.
        var heldBytes: ByteBuffer?
    }

    let url: URL
    let key: CacheKey
    let start: Int64
    let end: Int64
    /// Whether the request carries no `Range` (an origin without range support): the body
    /// starts at 0 and bytes before `start` are stored too.
    let isFullBody: Bool
    /// Whether fetched bytes go to the store; if not (`no-store`, or no entry could be
    /// opened), they are held in memory until every reader has passed them.
    let stores: Bool
    /// The request headers of the read that started the download, sent with each request.
    let headers: RequestHeaders
    let state: Mutex<State>

    init(url: URL, key: CacheKey, start: Int64, end: Int64, isFullBody: Bool, stores: Bool, headers: RequestHeaders) {
        self.stores = stores
        self.headers = headers
        self.url = url
        self.key = key
        self.start = isFullBody ? 0 : start
        self.end = end
        self.isFullBody = isFullBody
        state = Mutex(State(position: isFullBody ? 0 : start))
    }

    var isFinished: Bool {
        state.withLock { $0.outcome != nil || $0.isCancelled }
    }

    var position: Int64 {
        state.withLock { $0.position }
    }

    /// How many times the origin request was resumed after a failure.
    var retries: Int {
        state.withLock { $0.retries }
    }

    func noteRetry() {
        state.withLock { $0.retries += 1 }
    }

    // MARK: Readers

    /// Adds a reader at `cursor`; `nil` if the download has already ended.
    func addReader(at cursor: Int64) -> UInt64? {
        state.withLock { state in
            guard state.outcome == nil, !state.isCancelled else { return nil }
            let id = state.nextReader
            state.nextReader += 1
            state.readers[id] = cursor
            return id
        }
    }

    /// Removes a reader; the last one to leave cancels the origin request.
    func removeReader(_ id: UInt64) {
        let (task, wake) = state.withLock { state -> (Task<Void, Never>?, [CheckedContinuation<Void, Never>]) in
            guard state.readers.removeValue(forKey: id) != nil else { return (nil, []) }
            trimMemory(&state)
            if state.readers.isEmpty, state.outcome == nil {
                state.isCancelled = true
                return (state.task, state.changed())
            }
            return (nil, state.changed())
        }
        task?.cancel()
        wake.forEach { $0.resume() }
    }

    /// Records that reader `id` has consumed everything before `cursor`.
    func moveReader(_ id: UInt64, to cursor: Int64) {
        let wake = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.readers[id] != nil else { return [] }
            state.readers[id] = cursor
            trimMemory(&state)
            return state.changed()
        }
        wake.forEach { $0.resume() }
    }

    func snapshot(at cursor: Int64) -> Snapshot {
        state.withLock { state in
            var held: ByteBuffer?
            if let chunk = state.memory.first(where: { $0.offset <= cursor && cursor < $0.offset + Int64($0.bytes.readableBytes) }) {
                held = chunk.bytes.getSlice(at: chunk.bytes.readerIndex + Int(cursor - chunk.offset), length: chunk.bytes.readableBytes - Int(cursor - chunk.offset))
            }
            return Snapshot(position: state.position, changeCount: state.changeCount, hasResponse: state.hasResponse, outcome: state.outcome, heldBytes: held)
        }
    }

    /// Waits until something changes after `changeCount`, or the task is cancelled.
    func waitForChange(after changeCount: UInt64) async {
        let id = state.withLock { state -> UInt64 in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.changeCount != changeCount || state.outcome != nil || state.isCancelled || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Drops held chunks that every reader has passed.
    private func trimMemory(_ state: inout State) {
        guard !state.memory.isEmpty else { return }
        let slowest = state.readers.values.min() ?? .max
        state.memory.removeAll { $0.offset + Int64($0.bytes.readableBytes) <= slowest }
    }

    // MARK: The download's own side

    /// Waits while the download is `readAhead` bytes ahead of its readers: of the fastest
    /// one, or of the slowest while chunks are held in memory.
    func pace(readAhead: Int64) async {
        while true {
            let pausedAt = state.withLock { state -> UInt64? in
                guard !state.isCancelled, state.outcome == nil, !state.readers.isEmpty else { return nil }
                let reference = state.storeFailed ? state.readers.values.min()! : state.readers.values.max()!
                return state.position - reference >= readAhead ? state.changeCount : nil
            }
            guard let pausedAt, !Task.isCancelled else { return }
            await waitForChange(after: pausedAt)
        }
    }

    func markResponded() {
        let wake = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.hasResponse = true
            return state.changed()
        }
        wake.forEach { $0.resume() }
    }

    /// Publishes `length` more bytes: already stored, or `held` in memory.
    func deliver(length: Int64, held: ByteBuffer?) {
        let wake = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if let held {
                state.storeFailed = true
                state.memory.append((state.position, held))
            }
            state.position += length
            return state.changed()
        }
        wake.forEach { $0.resume() }
    }

    func finish(_ outcome: Outcome) {
        let wake = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if state.outcome == nil { state.outcome = outcome }
            return state.changed()
        }
        wake.forEach { $0.resume() }
    }
}
