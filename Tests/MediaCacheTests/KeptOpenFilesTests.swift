// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The files a store keeps open with no handle on them: never more than the limit, and the
/// ones closed are always those let go longest ago (a walk of random keeps and forgets,
/// checked against a plain list after every step).
@Suite(.stallLimit) struct KeptOpenFilesTests {
    @Test(arguments: [1, 3, 32]) func theLeastRecentlyLetGoCloseFirstAndNoMoreThanTheLimitStay(limit: Int) {
        var random = SplitMix(seed: UInt64(limit))
        var kept = KeptOpenFiles(limit: limit)
        var model: [CacheKey] = []  // least recently let go first
        var closedInAll = 0
        for step in 0..<20_000 {
            let key = CacheKey("k\(Int.random(in: 0..<(limit * 3 + 2), using: &random))")
            if Int.random(in: 0..<10, using: &random) == 0 {
                kept.forget(key)
                model.removeAll { $0 == key }
            } else {
                let closed = kept.keep(key)
                model.removeAll { $0 == key }
                model.append(key)
                let expected = Array(model.prefix(max(0, model.count - limit)))
                model.removeFirst(expected.count)
                #expect(closed == expected, "step \(step)")
                closedInAll += closed.count
            }
            #expect(kept.count == model.count && kept.count <= limit, "step \(step)")
        }
        #expect(closedInAll > 1_000, "the walk reached the limit")
    }

    @Test func theLimitIsAnEighthOfTheDescriptorsWithinBounds() {
        #expect(KeptOpenFiles.limit(descriptors: 256) == 32)
        #expect(KeptOpenFiles.limit(descriptors: 1_024) == 128)
        #expect(KeptOpenFiles.limit(descriptors: 65_536) == 2_048)
        #expect(KeptOpenFiles.limit(descriptors: Int.max) == 2_048)
        #expect(KeptOpenFiles.forThisProcess >= 32 && KeptOpenFiles.forThisProcess <= 2_048)
    }
}
