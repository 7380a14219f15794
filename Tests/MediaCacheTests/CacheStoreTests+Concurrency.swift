// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

extension CacheStoreTests {
    @Test func concurrentWritersAndReadersOnOneEntry() async throws {
        try await withTemporaryDirectory { directory in
            var configuration = Self.configuration()
            configuration.flushThreshold = 64 << 10  // many background flushes during the run
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            let key = CacheKey("shared")
            let length: Int64 = 4 << 20
            let setup = try store.openEntry(key)
            try setup.updateMetadata(ContentMetadata(length: length, acceptsRanges: true))
            let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<6 {
                    group.addTask {
                        let handle = try store.openEntry(key)
                        defer { handle.close() }
                        var random = SplitMix(seed: UInt64(writer))
                        for _ in 0..<60 {
                            let offset = Int64(random.next() % UInt64(length))
                            let end = min(length, offset + Int64(random.next() % 200_000) + 1)
                            try await Self.write(handle, ByteRange(offset, end))
                        }
                        // Then every writer covers its own stripe, so the whole resource ends up cached.
                        let stripe = length / 6
                        try await Self.write(
                            handle, ByteRange(Int64(writer) * stripe, writer == 5 ? length : Int64(writer + 1) * stripe)
                        )
                        return 0
                    }
                }
                for _ in 0..<6 {
                    group.addTask {
                        let handle = try store.openEntry(key)
                        defer { handle.close() }
                        var bad = 0
                        for _ in 0..<200 {
                            for span in try handle.spans().spans.prefix(4) {
                                let part = ByteRange(span.lowerBound, min(span.upperBound, span.lowerBound + 65_536))
                                let bytes = try await handle.read(part)
                                if Self.content.firstMismatch(in: bytes, at: part.lowerBound) != nil { bad += 1 }
                            }
                            await Task.yield()
                        }
                        return bad
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(mismatches == 0)
            #expect(try setup.spans().spans == [ByteRange(0, length)])
            #expect(store.totalBytes == length)
            try await Self.expectBytes(setup, ByteRange(0, length))
            setup.close()
            try await store.close()
            let reopened = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            #expect(reopened.spans(for: key).spans == [ByteRange(0, length)])
            try await reopened.close()
        }
    }

    /// A handle waiting to be alone on its entry returns once every other handle closed, and
    /// not before; one whose task is cancelled returns then, and leaves no waiter behind.
    @Test func aHandleWaitsForTheOthersToClose() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let key = CacheKey("alone")
            let waiter = try store.openEntry(key)
            let others = [try store.openEntry(key), try store.openEntry(key)]
            let waiting = Task { await waiter.untilAlone() }
            try await waitUntil { store.state.withLock { $0.aloneWaiters[waiter.id] != nil } }
            others[0].close()
            // One other is still open: the waiter still waits.
            #expect(store.state.withLock { $0.aloneWaiters[waiter.id] != nil })
            others[1].close()
            await waiting.value
            #expect(store.state.withLock { $0.aloneWaiters.isEmpty })
            // Alone already: it returns at once.
            await waiter.untilAlone()

            let another = try store.openEntry(key)
            let cancelled = Task { await waiter.untilAlone() }
            try await waitUntil { store.state.withLock { $0.aloneWaiters[waiter.id] != nil } }
            cancelled.cancel()
            await cancelled.value
            #expect(store.state.withLock { $0.aloneWaiters.isEmpty })
            another.close()
            waiter.close()
            try await store.close()
        }
    }

    /// A write past the end of a trim whose file is being cut waits for the cut and is stored
    /// (it was refused, and its transfer streamed the rest uncached, to be fetched again).
    @Test func aWritePastACutInProgressWaitsAndIsStored() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let key = CacheKey("being-cut")
            let handle = try store.openEntry(key)
            try await Self.write(handle, ByteRange(0, 65_536))
            store.state.withLock { state in  // as a flush that cuts the file does
                state.cutting[key] = 65_536
                store.cutsUnderWay.add(1, ordering: .relaxed)
            }
            let ended = Atomic<Bool>(false)
            let writing = Task {
                defer { ended.store(true, ordering: .releasing) }
                try await Self.write(handle, ByteRange(65_536, 131_072))
            }
            // Waits on the event: the write waits for the cut (or, wrongly, has ended).
            var waiting = 0
            while waiting == 0, !ended.load(ordering: .acquiring) {
                await Task.yield()
                waiting = store.state.withLock { $0.cutWaiters[key]?.count ?? 0 }
            }
            #expect(waiting == 1)
            #expect(try handle.spans() == SpanSet([ByteRange(0, 65_536)]))
            let waiters = store.state.withLock { state in
                store.cutsUnderWay.subtract(1, ordering: .relaxed)
                return state.endCuts(of: [key])
            }
            for waiter in waiters { waiter.resume() }
            try await writing.value
            #expect(try handle.spans() == SpanSet([ByteRange(0, 131_072)]))
            try await Self.expectBytes(handle, ByteRange(0, 131_072))
            handle.close()
            try await store.close()
        }
    }

    /// A region of a data file still held (being sent, or sent with `sendfile` and not yet
    /// read by its client) keeps its file: closing the files kept open beyond the limit skips
    /// it, and a trim's cut waits until the region is let go (a cut would zero, in place, the
    /// pages the socket still sends from), then happens at the next flush.
    @Test func aHeldRegionKeepsItsFileOpenAndUncut() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: Self.configuration())
            let (key, other) = (CacheKey("sent"), CacheKey("other"))
            for name in [key, other] {
                let handle = try store.openEntry(name)
                try await Self.write(handle, ByteRange(0, 4 * 65_536))
                handle.close()
            }
            let path = try #require(store.state.withLock { $0.records[key].map(store.dataPath(of:)) })
            func size() -> Int64 {
                var info = stat()
                return stat(path, &info) == 0 ? Int64(info.st_size) : -1
            }
            do {
                let handle = try store.openEntry(key)
                let region = try await handle.storedRegion(ByteRange(65_536, 3 * 65_536))
                handle.close()
                // One file kept open at most: keeping `other`'s closes `key`'s, unless it is held.
                store.state.withLock { state in
                    state.keptOpen = KeptOpenFiles(limit: 1)
                    state.keepFileOpen(key)
                    state.keepFileOpen(other)
                }
                #expect(store.state.withLock { $0.records[key]?.file != nil }, "a held file stays open")
                _ = store.state.withLock { $0.trim(key, keeping: 65_536) }
                try await store.flush()
                #expect(size() == 4 * 65_536, "not cut while a region is held")
                withExtendedLifetime(region) {}
            }
            try await store.flush()
            #expect(size() == 65_536, "cut at the next flush once the region is let go")
            try await store.close()
        }
    }
}
