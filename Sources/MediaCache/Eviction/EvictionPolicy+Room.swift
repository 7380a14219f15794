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

        /// Cuts it to what players read (`toStart` false) or to its start, freeing no more than
        /// `atMost` when its tail holds more (from the tail's end: a file's last bytes, a
        /// rendition's last segments): the actions, and the bytes they free.
        mutating func cut(toStart: Bool, startBytes: Int64, reason: Reason, atMost: Int64 = .max) -> [(Action, Int64)] {
            let level = toStart ? 2 : 1
            guard cut < level else { return [] }
            if isFile {
                let entry = entries[0]
                let keeping = toStart ? entry.startBytes : max(entry.startBytes, entry.playedBytes)
                guard entry.bytes > keeping else {
                    cut = level
                    return []
                }
                // Held bytes past an offset are at least the held bytes less the offset, and
                // the store trims whole blocks: an offset on a block's edge frees `atMost`.
                let block = BlockChecksums.blockSize
                let end = (entry.bytes - atMost) / block * block
                if toStart, atMost < entry.bytes - keeping, end > startBytes {
                    entries[0].bytes = end
                    return [(.trim(entry.key, keeping: end, reason), entry.bytes - end)]
                }
                cut = level
                entries[0].bytes = keeping
                let offset = toStart ? startBytes : max(startBytes, marks[0].playedEnd)
                return [(.trim(entry.key, keeping: offset, reason), entry.bytes - keeping)]
            }
            // A rendition's start is its first segments, up to the start's size (the first always).
            var kept: Int64 = 0
            var keep: [Bool] = []
            for (entry, mark) in zip(entries, marks) {
                keep.append(keep.isEmpty || kept < startBytes || (!toStart && mark.played))
                if keep.last! { kept += entry.bytes }
            }
            var freed: Int64 = 0
            var actions: [(Action, Int64)] = []
            var removed: Set<Int> = []
            for index in entries.indices.reversed() where !keep[index] && freed < atMost {
                actions.append((.remove(entries[index].key, reason), entries[index].bytes))
                freed += entries[index].bytes
                removed.insert(index)
            }
            if removed.count == keep.filter({ !$0 }).count { cut = level }
            let left = entries.indices.filter { !removed.contains($0) }
            (entries, marks) = (left.map { entries[$0] }, left.map { marks[$0] })
            return actions
        }

        /// Removes what is left of it.
        func whole(reason: Reason) -> [(Action, Int64)] {
            entries.map { (.remove($0.key, reason), $0.bytes) }
        }
    }

    /// A tail's or a start's place in the walk: the least worth first; among equals tails
    /// before starts, then ``Queue/small`` before ``Queue/main``, then the oldest.
    private struct Piece: Comparable {
        var worth: Int
        var isStart: Bool
        var queue: UInt8
        var order: UInt64
        var name: String
        var index: Int

        static func < (a: Self, b: Self) -> Bool {
            let (x, y) = (a.isStart ? 1 : 0, b.isStart ? 1 : 0)
            return (a.worth, x, a.queue, a.order, a.name) < (b.worth, y, b.queue, b.order, b.name)
        }
    }

    /// The actions that free at least `need` bytes from `holdings` (the entries that may go:
    /// neither open nor pinned): the tiers of ``EvictionPolicy``. Frees less only when the
    /// holdings are all gone. Room for the cache's own bytes (`forOwnBytes`: a fill, a
    /// read-ahead, a prefetch, a preload) is made of other own bytes only, never of what
    /// players read: then it may free less than `need`, and the work stops.
    /// - Parameter slack: how much more than `need` a decision frees (``slack(limit:)``), so
    ///   that a full store does not decide again at its next write.
    package mutating func makeRoom(
        _ need: Int64, slack: Int64 = 0, holdings: [Holding], forOwnBytes: Bool = false
    ) -> [Action] {
        guard need > 0 else { return [] }
        if !forOwnBytes { filled = true }
        guard !holdings.isEmpty else { return [] }
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
            mark.plays = max(plays[name] ?? 0, entryMarks.map(\.plays).max() ?? 0)
            mark.playedEnd = entryMarks.map(\.playedEnd).max() ?? 0
            mark.queue = entryMarks.contains { $0.queue == .main } ? .main : .small
            candidates.append(Candidate(name: name, entries: sorted, marks: entryMarks, mark: mark))
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
        let unplayed = candidates.indices.filter { !candidates[$0].mark.played || forOwnBytes }.sorted {
            let (a, b) = (candidates[$0], candidates[$1])
            return (a.mark.queue.rawValue, a.mark.order, a.name) < (b.mark.queue.rawValue, b.mark.order, b.name)
        }
        for index in unplayed {
            take(candidates[index].cut(toStart: false, startBytes: start, reason: .unplayed))
            if freed >= need + slack { return actions }
        }
        if forOwnBytes { return actions }

        // 2. Tails and starts, the least worth first.
        var pieces: [Piece] = []
        pieces.reserveCapacity(2 * candidates.count)
        for (index, candidate) in candidates.enumerated() {
            let plays = Int(candidate.mark.plays)
            for isStart in [false, true] {
                pieces.append(
                    Piece(
                        worth: isStart ? max(1, plays * Self.startWeight) : plays, isStart: isStart,
                        queue: candidate.mark.queue.rawValue, order: candidate.mark.order, name: candidate.name,
                        index: index))
            }
        }
        pieces.sort()
        for piece in pieces {
            if !piece.isStart {
                take(
                    candidates[piece.index].cut(
                        toStart: true, startBytes: start, reason: .tail, atMost: need + slack - freed))
            } else {
                // Past the need, only what fits in the slack goes: never a large item for its sake.
                let candidate = candidates[piece.index]
                if freed >= need, candidate.bytes > need + slack - freed { continue }
                take(candidate.whole(reason: candidate.mark.plays > 1 ? .cold : .unproven))
            }
            if freed >= need + slack { return actions }
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

extension EvictionPolicy.Action {
    /// The entry it acts on.
    var key: CacheKey {
        switch self {
        case .remove(let key, _), .trim(let key, _, _): key
        }
    }
}
