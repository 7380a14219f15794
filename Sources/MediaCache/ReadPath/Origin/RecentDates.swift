// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// The last date of one kind of event for each resource, with a note of it, for the resources
/// it happened to most recently: when the origin last gave or confirmed the stored version (the
/// reader's validations), when a player last read it and which version its play began with
/// (``Plays``). At most `limit` resources, so memory stays bounded however many a long-running
/// server sees; when it is full, the older half is forgotten. A resource forgotten counts as
/// never seen: its next use that needs a recent validation asks the origin again, and a play it
/// was in is over (a request, never a wrong byte).
final class RecentDates<Note: Sendable>: Sendable {
    private let entries = Mutex<[CacheKey: (date: Date, note: Note)]>([:])
    let limit: Int

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Records that the event happened to `key` at `date`, noting `note`.
    func record(_ key: CacheKey, at date: Date, note: Note) {
        entries.withLock { entries in
            if entries[key] == nil, entries.count >= limit {
                let oldest = entries.sorted { $0.value.date < $1.value.date }.prefix(entries.count - limit / 2)
                for (forgotten, _) in oldest { entries[forgotten] = nil }
            }
            entries[key] = (date, note)
        }
    }

    /// When the event last happened to `key`, if remembered.
    func date(of key: CacheKey) -> Date? {
        entries.withLock { $0[key]?.date }
    }

    /// When the event last happened to `key` and its note, if remembered.
    func last(of key: CacheKey) -> (date: Date, note: Note)? {
        entries.withLock { $0[key] }
    }

    /// How many resources are remembered.
    var count: Int {
        entries.withLock { $0.count }
    }
}

extension RecentDates where Note == Void {
    /// Records that the event happened to `key` at `date` (a memory of dates alone).
    func record(_ key: CacheKey, at date: Date) {
        record(key, at: date, note: ())
    }
}
