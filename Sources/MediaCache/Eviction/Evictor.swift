// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Chooses which entries to evict: expired ones first, then least recently used ones
/// until the total fits the limit. Entries with an open reader or writer, and pinned
/// entries, are never chosen.
///
/// Pure logic, without I/O: the store gives it a snapshot and removes what it returns.
struct Evictor: Sendable {
    /// One entry as the evictor sees it.
    struct Candidate: Sendable {
        var key: CacheKey
        var byteCount: Int64
        var lastAccess: Date
        /// Open or pinned: never chosen.
        var isPinned: Bool
    }

    /// The total number of bytes the store may hold.
    var maxBytes: Int64
    /// How long an entry may go unread before it is removed, if set.
    var maxAge: TimeInterval?

    /// The keys to evict, oldest access first, so that `totalBytes + incomingBytes` fits
    /// `maxBytes` and nothing older than `maxAge` remains (pinned entries excepted).
    func victims(of candidates: [Candidate], totalBytes: Int64, incomingBytes: Int64 = 0, now: Date) -> [CacheKey] {
        var victims: [CacheKey] = []
        var total = totalBytes + incomingBytes
        let evictable = candidates.filter { !$0.isPinned }.sorted {
            ($0.lastAccess, $0.key.rawValue) < ($1.lastAccess, $1.key.rawValue)
        }
        for candidate in evictable {
            let isExpired = maxAge.map { now.timeIntervalSince(candidate.lastAccess) > $0 } ?? false
            guard isExpired || total > maxBytes else { continue }
            victims.append(candidate.key)
            total -= candidate.byteCount
        }
        return victims
    }
}
