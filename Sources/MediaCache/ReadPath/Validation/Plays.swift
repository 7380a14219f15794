// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The plays under way. A play is the players' reads of one resource until none has read it
/// for `window`; it keeps to the version its first read had. Within a play a request goes where
/// the redirects led (``PlayRoute``), a whole stored entry is served to its reads past byte 0
/// though it turned stale (docs/http.md), and when the resource changed under it, such a read
/// is refused (a clean error, never bytes of two versions at the player); a read from byte 0
/// begins a new play of the version there is. Bounded, as ``RecentDates``.
final class Plays: Sendable {
    /// When the origin last gave or confirmed each resource's stored version.
    let validations: RecentDates<Void>
    /// When a player last began a read of each resource, and the version its play began with.
    let reads: RecentDates<Version>
    let window: Duration
    let clock: any WallClock

    init(limit: Int, window: Duration, clock: any WallClock) {
        validations = RecentDates(limit: limit)
        reads = RecentDates(limit: limit)
        (self.window, self.clock) = (window, clock)
    }

    /// The origin gave or confirmed `key`'s stored version now.
    func validated(_ key: CacheKey) {
        validations.record(key, at: clock.now)
    }

    /// A read of `version` of `key` from `offset` by `requester` begins now: `false` when a play
    /// of another version is under way and the player's read does not start at byte 0 (it would
    /// give the player bytes of two versions). The cache's own reads are no play: always `true`.
    func begin(_ key: CacheKey, version: ContentMetadata, from offset: Int64, by requester: Requester) -> Bool {
        guard requester.isPlayer else { return true }
        let now = clock.now
        let seen = Version(version)
        return reads.update(key) { last in
            // Looked at and recorded in one step: a cached range's answer comes here each time.
            if let known = last, known.note.matches(seen) {
                last?.date = now
                return true
            }
            if offset > 0, let known = last, Self.isWithin(window, from: known.date, to: now) { return false }
            last = (now, seen)
            return true
        }
    }

    /// Whether a player has read a resource other than `key` since `start` (of each resource,
    /// its last read is what is remembered).
    func otherPlayBegan(than key: CacheKey, after start: Date) -> Bool {
        reads.contains { other, date in other != key && date > start }
    }

    /// The version a play began with: its length and validators.
    struct Version: Sendable {
        let length: Int64?
        let etag: String?
        let lastModified: String?

        init(_ metadata: ContentMetadata) {
            (length, etag, lastModified) = (metadata.length, metadata.etag, metadata.lastModified)
        }

        /// Whether `other` may be this version: what both know agrees (as
        /// ``ContentMetadata/isSameVersion(as:)``).
        func matches(_ other: Version) -> Bool {
            if let a = etag, let b = other.etag, a != b { return false }
            if let a = lastModified, let b = other.lastModified, a != b { return false }
            if let a = length, let b = other.length, a != b { return false }
            return true
        }
    }

    /// Whether a play of `key` is under way: a player read it, or the origin gave or confirmed
    /// its version, less than ``window`` ago.
    func isUnderWay(_ key: CacheKey) -> Bool {
        let now = clock.now
        return [reads.date(of: key), validations.date(of: key)].contains {
            $0.map { Self.isWithin(window, from: $0, to: now) } ?? false
        }
    }

    /// Whether `now` is less than `interval` after `start` (and not before it).
    static func isWithin(_ interval: Duration, from start: Date, to now: Date) -> Bool {
        let elapsed = now.timeIntervalSince(start)
        let limit = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        return elapsed >= 0 && elapsed < limit
    }
}
