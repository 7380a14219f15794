// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import Synchronization

/// An origin answer's body between AsyncHTTPClient's delegate (which ``AnswerParts/yield(_:on:)``s
/// each part as it arrives, and waits while one is unread) and the one reader of ``AnswerBody``.
/// The reader that stops reading (its task cancelled, or the body and its iterator let go)
/// ends it, and ``onTerminate`` cancels the request.
///
/// It does what NIO's `NIOThrowingAsyncSequenceProducer` did here, for byte buffers only: that
/// type's generic state machines asked Swift's runtime for their type metadata at every part,
/// 6 % of the instructions a cold stream cost the serving process (callgrind).
final class AnswerParts: Sendable {
    private typealias Reader = CheckedContinuation<ByteBuffer?, any Error>

    private struct State {
        var parts: [ByteBuffer] = []
        /// How the body ended, once it did (`nil` error: whole).
        var end: (any Error)??
        /// The reader waiting for a part.
        var reader: Reader?
        /// The client waiting until the reader has taken what is unread.
        var producer: EventLoopPromise<Void>?
        /// The reader stopped: parts are dropped, the client is not held.
        var terminated = false
        var onTerminate: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// Whether the reader waits for a part now.
    var hasReader: Bool { state.withLock { $0.reader != nil } }

    /// Sets what ends the request when the reader stops reading (at once if it has).
    func onTerminate(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.terminated { return true }
            state.onTerminate = action
            return false
        }
        if now { action() }
    }

    /// Hands `part` to the reader: a future, on `eventLoop`, that completes once the reader has
    /// taken every part before it and this one (at once when the reader was waiting for it, or
    /// has stopped reading).
    func yield(_ part: ByteBuffer, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        typealias Handed = (reader: Reader?, waits: EventLoopPromise<Void>?)
        let (reader, waits) = state.withLock { state -> Handed in
            guard !state.terminated, state.end == nil else { return (nil, nil) }
            if let reader = state.reader {
                state.reader = nil
                return (reader, nil)
            }
            state.parts.append(part)
            let promise = eventLoop.makePromise(of: Void.self)
            state.producer = promise
            return (nil, promise)
        }
        reader?.resume(returning: part)
        return waits?.futureResult ?? eventLoop.makeSucceededVoidFuture()
    }

    /// The body ended: whole (`error` nil) or failed. The reader gets what is unread first.
    func finish(_ error: (any Error)? = nil) {
        let (reader, producer) = state.withLock { state in
            guard state.end == nil else { return (Reader?.none, EventLoopPromise<Void>?.none) }
            state.end = .some(error)
            defer { (state.reader, state.producer) = (nil, nil) }
            return (state.reader, state.producer)
        }
        producer?.succeed()
        guard let reader else { return }
        if let error { reader.resume(throwing: error) } else { reader.resume(returning: nil) }
    }

    /// What the reader gets now.
    private enum Step {
        /// A part, and the client to let read on once it is taken (the last unread part).
        case part(ByteBuffer, EventLoopPromise<Void>?)
        case end((any Error)?)
        case cancelled
        case wait

        /// Lets the client read on if it waited for this part; the part, `nil` at the end, or
        /// the failure. Not for `.wait`.
        func carryOut() throws -> ByteBuffer? {
            switch self {
            case .part(let part, let producer):
                producer?.succeed()
                return part
            case .end(let error):
                if let error { throw error }
                return nil
            case .cancelled, .wait:
                throw CancellationError()
            }
        }
    }

    /// Takes what the reader gets now from `state` (`cancelled`: the reader's task is).
    private static func take(from state: inout State, cancelled: Bool) -> Step {
        if cancelled || state.terminated { return .cancelled }
        if !state.parts.isEmpty {
            let part = state.parts.removeFirst()
            guard state.parts.isEmpty else { return .part(part, nil) }
            defer { state.producer = nil }
            return .part(part, state.producer)
        }
        if let end = state.end { return .end(end) }
        return .wait
    }

    /// The next part; `nil` at the body's end. A cancelled reader stops the body and gets a
    /// `CancellationError`.
    func next() async throws -> ByteBuffer? {
        let step = state.withLock { Self.take(from: &$0, cancelled: false) }
        guard case .wait = step else { return try step.carryOut() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let step = state.withLock { state in
                    let step = Self.take(from: &state, cancelled: Task.isCancelled)
                    if case .wait = step { state.reader = continuation }
                    return step
                }
                if case .wait = step { return }
                continuation.resume(with: Result { try step.carryOut() })
            }
        } onCancel: {
            terminate(cancelling: true)
        }
    }

    /// The reader stopped reading: unread parts are dropped, the client let go, the request
    /// ended (``onTerminate(_:)``) unless the body had ended already; a waiting reader is
    /// cancelled (`cancelling`).
    func terminate(cancelling: Bool = false) {
        let (reader, producer, action) = state.withLock { state in
            guard !state.terminated else {
                return (Reader?.none, EventLoopPromise<Void>?.none, (@Sendable () -> Void)?.none)
            }
            state.terminated = true
            state.parts = []
            defer { (state.reader, state.producer, state.onTerminate) = (nil, nil, nil) }
            return (state.reader, state.producer, state.end == nil ? state.onTerminate : nil)
        }
        producer?.succeed()
        if cancelling { reader?.resume(throwing: CancellationError()) } else { reader?.resume(returning: nil) }
        action?()
    }
}

/// The body of one origin answer, for its one reader (``AnswerParts``). Its iterator let go
/// stops the body and ends the request (unless it had ended), as does the sequence let go
/// before an iterator was made (NIO's `finishOnDeinit`).
struct AnswerBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    /// Ends the body when let go, if no iterator was made from it.
    final class Sequence: Sendable {
        let parts: AnswerParts
        let iterated = Atomic<Bool>(false)
        init(_ parts: AnswerParts) { self.parts = parts }
        deinit { if !iterated.load(ordering: .acquiring) { parts.terminate() } }
    }

    /// Ends the body when the iterator is let go.
    final class Reader: Sendable {
        let parts: AnswerParts
        init(_ parts: AnswerParts) { self.parts = parts }
        deinit { parts.terminate() }
    }

    let sequence: Sequence

    init(_ parts: AnswerParts) {
        sequence = Sequence(parts)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let reader: Reader
        mutating func next() async throws -> ByteBuffer? { try await reader.parts.next() }
    }

    func makeAsyncIterator() -> AsyncIterator {
        sequence.iterated.store(true, ordering: .releasing)
        return AsyncIterator(reader: Reader(sequence.parts))
    }
}
