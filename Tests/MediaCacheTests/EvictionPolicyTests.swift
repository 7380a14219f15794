// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The eviction policy without a store: its decisions as a table, and random event sequences
/// checked against what it must never do.
@Suite(.stallLimit, .cpuBound) struct EvictionPolicyTests {
    static let start: Int64 = 256 << 10
    static let mib: Int64 = 1 << 20

    /// A store the tests drive: entries holding their first `bytes`, as the policy decides.
    struct Model {
        var policy = EvictionPolicy()
        var entries: [CacheKey: (item: String, bytes: Int64)] = [:]
        var total: Int64 { entries.values.reduce(0) { $0 + $1.bytes } }

        /// `bytes` stored in `name` (of `item`, its own by default), played to `played` by a player.
        mutating func store(_ name: String, _ bytes: Int64, item: String? = nil, played: Int64? = nil) {
            let key = CacheKey(name)
            let item = item ?? name
            entries[key] = (item, max(entries[key]?.bytes ?? 0, bytes))
            policy.stored(key, item: item)
            if let played { policy.played(key, item: item, from: 0, through: played) }
        }

        mutating func play(_ name: String, from start: Int64 = 0, through end: Int64) {
            let key = CacheKey(name)
            guard let item = entries[key]?.item else { return }
            policy.played(key, item: item, from: start, through: end)
        }

        func holdings(except kept: Set<CacheKey> = []) -> [EvictionPolicy.Holding] {
            entries.compactMap { key, entry in
                guard !kept.contains(key) else { return nil }
                let played = CacheStore.State.blockEnd(
                    max(EvictionPolicyTests.start, policy.marks[key]?.playedEnd ?? 0))
                return EvictionPolicy.Holding(
                    key: key, item: entry.item, bytes: entry.bytes,
                    startBytes: min(entry.bytes, EvictionPolicyTests.start),
                    playedBytes: min(entry.bytes, played))
            }
        }

        /// Makes room for `need` bytes and carries the decision out; returns it.
        @discardableResult
        mutating func makeRoom(_ need: Int64, slack: Int64 = 0, kept: Set<CacheKey> = [], own: Bool = false)
            -> [EvictionPolicy.Action]
        {
            let actions = policy.makeRoom(need, slack: slack, holdings: holdings(except: kept), forOwnBytes: own)
            for action in actions { apply(action) }
            return actions
        }

        mutating func apply(_ action: EvictionPolicy.Action) {
            switch action {
            case .remove(let key, _):
                entries[key] = nil
                policy.removed(key)
            case .trim(let key, let keeping, _):
                entries[key]!.bytes = min(entries[key]!.bytes, CacheStore.State.blockEnd(keeping))
            }
        }

        func names() -> Set<String> { Set(entries.keys.map(\.rawValue)) }
    }

    // MARK: Decisions

    /// What the cache fetched of an item no player read goes first, its start kept; a fill's
    /// bytes past where its player stopped are a tail like others, cut from its end as far as
    /// the room needs.
    @Test func bytesOfItemsNoPlayerReadGoFirst() {
        var model = Model()
        model.store("song", 4 * Self.mib, played: 4 * Self.mib)
        // A fill stored the whole episode; the player read its first megabyte.
        model.store("episode", 8 * Self.mib, played: Self.mib)
        model.store("preloaded", 2 * Self.mib)
        model.play("song", through: 4 * Self.mib)  // played twice: its tail goes after the episode's
        let actions = model.makeRoom(4 * Self.mib)
        // 1.75 MiB from the preloaded entry, the 2.25 MiB left from the episode's end.
        #expect(
            actions == [
                .trim(CacheKey("preloaded"), keeping: Self.start, .unplayed),
                .trim(CacheKey("episode"), keeping: 23 * Self.start, .tail),
            ])
        #expect(model.entries[CacheKey("song")]?.bytes == 4 * Self.mib)
    }

    @Test func tailsGoBeforeAnyStartAndTheLeastPlayedFirst() {
        var model = Model()
        model.store("favourite", 4 * Self.mib, played: 4 * Self.mib)
        model.store("once", 4 * Self.mib, played: 4 * Self.mib)
        model.play("favourite", through: 4 * Self.mib)
        let actions = model.makeRoom(6 * Self.mib)
        #expect(
            actions == [
                .trim(CacheKey("once"), keeping: Self.start, .tail),
                .trim(CacheKey("favourite"), keeping: 7 * Self.start, .tail),
            ])
        #expect(model.total == 2 * Self.mib)
    }

    /// A tail is worth its item's plays, a start three times as much: the start of a song played
    /// once goes before the tail of one played four times, and both before its start.
    @Test func aFavouritesTailOutlastsTheStartOfASongPlayedOnce() {
        var model = Model()
        model.store("favourite", 4 * Self.mib, played: 4 * Self.mib)
        model.store("once", 4 * Self.mib, played: 4 * Self.mib)
        model.store("x", 1)
        for _ in 0..<3 {
            model.play("x", through: 1)
            model.play("favourite", through: 4 * Self.mib)
        }
        model.store("later", 4 * Self.mib, played: 4 * Self.mib)
        #expect(model.policy.marks[CacheKey("favourite")]?.plays == 4)
        let actions = model.makeRoom(6 * Self.mib, kept: [CacheKey("later")])
        #expect(
            actions == [
                .trim(CacheKey("once"), keeping: Self.start, .tail),
                .remove(CacheKey("once"), .unproven),
                .trim(CacheKey("favourite"), keeping: 8 * Self.start, .tail),
            ])
    }

    /// A resumed play reads past what was played: it is not a play again; a play from the
    /// first bytes is.
    @Test func aResumeIsNotAPlayAgain() {
        var model = Model()
        model.store("episode", 40 * Self.mib, played: 10 * Self.mib)
        model.store("x", 1, played: 1)
        model.play("episode", from: 10 * Self.mib, through: 20 * Self.mib)
        #expect(model.policy.marks[CacheKey("episode")]?.plays == 1)
        model.play("x", through: 1)
        model.play("episode", from: 0, through: Self.mib)
        #expect(model.policy.marks[CacheKey("episode")]?.plays == 2)
        // A rendition: a segment played before is a play again, a new one is not.
        for segment in 0..<4 { model.store("r/\(segment).ts", 1000, item: "r/", played: 1000) }
        model.play("x", through: 1)
        model.store("r/4.ts", 1000, item: "r/", played: 1000)
        #expect(model.policy.marks[CacheKey("r/0.ts")]?.plays == 1)
        model.play("x", through: 1)
        model.play("r/0.ts", through: 1000)
        #expect(model.policy.marks[CacheKey("r/4.ts")]?.plays == 2)
    }

    /// Among items of equal worth, those stored after the store first filled go before its
    /// first contents: a scan passes through without pushing them out.
    @Test func theFirstContentsOutlastLaterItemsOfEqualWorth() {
        var model = Model()
        model.store("first", 4 * Self.mib, played: 4 * Self.mib)
        model.makeRoom(1, kept: [CacheKey("first")])  // the store fills
        model.store("later", 4 * Self.mib, played: 4 * Self.mib)
        model.store("last", Self.mib, played: Self.mib)
        let actions = model.makeRoom(2 * Self.mib, kept: [CacheKey("last")])
        #expect(actions == [.trim(CacheKey("later"), keeping: 8 * Self.start, .tail)])
        #expect(model.policy.marks[CacheKey("first")]?.queue == .main)
        #expect(model.policy.marks[CacheKey("later")]?.queue == .small)
    }

    /// Counts halve once the history has counted its capacity of plays.
    @Test func playsFadeAsTheyAreCounted() {
        var model = Model()
        model.policy.settings.historyCapacity = 8
        model.store("a", 1, played: 1)
        model.store("b", 1, played: 1)
        for _ in 0..<2 {
            model.play("a", through: 1)
            model.play("b", through: 1)
        }
        #expect(model.policy.marks[CacheKey("a")]?.plays == 3)
        model.play("a", through: 1)
        model.play("b", through: 1)  // the eighth play: both fours halve
        #expect(model.policy.marks[CacheKey("a")]?.plays == 2)
        #expect(model.policy.marks[CacheKey("b")]?.plays == 2)
    }

    /// A movie watched once (a rendition of segments, one item) loses its tail, then its start
    /// before a song played three times loses anything.
    @Test func aScanGoesBeforeAFavourite() {
        var model = Model()
        model.store("song", 3 * Self.mib, played: 3 * Self.mib)
        for _ in 0..<3 {
            model.store("x", 1)
            model.play("x", through: 1)
            model.play("song", through: 3 * Self.mib)
        }
        for segment in 0..<40 {
            model.store("movie/\(segment).ts", 400_000, item: "movie/", played: 400_000)
        }
        model.makeRoom(model.total - 4 * Self.mib, kept: [CacheKey("movie/39.ts")])
        #expect(model.entries[CacheKey("song")]?.bytes == 3 * Self.mib, "\(model.names())")
        // The movie's first segment, its start, is the last of it to go.
        #expect(model.entries[CacheKey("movie/1.ts")] == nil)
        #expect(model.total <= 4 * Self.mib)
    }

    @Test func aRenditionsStartIsItsFirstSegments() {
        var model = Model()
        for segment in 0..<6 { model.store("e/\(segment).ts", 200_000, item: "e/", played: 200_000) }
        let actions = model.makeRoom(700_000)
        // 256 KiB of start: the first two segments stay; the others go, the last first.
        #expect(Set(actions.map(\.key.rawValue)) == ["e/2.ts", "e/3.ts", "e/4.ts", "e/5.ts"])
        #expect(model.names() == ["e/0.ts", "e/1.ts"])
    }

    @Test func roomForOwnBytesIsMadeOfOwnBytesOnly() {
        var model = Model()
        model.store("played", 2 * Self.mib, played: 2 * Self.mib)
        model.store("preloaded", Self.mib)
        model.store("filled", 2 * Self.mib, played: Self.mib)
        let actions = model.makeRoom(3 * Self.mib, own: true)
        #expect(
            Set(actions) == [
                .trim(CacheKey("preloaded"), keeping: Self.start, .unplayed),
                .trim(CacheKey("filled"), keeping: Self.mib, .unplayed),
            ])
        #expect(model.entries[CacheKey("played")]?.bytes == 2 * Self.mib)
    }

    @Test func anItemThatComesBackSkipsTheSmallQueueWithItsPlays() {
        var model = Model()
        model.store("song", Self.start, played: Self.start)
        model.store("x", 1, played: 1)
        model.play("song", through: Self.start)
        model.apply(.remove(CacheKey("song"), .cold))
        model.makeRoom(1, kept: [CacheKey("x")])  // the store fills
        model.store("song", Self.start)
        #expect(model.policy.marks[CacheKey("song")]?.queue == .main)
        #expect(model.policy.marks[CacheKey("song")]?.plays == 2)
    }

    /// Past what it needs, a decision frees whole items only as far as each fits in its slack:
    /// small files go a few together (the next writes need no decision), a large item never
    /// goes for the slack's sake.
    @Test func theSlackTakesSmallItemsNeverALargeOne() {
        var small = Model()
        for index in 0..<20 { small.store("s\(index)", 10_000, played: 10_000) }
        let several = small.makeRoom(10_000, slack: 50_000)
        #expect(several.count == 6 && small.total == 140_000)
        var large = Model()
        for index in 0..<3 { large.store("l\(index)", 100_000, played: 100_000) }
        let one = large.makeRoom(10_000, slack: 50_000)
        #expect(one.count == 1 && large.total == 200_000)
    }

    @Test func marksReadBackAndRefuseAnythingElse() {
        let mark = EvictionPolicy.Mark(queue: .main, plays: 15, playedEnd: 1_234_567, order: 42, created: 7)
        #expect(EvictionPolicy.Mark(encoded: mark.encoded) == mark)
        for text in ["", "1,2,3,4", "2,0,0,0,0", "0,16,0,0,0", "0,0,-1,0,0", "0,0,0,x,0", "0,0,0,0,0,0", "1, 0,0,0,0"] {
            #expect(EvictionPolicy.Mark(encoded: text) == nil, "\(text)")
        }
    }

    @Test func segmentsAgeByTheirRenditionAndFilesAlone() {
        #expect(
            EvictionPolicy.item(of: "https://cdn.example/show/720p/seg12.ts?t=1", mimeType: nil)
                == "https://cdn.example/show/720p/")
        #expect(
            EvictionPolicy.item(of: "https://cdn.example/dash/v1/chunk-5", mimeType: "video/iso.segment")
                == "https://cdn.example/dash/v1/")
        #expect(EvictionPolicy.item(of: "https://cdn.example/music/song.mp3", mimeType: "audio/mpeg") == nil)
        #expect(EvictionPolicy.item(of: "https://cdn.example/film.mp4", mimeType: "video/mp4") == nil)
    }

    // MARK: Random sequences

    /// Random stores, plays, removals and decisions, some entries open or pinned: a decision
    /// never chooses an entry outside the holdings, frees what is needed unless every holding is
    /// gone, never cuts a start while an entry not played again still has a tail, and makes
    /// room for own bytes of bytes no player read only.
    @Test(arguments: 0..<UInt64(40)) func randomSequencesKeepTheRules(seed: UInt64) {
        var random = Mutator(lines: [""], seed: seed)
        var model = Model()
        let limit: Int64 = 24 * Self.mib
        var seen: Set<String> = []
        for step in 0..<600 {
            let name = "e\(random.below(30))"
            let item = random.below(3) == 0 ? "r\(random.below(3))/" : name
            switch random.below(6) {
            case 0, 1:
                let bytes = Int64(1 + random.below(Int(3 * Self.mib)))
                let played: Int64? = random.below(3) == 0 ? nil : Int64(random.below(Int(bytes)) + 1)
                if model.entries[CacheKey(name)].map({ $0.item != item }) ?? false { continue }
                model.store(name, bytes, item: item, played: played)
            case 2:
                model.play(name, through: Int64(random.below(Int(3 * Self.mib)) + 1))
            case 3:
                if model.entries[CacheKey(name)] != nil {
                    model.apply(.remove(CacheKey(name), .cold))
                }
            default:
                let kept = Set(model.entries.keys.filter { _ in random.below(5) == 0 })
                let own = random.below(3) == 0
                // Now and then a store a twelfth the size: the starts must go too.
                let limit = random.below(4) == 0 ? limit / 12 : limit
                let need = model.total + Int64(random.below(Int(4 * Self.mib))) - limit
                guard need > 0 else { continue }
                seen.formUnion(check(&model, need: need, kept: kept, own: own, step: step, seed: seed))
            }
        }
        // The sequences reach every tier.
        #expect(seen.isSuperset(of: ["trim unplayed", "trim tail", "remove unproven"]), "\(seen)")
    }

    /// Carries out one decision, checking it; returns what kinds of action it took.
    private func check(
        _ model: inout Model, need: Int64, kept: Set<CacheKey>, own: Bool, step: Int, seed: UInt64
    ) -> Set<String> {
        let before = model
        let holdings = model.holdings(except: kept)
        let actions = model.policy.makeRoom(need, holdings: holdings, forOwnBytes: own)
        let at = "seed \(seed), step \(step)"
        #expect(actions.allSatisfy { !kept.contains($0.key) }, "an open or pinned entry was chosen (\(at))")
        // Items not played again that still had a tail when the decision began.
        let cold = Set(
            holdings.filter {
                $0.bytes > $0.startBytes && (before.policy.marks[$0.key]?.plays ?? 0) <= 1
                    && $0.item == $0.key.rawValue
            }.map(\.key))
        var tails = cold
        for action in actions {
            let entry = model.entries[action.key]!
            switch action {
            case .remove(let key, _):
                if entry.item == key.rawValue, entry.bytes > 0 {
                    #expect(
                        tails.subtracting([key]).isEmpty || own,
                        "a start went while \(tails.subtracting([key]).count) entries not played again kept a tail (\(at))"
                    )
                }
                if own {
                    #expect(
                        !(before.policy.marks[key]?.played ?? false) || entry.item != key.rawValue,
                        "own bytes pushed out a played entry (\(at))")
                }
                tails.remove(key)
            case .trim(let key, let keeping, _):
                if own {
                    #expect(keeping >= (before.policy.marks[key]?.playedEnd ?? 0), "own bytes cut played bytes (\(at))")
                }
                #expect(keeping >= Self.start, "a trim cut into a start (\(at))")
                tails.remove(key)
            }
            model.apply(action)
        }
        let freed = before.total - model.total
        let everything = holdings.reduce(Int64(0)) { $0 + $1.bytes }
        if !own {
            #expect(
                freed >= min(need, everything) || model.holdings(except: kept).isEmpty,
                "freed \(freed) of \(need) (\(at))")
        }
        return Set(
            actions.map {
                switch $0 {
                case .remove(_, let why): "remove \(why)"
                case .trim(_, _, let why): "trim \(why)"
                }
            })
    }
}
