// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Which stored bytes go when the store needs room: frequency-aware, scan-resistant and
/// media-aware. Pure: events in (stored, played, removed), actions out (remove an entry, trim
/// one); the store carries them out and keeps each entry's ``Mark`` in its index row.
///
/// - **Items and plays.** The segments of one rendition (``item(of:mimeType:)``) age as one
///   item; any other entry is an item of its own. A play is a player's read of an item other
///   than the one a player read last, counted when it reads from the item's first byte or
///   again what was read before: a podcast resumed where the last session stopped reads new
///   bytes, and is not played again. Each item's plays (at most ``maxPlays``) are remembered
///   after it goes, and halve as the history grows (old popularity fades, as TinyLFU's sketch
///   does).
/// - **Starts and tails.** An item's first ``Settings/startBytes`` (the first bytes of a file,
///   the first segments of a rendition: what a play needs first, and what preload fetches) is
///   its start; the rest its tail.
/// - **Room is made in two tiers.** First the tails of items no player has read (the cache's
///   own fetches: read-ahead, prefetch, preload, which count as not yet played until a player
///   reads them). Then tails and starts in one walk, the least worth first: a tail is worth its
///   item's plays, a start ``startWeight`` times as much (at least more than a tail played
///   once): an item played once loses its tail before any start goes, and a favourite's tail
///   outlasts the start of a song played once. A tail is cut from its end as far as the room
///   needs. Among equals, the items stored after the store first filled go before those it
///   filled with (libCacheSim's S3-FIFO keeps its first contents the same way: a scan then
///   passes through without pushing them out), then the oldest.
/// - **Own bytes do not push out played ones.** Room for the cache's own bytes is made of other
///   bytes no player read, or not at all.
///
/// Tried on `mediacache-bench trace`'s traces (`--model`, byte miss ratio; household at 128 /
/// 512 MiB, songs and shows at 128 MiB): S3-FIFO queues with every tail before any start, by
/// plays, 0.6579 / 0.5672, 0.3456, 0.9994; starts weighed against tails (three plays) 0.6605 /
/// 0.5671, 0.3401; resumes not counted as plays 0.6307 / 0.5625, 0.3401; the first contents
/// kept as well 0.6237 / 0.5561, 0.3306, 0.9842 (libCacheSim's best: W-TinyLFU 0.6560, S3-FIFO
/// 0.5693, W-TinyLFU 0.3361, S3-FIFO 0.9884). A start weighed as two plays: 0.6200, 0.3314, with
/// fewer instant starts (453 of 648, 431 of 550, against 464 and 440); tails cut whole rather
/// than from their end (with two plays): 0.6206, 0.3325, 462 and 438 starts.
package struct EvictionPolicy: Sendable {
    package struct Settings: Sendable, Equatable {
        /// How much of each item is its start, kept last.
        package var startBytes: Int64 = 256 << 10
        /// How many items' plays are remembered, and how many plays are counted, before every
        /// count is halved (old popularity fades, as TinyLFU's sketch does).
        package var historyCapacity = 4096

        package init() {}
    }

    /// The most plays an item's count holds.
    static let maxPlays: UInt8 = 15
    /// How many plays of its item a start weighs.
    static let startWeight = 3

    /// Where an item stands among others of the same worth.
    package enum Queue: UInt8, Sendable {
        /// Stored after the store first filled: goes first.
        case small = 0
        /// Stored while the store first filled (its first contents), or come back with plays.
        case main = 1
    }

    /// The policy's state of one entry, kept in the index with its row; the members of an item
    /// carry the same queue, plays and order.
    package struct Mark: Sendable, Equatable {
        var queue: Queue = .small
        /// Its item's plays (at most ``maxPlays``).
        var plays: UInt8 = 0
        /// Where the bytes players read end (the furthest end of a player's read; 0: none):
        /// bytes the cache fetched on its own past it are not yet played.
        package var playedEnd: Int64 = 0
        /// The item's place in its queue: the later, the later it goes.
        var order: UInt64 = 0
        /// When the entry was first stored: a rendition's first segments are its start.
        var created: UInt64 = 0

        var played: Bool { playedEnd > 0 }

        /// `q,plays,playedEnd,order,created`, as the index keeps it (a store of an earlier
        /// version kept a frequency of at most 3 in place of the plays).
        var encoded: String { "\(queue.rawValue),\(plays),\(playedEnd),\(order),\(created)" }

        init(queue: Queue = .small, plays: UInt8 = 0, playedEnd: Int64 = 0, order: UInt64 = 0, created: UInt64 = 0) {
            (self.queue, self.plays, self.playedEnd, self.order, self.created) = (
                queue, plays, playedEnd, order, created
            )
        }

        /// Reads ``encoded``; `nil` for anything else (a row of an earlier store has none).
        init?(encoded: String) {
            let parts = encoded.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 5, let queue = UInt8(parts[0]).flatMap(Queue.init(rawValue:)),
                let plays = UInt8(parts[1]), plays <= EvictionPolicy.maxPlays,
                let playedEnd = Int64(parts[2]), playedEnd >= 0, let order = UInt64(parts[3]),
                let created = UInt64(parts[4])
            else { return nil }
            self.init(queue: queue, plays: plays, playedEnd: playedEnd, order: order, created: created)
        }
    }

    /// Why bytes went (counted by reason in the metrics and `mediacache stats`).
    package enum Reason: String, Sendable, CaseIterable, Hashable {
        /// Bytes the cache fetched on its own that no player read.
        case unplayed
        /// The part past an item's start, worth less than what stayed.
        case tail
        /// The start of an item played once at most.
        case unproven
        /// The start of an item played again, worth less than what stayed.
        case cold
        /// Unread for longer than the store's maximum age.
        case expired
        /// Room for the disk's floor of free space.
        case disk
    }

    /// What the store does to make room.
    package enum Action: Sendable, Hashable {
        /// Remove the entry.
        case remove(CacheKey, Reason)
        /// Keep the entry's first `keeping` bytes only.
        case trim(CacheKey, keeping: Int64, Reason)
    }

    /// An entry that may go, as the store holds it now.
    package struct Holding: Sendable {
        package var key: CacheKey
        /// The item it ages with (``item(of:mimeType:)``, or its key).
        package var item: String
        /// The bytes it holds.
        package var bytes: Int64
        /// Of those, the bytes within its first ``Settings/startBytes``.
        package var startBytes: Int64
        /// Of those, the bytes before its ``Mark/playedEnd`` or its start's end, whichever is
        /// further: what a trim of the bytes no player read leaves.
        package var playedBytes: Int64

        package init(key: CacheKey, item: String, bytes: Int64, startBytes: Int64, playedBytes: Int64) {
            (self.key, self.item, self.bytes, self.startBytes) = (key, item, bytes, startBytes)
            self.playedBytes = playedBytes
        }
    }

    package var settings: Settings
    package private(set) var marks: [CacheKey: Mark] = [:]
    /// The entries of each item, and each entry's item.
    private var members: [String: Set<CacheKey>] = [:]
    private var items: [CacheKey: String] = [:]
    /// Each item's plays so far, kept after it goes: one that comes back has them again.
    private(set) var plays: [String: UInt8] = [:]
    /// Plays counted since the counts were last halved.
    private var playsSinceHalving = 0
    private var sequence: UInt64 = 0
    /// Whether the store has needed room yet: until then, new items are its first contents.
    /// (Set by the decision in `+Room`.)
    var filled = false
    private var lastPlayed: String?
    private var lastPlayedKey: CacheKey?
    /// How far the entry played last was played.
    private var lastPlayedEnd: Int64 = 0
    /// Entries whose marks changed since ``takeChanged()``.
    private var changed: Set<CacheKey> = []

    package init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// The item a resource ages with: for a media segment (an MPEG-TS or fragmented MP4
    /// segment, by type or name), its rendition, named by the folder of its URL; `nil` for
    /// anything else (an entry of its own).
    package static func item(of url: String, mimeType: String?) -> String? {
        // Worked out once per entry, on a miss's path: on the URL's bytes (the characters looked
        // for are ASCII, so each index found is one of the string's too), no lower-casing of
        // whole strings.
        let bytes = url.utf8
        let end = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        guard let slash = bytes[..<end].lastIndex(of: UInt8(ascii: "/")) else { return nil }
        if !isSegmentType(mimeType) {
            let name = bytes[bytes.index(after: slash)..<end]
            guard let dot = name.lastIndex(of: UInt8(ascii: ".")), name.distance(from: dot, to: end) <= 8,
                segmentExtensions.contains(url[dot..<end].lowercased())
            else { return nil }
        }
        return String(url[...slash])
    }

    private static let segmentTypes: Set<String> = ["video/mp2t", "video/iso.segment", "audio/iso.segment"]
    private static let segmentExtensions: Set<String> = [".ts", ".m4s", ".cmfv", ".cmfa"]

    private static func isSegmentType(_ type: String?) -> Bool {
        guard let type, type.utf8.count <= 17 else { return false }
        return segmentTypes.contains(type) || segmentTypes.contains(type.lowercased())
    }

    // MARK: Events

    /// An entry of the store, as its index row had it (`mark` `nil`: a row of an earlier store,
    /// which joins the main queue in the order of its last access, `rank`).
    mutating func restore(_ key: CacheKey, item: String, mark stored: Mark?, rank: UInt64) {
        let mark = stored ?? Mark(queue: .main, plays: 0, playedEnd: .max, order: rank, created: rank)
        sequence = max(sequence, mark.order, mark.created)
        // An earlier store, or one that filled before: new items are not its first contents.
        if stored == nil || mark.queue == .small { filled = true }
        if mark.plays > plays[item] ?? 0 { plays[item] = mark.plays }
        join(key, item: item, mark: mark)
        if mark.order == rank, mark.created == rank { changed.insert(key) }
    }

    /// Bytes were stored in `key`'s entry (by a player's read, or by the cache's own work: a
    /// player's reads say what it played, ``played(_:item:through:)``).
    package mutating func stored(_ key: CacheKey, item: String) {
        guard marks[key] == nil else { return }
        sequence += 1
        var mark = Mark(queue: filled ? .small : .main, order: sequence, created: sequence)
        if let peer = members[item]?.first.flatMap({ marks[$0] }) {
            (mark.queue, mark.plays, mark.order) = (peer.queue, peer.plays, peer.order)
        } else if let count = plays[item], count > 0 {
            (mark.queue, mark.plays) = (.main, count)
        }
        join(key, item: item, mark: mark)
        changed.insert(key)
    }

    /// A player read `key`'s entry from `start` up to `end` (excluded).
    package mutating func played(_ key: CacheKey, item: String, from start: Int64, through end: Int64) {
        played(key, item: { item }, from: start, through: end)
    }

    /// ``played(_:item:from:through:)`` with the item worked out only when the entry is new to
    /// the policy: a hot range's answer says it was played, and that must cost next to nothing.
    mutating func played(_ key: CacheKey, item: () -> String, from start: Int64, through end: Int64) {
        if isPlayed(key, through: end) { return }
        // (A play can end before its bytes are written: the entry is then known from here.)
        if marks[key] == nil { stored(key, item: item()) }
        if lastPlayedKey != key, let item = items[key] {
            lastPlayedKey = key
            if lastPlayed != item {
                lastPlayed = item
                // A play from a file's first bytes, or of a segment played before; not a resume
                // (nor a seek) past what was played, nor the first play's later segments.
                let isFile = item == key.rawValue
                let again = isFile ? start < settings.startBytes : start < marks[key]!.playedEnd
                if again || (plays[item] ?? 0) == 0 { count(item) }
            }
        }
        if marks[key]!.playedEnd < end {
            marks[key]!.playedEnd = end
            changed.insert(key)
        }
        lastPlayedEnd = marks[key]!.playedEnd
    }

    /// Whether a play of `key` to `end` would change nothing: the entry played last, read again
    /// within what it played (a hot range's answer asks this under the store's lock, with no
    /// look-up).
    func isPlayed(_ key: CacheKey, through end: Int64) -> Bool {
        end <= lastPlayedEnd && key == lastPlayedKey
    }

    /// The item `key`'s entry ages with, as the policy knows it (`nil`: an entry it does not know).
    func item(of key: CacheKey) -> String? { items[key] }

    /// The entry is gone (removed, replaced, evicted).
    package mutating func removed(_ key: CacheKey) {
        if key == lastPlayedKey { (lastPlayedKey, lastPlayedEnd) = (nil, 0) }
        guard marks.removeValue(forKey: key) != nil, let item = items.removeValue(forKey: key) else { return }
        members[item]?.remove(key)
        if members[item]?.isEmpty == true { members[item] = nil }
        changed.remove(key)
    }

    /// The entries whose marks changed since the last call (for the index), with their marks.
    mutating func takeChanged() -> [(CacheKey, Mark)] {
        defer { changed = [] }
        return changed.compactMap { key in marks[key].map { (key, $0) } }
    }

    private mutating func join(_ key: CacheKey, item: String, mark: Mark) {
        if let old = items[key], old != item { members[old]?.remove(key) }
        marks[key] = mark
        items[key] = item
        members[item, default: []].insert(key)
    }

    private mutating func update(_ item: String, _ change: (inout Mark) -> Void) {
        for key in members[item] ?? [] where marks[key] != nil {
            change(&marks[key]!)
            changed.insert(key)
        }
    }

    /// Counts a play of `item` in its history and its entries' marks; halves every count when
    /// the history holds too many items or has counted too many plays.
    private mutating func count(_ item: String) {
        let count = min(Self.maxPlays, (plays[item] ?? 0) + 1)
        plays[item] = count
        update(item) { $0.plays = count }
        playsSinceHalving += 1
        guard plays.count > settings.historyCapacity || playsSinceHalving >= settings.historyCapacity else { return }
        playsSinceHalving = 0
        plays = plays.compactMapValues { $0 > 1 ? $0 / 2 : nil }
        for (key, item) in items where marks[key]?.plays != plays[item] ?? 0 {
            marks[key]?.plays = plays[item] ?? 0
            changed.insert(key)
        }
    }
}
