// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import Synchronization

/// An origin body without a length (a chunked CMAF segment of low-latency DASH, the part an
/// LL-HLS open-ended hint names, a chunked file) that any number of reads share: one origin
/// request, read by one task, each chunk handed to every reader as it arrives. A reader that
/// joins late gets the chunks before it from the history first.
///
/// Bounded: the history is kept while it is at most ``maximumHistory`` bytes (past that, no
/// reader can join, and chunks every reader has had are let go), and the origin is read no
/// further ahead of the slowest reader than ``maximumLag`` bytes. When the last reader leaves,
/// the origin request is cancelled.
final class GrowingBody: Sendable {
    static let maximumHistory = 32 << 20
    static let maximumLag = 4 << 20

    /// The response the body came with (its body unused: readers take ``subscribe()``'s).
    let metadata: ContentMetadata
    let bodyOffset: Int64
    let bodyEnd: Int64?

    private struct State {
        var chunks: [ByteBuffer] = []
        /// The index of `chunks[0]` among every chunk the body gave.
        var firstIndex = 0
        /// Bytes in `chunks`.
        var historyBytes = 0
        /// Each reader's next chunk, by reader.
        var cursors: [Int: Int] = [:]
        var nextReader = 0
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
        /// The pump, waiting for the slowest reader.
        var pumpWaiting: CheckedContinuation<Void, Never>?
        var end: Result<Void, any Error>?
        var isJoinable = true
        var pump: Task<Void, Never>?

        /// Bytes past the slowest reader's cursor.
        var lag: Int {
            guard let slowest = cursors.values.min() else { return 0 }
            return chunks.dropFirst(max(0, slowest - firstIndex)).reduce(0) { $0 + $1.readableBytes }
        }

        /// Lets go of the chunks every reader has had, once no reader can join.
        mutating func trim() {
            guard !isJoinable, let slowest = cursors.values.min() ?? Optional(firstIndex + chunks.count),
                slowest > firstIndex
            else { return }
            let drop = min(chunks.count, slowest - firstIndex)
            historyBytes -= chunks.prefix(drop).reduce(0) { $0 + $1.readableBytes }
            chunks.removeFirst(drop)
            firstIndex += drop
        }
    }

    private let state = Mutex(State())
    /// Called once the body has ended, or cannot be joined any more.
    private let onClosed: @Sendable () -> Void

    init(_ response: OriginResponse, onClosed: @escaping @Sendable () -> Void) {
        metadata = response.metadata
        bodyOffset = response.bodyOffset
        bodyEnd = response.bodyEnd
        self.onClosed = onClosed
        let body = response.body
        let pump = TaskPlacement.task { [weak self] in
            await self?.waitForFirstReader()
            do {
                for try await chunk in body {
                    guard let self else { return }
                    try Task.checkCancellation()
                    await self.append(chunk)
                }
                self?.finish(.success(()))
            } catch {
                self?.finish(.failure(error))
            }
        }
        state.withLock { $0.pump = pump }
    }

    /// A reader of the body from its first byte; `nil` once no reader can join.
    func subscribe() -> Reader? {
        let id = state.withLock { state -> Int? in
            guard state.isJoinable else { return nil }
            defer { state.nextReader += 1 }
            state.cursors[state.nextReader] = state.firstIndex
            return state.nextReader
        }
        guard let id else { return nil }
        resumePump()
        return Reader(body: self, id: id)
    }

    var isJoinable: Bool { state.withLock { $0.isJoinable } }

    private func waitForFirstReader() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.cursors.isEmpty {
                    state.pumpWaiting = continuation
                    return false
                }
                return true
            }
            if now { continuation.resume() }
        }
    }

    private func resumePump() {
        state.withLock { state in
            defer { state.pumpWaiting = nil }
            return state.pumpWaiting
        }?.resume()
    }

    /// Adds a chunk and wakes the readers; waits while the slowest reader is too far behind.
    private func append(_ chunk: ByteBuffer) async {
        let (readers, closes) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
            state.chunks.append(chunk)
            state.historyBytes += chunk.readableBytes
            var closes = false
            if state.isJoinable, state.historyBytes > Self.maximumHistory {
                state.isJoinable = false
                closes = true
            }
            state.trim()
            defer { state.waiting = [:] }
            return (Array(state.waiting.values), closes)
        }
        for reader in readers { reader.resume() }
        if closes { onClosed() }
        await withCheckedContinuation { continuation in
            let waits = state.withLock { state in
                if state.lag > Self.maximumLag, !state.cursors.isEmpty {
                    state.pumpWaiting = continuation
                    return true
                }
                return false
            }
            if !waits { continuation.resume() }
        }
    }

    private func finish(_ end: Result<Void, any Error>) {
        let readers = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.end = end
            state.isJoinable = false
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for reader in readers { reader.resume() }
        onClosed()
    }

    /// The next chunk for reader `id`, waiting for the origin when it has had every one.
    fileprivate func next(_ id: Int) async throws -> ByteBuffer? {
        while true {
            try Task.checkCancellation()
            enum Step {
                case chunk(ByteBuffer)
                case end(Result<Void, any Error>)
                case wait
            }
            let step = state.withLock { state -> Step in
                guard let cursor = state.cursors[id] else { return .end(.failure(CancellationError())) }
                if cursor < state.firstIndex + state.chunks.count {
                    state.cursors[id] = cursor + 1
                    return .chunk(state.chunks[cursor - state.firstIndex])
                }
                return state.end.map(Step.end) ?? .wait
            }
            switch step {
            case .chunk(let chunk):
                if state.withLock({ $0.lag <= Self.maximumLag }) { resumePump() }
                return chunk
            case .end(let end):
                try end.get()
                return nil
            case .wait:
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let now = state.withLock { state in
                            let ready =
                                (state.cursors[id] ?? 0) < state.firstIndex + state.chunks.count || state.end != nil
                                || Task.isCancelled
                            if !ready { state.waiting[id] = continuation }
                            return ready
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    state.withLock { $0.waiting.removeValue(forKey: id) }?.resume()
                }
            }
        }
    }

    /// Reader `id` has left: the origin request ends with the last one.
    fileprivate func leave(_ id: Int) {
        let (pump, waiting, lastLeft) = state.withLock { state in
            state.cursors[id] = nil
            state.waiting[id] = nil
            state.trim()
            let lastLeft = state.cursors.isEmpty && state.end == nil
            if lastLeft { state.isJoinable = false }
            defer { state.pumpWaiting = nil }
            return (state.pump, state.pumpWaiting, lastLeft)
        }
        waiting?.resume()
        if lastLeft {
            pump?.cancel()
            onClosed()
        }
    }

    /// One reader's view: the body as an async sequence of its chunks; the reader leaves when
    /// the last copy of it goes.
    final class Reader: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        private let body: GrowingBody
        private let id: Int

        fileprivate init(body: GrowingBody, id: Int) {
            self.body = body
            self.id = id
        }

        deinit { body.leave(id) }

        func makeAsyncIterator() -> Iterator { Iterator(reader: self) }

        struct Iterator: AsyncIteratorProtocol {
            let reader: Reader
            mutating func next() async throws -> ByteBuffer? { try await reader.body.next(reader.id) }
        }
    }
}
