// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// A prefetch's progress as its caller hears it, while concurrent fetches change it.
@Suite(.stallLimit) struct PrefetchTrackerTests {
    /// Threads report changes at once; the caller hears them in the order they were made, never a
    /// count lower than one heard before, and last the final count. (Found under load in the
    /// HLS prefetch test: a fetch that changed the progress first could report it after another
    /// fetch's later change.)
    @Test func progressIsHeardInTheOrderItChanged() {
        let items = (0..<16).map { PrefetchItem(url: URL(string: "https://o.example/s\($0).ts")!, range: nil) }
        let heard = Mutex<[Int64]>([])
        let tracker = PrefetchTracker(items: items, playlists: []) { progress in
            heard.withLock { $0.append(progress.bytesDone) }
        }
        let threads = 4
        let changes = 5_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<changes { tracker.report { $0.bytesDone += 1 } }
        }
        let counts = heard.withLock { $0 }
        #expect(
            counts.first == 0 && counts.last == Int64(threads * changes), "\(counts.prefix(3)) … \(counts.suffix(3))")
        let backwards = zip(counts, counts.dropFirst()).filter { $0 >= $1 }
        #expect(backwards.count == 0, "reports that did not move forward, e.g. \(backwards.prefix(3))")
    }
}
