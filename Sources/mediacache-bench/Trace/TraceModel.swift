// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache

/// The store's eviction policy run on a trace without a server, in a moment: each request's
/// missing bytes come from the origin and are stored, a played audio file is filled to its end
/// when its play read 1 MiB and there is room of the cache's own kind for it, and the
/// policy makes room as the store does. A guide for trying settings; `mediacache-bench trace`
/// through `serve` gives the figures.
struct TraceModel {
    var policy: EvictionPolicy
    let limit: Int64
    let fills: Bool
    private var stored: [String: SpanSet] = [:]
    private var total: Int64 = 0
    private(set) var originBytes: Int64 = 0
    private(set) var askedBytes: Int64 = 0
    private(set) var instantStarts = 0
    private(set) var plays = 0
    var byKind: [String: Int64] = [:]
    var kind = ""

    init(limit: Int64, fills: Bool, settings: EvictionPolicy.Settings = EvictionPolicy.Settings()) {
        self.limit = limit
        self.fills = fills
        policy = EvictionPolicy(settings: settings)
    }

    mutating func run(_ requests: [TraceRequest]) {
        var index = 0
        while index < requests.count {
            let play = requests[index].play
            var end = index
            while end < requests.count, requests[end].play == play { end += 1 }
            self.play(requests[index..<end])
            index = end
        }
    }

    private mutating func play(_ requests: ArraySlice<TraceRequest>) {
        plays += 1
        kind = requests.first!.kind
        for (number, request) in requests.enumerated() {
            let fetched = fetch(
                request.path, ByteRange(offset: request.first, length: request.length), size: request.size,
                type: request.type, byPlayer: true)
            if number == 0, fetched == 0 { instantStarts += 1 }
            askedBytes += request.length
        }
        // A fill: to the file's end, as serve's does, once the play proved itself by reading
        // 1 MiB (the next play follows at once here: a skip's fill ends unfetched).
        let played = requests.reduce(Int64(0)) { $0 + $1.length }
        guard fills, played >= 1 << 20, let last = requests.last, last.type.hasPrefix("audio/"),
            last.size <= limit / 8
        else { return }
        let end = last.size
        // Only with room of the cache's own kind for the rest (free, or bytes no player read).
        var offset = last.last + 1
        guard roomForOwnBytes() >= last.size else { return }
        while offset < end {
            let length = min(HouseholdTrace.chunk, end - offset)
            guard
                fetch(
                    last.path, ByteRange(offset: offset, length: length), size: last.size, type: last.type,
                    byPlayer: false) >= 0
            else { break }
            offset += length
        }
    }

    /// Stores what `range` of `path` lacks; the origin bytes it took (-1: the cache's own
    /// work found no room of other own bytes, and stops).
    @discardableResult
    private mutating func fetch(_ path: String, _ range: ByteRange, size: Int64, type: String, byPlayer: Bool) -> Int64
    {
        let key = CacheKey(path)
        let item = EvictionPolicy.item(of: path, mimeType: type) ?? path
        let held = stored[path, default: SpanSet()]
        let missing = range.length - held.byteCount(in: range)
        if missing > 0 {
            guard makeRoom(missing, keeping: path, own: !byPlayer) else { return -1 }
            originBytes += missing
            byKind[kind, default: 0] += missing
            stored[path, default: SpanSet()].insert(range)
            total += missing
            policy.stored(key, item: item)
        }
        if byPlayer { policy.played(key, item: item, from: range.lowerBound, through: range.upperBound) }
        return missing
    }

    /// Free room under the limit, and the bytes past what players read (and past starts).
    private func roomForOwnBytes() -> Int64 {
        stored.reduce(limit - total) { room, entry in
            let played = max(policy.settings.startBytes, policy.marks[CacheKey(entry.key)]?.playedEnd ?? 0)
            return room + entry.value.byteCount - entry.value.byteCount(in: ByteRange(offset: 0, length: played))
        }
    }

    private mutating func makeRoom(_ incoming: Int64, keeping open: String, own: Bool) -> Bool {
        guard total + incoming > limit else { return true }
        let start = policy.settings.startBytes
        let holdings = stored.compactMap { path, spans -> EvictionPolicy.Holding? in
            guard path != open else { return nil }
            let type = path.hasSuffix(".ts") ? "video/mp2t" : "audio/mpeg"
            let key = CacheKey(path)
            let played = max(start, policy.marks[key]?.playedEnd ?? 0)
            return EvictionPolicy.Holding(
                key: key, item: EvictionPolicy.item(of: path, mimeType: type) ?? path,
                bytes: spans.byteCount, startBytes: spans.byteCount(in: ByteRange(offset: 0, length: start)),
                playedBytes: spans.byteCount(in: ByteRange(offset: 0, length: played)))
        }
        let actions = policy.makeRoom(
            total + incoming - limit, slack: own ? 0 : EvictionPolicy.slack(limit: limit), holdings: holdings,
            forOwnBytes: own)
        for action in actions {
            switch action {
            case .remove(let key, _):
                total -= stored.removeValue(forKey: key.rawValue)?.byteCount ?? 0
                policy.removed(key)
            case .trim(let key, let keeping, _):
                guard let spans = stored[key.rawValue] else { continue }
                let kept = spans.clipped(to: ByteRange(offset: 0, length: keeping))
                total -= spans.byteCount - kept.byteCount
                stored[key.rawValue] = kept
            }
        }
        return total + incoming <= limit
    }
}
