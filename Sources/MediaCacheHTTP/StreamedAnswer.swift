// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Synchronization

/// One origin answer through AsyncHTTPClient's delegate interface: the head fulfils ``head``,
/// the body's parts go to ``body`` as they arrive, and the client reads the next part from the
/// connection only once the reader has taken the last (backpressure, one part ahead, as the
/// client's own async interface keeps it). Ending the body's reading early cancels the request.
///
/// Why not `HTTPClient.execute(_:timeout:)`: AsyncHTTPClient 1.37's async interface hands each
/// request's cancellation handler to an actor from a task of its own, one trip through Swift's
/// cooperative pool per origin request (a thread woken, and put to sleep again, for each miss,
/// when the rest of the miss runs on its connection's event loop). Here nothing leaves the loop.
final class StreamedAnswer: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void
    typealias Body = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Demand
    >

    /// The answer's head; fails with the request's error when there is none.
    let head: EventLoopPromise<HTTPResponseHead>
    /// The answer's body as the origin sends it.
    let body: Body
    private let source: Body.Source
    private let demand: Demand
    private let eventLoop: any EventLoop

    /// Makes the answer of a request whose delegate runs on `eventLoop`.
    init(on eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        head = eventLoop.makePromise()
        demand = Demand()
        let made = Body.makeSequence(
            backPressureStrategy: .init(lowWatermark: 1, highWatermark: 1), finishOnDeinit: true, delegate: demand)
        (body, source) = (made.sequence, made.source)
    }

    /// Ties the answer to its request (`task`): the body's reading ended early cancels it, and
    /// a failure before the head fails ``head``.
    func started(_ task: HTTPClient.Task<Void>) {
        demand.started(task)
        task.futureResult.whenFailure { self.failBeforeHead($0) }
    }

    /// Fails the request with `error` if its head has not come yet; nothing otherwise.
    func failBeforeHead(_ error: any Error, task: HTTPClient.Task<Void>? = nil) {
        guard demand.claimHead() else { return }
        head.fail(error)
        source.finish(error)
        task?.fail(reason: error)
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ received: HTTPResponseHead) -> EventLoopFuture<Void> {
        if demand.claimHead() { head.succeed(received) }
        return eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        switch source.yield(buffer) {
        case .produceMore, .dropped:
            return eventLoop.makeSucceededVoidFuture()
        case .stopProducing:
            return demand.wait(on: eventLoop)
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        failBeforeHead(error)
        source.finish(error)
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        source.finish()
    }

    /// The reader's side: when it wants the next part, and when it has stopped reading.
    final class Demand: NIOAsyncSequenceProducerDelegate, Sendable {
        struct State {
            var task: HTTPClient.Task<Void>?
            /// The client waiting for the reader before it reads on.
            var waiting: EventLoopPromise<Void>?
            /// The reader asked for more before the client waited.
            var wanted = false
            var terminated = false
            var headDone = false
        }

        let state = Mutex(State())

        func started(_ task: HTTPClient.Task<Void>) {
            let terminated = state.withLock { state in
                state.task = task
                return state.terminated
            }
            if terminated { task.cancel() }
        }

        /// Whether the head is this caller's to fulfil (the first to ask).
        func claimHead() -> Bool {
            state.withLock { state in
                defer { state.headDone = true }
                return !state.headDone
            }
        }

        /// A future that completes when the reader wants the next part.
        func wait(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
            state.withLock { state in
                if state.wanted || state.terminated {
                    state.wanted = false
                    return eventLoop.makeSucceededVoidFuture()
                }
                let promise = eventLoop.makePromise(of: Void.self)
                state.waiting = promise
                return promise.futureResult
            }
        }

        func produceMore() {
            let waiting = state.withLock { state in
                defer { state.waiting = nil }
                if state.waiting == nil { state.wanted = true }
                return state.waiting
            }
            waiting?.succeed()
        }

        func didTerminate() {
            let (task, waiting) = state.withLock { state in
                state.terminated = true
                defer { state.waiting = nil }
                return (state.task, state.waiting)
            }
            waiting?.succeed()
            task?.cancel()
        }
    }
}
