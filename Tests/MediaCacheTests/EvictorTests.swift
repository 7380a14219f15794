// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

@Suite(.stallLimit) struct EvictorTests {
    let now = Date(timeIntervalSince1970: 1_000_000)

    func candidate(_ name: String, bytes: Int64, age: TimeInterval, pinned: Bool = false) -> Evictor.Candidate {
        Evictor.Candidate(key: CacheKey(name), byteCount: bytes, lastAccess: now - age, isPinned: pinned)
    }

    @Test func leastRecentlyUsedGoFirstUntilTheTotalFits() {
        let evictor = Evictor(maxBytes: 250, maxAge: nil)
        let candidates = [
            candidate("newest", bytes: 100, age: 1),
            candidate("oldest", bytes: 100, age: 30),
            candidate("middle", bytes: 100, age: 10),
        ]
        #expect(evictor.victims(of: candidates, totalBytes: 300, now: now) == [CacheKey("oldest")])
        #expect(
            evictor.victims(of: candidates, totalBytes: 300, incomingBytes: 100, now: now) == [
                CacheKey("oldest"), CacheKey("middle"),
            ])
        #expect(evictor.victims(of: candidates, totalBytes: 250, now: now).isEmpty)
    }

    @Test func pinnedEntriesAreNeverChosen() {
        let evictor = Evictor(maxBytes: 100, maxAge: 5)
        let candidates = [
            candidate("old-pinned", bytes: 100, age: 60, pinned: true),
            candidate("new", bytes: 100, age: 1),
        ]
        #expect(evictor.victims(of: candidates, totalBytes: 200, now: now) == [CacheKey("new")])
    }

    @Test func expiredEntriesGoEvenUnderTheLimit() {
        let evictor = Evictor(maxBytes: 1_000, maxAge: 60)
        let candidates = [
            candidate("fresh", bytes: 10, age: 59),
            candidate("stale", bytes: 10, age: 61),
        ]
        #expect(evictor.victims(of: candidates, totalBytes: 20, now: now) == [CacheKey("stale")])
    }
}
