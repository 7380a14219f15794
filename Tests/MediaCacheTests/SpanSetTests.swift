// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCache

@Suite(.stallLimit, .cpuBound) struct SpanSetTests {
    @Test func touchingAndOverlappingSpansMerge() {
        var set = SpanSet()
        set.insert(ByteRange(10, 20))
        set.insert(ByteRange(30, 40))
        #expect(set.spans == [ByteRange(10, 20), ByteRange(30, 40)])
        set.insert(ByteRange(20, 30))  // touches both
        #expect(set.spans == [ByteRange(10, 40)])
        set.insert(ByteRange(0, 5))
        set.insert(ByteRange(3, 12))
        #expect(set.spans == [ByteRange(0, 40)])
        #expect(set.byteCount == 40)
    }

    @Test func holesAndSegments() {
        let set = SpanSet([ByteRange(10, 20), ByteRange(30, 40)])
        #expect(set.holes(in: ByteRange(0, 50)) == [ByteRange(0, 10), ByteRange(20, 30), ByteRange(40, 50)])
        #expect(set.holes(in: ByteRange(12, 18)).isEmpty)
        #expect(set.contains(ByteRange(12, 18)))
        #expect(!set.contains(ByteRange(15, 35)))
        let segments = set.segments(in: ByteRange(15, 35))
        #expect(segments.map(\.range) == [ByteRange(15, 20), ByteRange(20, 30), ByteRange(30, 35)])
        #expect(segments.map(\.isCached) == [true, false, true])
    }

    /// Thousands of random inserts, removals and queries checked against a bitmap.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func matchesReferenceModel(seed: UInt64) {
        var random = SplitMix(seed: seed)
        let size = 2_000
        var model = [Bool](repeating: false, count: size)
        var set = SpanSet()
        for step in 0..<3_000 {
            let a = Int(random.next() % UInt64(size))
            let b = min(size, a + Int(random.next() % 120))
            let range = ByteRange(Int64(a), Int64(b))
            if random.next() % 5 == 0 {
                set.remove(range)
                for i in a..<b { model[i] = false }
            } else {
                set.insert(range)
                for i in a..<b { model[i] = true }
            }
            // Invariants: sorted, disjoint, never touching, never empty.
            for (left, right) in zip(set.spans, set.spans.dropFirst()) {
                #expect(left.upperBound < right.lowerBound)
            }
            #expect(set.spans.allSatisfy { !$0.isEmpty })
            #expect(set.byteCount == Int64(model.filter { $0 }.count))

            let q = Int(random.next() % UInt64(size))
            let r = min(size, q + Int(random.next() % 300) + 1)
            let query = ByteRange(Int64(q), Int64(r))
            #expect(set.holes(in: query) == Self.runs(of: false, in: model, q..<r), "step \(step)")
            #expect(set.spans(in: query) == Self.runs(of: true, in: model, q..<r), "step \(step)")
            #expect(set.clipped(to: query).spans == Self.runs(of: true, in: model, q..<r), "step \(step)")
            #expect(set.byteCount(in: query) == Int64(model[q..<r].filter { $0 }.count), "step \(step)")
            #expect(set.contains(query) == model[q..<r].allSatisfy { $0 })
        }
        // The index's text form round-trips.
        #expect(SpanSet(encoded: set.encoded) == set)
    }

    static func runs(of value: Bool, in model: [Bool], _ range: Range<Int>) -> [ByteRange] {
        var result: [ByteRange] = []
        var start: Int?
        for i in range {
            if model[i] == value, start == nil { start = i }
            if model[i] != value, let s = start {
                result.append(ByteRange(Int64(s), Int64(i)))
                start = nil
            }
        }
        if let s = start { result.append(ByteRange(Int64(s), Int64(range.upperBound))) }
        return result
    }
}
