// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The entries whose data files stay open with no handle on them, least recently let go
/// first: a range of one of them is sent again without opening its file (a trip through the
/// I/O pool, and its blocks checked again), on the event loop it was asked on. At most
/// ``limit``; keeping one more names those to close. Each step is O(1), amortised: a store
/// that keeps thousands closes one at each read of a new file.
struct KeptOpenFiles {
    /// How many files stay open at most.
    let limit: Int
    /// Each kept entry's latest stamp; an entry of ``order`` with an older one is stale.
    private var stamps: [CacheKey: UInt64] = [:]
    /// Kept entries in the order they were let go (stale ones included), from ``head`` on.
    private var order: [(key: CacheKey, stamp: UInt64)] = []
    private var head = 0
    private var nextStamp: UInt64 = 0

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How many files are kept open now.
    var count: Int { stamps.count }

    /// Keeps `key`'s file open as the one let go last; returns the entries beyond ``limit``,
    /// least recently let go first, whose files the caller closes.
    mutating func keep(_ key: CacheKey) -> [CacheKey] {
        nextStamp += 1
        stamps[key] = nextStamp
        order.append((key, nextStamp))
        var closing: [CacheKey] = []
        while stamps.count > limit, head < order.count {
            let oldest = order[head]
            head += 1
            if stamps[oldest.key] == oldest.stamp {
                stamps[oldest.key] = nil
                closing.append(oldest.key)
            }
        }
        // Drops the entries passed and the stale ones once they make up most of the array (a
        // file let go again and again leaves one stale entry each time).
        if order.count - head > 2 * stamps.count + 64 || (head > 64 && head * 2 > order.count) {
            order = order[head...].filter { stamps[$0.key] == $0.stamp }
            head = 0
        }
        return closing
    }

    /// Stops counting `key` (its entry is gone); its place in the order goes stale.
    mutating func forget(_ key: CacheKey) {
        stamps[key] = nil
    }

    /// How many files a store keeps open when a process may have `descriptors` open: an
    /// eighth of them (room for connections, other stores and the app's own), at least 32 and
    /// at most 2,048 (a thousand-file working set costs no reopening; 2,048 is ~1 MB of the
    /// kernel's memory).
    static func limit(descriptors: Int) -> Int {
        min(2_048, max(32, descriptors / 8))
    }

    /// The limit for this process's descriptor limit when first asked: `mediacache serve`
    /// raises that limit (`DescriptorLimit.raise()`) before it opens its store.
    static let forThisProcess: Int = DescriptorLimit.current.map(limit(descriptors:)) ?? 32
}

/// This process's limit on open descriptors (its soft `RLIMIT_NOFILE`), and raising it as
/// servers do (nginx's `worker_rlimit_nofile`, Go's runtime at start): the soft limit, often
/// 1,024 (256 on macOS), up to the hard limit, at most 65,536. Connections and a store's open
/// data files both need descriptors.
package enum DescriptorLimit {
    #if os(Linux)
        private static let resource = Int32(RLIMIT_NOFILE.rawValue)
    #else
        private static let resource = RLIMIT_NOFILE
    #endif

    /// The soft limit; `nil` when it cannot be read.
    package static var current: Int? {
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { return nil }
        return Int(clamping: limits.rlim_cur)
    }

    /// Raises the soft limit to the hard one (at most 65,536, and OPEN_MAX on macOS); leaves
    /// it as it is when it cannot.
    package static func raise() {
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { return }
        var wanted = min(limits.rlim_max, 65_536)
        #if canImport(Darwin)
            wanted = min(wanted, rlim_t(OPEN_MAX))  // macOS refuses more than OPEN_MAX
        #endif
        guard limits.rlim_cur < wanted else { return }
        limits.rlim_cur = wanted
        _ = setrlimit(resource, &limits)
    }
}
