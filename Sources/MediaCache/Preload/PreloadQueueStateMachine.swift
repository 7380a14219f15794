// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The preload queue's decisions, without I/O: which items start, whether a started one
/// goes on at its next boundary, and what the byte budget allows.
///
/// A new queue replaces the old one: items of the old queue that had not started are
/// dropped; a started one goes on if the new queue names it, else it stops at its next
/// boundary (a segment, or a piece of a range). At most `maxConcurrent` items run at once,
/// those stopping included (they still use the link until their boundary). Each queue may
/// fetch `maxBytes` from the origin: a piece is fetched only if its missing bytes fit in
/// what is left, and once one does not fit no other item starts. While the queue is held (the
/// device's power is low), nothing starts and a started item stops at its next boundary and
/// waits, queued, to go on when the hold ends.
struct PreloadQueueStateMachine {
    struct Entry: Equatable {
        var id: UInt64
        var item: PreloadItem
        var state: PreloadItem.Status.State = .queued
        var bytesFetched: Int64 = 0
        var error: String?
        /// A piece did not fit in the budget: it ends as `.overBudget`.
        var refused = false
    }

    /// A started item the runner carries out.
    struct Start: Equatable {
        var id: UInt64
        var item: PreloadItem
    }

    let maxBytes: Int64
    let maxConcurrent: Int
    /// The current queue, in order, finished items included.
    private(set) var entries: [Entry] = []
    /// Started items the current queue no longer names, until they reach a boundary.
    private(set) var stopping: [Entry] = []
    /// Bytes this queue has fetched or reserved.
    private(set) var bytesUsed: Int64 = 0
    /// Whether a piece did not fit in the budget: nothing more starts in this queue.
    private(set) var budgetSpent = false
    /// Why nothing starts now (`"power"`), or `nil`.
    private(set) var hold: String?
    private var nextID: UInt64 = 1

    init(maxBytes: Int64, maxConcurrent: Int) {
        self.maxBytes = maxBytes
        self.maxConcurrent = max(1, maxConcurrent)
    }

    /// How many items hold a transfer.
    var running: Int { entries.count { $0.state == .preloading } + stopping.count }

    /// Replaces the queue with `items` (the first of each URL counts).
    mutating func replace(with items: [PreloadItem]) -> [Start] {
        var seen: Set<URL> = []
        let wanted = items.filter { seen.insert($0.url).inserted }
        // Every started item, a stopping one named again included, goes on or stops.
        var kept: [URL: Entry] = [:]
        let started = entries.filter { $0.state == .preloading } + stopping
        stopping = []
        for entry in started {
            if wanted.contains(where: { $0.url == entry.item.url }), kept[entry.item.url] == nil {
                kept[entry.item.url] = entry
            } else {
                stopping.append(entry)
            }
        }
        entries = wanted.map { item in
            if var entry = kept[item.url] {
                entry.item = item
                entry.state = .preloading
                return entry
            }
            defer { nextID += 1 }
            return Entry(id: nextID, item: item)
        }
        bytesUsed = 0
        budgetSpent = false
        return startMore()
    }

    /// Holds the queue for `reason`, or lets it go on (`nil`); returns what starts then.
    mutating func setHold(_ reason: String?) -> [Start] {
        hold = reason
        return startMore()
    }

    /// What an item does at a boundary.
    enum Boundary: Equatable {
        case fetch
        /// The queue no longer names it.
        case stop
        /// The queue is held: it waits, queued, and goes on when the hold ends.
        case held
        /// Its next piece does not fit in the budget.
        case overBudget
    }

    /// At a boundary of item `id`: whether it fetches its next piece, of which `missing` bytes
    /// are not stored; reserves them when it does. An item told to stop still holds its
    /// transfer until ``finished(_:error:)``.
    mutating func boundary(_ id: UInt64, missing: Int64) -> Boundary {
        guard let index = entries.firstIndex(where: { $0.id == id && $0.state == .preloading }) else { return .stop }
        guard hold == nil else { return .held }
        guard missing <= maxBytes - bytesUsed else {
            budgetSpent = true
            entries[index].refused = true
            return .overBudget
        }
        bytesUsed += missing
        return .fetch
    }

    /// Records that item `id` fetched `bytes` from the origin, of `reserved` reserved for it.
    mutating func fetched(_ id: UInt64, bytes: Int64, reserved: Int64) {
        if let index = entries.firstIndex(where: { $0.id == id }) {
            entries[index].bytesFetched += bytes
            bytesUsed = max(0, bytesUsed + bytes - reserved)
        } else if let index = stopping.firstIndex(where: { $0.id == id }) {
            stopping[index].bytesFetched += bytes
        }
    }

    /// Item `id` has ended: done, failed with `error`, or stopped by a hold (`held`: queued
    /// again, to go on when the hold ends). Returns what starts in its place.
    mutating func finished(_ id: UInt64, error: String?, held: Bool = false) -> [Start] {
        stopping.removeAll { $0.id == id }
        if let index = entries.firstIndex(where: { $0.id == id && $0.state == .preloading }) {
            if held, error == nil {
                entries[index].state = .queued
            } else {
                entries[index].state = entries[index].refused ? .overBudget : error == nil ? .done : .failed
                entries[index].error = error
            }
        }
        return startMore()
    }

    /// The queue's items as a caller sees them.
    var status: [PreloadItem.Status] {
        entries.map {
            PreloadItem.Status(
                url: $0.item.url, seconds: $0.item.seconds, state: $0.state, bytesFetched: $0.bytesFetched,
                error: $0.error, waiting: $0.state == .queued ? hold : nil)
        }
    }

    private mutating func startMore() -> [Start] {
        var started: [Start] = []
        while hold == nil, !budgetSpent, running < maxConcurrent,
            let index = entries.firstIndex(where: { $0.state == .queued })
        {
            entries[index].state = .preloading
            started.append(Start(id: entries[index].id, item: entries[index].item))
        }
        return started
    }
}
