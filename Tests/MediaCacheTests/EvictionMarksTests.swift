// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import GRDB
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The eviction policy's marks as the index keeps them, across versions of the store.
@Suite(.stallLimit) struct EvictionMarksTests {
    static let whole = ByteRange(0, 300_000)

    /// A store whose entries were played once each, closed.
    static func storePlayed(_ names: [String], in directory: URL) async throws {
        let store = try await CacheStore.open(directory: directory, configuration: CacheStoreTests.configuration())
        for name in names {
            let handle = try store.openEntry(CacheKey(name))
            try await CacheStoreTests.write(handle, whole)
            handle.close()
            store.notePlayed(CacheKey(name), from: 0, through: whole.upperBound)
        }
        try await store.close()
    }

    /// Opens the store in `directory` and checks that it holds every byte of `names`; returns
    /// its eviction policy.
    static func reopenWithEveryByte(_ names: [String], in directory: URL) async throws -> EvictionPolicy {
        let store = try await CacheStore.open(directory: directory, configuration: CacheStoreTests.configuration())
        #expect(Set(store.keys) == Set(names.map(CacheKey.init)))
        #expect(store.totalBytes == Int64(names.count) * whole.length)
        for name in names {
            let handle = try store.openEntry(CacheKey(name))
            #expect(try handle.spans() == SpanSet([whole]), "\(name)")
            try await CacheStoreTests.expectBytes(handle, whole)
            handle.close()
        }
        let policy = store.state.withLock { $0.policy }
        try await store.close()
        return policy
    }

    /// A store of the layout before the marks (no policy column, records without one: 29439ae
    /// and earlier) opens with every entry and byte, as a store that has filled (new items are
    /// not its first contents).
    @Test func aStoreFromBeforeTheMarksOpensWithNothingLost() async throws {
        try await withTemporaryDirectory { directory in
            let names = ["a", "b", "c"]
            try await Self.storePlayed(names, in: directory)
            let index = try DatabaseQueue(path: directory.appendingPathComponent("index.sqlite").path)
            try await index.write { db in
                try db.execute(sql: "ALTER TABLE entry DROP COLUMN policy")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4 eviction marks'")
                #expect(db.changesCount == 1)
            }
            try index.close()
            // That layout kept a file per entry's record, without a mark.
            let records = directory.appendingPathComponent("entries")
            let journal = EntryJournal(path: records.appendingPathComponent(".journal").path, markCreated: nil)
            let frames = try await BlockingIO.run { journal.load() }
            #expect(frames.count == names.count)
            try FileManager.default.removeItem(at: records.appendingPathComponent(".journal"))
            for frame in frames {
                let payload = try #require(frame.payload)
                var json = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
                #expect(json.removeValue(forKey: "policy") != nil)
                try JSONSerialization.data(withJSONObject: json).write(to: records.appendingPathComponent(frame.name))
            }
            let policy = try await Self.reopenWithEveryByte(names, in: directory)
            #expect(policy.filled)
            // They join the store's first contents, in the order of their last access, unplayed.
            #expect(names.allSatisfy { policy.marks[CacheKey($0)]?.queue == .main })
            #expect(names.allSatisfy { policy.marks[CacheKey($0)]?.plays == 0 })
        }
    }

    /// A mark of the version before plays were kept (a frequency of at most 3 in their place)
    /// is read as the item's plays; a damaged mark is read as none; every byte stays.
    @Test func marksOfTheVersionBeforeAreReadAsPlays() async throws {
        try await withTemporaryDirectory { directory in
            let names = ["frequency-mark", "damaged-mark"]
            try await Self.storePlayed(names, in: directory)
            let index = try DatabaseQueue(path: directory.appendingPathComponent("index.sqlite").path)
            try await index.write { db in
                for (name, mark) in zip(names, ["0,3,300000,2,2", "0,x"]) {
                    try db.execute(
                        sql: "UPDATE entry SET policy = ? WHERE key = ?", arguments: [mark, Data(name.utf8)])
                    #expect(db.changesCount == 1, "\(name)")
                }
            }
            try index.close()
            let policy = try await Self.reopenWithEveryByte(names, in: directory)
            #expect(policy.marks[CacheKey("frequency-mark")]?.plays == 3)
            #expect(policy.plays["frequency-mark"] == 3)
            #expect(policy.filled)
        }
    }
}
