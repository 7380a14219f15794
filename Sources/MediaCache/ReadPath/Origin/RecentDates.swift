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
        update(key) { $0 = (date, note) }
    }

    /// Runs `body` on what is remembered of `key` (`nil`: nothing), in one step: what it leaves
    /// there is remembered.
    func update<Result>(_ key: CacheKey, _ body: (inout (date: Date, note: Note)?) -> Result) -> Result {
        entries.withLock { entries in
            if let index = entries.index(forKey: key) {
                // Remembered: changed in place, the key hashed once.
                var entry: (date: Date, note: Note)? = entries.values[index]
                let result = body(&entry)
                if let entry { entries.values[index] = entry } else { entries.remove(at: index) }
                return result
            }
            var entry: (date: Date, note: Note)?
            let result = body(&entry)
            guard let entry else { return result }
            if entries.count >= limit {
                let oldest = entries.sorted { $0.value.date < $1.value.date }.prefix(entries.count - limit / 2)
                for (forgotten, _) in oldest { entries[forgotten] = nil }
            }
            entries[key] = entry
            return result
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

    /// Whether a remembered resource and the last date of its event satisfy `predicate`.
    func contains(where predicate: (CacheKey, Date) -> Bool) -> Bool {
        entries.withLock { $0.contains { predicate($0.key, $0.value.date) } }
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
