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
    static let requestTimeout = TimeAmount.seconds(10)
    static let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/a")

    static func machine(overCapacity: Bool = false) -> ConnectionStateMachine {
        ConnectionStateMachine(now: start, idleTimeout: timeout, requestTimeout: requestTimeout, isOverCapacity: overCapacity)
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
        #expect(machine.timerFired(now: Self.start + .seconds(500)) == .lookAgain(Self.requestTimeout))
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
    /// closed once nothing happened on it for the idle timeout, and looked at again when it
    /// would be.
    @Test func theIdleTimer() {
        var machine = Self.machine()
        #expect(machine.firstLook == Self.requestTimeout, "the sooner deadline")
        #expect(machine.timerFired(now: Self.start) == .lookAgain(Self.timeout))
        #expect(machine.timerFired(now: Self.start + .seconds(20)) == .lookAgain(.seconds(100)))
        #expect(machine.timerFired(now: Self.start + .seconds(120)) == .close)
        _ = machine.requestHead(Self.head, now: Self.start + .seconds(100))
        _ = machine.requestEnd(now: Self.start + .seconds(101))
        #expect(machine.timerFired(now: Self.start + .seconds(900)) == .lookAgain(Self.requestTimeout), "answering: never idle")
        _ = machine.answerEnded(1, now: Self.start + .seconds(900))
        #expect(machine.timerFired(now: Self.start + .seconds(930)) == .lookAgain(.seconds(90)), "an answer's end counts as activity")
        #expect(machine.timerFired(now: Self.start + .seconds(1020)) == .close)
        // Lingering after a refusal is idle too: the linger time closes it first, this at the latest.
        var refused = Self.machine()
        _ = refused.errorCaught(HTTPParserError.invalidMethod)
        #expect(refused.timerFired(now: Self.start + .seconds(120)) == .close)
        #expect(refused.channelInactive() == .none)
        #expect(refused.timerFired(now: Self.start + .seconds(500)) == .none, "closed: nothing to do")
    }

    /// A request must arrive whole within the request timeout of its first bytes (a head sent
    /// a byte at a time is closed after it, not after the idle timeout); a whole request stops
    /// the clock, and a request pipelined behind a long answer is not timed while it waits.
    @Test func theRequestTimer() {
        var slow = Self.machine()
        slow.bytesArrived(now: Self.start + .seconds(30))
        #expect(slow.timerFired(now: Self.start + .seconds(35)) == .lookAgain(.seconds(5)), "its first bytes start the clock")
        slow.bytesArrived(now: Self.start + .seconds(39))
        #expect(slow.timerFired(now: Self.start + .seconds(40)) == .close, "more bytes do not move it")
        // A whole request stops it; the next request's first bytes start it again.
        var kept = Self.machine()
        kept.bytesArrived(now: Self.start)
        _ = kept.requestHead(Self.head, now: Self.start + .seconds(1))
        #expect(kept.requestEnd(now: Self.start + .seconds(2)) == .answer(Self.head))
        _ = kept.answerEnded(1, now: Self.start + .seconds(3))
        #expect(kept.timerFired(now: Self.start + .seconds(60)) == .lookAgain(.seconds(63)), "between requests only the idle timeout counts")
        kept.bytesArrived(now: Self.start + .seconds(70))
        #expect(kept.timerFired(now: Self.start + .seconds(80)) == .close)
        // Bytes of the next request that come while an answer is sent are timed once it ends.
        var pipelined = Self.machine()
        _ = pipelined.requestHead(Self.head, now: Self.start)
        _ = pipelined.requestEnd(now: Self.start)
        pipelined.bytesArrived(now: Self.start + .seconds(1))
        #expect(pipelined.timerFired(now: Self.start + .seconds(300)) == .lookAgain(Self.requestTimeout), "answering: not cut")
        _ = pipelined.answerEnded(1, now: Self.start + .seconds(300))
        #expect(pipelined.requestHead(Self.head, now: Self.start + .seconds(300)) == .none, "the held request comes whole")
        #expect(pipelined.requestEnd(now: Self.start + .seconds(300)) == .answer(Self.head))
        _ = pipelined.answerEnded(2, now: Self.start + .seconds(301))
        #expect(pipelined.timerFired(now: Self.start + .seconds(302)) == .lookAgain(.seconds(119)))
    }
}
