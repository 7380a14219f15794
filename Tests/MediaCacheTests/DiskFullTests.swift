// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// A real full disk: a small tmpfs mounted for the test (needs root, as on CI).
@Suite(.stallLimit) struct DiskFullTests {
    @Test(.enabled(if: SmallDisk.canMount, "needs root to mount a small tmpfs"))
    func aFullDiskFailsTheWriteAndKeepsWhatIsStored() async throws {
        try await withTemporaryDirectory { directory in
            try await SmallDisk.with("3m", at: directory) {
                let storeDirectory = directory.appendingPathComponent("store")
                let content = DeterministicContent(seed: 9)
                // No floor: the disk itself refuses (DiskFloorTests has the floor).
                var configuration = CacheStore.Configuration()
                configuration.minFreeDiskBytes = 0
                let store = try await CacheStore.open(directory: storeDirectory, configuration: configuration)
                let handle = try store.openEntry(CacheKey("big"))
                try await handle.write(content.buffer(offset: 0, length: 512 << 10), at: 0)
                try await store.flush()
                // Fill the disk with another file, then write until the disk refuses.
                let filler = directory.appendingPathComponent("filler")
                FileManager.default.createFile(atPath: filler.path, contents: Data(count: 1_900_000))
                var offset: Int64 = 512 << 10
                var failure: CacheError?
                while failure == nil, offset < 16 << 20 {
                    do {
                        try await handle.write(content.buffer(offset: offset, length: 128 << 10), at: offset)
                        offset += 128 << 10
                    } catch let error as CacheError {
                        failure = error
                    }
                }
                #expect(
                    failure?.code == .ioFailure,
                    "writes must fail with an I/O error on a full disk, got \(String(describing: failure))")
                // The failed write claimed nothing; what was stored reads back right.
                let spans = try handle.spans()
                #expect(spans.spans == [ByteRange(0, offset)])
                let stored = try await handle.read(ByteRange(0, offset))
                #expect(content.firstMismatch(in: stored, at: 0) == nil)
                // With room again, everything is committed and survives a reopen.
                try FileManager.default.removeItem(at: filler)
                handle.close()
                try await store.close()
                let reopened = try await CacheStore.open(directory: storeDirectory)
                #expect(reopened.spans(for: CacheKey("big")) == spans)
                let again = try reopened.openEntry(CacheKey("big"))
                #expect(content.firstMismatch(in: try await again.read(ByteRange(0, offset)), at: 0) == nil)
                again.close()
                try await reopened.close()
            }
        }
    }
}
