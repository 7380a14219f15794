// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Which stored bytes go when the store needs room: scan-resistant, frequency-aware and
/// media-aware. Pure: events in (stored, played, removed), actions out (remove an entry, trim
/// one to its start); the store carries them out and keeps each entry's ``Mark`` in its index
/// row.
///
/// - **Items.** The segments of one rendition (``item(of:mimeType:)``) age as one item; any
///   other entry is an item of its own. A play is a player's read of an item other than the one
///   a player read last; an item played again gains frequency (at most ``maxFrequency``).
/// - **S3-FIFO** (Yang et al., SOSP '23): a new item enters a small queue (a tenth of the limit)
///   where it must prove itself; played again there, it moves to the main queue, else it goes
///   and is remembered as a ghost, and a ghost that comes back enters the main queue at once.
///   The main queue is a FIFO in which an item with frequency left is kept for another lap, one
///   frequency less. A movie watched once passes through the small queue and never reaches the
///   songs played every day.
/// - **Starts last.** An item's first ``Settings/startBytes`` (the first bytes of a file, the
///   first segments of a rendition: what a play needs first, and what preload fetches) is its
///   start; the rest its tail. Room is made in tiers: first the tails of items no player has
///   read (the cache's own fetches: read-ahead, prefetch, preload, which count as not yet
///   played until a player reads them); then every tail, the least played item's first (its
///   plays over its history, then its age), a fill's bytes past where its player stopped among
///   them; only then whole items (their starts), by S3-FIFO.
/// - **Own bytes do not push out played ones.** Room for the cache's own bytes is made of other
///   bytes no player read, or not at all.
///
/// Tried on `mediacache-bench trace`'s household trace (the model, 128 MiB / 512 MiB byte miss
/// ratio, fills off): S3-FIFO over whole items 0.689 / 0.567; with tails before starts 0.709;
/// tails by frequency, then S3-FIFO 0.662 / 0.568; every tail by plays, a 256 KiB start 0.658 /
/// 0.567 (libCacheSim's best: W-TinyLFU 0.656 at 128 MiB, S3-FIFO 0.569 at 512 MiB). With fills,
/// a fill's bytes taken first made a podcast's next session fetch its rest again (0.607 at 512 MiB);
/// as tails, 0.573.
package struct EvictionPolicy: Sendable {
    package struct Settings: Sendable, Equatable {
        /// The small queue's share of the limit, where new items prove themselves.
        package var smallShare = 0.1
        /// How much of each item is its start, kept last.
        package var startBytes: Int64 = 256 << 10
        /// How many items' plays are remembered (past that, every count is halved: old
        /// popularity fades, as TinyLFU's sketch does).
        package var historyCapacity = 4096

        package init() {}
    }

    /// The most plays an item's frequency counts.
    static let maxFrequency: UInt8 = 3

    package enum Queue: UInt8, Sendable {
        case small = 0
        case main = 1
    }

    /// The policy's state of one entry, kept in the index with its row; the members of an item
    /// carry the same queue, frequency and order.
    package struct Mark: Sendable, Equatable {
        var queue: Queue = .small
        var frequency: UInt8 = 0
        /// Where the bytes players read end (the furthest end of a player's read; 0: none):
        /// bytes the cache fetched on its own past it are not yet played.
        package var playedEnd: Int64 = 0
        /// The item's place in its queue: the later, the later it goes.
        var order: UInt64 = 0
        /// When the entry was first stored: a rendition's first segments are its start.
        var created: UInt64 = 0

        var played: Bool { playedEnd > 0 }

        /// `q,f,playedEnd,order,created`, as the index keeps it.
        var encoded: String { "\(queue.rawValue),\(frequency),\(playedEnd),\(order),\(created)" }

        init(queue: Queue = .small, frequency: UInt8 = 0, playedEnd: Int64 = 0, order: UInt64 = 0, created: UInt64 = 0)
        {
            (self.queue, self.frequency, self.playedEnd, self.order, self.created) = (
                queue, frequency, playedEnd, order, created
            )
        }

        /// Reads ``encoded``; `nil` for anything else (a row of an earlier store has none).
        init?(encoded: String) {
            let parts = encoded.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 5, let queue = UInt8(parts[0]).flatMap(Queue.init(rawValue:)),
                let frequency = UInt8(parts[1]), frequency <= EvictionPolicy.maxFrequency,
                let playedEnd = Int64(parts[2]), playedEnd >= 0, let order = UInt64(parts[3]),
                let created = UInt64(parts[4])
            else { return nil }
            self.init(queue: queue, frequency: frequency, playedEnd: playedEnd, order: order, created: created)
        }
    }

    /// Why bytes went (counted by reason in the metrics and `mediacache stats`).
    package enum Reason: String, Sendable, CaseIterable, Hashable {
        /// Bytes the cache fetched on its own that no player read.
        case unplayed
        /// The part past an item's start, not played again.
        case tail
        /// A new item not played again while in the small queue.
        case unproven
        /// An item of the main queue whose plays were used up.
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
    /// Each item's plays so far, kept after it goes: one that comes back and was played
    /// before skips the small queue, with that frequency.
    var plays: [String: UInt8] = [:]
    // (Not private: the decision in `+Room` moves items on.)
    var sequence: UInt64 = 0
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
        // Worked out once per entry, on a miss's path: no lower-casing of whole strings.
        var path = Substring(url)
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        guard let slash = path.lastIndex(of: "/") else { return nil }
        if !isSegmentType(mimeType) {
            let name = path[path.index(after: slash)...]
            guard let dot = name.lastIndex(of: "."), name.utf8.distance(from: dot, to: name.endIndex) <= 8,
                segmentExtensions.contains(name[dot...].lowercased())
            else { return nil }
        }
        return String(path[...slash])
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
    mutating func restore(_ key: CacheKey, item: String, mark: Mark?, rank: UInt64) {
        let mark = mark ?? Mark(queue: .main, frequency: 0, playedEnd: .max, order: rank, created: rank)
        sequence = max(sequence, mark.order, mark.created)
        join(key, item: item, mark: mark)
        if mark.order == rank, mark.created == rank { changed.insert(key) }
    }

    /// Bytes were stored in `key`'s entry (by a player's read, or by the cache's own work: a
    /// player's reads say what it played, ``played(_:item:through:)``).
    package mutating func stored(_ key: CacheKey, item: String) {
        guard marks[key] == nil else { return }
        sequence += 1
        var mark = Mark(order: sequence, created: sequence)
        if let peer = members[item]?.first.flatMap({ marks[$0] }) {
            (mark.queue, mark.frequency, mark.order) = (peer.queue, peer.frequency, peer.order)
        } else if let count = plays[item], count > 0 {
            mark.queue = .main
            mark.frequency = min(Self.maxFrequency, count)
        }
        join(key, item: item, mark: mark)
        changed.insert(key)
    }

    /// A player read `key`'s entry up to `end` (excluded).
    package mutating func played(_ key: CacheKey, item: String, through end: Int64) {
        played(key, item: { item }, through: end)
    }

    /// ``played(_:item:through:)`` with the item worked out only when the entry is new to the
    /// policy: a hot range's answer says it was played, and that must cost next to nothing.
    mutating func played(_ key: CacheKey, item: () -> String, through end: Int64) {
        if isPlayed(key, through: end) { return }
        // (A play can end before its bytes are written: the entry is then known from here.)
        if marks[key] == nil { stored(key, item: item()) }
        if lastPlayedKey != key, let item = items[key] {
            lastPlayedKey = key
            if lastPlayed != item {
                lastPlayed = item
                count(item)
                // A play of an item a player read before: it gains frequency.
                if members[item, default: []].contains(where: { marks[$0]?.played == true }) {
                    update(item) { $0.frequency = min(Self.maxFrequency, $0.frequency + 1) }
                }
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

    mutating func update(_ item: String, _ change: (inout Mark) -> Void) {
        for key in members[item] ?? [] where marks[key] != nil {
            change(&marks[key]!)
            changed.insert(key)
        }
    }

    /// Counts a play of `item` in its history.
    private mutating func count(_ item: String) {
        plays[item] = min(15, (plays[item] ?? 0) + 1)
        if plays.count > settings.historyCapacity {
            plays = plays.compactMapValues { $0 > 1 ? $0 / 2 : nil }
        }
    }
}
