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
        /// Answering a request: the connection's `number`th. What the decoder gives meanwhile
        /// (a pipelined request) is held until it ends, and the socket is not read.
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

    /// What the decoder gives, as the machine needs it (a body's bytes are not: the proxy
    /// serves `GET` and `HEAD`).
    enum Inbound: Equatable {
        case head(HTTPRequestHead)
        case body
        case end
        case parserError(HTTPParserError)
    }

    private(set) var state: State = .waiting(head: nil)
    /// What came while an answer was being written, in order: acted on once it ends.
    private(set) var held: [Inbound] = []
    /// How many requests the connection was given to answer.
    private(set) var answers = 0
    /// When a request's bytes last arrived or an answer ended.
    private(set) var lastActivity: NIODeadline
    /// When the request under way began to arrive; `nil` between requests.
    private(set) var requestStarted: NIODeadline?
    /// When the armed timer looks next. Between requests it may be as far as the idle
    /// timeout; a request that begins meanwhile brings it forward (``bytesArrived(now:)``).
    private(set) var nextLook: NIODeadline
    /// Opened while the connection limit was reached: its request is refused.
    let isOverCapacity: Bool
    let idleTimeout: TimeAmount
    let requestTimeout: TimeAmount

    init(now: NIODeadline, idleTimeout: TimeAmount, requestTimeout: TimeAmount, isOverCapacity: Bool) {
        lastActivity = now
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
        self.isOverCapacity = isOverCapacity
        nextLook = now + min(idleTimeout, requestTimeout)
    }

    /// How long after it is armed the timer first looks: the sooner of the two deadlines.
    var firstLook: TimeAmount { min(idleTimeout, requestTimeout) }

    /// Bytes came from the client (before they are parsed): a request begins to arrive, if
    /// none was under way. When the timer was armed for the idle timeout (it looked while no
    /// request was under way), it must look again when this request's time is up, not then:
    /// `.lookAgain` says to arm it anew.
    mutating func bytesArrived(now: NIODeadline) -> Action {
        guard requestStarted == nil else { return .none }
        requestStarted = now
        let deadline = now + requestTimeout
        guard nextLook > deadline else { return .none }
        nextLook = deadline
        return .lookAgain(requestTimeout)
    }

    /// Whether the socket is not to be read now: while an answer is written, a pipelined
    /// request waits, and so does the client (reading on would only fill ``held``).
    var readsPaused: Bool {
        if case .answering = state { true } else { false }
    }

    /// What the decoder gave: held while an answer is being written (pipelined requests are
    /// answered in order, one at a time), else acted on.
    mutating func receive(_ event: Inbound, now: NIODeadline) -> Action {
        switch state {
        case .answering:
            held.append(event)
            return .none
        case .lingering:
            return .drop  // after a refused request
        case .waiting, .closed:
            return act(on: event, now: now)
        }
    }

    private mutating func act(on event: Inbound, now: NIODeadline) -> Action {
        switch event {
        case .head(let head):
            lastActivity = now
            // The next request's bytes may have come with the last one's end.
            if requestStarted == nil { requestStarted = now }
            if case .waiting = state { state = .waiting(head: head) }
            return .none
        case .body:
            lastActivity = now
            return .none
        case .end:
            lastActivity = now
            requestStarted = nil  // it arrived whole
            guard case .waiting(let head?) = state else { return .none }
            answers += 1
            state = .answering(number: answers)
            return isOverCapacity ? .refuseOverCapacity(head) : .answer(head)
        case .parserError(let error):
            // Answered once; what follows is dropped.
            state = .lingering
            held = []
            return .refuseMalformed(error)
        }
    }

    /// The answer to the connection's `number`th request ended (written whole, or given up
    /// on): what was held meanwhile is acted on, up to the next thing to do (an answer, a
    /// refusal), the rest still held. A notice about an earlier answer changes nothing.
    mutating func answerEnded(_ number: Int, now: NIODeadline) -> Action {
        guard state == .answering(number: number) else { return .none }
        lastActivity = now
        state = .waiting(head: nil)
        // Bytes of the next request that came with this one could not be read meanwhile: they
        // are timed from now.
        if requestStarted != nil { requestStarted = now }
        while !held.isEmpty, !readsPaused, state != .lingering {
            let action = act(on: held.removeFirst(), now: now)
            if action != .none { return action }
        }
        return .none
    }

    /// An error came up the pipeline: a request the parser refused is held or answered as any
    /// request is (once; after that, everything is dropped); other errors go on.
    mutating func errorCaught(_ error: any Error, now: NIODeadline) -> Action {
        if state == .lingering { return .drop }
        guard let parserError = error as? HTTPParserError else { return .forward }
        return receive(.parserError(parserError), now: now)
    }

    /// The timer fired: close a connection whose request has not arrived whole within the
    /// request timeout of its first bytes, or that has neither sent a request byte nor been
    /// answered for the idle timeout (never one being answered: a long answer is not cut, and a
    /// request pipelined behind it waits with it); else look again when a deadline would pass.
    mutating func timerFired(now: NIODeadline) -> Action {
        switch state {
        case .closed: return .none
        case .answering:
            nextLook = now + firstLook
            return .lookAgain(firstLook)
        case .waiting, .lingering:
            var next = idleTimeout - (now - lastActivity)
            if let requestStarted { next = min(next, requestTimeout - (now - requestStarted)) }
            guard next > .zero else { return .close }
            nextLook = now + next
            return .lookAgain(next)
        }
    }

    mutating func channelInactive() -> Action {
        defer {
            state = .closed
            held = []
        }
        if case .answering = state { return .cancelAnswer }
        return .none
    }
}
