// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Synchronization

/// One origin answer through AsyncHTTPClient's delegate interface: the head fulfils ``head``,
/// the body's parts go to ``makeBody()`` as they arrive, and the client reads the next part from the
/// connection only once the reader has taken the last (backpressure, one part ahead, as the
/// client's own async interface keeps it). Ending the body's reading early cancels the request.
///
/// Why not `HTTPClient.execute(_:timeout:)`: AsyncHTTPClient 1.37's async interface hands each
/// request's cancellation handler to an actor from a task of its own, one trip through Swift's
/// cooperative pool per origin request (a thread woken, and put to sleep again, for each miss,
/// when the rest of the miss runs on its connection's event loop). Here nothing leaves the loop.
final class StreamedAnswer: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    /// The answer's head; fails with the request's error when there is none.
    let head: EventLoopPromise<HTTPResponseHead>
    /// The answer's body as the origin sends it, for its one reader: made once (the body ends
    /// when what this returns is let go).
    func makeBody() -> AnswerBody { AnswerBody(parts) }
    private let parts = AnswerParts()
    private let headDone = Atomic<Bool>(false)
    private let eventLoop: any EventLoop

    /// Makes the answer of a request whose delegate runs on `eventLoop`.
    init(on eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        head = eventLoop.makePromise()
    }

    /// Ties the answer to its request (`task`): the body's reading ended early cancels it, and
    /// a failure before the head fails ``head``.
    func started(_ task: HTTPClient.Task<Void>) {
        parts.onTerminate { task.cancel() }
        task.futureResult.whenFailure { self.failBeforeHead($0) }
    }

    /// Whether the head is this caller's to fulfil (the first to ask).
    private func claimHead() -> Bool {
        !headDone.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Fails the request with `error` if its head has not come yet; nothing otherwise.
    func failBeforeHead(_ error: any Error, task: HTTPClient.Task<Void>? = nil) {
        guard claimHead() else { return }
        head.fail(error)
        parts.finish(error)
        task?.fail(reason: error)
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ received: HTTPResponseHead) -> EventLoopFuture<Void> {
        if claimHead() { head.succeed(received) }
        return eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        parts.yield(buffer, on: eventLoop)
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        failBeforeHead(error)
        parts.finish(error)
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        parts.finish()
    }
}
