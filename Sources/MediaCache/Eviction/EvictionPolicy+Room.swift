// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

extension EvictionPolicy {
    /// One item as a decision sees it: its entries that may go, oldest first, with what each
    /// holds as the decision goes on.
    private struct Candidate {
        var name: String
        var entries: [Holding]
        var marks: [Mark]
        var mark: Mark
        /// How far it was cut: 0 whole, 1 to what players read, 2 to its start.
        var cut = 0

        var bytes: Int64 { entries.reduce(0) { $0 + $1.bytes } }

        /// Whether it is a file (one entry of its own), not a rendition's segments.
        var isFile: Bool { entries.count == 1 && entries[0].item == entries[0].key.rawValue }

        /// Cuts it to what players read (`toStart` false) or to its start: the actions, and
        /// the bytes they free.
        mutating func cut(toStart: Bool, startBytes: Int64, reason: Reason) -> [(Action, Int64)] {
            let level = toStart ? 2 : 1
            guard cut < level else { return [] }
            cut = level
            if isFile {
                let entry = entries[0]
                let keeping = toStart ? entry.startBytes : max(entry.startBytes, entry.playedBytes)
                guard entry.bytes > keeping else { return [] }
                entries[0].bytes = keeping
                let end = toStart ? startBytes : max(startBytes, marks[0].playedEnd)
                return [(.trim(entry.key, keeping: end, reason), entry.bytes - keeping)]
            }
            // A rendition's start is its first segments, up to the start's size (the first always).
            var kept: Int64 = 0
            var left: [(Holding, Mark)] = []
            var actions: [(Action, Int64)] = []
            for (entry, mark) in zip(entries, marks) {
                if left.isEmpty || kept < startBytes || (!toStart && mark.played) {
                    kept += entry.bytes
                    left.append((entry, mark))
                } else {
                    actions.append((.remove(entry.key, reason), entry.bytes))
                }
            }
            (entries, marks) = (left.map(\.0), left.map(\.1))
            return actions
        }

        /// Removes what is left of it.
        func whole(reason: Reason) -> [(Action, Int64)] {
            entries.map { (.remove($0.key, reason), $0.bytes) }
        }
    }

    /// The actions that free at least `need` bytes from `holdings` (the entries that may go:
    /// neither open nor pinned), `limit` being the store's size limit (the small queue's share
    /// is of it): the tiers of ``EvictionPolicy``. Moves items between queues and uses up their
    /// frequency as S3-FIFO does. Frees less only when
    /// the holdings are all gone. Room for the cache's own bytes (`forOwnBytes`: a fill, a
    /// read-ahead, a prefetch, a preload) is made of other own bytes only, never of what
    /// players read: then it may free less than `need`, and the work stops.
    /// - Parameter slack: how much more than `need` a decision frees (``slack(limit:)``), so
    ///   that a full store does not decide again at its next write.
    package mutating func makeRoom(
        _ need: Int64, slack: Int64 = 0, limit: Int64, holdings: [Holding], forOwnBytes: Bool = false
    ) -> [Action] {
        guard need > 0, !holdings.isEmpty else { return [] }
        var byItem: [String: [Holding]] = [:]
        for holding in holdings { byItem[holding.item, default: []].append(holding) }
        // Candidates sit in an array and are ordered by small keys over their indices: a
        // decision runs on every write of a full store, and sorting the candidates themselves
        // copied their arrays.
        var candidates: [Candidate] = []
        candidates.reserveCapacity(byItem.count)
        for (name, entries) in byItem {
            let sorted = entries.sorted {
                (marks[$0.key]?.created ?? 0, $0.key.rawValue) < (marks[$1.key]?.created ?? 0, $1.key.rawValue)
            }
            let entryMarks = sorted.map { marks[$0.key] ?? Mark(queue: .main, playedEnd: .max) }
            var mark = entryMarks[0]
            mark.order = entryMarks.map(\.order).max() ?? 0
            mark.frequency = entryMarks.map(\.frequency).max() ?? 0
            mark.playedEnd = entryMarks.map(\.playedEnd).max() ?? 0
            mark.queue = entryMarks.contains { $0.queue == .main } ? .main : .small
            candidates.append(Candidate(name: name, entries: sorted, marks: entryMarks, mark: mark))
        }
        /// The indices of the candidates `include` picks, in the order `key` gives (then by name).
        func ordered<Key: Comparable>(_ include: (Candidate) -> Bool = { _ in true }, by key: (Candidate) -> Key)
            -> [Int]
        {
            let keyed = candidates.indices.filter { include(candidates[$0]) }.map { (key(candidates[$0]), $0) }
            return keyed.sorted {
                $0.0 < $1.0 || ($0.0 == $1.0 && candidates[$0.1].name < candidates[$1.1].name)
            }.map(\.1)
        }
        func queueOrder(_ candidate: Candidate) -> QueueKey {
            QueueKey(queue: candidate.mark.queue.rawValue, order: candidate.mark.order)
        }
        var actions: [Action] = []
        var freed: Int64 = 0
        func take(_ taken: [(Action, Int64)]) {
            for (action, bytes) in taken {
                actions.append(action)
                freed += bytes
            }
        }
        let start = settings.startBytes

        // 1. What the cache fetched on its own of items no player read (read-ahead, prefetch,
        // preload, past their starts). Room for own bytes ends here, with the unplayed parts of
        // played items too (other fills' bytes past where their players stopped).
        for index in ordered({ !$0.mark.played || forOwnBytes }, by: queueOrder) {
            take(candidates[index].cut(toStart: false, startBytes: start, reason: .unplayed))
            if freed >= need + slack { return actions }
        }
        if forOwnBytes { return actions }
        // 2. Tails (a fill's bytes past where its player stopped among them: that play may well
        // go on): the least played first, by the plays each had over its history, then the oldest.
        let tails = ordered {
            TailKey(plays: plays[$0.name] ?? 0, queue: $0.mark.queue.rawValue, order: $0.mark.order)
        }
        for index in tails {
            take(candidates[index].cut(toStart: true, startBytes: start, reason: .tail))
            if freed >= need + slack { return actions }
        }
        if freed >= need { return actions }

        // 3. Whole items (their starts, by now), by S3-FIFO.
        var small = ordered({ $0.mark.queue == .small }, by: queueOrder).map { candidates[$0] }[...]
        var main = ordered({ $0.mark.queue == .main }, by: queueOrder).map { candidates[$0] }
        var mainHead = 0
        var smallBytes = small.reduce(Int64(0)) { $0 + $1.bytes }
        let smallTarget = Int64(Double(limit) * settings.smallShare)
        /// Past the need, only what fits in the slack goes: never a large item for its sake.
        func outgrowsSlack(_ candidate: Candidate) -> Bool { freed >= need && candidate.bytes > need + slack - freed }
        while freed < need + slack {
            sequence += 1
            let next = sequence
            if let candidate = small.first, smallBytes > smallTarget || mainHead == main.count {
                small.removeFirst()
                smallBytes -= candidate.bytes
                if candidate.mark.frequency > 0 {
                    var moved = candidate
                    update(moved.name) { ($0.queue, $0.order) = (.main, next) }
                    (moved.mark.queue, moved.mark.order) = (.main, next)
                    main.append(moved)
                } else if outgrowsSlack(candidate) {
                    break
                } else {
                    take(candidate.whole(reason: .unproven))
                }
            } else if mainHead < main.count {
                var candidate = main[mainHead]
                mainHead += 1
                if candidate.mark.frequency > 0 {
                    update(candidate.name) { ($0.frequency, $0.order) = ($0.frequency - 1, next) }
                    (candidate.mark.frequency, candidate.mark.order) = (candidate.mark.frequency - 1, next)
                    main.append(candidate)
                } else if outgrowsSlack(candidate) {
                    break
                } else {
                    take(candidate.whole(reason: .cold))
                }
            } else {
                break
            }
        }
        return actions
    }
}

extension EvictionPolicy {
    /// How much more than it needs a decision for players' bytes frees: a sixty-fourth of the
    /// limit, at most 1 MiB; whole items only as far as each fits in it (never a large item for
    /// the slack's sake). A decision orders every entry that may go, so a full store that freed
    /// only what each write needed decided at every write: 32 % of a miss's CPU in a store of
    /// 500 small files, all of them starts that only whole-item removal frees.
    package static func slack(limit: Int64) -> Int64 { min(limit / 64, 1 << 20) }
}

/// A candidate's place in its queues, then by its order in them.
private struct QueueKey: Comparable {
    var queue: UInt8
    var order: UInt64
    static func < (a: Self, b: Self) -> Bool { (a.queue, a.order) < (b.queue, b.order) }
}

/// A tail's place: the least played first, then as ``QueueKey``.
private struct TailKey: Comparable {
    var plays: UInt8
    var queue: UInt8
    var order: UInt64
    static func < (a: Self, b: Self) -> Bool { (a.plays, a.queue, a.order) < (b.plays, b.queue, b.order) }
}

extension EvictionPolicy.Action {
    /// The entry it acts on.
    var key: CacheKey {
        switch self {
        case .remove(let key, _), .trim(let key, _, _): key
        }
    }
}
