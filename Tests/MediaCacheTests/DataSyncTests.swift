// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Forcing a commit's data files to disk: a folder with enough of them is forced in one call
/// (Linux), the rest a file at a time; the files' bytes are untouched either way, and a file
/// that cannot be forced is an error.
@Suite(.stallLimit) struct DataSyncTests {
    /// Writes `count` files named `prefix0`, `prefix1`… in `folder`, each its own bytes.
    static func files(_ count: Int, in folder: String, prefix: String) throws -> [(path: String, bytes: Data)] {
        try (0..<count).map { index in
            let path = folder + "/\(prefix)\(index)"
            let bytes = Data((0..<(1_000 + index)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
            try bytes.write(to: URL(fileURLWithPath: path))
            return (path, bytes)
        }
    }

    @Test func aFolderOfManyFilesIsForcedInOneCallTheRestAlone() async throws {
        try await withTemporaryDirectory { directory in
            let (many, few, unopened) = (directory.path + "/many", directory.path + "/few", directory.path + "/other")
            let made = try await BlockingIO.run {
                for folder in [many, few, unopened] {
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                }
                return try Self.files(DataSync.wholeFolderAt + 1, in: many, prefix: "m")
                    + Self.files(DataSync.wholeFolderAt - 1, in: few, prefix: "f")
                    + Self.files(DataSync.wholeFolderAt, in: unopened, prefix: "o")
            }
            // Opening folders is a blocking call: on the pool, as the store makes it.
            let sync = try await BlockingIO.run { DataSync(folders: [many, few]) }
            // One of them open, as a kept file is; the others by path.
            let kept = try await BlockingIO.run { try EntryFile(existingAt: made[0].path) }
            let calls = try await BlockingIO.run {
                try sync.synchronize(made.enumerated().map { ($1.path, $0 == 0 ? kept : nil) })
            }
            #if os(Linux)
                #expect(calls.folders == 1 && calls.files == 2 * DataSync.wholeFolderAt - 1)
            #else
                #expect(calls.folders == 0 && calls.files == made.count)
            #endif
            for (path, bytes) in made {
                let read = try await BlockingIO.run { try Data(contentsOf: URL(fileURLWithPath: path)) }
                #expect(read == bytes, "\(path)")
            }
        }
    }

    @Test func aFileThatCannotBeForcedIsAnError() async throws {
        try await withTemporaryDirectory { directory in
            let sync = try await BlockingIO.run { DataSync(folders: [directory.path]) }
            let gone = directory.path + "/missing/file"
            await #expect(throws: CacheError.self) {
                try await BlockingIO.run { try sync.synchronize([(gone, nil)]) }
            }
        }
    }
}
