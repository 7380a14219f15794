// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The pinned downloads' rate cap, as a pure token bucket over given time.
@Suite(.stallLimit) struct RateBucketTests {
    @Test func aBurstOfOneSecondThenTheRate() {
        var bucket = RateBucket(bytesPerSecond: 1000)
        #expect(bucket.take(1000, at: .zero) == .zero, "one second's worth at once")
        #expect(bucket.take(500, at: .zero) == .milliseconds(500))
        #expect(bucket.take(500, at: .milliseconds(1000)) == .zero, "refilled while it waited")
        #expect(bucket.take(2000, at: .milliseconds(1000)) == .milliseconds(2000))
    }

    /// Chunks of random sizes, each sent once its wait is over: over any run the bytes sent
    /// never exceed the rate times the time plus one second's burst, and a steady sender gets
    /// the whole rate.
    @Test func randomChunksStayWithinTheRateAndGetAllOfIt() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let rate = Int64.random(in: 1_000...10_000_000, using: &random)
            var bucket = RateBucket(bytesPerSecond: rate)
            var now = Duration.zero
            var sent: Int64 = 0
            for _ in 0..<500 {
                let chunk = Int.random(in: 1...Int(min(rate, 1 << 20)), using: &random)
                now += bucket.take(chunk, at: now)
                sent += Int64(chunk)
                let seconds = Double(now.components.seconds) + Double(now.components.attoseconds) / 1e18
                #expect(Double(sent) <= Double(rate) * (seconds + 1) + 1, "rate \(rate): \(sent) bytes in \(seconds) s")
            }
            let seconds = Double(now.components.seconds) + Double(now.components.attoseconds) / 1e18
            if seconds > 10 {
                #expect(Double(sent) >= Double(rate) * seconds * 0.99, "rate \(rate): only \(sent) in \(seconds) s")
            }
        }
    }
}
