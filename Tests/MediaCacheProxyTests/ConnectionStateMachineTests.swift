// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// A client connection's decisions, without a socket and without waiting: each event with a
/// time in, an action out.
@Suite(.stallLimit) struct ConnectionStateMachineTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    static let timeout = TimeAmount.seconds(120)
    static let requestTimeout = TimeAmount.seconds(10)
    static let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/a")

    static func machine(overCapacity: Bool = false) -> ConnectionStateMachine {
        ConnectionStateMachine(
            now: start, idleTimeout: timeout, requestTimeout: requestTimeout, isOverCapacity: overCapacity)
    }

    @Test func aRequestIsAnsweredWhenItsEndArrivesAndTheNextWaitsForTheAnswer() {
        var machine = Self.machine()
        #expect(machine.receive(.end, now: Self.start) == .none, "no head: nothing to answer")
        #expect(machine.receive(.head(Self.head), now: Self.start) == .none)
        #expect(machine.receive(.body, now: Self.start) == .none)
        #expect(machine.receive(.end, now: Self.start) == .answer(Self.head))
        #expect(machine.state == .answering(number: 1))
        #expect(machine.answerEnded(1, now: Self.start + .seconds(1)) == .none)
        #expect(machine.state == .waiting(head: nil))
        #expect(machine.receive(.head(Self.head), now: Self.start + .seconds(2)) == .none)
        #expect(machine.receive(.end, now: Self.start + .seconds(2)) == .answer(Self.head))
        #expect(machine.state == .answering(number: 2))
    }

    /// What the decoder gives while an answer is written (a pipelined request, a parser
    /// error) is held, and the socket not read, until the answer ends; then it is acted on in
    /// order, up to the next answer. A notice about an earlier answer changes nothing.
    @Test func aPipelinedRequestWaitsForTheAnswerBeforeIt() {
        var machine = Self.machine()
        _ = machine.receive(.head(Self.head), now: Self.start)
        #expect(machine.receive(.end, now: Self.start) == .answer(Self.head))
        #expect(machine.readsPaused)
        let second = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/b")
        let third = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/c")
        for event in [ConnectionStateMachine.Inbound.head(second), .end, .head(third), .end] {
            #expect(machine.receive(event, now: Self.start + .seconds(1)) == .none, "held")
        }
        #expect(machine.held.count == 4)
        #expect(machine.answerEnded(7, now: Self.start + .seconds(2)) == .none, "another answer's notice")
        #expect(machine.answerEnded(1, now: Self.start + .seconds(2)) == .answer(second))
        #expect(
            machine.state == .answering(number: 2) && machine.held == [.head(third), .end], "the third still waits")
        #expect(
            machine.timerFired(now: Self.start + .seconds(500)) == .lookAgain(Self.requestTimeout), "answering: not cut"
        )
        #expect(machine.answerEnded(2, now: Self.start + .seconds(501)) == .answer(third))
        #expect(machine.answerEnded(3, now: Self.start + .seconds(502)) == .none)
        #expect(!machine.readsPaused && machine.held.isEmpty)
        // A parser error behind an answer waits for it too, and then is refused; what was held
        // after it is dropped.
        var refused = Self.machine()
        _ = refused.receive(.head(Self.head), now: Self.start)
        _ = refused.receive(.end, now: Self.start)
        #expect(refused.errorCaught(HTTPParserError.invalidMethod, now: Self.start) == .none)
        _ = refused.receive(.head(second), now: Self.start)
        #expect(refused.answerEnded(1, now: Self.start + .seconds(1)) == .refuseMalformed(.invalidMethod))
        #expect(refused.state == .lingering && refused.held.isEmpty)
        #expect(refused.errorCaught(ChannelError.ioOnClosedChannel, now: Self.start) == .drop)
    }

    @Test func overTheLimitTheRequestIsRefused() {
        var machine = Self.machine(overCapacity: true)
        _ = machine.receive(.head(Self.head), now: Self.start)
        #expect(machine.receive(.end, now: Self.start) == .refuseOverCapacity(Self.head))
        #expect(machine.channelInactive() == .cancelAnswer)
    }

    @Test func aMalformedRequestIsRefusedOnceThenEverythingIsDropped() {
        var machine = Self.machine()
        #expect(machine.errorCaught(HTTPParserError.invalidMethod, now: Self.start) == .refuseMalformed(.invalidMethod))
        #expect(machine.state == .lingering)
        #expect(
            machine.errorCaught(HTTPParserError.headerOverflow, now: Self.start) == .drop,
            "a second parser error: dropped")
        #expect(
            machine.errorCaught(ChannelError.ioOnClosedChannel, now: Self.start) == .drop,
            "the decoder's complaint about more bytes: dropped")
        #expect(machine.receive(.end, now: Self.start) == .drop, "no request is answered after a refusal")
        // An error that is not the parser's goes on down the pipeline.
        var other = Self.machine()
        #expect(other.errorCaught(ChannelError.ioOnClosedChannel, now: Self.start) == .forward)
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
        _ = machine.receive(.head(Self.head), now: Self.start + .seconds(100))
        _ = machine.receive(.end, now: Self.start + .seconds(101))
        #expect(
            machine.timerFired(now: Self.start + .seconds(900)) == .lookAgain(Self.requestTimeout),
            "answering: never idle")
        _ = machine.answerEnded(1, now: Self.start + .seconds(900))
        #expect(
            machine.timerFired(now: Self.start + .seconds(930)) == .lookAgain(.seconds(90)),
            "an answer's end counts as activity")
        #expect(machine.timerFired(now: Self.start + .seconds(1020)) == .close)
        // Lingering after a refusal is idle too: the linger time closes it first, this at the latest.
        var refused = Self.machine()
        _ = refused.errorCaught(HTTPParserError.invalidMethod, now: Self.start)
        #expect(refused.timerFired(now: Self.start + .seconds(120)) == .close)
        #expect(refused.channelInactive() == .none)
        #expect(refused.timerFired(now: Self.start + .seconds(500)) == .none, "closed: nothing to do")
    }

    /// A request must arrive whole within the request timeout of its first bytes (a head sent
    /// a byte at a time is closed after it, not after the idle timeout); a whole request stops
    /// the clock, and a request pipelined behind a long answer is not timed while it waits.
    @Test func theRequestTimer() {
        var slow = Self.machine()
        _ = slow.bytesArrived(now: Self.start + .seconds(30))
        #expect(
            slow.timerFired(now: Self.start + .seconds(35)) == .lookAgain(.seconds(5)),
            "its first bytes start the clock")
        _ = slow.bytesArrived(now: Self.start + .seconds(39))
        #expect(slow.timerFired(now: Self.start + .seconds(40)) == .close, "more bytes do not move it")
        // A whole request stops it; the next request's first bytes start it again.
        var kept = Self.machine()
        _ = kept.bytesArrived(now: Self.start)
        _ = kept.receive(.head(Self.head), now: Self.start + .seconds(1))
        #expect(kept.receive(.end, now: Self.start + .seconds(2)) == .answer(Self.head))
        _ = kept.answerEnded(1, now: Self.start + .seconds(3))
        #expect(
            kept.timerFired(now: Self.start + .seconds(60)) == .lookAgain(.seconds(63)),
            "between requests only the idle timeout counts")
        #expect(
            kept.bytesArrived(now: Self.start + .seconds(70)) == .lookAgain(Self.requestTimeout),
            "the timer armed for the idle timeout is brought forward")
        #expect(kept.timerFired(now: Self.start + .seconds(80)) == .close)
        // Bytes of the next request that come while an answer is sent are timed once it ends.
        var pipelined = Self.machine()
        _ = pipelined.receive(.head(Self.head), now: Self.start)
        _ = pipelined.receive(.end, now: Self.start)
        #expect(pipelined.bytesArrived(now: Self.start + .seconds(1)) == .none, "answering: timed once the answer ends")
        #expect(
            pipelined.timerFired(now: Self.start + .seconds(300)) == .lookAgain(Self.requestTimeout),
            "answering: not cut")
        _ = pipelined.answerEnded(1, now: Self.start + .seconds(300))
        #expect(
            pipelined.receive(.head(Self.head), now: Self.start + .seconds(300)) == .none,
            "the held request comes whole")
        #expect(pipelined.receive(.end, now: Self.start + .seconds(300)) == .answer(Self.head))
        _ = pipelined.answerEnded(2, now: Self.start + .seconds(301))
        #expect(pipelined.timerFired(now: Self.start + .seconds(302)) == .lookAgain(.seconds(119)))
    }

    /// The timer as the connection's handler arms it: it looks only when the machine last said
    /// to, and a request that begins while it is armed for the idle timeout arms it anew. (The
    /// timer once looked while no request was under way, was armed for the idle timeout, and a
    /// head that then came a byte at a time held the connection for two minutes: two
    /// `HostileClientTests` failed on a loaded machine, whose client began to send after the
    /// first look.)
    struct ArmedTimer {
        var machine = ConnectionStateMachineTests.machine()
        var looksAt = ConnectionStateMachineTests.start + ConnectionStateMachineTests.machine().firstLook
        var closedAt: NIODeadline?

        /// Lets the timer look at every deadline it is armed for up to `time`.
        mutating func run(until time: NIODeadline) {
            while closedAt == nil, looksAt <= time {
                switch machine.timerFired(now: looksAt) {
                case .close: closedAt = looksAt
                case .lookAgain(let delay): looksAt = looksAt + delay
                default: return
                }
            }
        }

        mutating func bytesArrive(at time: NIODeadline) {
            run(until: time)
            if case .lookAgain(let delay) = machine.bytesArrived(now: time) { looksAt = time + delay }
        }

        mutating func receive(_ event: ConnectionStateMachine.Inbound, at time: NIODeadline)
            -> ConnectionStateMachine.Action
        {
            run(until: time)
            return machine.receive(event, now: time)
        }

        mutating func answerEnded(_ number: Int, at time: NIODeadline) {
            run(until: time)
            _ = machine.answerEnded(number, now: time)
        }
    }

    @Test func aRequestThatBeginsAfterAnIdleLookIsStillCutAtItsTimeout() {
        let start = Self.start
        // Connected, silent past the first look; then a head that never ends.
        var late = ArmedTimer()
        late.bytesArrive(at: start + .seconds(12))
        for second in 13...30 { late.bytesArrive(at: start + .seconds(Int64(second))) }
        late.run(until: start + .seconds(120))
        #expect(late.closedAt == start + .seconds(22), "cut a request timeout after its first bytes")
        // One request answered, the timer's look after it, then a head that never ends.
        var afterOne = ArmedTimer()
        afterOne.bytesArrive(at: start)
        _ = afterOne.receive(.head(Self.head), at: start)
        #expect(afterOne.receive(.end, at: start) == .answer(Self.head))
        afterOne.answerEnded(1, at: start + .seconds(1))
        afterOne.bytesArrive(at: start + .seconds(40))
        afterOne.run(until: start + .seconds(120))
        #expect(afterOne.closedAt == start + .seconds(50))
        // A connection that stays idle is closed at the idle timeout, not before.
        var idle = ArmedTimer()
        idle.run(until: start + .seconds(300))
        #expect(idle.closedAt == start + Self.timeout)
        // Bytes of the next request that came with the last one's end: timed from the end of
        // its answer, when the socket is read again.
        var pipelined = ArmedTimer()
        pipelined.bytesArrive(at: start)
        _ = pipelined.receive(.head(Self.head), at: start)
        _ = pipelined.receive(.end, at: start)
        pipelined.bytesArrive(at: start)
        pipelined.answerEnded(1, at: start + .seconds(100))
        pipelined.run(until: start + .seconds(300))
        #expect(pipelined.closedAt == start + .seconds(110))
    }
}
