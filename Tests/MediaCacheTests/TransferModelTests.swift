// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Liveness as an invariant: the connection budgets and the transfers' policies driven together
/// (``TransferModel``) over thousands of random schedules — players with open and closed ranges,
/// seeks and hang-ups; fills; pins; preloads; read-aheads; recordings; two or three hosts, some
/// asked in pieces — on a manual clock, checked after every step and once everything drained.
@Suite(.stallLimit, .cpuBound) struct TransferModelTests {
    static let schedules = 2_000
    static let steps = 200

    /// After every step: the budgets count exactly what transfers hold, and no connection is held
    /// by work that moves no bytes while a player waits for one. After the drain: every player
    /// got its bytes or hung up, every connection taken was returned, every fill completed or
    /// stopped for a stated reason.
    @Test func everyScheduleKeepsPlayersServedAndConnectionsReturned() {
        var fills = 0
        var stopped: [String: Int] = [:]
        var pieces = (readOn: 0, waited: 0)
        for seed in 0..<UInt64(Self.schedules) {
            var model = TransferModel(seed: seed, variant: .current)
            for _ in 0..<Self.steps where model.violations.isEmpty { model.step() }
            if model.violations.isEmpty { model.drain() }
            guard model.violations.isEmpty else {
                Issue.record(
                    "seed \(seed): \(model.violations.first!)\n\(model.schedule.suffix(40).joined(separator: "\n"))")
                return
            }
            fills += model.fillOutcomes.count
            pieces.readOn += model.piecesReadOn
            pieces.waited += model.piecesWaited
            for outcome in model.fillOutcomes { stopped[outcome, default: 0] += 1 }
        }
        // The schedules reach what they are for: fills that complete and fills that stop.
        #expect(fills > Self.schedules, "\(fills) fills in \(Self.schedules) schedules")
        #expect(stopped["completed", default: 0] > 0 && stopped["stopped: superseded", default: 0] > 0, "\(stopped)")
        #expect(stopped["stopped: metered", default: 0] > 0, "\(stopped)")
        // Hosts asked in pieces: bodies read on with pieces asked ahead, some of which waited.
        #expect(pieces.readOn > Self.schedules && pieces.waited > 0, "\(pieces)")
    }

    /// The model finds what e48a7a1 did: a fill that began on a probe's answer kept that answer's
    /// connection and asked for the rest with another, so fills came to hold every connection of
    /// a host while a player waited for one. The shortest failing schedule of the first seeds is
    /// printed (the closing note of issue 75 names it).
    @Test func e48a7a1sRetainedProbeAnswersAreFound() {
        var failing = 0
        var shortest: (seed: UInt64, model: TransferModel)?
        for seed in 0..<UInt64(60) {
            var model = TransferModel(seed: seed, variant: .e48a7a1)
            for _ in 0..<Self.steps where model.violations.isEmpty { model.step() }
            if model.violations.isEmpty { model.drain(bound: 2_000) }
            guard let violation = model.violations.first else { continue }
            failing += 1
            // The issue's case: a fill holding what a player waits for.
            guard violation.contains("(a fill)") else { continue }
            if shortest == nil || model.steps < shortest!.model.steps { shortest = (seed, model) }
        }
        #expect(failing > 12, "\(failing) of 60 schedules fail under e48a7a1's rules")
        let found = try? #require(shortest, "no schedule shows a fill holding a connection a player waits for")
        guard let found else { return }
        print(
            "e48a7a1's rules: \(failing) of 60 schedules fail; the shortest with a fill, seed \(found.seed), after "
                + "\(found.model.steps) events: \(found.model.violations.first!)\n"
                + found.model.schedule.joined(separator: "\n"))
    }
}
