// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// A client connection's decisions, without a socket and without waiting: each event with a
/// time in, an action out.
@Suite struct ConnectionStateMachineTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    static let timeout = TimeAmount.seconds(120)
    static let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/a")

    static func machine(overCapacity: Bool = false) -> ConnectionStateMachine {
        ConnectionStateMachine(now: start, idleTimeout: timeout, isOverCapacity: overCapacity)
    }

    @Test func aRequestIsAnsweredWhenItsEndArrivesAndTheNextWaitsForTheAnswer() {
        var machine = Self.machine()
        #expect(machine.requestEnd(now: Self.start) == .none, "no head: nothing to answer")
        #expect(machine.requestHead(Self.head, now: Self.start) == .none)
        #expect(machine.requestBody(now: Self.start) == .none)
        #expect(machine.requestEnd(now: Self.start) == .answer(Self.head))
        #expect(machine.state == .answering(number: 1))
        #expect(machine.answerEnded(1, now: Self.start + .seconds(1)) == .none)
        #expect(machine.state == .waiting(head: nil))
        #expect(machine.requestHead(Self.head, now: Self.start + .seconds(2)) == .none)
        #expect(machine.requestEnd(now: Self.start + .seconds(2)) == .answer(Self.head))
        #expect(machine.state == .answering(number: 2))
    }

    /// The next request's head can come before the notice that the answer before it ended
    /// (the pipeline handler lets it through once the end is written): the late notice must
    /// not end the new answer, which would let the idle timer cut it.
    @Test func aLateNoticeOfAnEarlierAnswerChangesNothing() {
        var machine = Self.machine()
        _ = machine.requestHead(Self.head, now: Self.start)
        #expect(machine.requestEnd(now: Self.start) == .answer(Self.head))
        _ = machine.requestHead(Self.head, now: Self.start + .seconds(1))
        #expect(machine.requestEnd(now: Self.start + .seconds(1)) == .answer(Self.head), "the next request is answered")
        #expect(machine.answerEnded(1, now: Self.start + .seconds(2)) == .none)
        #expect(machine.state == .answering(number: 2), "still answering the second")
        #expect(machine.idleTimerFired(now: Self.start + .seconds(500)) == .lookAgain(Self.timeout))
    }

    @Test func overTheLimitTheRequestIsRefused() {
        var machine = Self.machine(overCapacity: true)
        _ = machine.requestHead(Self.head, now: Self.start)
        #expect(machine.requestEnd(now: Self.start) == .refuseOverCapacity(Self.head))
        #expect(machine.channelInactive() == .cancelAnswer)
    }

    @Test func aMalformedRequestIsRefusedOnceThenEverythingIsDropped() {
        var machine = Self.machine()
        #expect(machine.errorCaught(HTTPParserError.invalidMethod) == .refuseMalformed(.invalidMethod))
        #expect(machine.state == .lingering)
        #expect(machine.errorCaught(HTTPParserError.headerOverflow) == .drop, "a second parser error: dropped")
        #expect(machine.errorCaught(ChannelError.ioOnClosedChannel) == .drop, "the decoder's complaint about more bytes: dropped")
        #expect(machine.requestEnd(now: Self.start) == .none, "no request is answered after a refusal")
        // An error that is not the parser's goes on down the pipeline.
        var other = Self.machine()
        #expect(other.errorCaught(ChannelError.ioOnClosedChannel) == .forward)
    }

    /// An answer being sent is never cut, however long it takes; otherwise a connection is
    /// closed once nothing happened on it for the timeout, and looked at again when it would be.
    @Test func theIdleTimer() {
        var machine = Self.machine()
        #expect(machine.idleTimerFired(now: Self.start) == .lookAgain(Self.timeout))
        #expect(machine.idleTimerFired(now: Self.start + .seconds(20)) == .lookAgain(.seconds(100)))
        #expect(machine.idleTimerFired(now: Self.start + .seconds(120)) == .close)
        _ = machine.requestHead(Self.head, now: Self.start + .seconds(100))
        #expect(machine.idleTimerFired(now: Self.start + .seconds(130)) == .lookAgain(.seconds(90)), "a request's bytes count as activity")
        _ = machine.requestEnd(now: Self.start + .seconds(130))
        #expect(machine.idleTimerFired(now: Self.start + .seconds(900)) == .lookAgain(Self.timeout), "answering: never idle")
        _ = machine.answerEnded(1, now: Self.start + .seconds(900))
        #expect(machine.idleTimerFired(now: Self.start + .seconds(1020)) == .close)
        // Lingering after a refusal is idle too: the linger time closes it first, this at the latest.
        var refused = Self.machine()
        _ = refused.errorCaught(HTTPParserError.invalidMethod)
        #expect(refused.idleTimerFired(now: Self.start + .seconds(120)) == .close)
        #expect(refused.channelInactive() == .none)
        #expect(refused.idleTimerFired(now: Self.start + .seconds(500)) == .none, "closed: nothing to do")
    }
}
