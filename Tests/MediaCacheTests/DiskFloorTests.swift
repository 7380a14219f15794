// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// The store's free-space floor over a disk whose free space the test sets: least recently
/// used streaming entries go first, a pinned entry is then refused, and nothing stored is lost;
/// with space back (measured again), writes go on.
@Suite(.stallLimit) struct DiskFloorTests {
    @Test func streamingEntriesGoFirstThenWritesAreRefused() async throws {
        let mib: Int64 = 1 << 20
        let floor = 4 * mib
        // Free space: `base` less what the store holds.
        let disk = Mutex<(base: Int64, store: CacheStore?)>((floor + 8 * mib, nil))
        var configuration = CacheStore.Configuration()
        configuration.minFreeDiskBytes = floor
        configuration.diskSpace = { _ in
            let (base, store) = disk.withLock { ($0.base, $0.store) }
            return DiskSpace(free: base - (store?.totalBytes ?? 0), volume: 1 << 40)
        }
        try await withTemporaryDirectory { directory in
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            disk.withLock { $0.store = store }
            #expect(store.diskFloor == floor)
            let content = DeterministicContent(seed: 5)
            for name in ["a", "b", "c"] {
                let handle = try store.openEntry(CacheKey(name))
                try await CacheStoreTests.write(handle, ByteRange(0, 3 * mib), content: content)
                handle.close()
            }
            // 8 MiB of room: "a", the oldest, made room for "c": cut to its start (tails go first).
            #expect(store.spans(for: CacheKey("a")) == SpanSet([ByteRange(0, 256 << 10)]))
            #expect(
                store.spans(for: CacheKey("b")).byteCount == 3 * mib
                    && store.spans(for: CacheKey("c")).byteCount == 3 * mib)
            #expect(store.diskRoom == 8 * mib, "room above the floor, the streaming entries counted")
            try await store.pin([CacheKey("film")])
            let film = try store.openEntry(CacheKey("film"))
            var refusal: CacheError?
            var offset: Int64 = 0
            while refusal == nil, offset < 12 * mib {
                do {
                    try await CacheStoreTests.write(film, ByteRange(offset, offset + mib), content: content)
                    offset += mib
                } catch let error as CacheError {
                    refusal = error
                }
            }
            #expect(
                refusal?.code == .capacityExceeded && refusal?.remedy == CacheError.Remedy(.freeDiskSpace)
                    && refusal?.message.contains("--") == false, "\(String(describing: refusal))")
            #expect(offset == 8 * mib, "the pinned entry took every byte above the floor")
            #expect(
                store.keys.allSatisfy { $0 == CacheKey("film") }, "streaming entries went first: \(store.keys)")
            #expect(store.diskRoom.map { $0 < mib } == true)
            // Space returns (another app deleted a file): measured again, the writes go on.
            disk.withLock { $0.base += 4 * mib }
            await store.measureDisk()
            try await CacheStoreTests.write(film, ByteRange(offset, offset + 2 * mib), content: content)
            let stored = try await film.read(ByteRange(0, offset + 2 * mib))
            #expect(content.firstMismatch(in: stored, at: 0) == nil)
            film.close()
            try await store.close()
        }
    }
}
