// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The store's usage history and the eviction marks, as the index keeps them in text: what is
/// written reads back the same, and any text read from a damaged index is a value within its
/// bounds or refused, never a trap.
@Suite(.stallLimit, .cpuBound) struct UsageHistoryTests {
    /// Random histories: days counted over months, evictions of every reason.
    @Test(arguments: 0..<UInt64(20)) func historiesReadBackAsWritten(seed: UInt64) throws {
        var random = Mutator(lines: [""], seed: seed)
        var history = UsageHistory()
        var date = Date(timeIntervalSince1970: 1_800_000_000)
        for _ in 0..<400 {
            date += Double(random.below(200_000))
            history.served(fromCache: Int64(random.below(1 << 30)), fromOrigin: Int64(random.below(1 << 20)), at: date)
            let reason = EvictionPolicy.Reason.allCases[random.below(EvictionPolicy.Reason.allCases.count)]
            history.evicted(Int64(random.below(1 << 24)), for: reason)
        }
        #expect(history.days.count == UsageHistory.daysKept && history.earlier.fromCache > 0)
        let again = try #require(UsageHistory(encoded: history.encoded))
        #expect(again == history && again.fromCache == history.fromCache && again.fromOrigin == history.fromOrigin)
    }

    /// Texts made of a written history and of marks, mutated: each reads as values within their
    /// bounds that write back as read, or is refused.
    @Test func damagedTextsAreReadWithinBoundsOrRefused() throws {
        var history = UsageHistory()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for day in 0..<5 { history.served(fromCache: 1_000, fromOrigin: 10, at: start + Double(day) * 86_400) }
        history.evicted(5_000, for: .tail)
        let marks = [
            EvictionPolicy.Mark(queue: .main, plays: 2, playedEnd: 123_456, order: 9, created: 3).encoded,
            "0,0,0,0,0",
        ]
        let outcomes = try Mutator.run("usage", lines: history.encoded.split(separator: "\n").map(String.init) + marks)
        { input in
            var label = "refused"
            if let read = UsageHistory(encoded: input) {
                guard read.days.count <= UsageHistory.daysKept,
                    read.days.allSatisfy({ $0.fromCache >= 0 && $0.fromOrigin >= 0 }),
                    UsageHistory(encoded: read.encoded) == read
                else { return ("history", "\(input.debugDescription) read as \(read)") }
                label = "history"
            }
            if let mark = EvictionPolicy.Mark(encoded: input) {
                guard mark.plays <= EvictionPolicy.maxPlays, mark.playedEnd >= 0,
                    EvictionPolicy.Mark(encoded: mark.encoded) == mark
                else { return ("mark", "\(input.debugDescription) read as \(mark)") }
                label = "mark"
            }
            return (label, nil)
        }
        try Mutator.expectVaried(outcomes, ["history", "mark", "refused"])
    }
}
