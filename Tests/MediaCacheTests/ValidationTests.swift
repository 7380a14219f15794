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
}
