// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// A token bucket: at most `rate` bytes per second on average, with bursts of at most one
/// second's worth. Pure: time is given.
struct RateBucket: Sendable, Equatable {
    let rate: Int64
    private(set) var tokens: Double
    private(set) var last: Duration?

    init(bytesPerSecond rate: Int64) {
        self.rate = max(1, rate)
        tokens = Double(self.rate)
    }

    /// Takes `bytes` at `now` (since any fixed start); returns how long to wait before they may
    /// be sent (zero when the bucket held them).
    mutating func take(_ bytes: Int, at now: Duration) -> Duration {
        if let last {
            let elapsed = Double((now - last).components.seconds) + Double((now - last).components.attoseconds) / 1e18
            tokens = min(Double(rate), tokens + max(0, elapsed) * Double(rate))
        }
        last = now
        tokens -= Double(bytes)
        guard tokens < 0 else { return .zero }
        return .nanoseconds(Int64((-tokens / Double(rate) * 1e9).rounded(.up)))
    }
}

/// A rate cap shared by the transfers that take from it (the queue's, or one job's).
final class DownloadRate: Sendable {
    private let bucket: Mutex<RateBucket>
    private let start = ContinuousClock.now

    init(bytesPerSecond: Int64) {
        bucket = Mutex(RateBucket(bytesPerSecond: bytesPerSecond))
    }

    /// Takes `bytes`: how long to wait before they are within the rate.
    func take(_ bytes: Int) -> Duration {
        let now = ContinuousClock.now - start
        return bucket.withLock { $0.take(bytes, at: now) }
    }
}

/// What paces a pinned download's transfers: the rate caps it is under (the queue's, its own),
/// taken before each chunk, and the disk's room, asked before each piece or resource. The job's
/// ``Requester`` carries it to the transfers it starts; a transfer a player reads is never held
/// back (``TransferPolicy``).
final class DownloadPacer: Sendable {
    /// What a pinned download asks for at a time, and so what it is paced by: 512 KiB.
    static let piece: Int64 = 512 << 10

    let rates: [DownloadRate]
    /// The store whose disk's room it asks (`nil`: it keeps to its rates only).
    let store: CacheStore?

    init(rates: [DownloadRate], store: CacheStore?) {
        self.rates = rates
        self.store = store
    }

    /// Takes `bytes` from every cap: how long to wait before they are within all of them.
    func take(_ bytes: Int) -> Duration {
        rates.reduce(.zero) { max($0, $1.take(bytes)) }
    }

    /// Throws ``RoomWanted`` when the disk has less room above its floor than `bytes` (at most
    /// a piece, at least a byte): the job waits for space rather than fetch what it cannot keep.
    func admit(_ bytes: Int64) throws {
        let wanted = min(DownloadPacer.piece, max(1, bytes))
        guard let store, let room = store.diskRoom, room < wanted else { return }
        throw RoomWanted(
            message:
                "the disk has \(ByteCountText.format(max(0, room))) above the \(ByteCountText.format(store.diskFloor)) it keeps free, "
                + "less than the \(ByteCountText.format(wanted)) the download takes next")
    }
}

/// A pinned download stopped before fetching what the disk has no room for.
struct RoomWanted: Error {
    var message: String
}
