// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Testing

@testable import MediaCache

/// "May this stored version serve, and what is the origin asked": the decision alone, one row per
/// case, no origin, no store, no clock.
@Suite(.stallLimit) struct ValidationTests {
    typealias Held = Validation.Held
    typealias Stored = Validation.Stored
    typealias Asked = Validation.Asked

    /// A stored version: fresh unless said, a read that misses nothing.
    static func stored(_ change: (inout Stored) -> Void = { _ in }) -> Held {
        var stored = Stored()
        stored.isCurrent = true
        change(&stored)
        var held = Held()
        held.stored = stored
        return held
    }

    static func stale(_ change: (inout Stored) -> Void = { _ in }) -> Held {
        stored {
            $0.isCurrent = false
            change(&$0)
        }
    }

    static func asked(_ change: (inout Asked) -> Void = { _ in }) -> Asked {
        var asked = Asked()
        change(&asked)
        return asked
    }

    static func with(_ held: Held, _ change: (inout Held) -> Void) -> Held {
        var held = held
        change(&held)
        return held
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let held: Held
        let asked: Asked
        let decision: Validation.Decision
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "nothing stored, a read follows: a probe", held: Held(), asked: asked { $0.readsNext = true },
            decision: .probe(shared: true)),
        Row(
            name: "nothing stored, no read follows: a HEAD", held: Held(), asked: asked(),
            decision: .askHead(shared: true)),
        Row(
            name: "nothing stored, the player's own conditions: its own probe", held: Held(),
            asked: asked {
                $0.readsNext = true
                $0.hasConditions = true
            }, decision: .probe(shared: false)),
        Row(
            name: "a remembered origin answer", held: with(Held()) { $0.remembersAnswer = true }, asked: asked(),
            decision: .rememberedAnswer),
        Row(
            name: "a remembered answer, the player's own conditions: asked",
            held: with(Held()) { $0.remembersAnswer = true }, asked: asked { $0.hasConditions = true },
            decision: .askHead(shared: false)),
        Row(name: "fresh", held: stored(), asked: asked { $0.readsNext = true }, decision: .stored),
        Row(
            name: "fresh, a probe of it still setting up its download", held: with(stored()) { $0.probeRunning = true },
            asked: asked { $0.readsNext = true }, decision: .storedAfterRunningProbe),
        Row(
            name: "fresh, offline, a probe running: the stored version",
            held: with(stored()) {
                $0.probeRunning = true
                $0.isOffline = true
            }, asked: asked(), decision: .stored),
        Row(
            name: "fresh but older than the maximum age (a live playlist)",
            held: stored { $0.isYoungEnough = false }, asked: asked { $0.hasMaximumAge = true },
            decision: .revalidate(shared: true)),
        Row(
            name: "older than the maximum age, offline: the stored version",
            held: with(stored { $0.isYoungEnough = false }) { $0.isOffline = true },
            asked: asked { $0.hasMaximumAge = true }, decision: .stored),
        Row(
            name: "stored for other varying fields", held: stored { $0.varies = true }, asked: asked(),
            decision: .dropVariedVersion),
        Row(
            name: "stale: revalidated", held: stale(), asked: asked { $0.readsNext = true },
            decision: .revalidate(shared: true)),
        Row(
            name: "stale, a revalidation running: joined", held: with(stale()) { $0.probeRunning = true },
            asked: asked { $0.readsNext = true }, decision: .joinRunningProbe),
        Row(
            name: "stale, the player's own conditions: its own revalidation",
            held: with(stale()) { $0.probeRunning = true }, asked: asked { $0.hasConditions = true },
            decision: .revalidate(shared: false)),
        Row(
            name: "stale, whole, a seek in the play that began with it",
            held: stale { $0.isWholeInPlay = true }, asked: asked { $0.continuesPlay = true },
            decision: .staleWholeInPlay),
        Row(
            name: "stale, whole in a play, but no-cache or must-revalidate",
            held: stale {
                $0.isWholeInPlay = true
                $0.requiresRevalidation = true
            }, asked: asked { $0.continuesPlay = true }, decision: .revalidate(shared: true)),
        Row(
            name: "stale, whole in a play, a read from byte 0 (a new play)",
            held: stale { $0.isWholeInPlay = true }, asked: asked { $0.readsNext = true },
            decision: .revalidate(shared: true)),
        Row(
            name: "stale within stale-while-revalidate", held: stale { $0.mayServeWhileRevalidating = true },
            asked: asked(), decision: .staleWhileRevalidate),
        Row(
            name: "stale-while-revalidate while shutting down: refused",
            held: with(stale { $0.mayServeWhileRevalidating = true }) { $0.isShutDown = true }, asked: asked(),
            decision: .shutDown),
        Row(
            name: "stale-while-revalidate, a maximum age given: revalidated",
            held: stale { $0.mayServeWhileRevalidating = true }, asked: asked { $0.hasMaximumAge = true },
            decision: .revalidate(shared: true)),
        Row(
            name: "stale, the read misses bytes: If-Range on its request",
            held: stale {
                $0.hasIfRangeValidator = true
                $0.readMissesBytes = true
            }, asked: asked { $0.readsNext = true }, decision: .staleWithIfRange),
        Row(
            name: "stale, a hole, but no validator for If-Range",
            held: stale { $0.readMissesBytes = true }, asked: asked { $0.readsNext = true },
            decision: .revalidate(shared: true)),
        Row(
            name: "stale, a hole, the player's own conditions",
            held: stale {
                $0.hasIfRangeValidator = true
                $0.readMissesBytes = true
            },
            asked: asked {
                $0.readsNext = true
                $0.hasConditions = true
            }, decision: .revalidate(shared: false)),
        Row(
            name: "a body without a length coming for the read's start",
            held: with(Held()) { $0.growingBodyAtReadStart = true }, asked: asked { $0.readsNext = true },
            decision: .joinGrowingBody),
        Row(
            name: "the cache's own question while players wait", held: stale(),
            asked: asked { $0.isPlayer = false }, decision: .waitForPlayers),
        Row(
            name: "the cache's own question, after it waited",
            held: stale(),
            asked: asked {
                $0.isPlayer = false
                $0.hasYielded = true
            }, decision: .revalidate(shared: true)),
        Row(
            name: "the cache's own question, a question running: joined, no wait",
            held: with(stale()) { $0.probeRunning = true }, asked: asked { $0.isPlayer = false },
            decision: .joinRunningProbe),
        Row(
            name: "the cache's own question for a fresh version: served", held: stored(),
            asked: asked { $0.isPlayer = false }, decision: .stored),
        Row(
            name: "nothing stored while shutting down", held: with(Held()) { $0.isShutDown = true },
            asked: asked { $0.readsNext = true }, decision: .shutDown),
    ]

    @Test(arguments: rows) func eachCaseIsDecidedAsTheRulesSay(_ row: Row) {
        #expect(Validation.decide(held: row.held, asked: row.asked) == row.decision)
    }

    /// Every outcome has a row.
    @Test func everyDecisionHasARow() {
        let decided = Set(Self.rows.map { "\($0.decision)" })
        for decision: Validation.Decision in [
            .rememberedAnswer, .dropVariedVersion, .joinGrowingBody, .stored, .storedAfterRunningProbe,
            .staleWholeInPlay, .staleWhileRevalidate, .staleWithIfRange, .waitForPlayers, .shutDown,
            .joinRunningProbe, .revalidate(shared: true), .revalidate(shared: false), .probe(shared: true),
            .probe(shared: false), .askHead(shared: true), .askHead(shared: false),
        ] {
            #expect(decided.contains("\(decision)"), "no row decides \(decision)")
        }
    }

    // MARK: What an answer means

    struct AnswerRow: Sendable, CustomTestStringConvertible {
        let name: String
        let answer: Validation.Answer
        let questioned: Validation.Questioned
        let outcome: Validation.Outcome
        var testDescription: String { name }
    }

    static func revalidation(_ change: (inout Validation.Questioned) -> Void = { _ in }) -> Validation.Questioned {
        var questioned = Validation.Questioned()
        questioned.revalidates = true
        change(&questioned)
        return questioned
    }

    static let probe = Validation.Questioned()

    static let answerRows: [AnswerRow] = [
        AnswerRow(
            name: "a 304 to a revalidation confirms", answer: .notModified, questioned: revalidation(),
            outcome: .confirm),
        AnswerRow(
            name: "a 304 to a probe is the player's own", answer: .notModified, questioned: probe,
            outcome: .passNotModified),
        AnswerRow(
            name: "the same version's body is adopted as it", answer: .body(provenSame: true),
            questioned: revalidation(), outcome: .adopt(newVersion: false)),
        AnswerRow(
            name: "another version's body replaces the stored one", answer: .body(provenSame: false),
            questioned: revalidation(), outcome: .adopt(newVersion: true)),
        AnswerRow(
            name: "a probe's body is adopted", answer: .body(provenSame: false), questioned: probe,
            outcome: .adopt(newVersion: false)),
        AnswerRow(
            name: "a failed origin: stale served", answer: .failed, questioned: revalidation(), outcome: .serveStale),
        AnswerRow(
            name: "a failed origin, must-revalidate: failed", answer: .failed,
            questioned: revalidation { $0.requiresRevalidation = true }, outcome: .fail(.mustRevalidate)),
        AnswerRow(
            name: "a failed origin, stale never served: failed", answer: .failed,
            questioned: revalidation { $0.servesStaleOnFailure = false }, outcome: .fail(.noStaleOnFailure)),
        AnswerRow(
            name: "a failed origin, a whole pin: stale served", answer: .failed,
            questioned: revalidation { $0.isWholePin = true }, outcome: .serveStale),
        AnswerRow(name: "a failed probe fails", answer: .failed, questioned: probe, outcome: .fail(.originError)),
        AnswerRow(
            name: "a 404 of a whole pin: the pin plays", answer: .refused(status: 404),
            questioned: revalidation { $0.isWholePin = true }, outcome: .servePinned),
        AnswerRow(
            name: "a 410 of a whole pin: the pin plays", answer: .refused(status: 410),
            questioned: revalidation { $0.isWholePin = true }, outcome: .servePinned),
        AnswerRow(
            name: "a 403 of a whole pin is the origin's", answer: .refused(status: 403),
            questioned: revalidation { $0.isWholePin = true }, outcome: .fail(.originError)),
        AnswerRow(
            name: "a 404 of what is not pinned whole is the origin's", answer: .refused(status: 404),
            questioned: revalidation(), outcome: .fail(.originError)),
        AnswerRow(
            name: "a 404 to a probe is the origin's", answer: .refused(status: 404), questioned: probe,
            outcome: .fail(.originError)),
        AnswerRow(
            name: "a 416 to a probe: a HEAD", answer: .rangeNotSatisfiable, questioned: probe, outcome: .askHead),
        AnswerRow(
            name: "a 416 to a revalidation fails", answer: .rangeNotSatisfiable, questioned: revalidation(),
            outcome: .fail(.originError)),
        AnswerRow(
            name: "an answer the cache refused fails", answer: .otherError, questioned: revalidation(),
            outcome: .fail(.originError)),
    ]

    @Test(arguments: answerRows) func eachAnswerMeansWhatTheRulesSay(_ row: AnswerRow) {
        #expect(Validation.outcome(of: row.answer, questioned: row.questioned) == row.outcome)
    }

    /// Every outcome of an answer has a row, and so does every kind of answer.
    @Test func everyOutcomeAndAnswerHasARow() {
        let outcomes = Set(Self.answerRows.map { "\($0.outcome)" })
        for outcome: Validation.Outcome in [
            .serveStale, .servePinned, .confirm, .adopt(newVersion: true), .adopt(newVersion: false), .askHead,
            .passNotModified, .fail(.originError), .fail(.noStaleOnFailure), .fail(.mustRevalidate),
        ] {
            #expect(outcomes.contains("\(outcome)"), "no row means \(outcome)")
        }
        let answers = Set(Self.answerRows.map { "\($0.answer)".prefix { $0 != "(" } })
        for answer: Validation.Answer in [
            .failed, .refused(status: 404), .rangeNotSatisfiable, .otherError, .notModified, .body(provenSame: true),
        ] {
            #expect(answers.contains("\(answer)".prefix { $0 != "(" }), "no row answers \(answer)")
        }
    }

    /// What an origin request's error is, as an answer: a failure first (a `5xx` is one), then
    /// a `416`, then the origin's own status, else another error.
    @Test func anErrorIsSortedIntoItsAnswer() {
        let unreachable = CacheError(.originUnavailable, "down")
        #expect(Validation.Answer(unreachable) == .failed)
        #expect(Validation.Answer(CacheError(.rangeNotSatisfiable, "none")) == .rangeNotSatisfiable)
        let gone = CacheError(answer: OriginAnswer(status: 410, reason: "Gone", headers: [], body: []), url: "u")
        #expect(Validation.Answer(gone) == .refused(status: 410))
        let broken = CacheError(answer: OriginAnswer(status: 503, reason: "Busy", headers: [], body: []), url: "u")
        #expect(Validation.Answer(broken) == .failed)
        #expect(Validation.Answer(CacheError(.offline, "offline")) == .otherError)
    }
}
