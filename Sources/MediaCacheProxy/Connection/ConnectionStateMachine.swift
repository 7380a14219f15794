// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import NIOHTTP1

/// One client connection as a pure machine: each event of the channel (a request's bytes,
/// head and end, an answer that ended, a request the parser refused, a look at the timer, the
/// channel going away) comes in with the time, and what to do comes back. The connection's
/// handler (`ProxyConnectionHandler`) carries the actions out and holds only what a value
/// cannot (the answer's task, the timer, the channel). Tested without a socket.
///
/// Two deadlines, one timer: a request must arrive whole within the request timeout of its
/// first bytes (a client that sends its head a byte at a time holds a connection for seconds,
/// not for as long as it likes), and a connection that has neither sent a request byte nor
/// been answered for the idle timeout is closed. An answer being sent is never cut.
struct ConnectionStateMachine {
    enum State: Equatable {
        /// Waiting for a request, or reading one (its head, once it came).
        case waiting(head: HTTPRequestHead?)
        /// Answering a request: the connection's `number`th (pipelined ones wait in the
        /// pipeline handler until its end is written).
        case answering(number: Int)
        /// A request the parser refused was answered; what still comes is read and dropped
        /// until the client closes or the linger time passes (a close with unread input would
        /// reset the connection, which can destroy the answer before the client reads it).
        case lingering
        case closed
    }

    enum Action: Equatable {
        case none
        /// Answer `head` (from the store on the event loop when it can, else on a task).
        case answer(HTTPRequestHead)
        /// The connection was opened over the limit: answer `head` with 503 and close.
        case refuseOverCapacity(HTTPRequestHead)
        /// Answer the request the parser refused (400 or 431, saying why), then linger.
        case refuseMalformed(HTTPParserError)
        /// Bytes (or the decoder's complaint about them) after a refused request: dropped.
        case drop
        /// Pass an error on down the pipeline.
        case forward
        /// Close the connection.
        case close
        /// Look at the timer again after this long.
        case lookAgain(TimeAmount)
        /// The client went: cancel the answer being sent, if any.
        case cancelAnswer
    }

    private(set) var state: State = .waiting(head: nil)
    /// How many requests the connection was given to answer.
    private(set) var answers = 0
    /// When a request's bytes last arrived or an answer ended.
    private(set) var lastActivity: NIODeadline
    /// When the request under way began to arrive; `nil` between requests.
    private(set) var requestStarted: NIODeadline?
    /// Opened while the connection limit was reached: its request is refused.
    let isOverCapacity: Bool
    let idleTimeout: TimeAmount
    let requestTimeout: TimeAmount

    init(now: NIODeadline, idleTimeout: TimeAmount, requestTimeout: TimeAmount, isOverCapacity: Bool) {
        lastActivity = now
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
        self.isOverCapacity = isOverCapacity
    }

    /// How long after it is armed the timer first looks: the sooner of the two deadlines.
    var firstLook: TimeAmount { min(idleTimeout, requestTimeout) }

    /// Bytes came from the client (before they are parsed): a request begins to arrive, if
    /// none was under way.
    mutating func bytesArrived(now: NIODeadline) {
        if requestStarted == nil { requestStarted = now }
    }

    /// A request's head. One comes only once the answer before it was written whole (the
    /// pipeline handler holds it back till then), so an answer still marked as going on has
    /// ended: its own notice may come after this.
    mutating func requestHead(_ head: HTTPRequestHead, now: NIODeadline) -> Action {
        lastActivity = now
        // The next request's bytes may have come with the last one's end.
        if requestStarted == nil { requestStarted = now }
        switch state {
        case .waiting, .answering: state = .waiting(head: head)
        case .lingering, .closed: break
        }
        return .none
    }

    mutating func requestBody(now: NIODeadline) -> Action {
        lastActivity = now
        return .none
    }

    mutating func requestEnd(now: NIODeadline) -> Action {
        lastActivity = now
        requestStarted = nil  // it arrived whole
        guard case .waiting(let head?) = state else { return .none }
        answers += 1
        state = .answering(number: answers)
        return isOverCapacity ? .refuseOverCapacity(head) : .answer(head)
    }

    /// The answer to the connection's `number`th request ended (written whole, or given up
    /// on); a notice about an earlier one is late and changes nothing.
    mutating func answerEnded(_ number: Int, now: NIODeadline) -> Action {
        guard state == .answering(number: number) else { return .none }
        lastActivity = now
        state = .waiting(head: nil)
        return .none
    }

    /// An error came up the pipeline: a request the parser refused is answered once; after
    /// that, everything is dropped.
    mutating func errorCaught(_ error: any Error) -> Action {
        if state == .lingering { return .drop }
        guard let parserError = error as? HTTPParserError else { return .forward }
        state = .lingering
        return .refuseMalformed(parserError)
    }

    /// The timer fired: close a connection whose request has not arrived whole within the
    /// request timeout of its first bytes, or that has neither sent a request byte nor been
    /// answered for the idle timeout (never one being answered: a long answer is not cut, and a
    /// request pipelined behind it waits with it); else look again when a deadline would pass.
    mutating func timerFired(now: NIODeadline) -> Action {
        switch state {
        case .closed: return .none
        case .answering: return .lookAgain(firstLook)
        case .waiting, .lingering:
            var next = idleTimeout - (now - lastActivity)
            if let requestStarted { next = min(next, requestTimeout - (now - requestStarted)) }
            return next <= .zero ? .close : .lookAgain(next)
        }
    }

    mutating func channelInactive() -> Action {
        defer { state = .closed }
        if case .answering = state { return .cancelAnswer }
        return .none
    }
}
