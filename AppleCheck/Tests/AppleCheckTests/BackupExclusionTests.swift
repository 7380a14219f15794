// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import CheckedAVFoundationAdapter
import Foundation
import Glibc
import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport
import Testing

/// Every folder and file the store makes is excluded from backup: a store configured with
/// `excludingFromBackup()` (its pins in the data folder, streaming entries in a cache folder)
/// asks for the flag on each. Swift's Foundation on Linux takes `isExcludedFromBackup` without
/// keeping it, so the check stands in for the flag with an extended attribute the test's hook
/// sets beside the adapter's on each item it is called with (like Apple's flag, it belongs to
/// the file, follows it when pinning renames it to the other folder, and goes with it); after a
/// streaming read, a pin, a job record and a reopen, every item in both folders must carry it.
@Suite(.stallLimit) struct BackupExclusionTests {
    static let flag = "user.mediacache-test.excluded-from-backup"

    /// The items under `folder`, the folder included.
    static func items(under folder: URL) -> [String] {
        var found: [String] = []
        func visit(_ path: String) {
            found.append(path)
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
                return
            }
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { visit(path + "/" + name) }
        }
        visit(folder.path)
        return found
    }

    // glibc's extended-attribute calls, which its Swift module map leaves out.
    typealias SetAttribute =
        @convention(c) (
            UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeRawPointer?, Int, CInt
        ) -> CInt
    typealias GetAttribute =
        @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int)
        -> Int
    static let setAttribute = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setxattr"), to: SetAttribute.self)
    static let getAttribute = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "getxattr"), to: GetAttribute.self)

    static func setFlag(_ path: String) -> Bool {
        setAttribute(path, flag, "1", 1, 0) == 0
    }

    static func isFlagged(_ path: String) -> Bool {
        getAttribute(path, flag, nil, 0) >= 0
    }

    @Test func everyFolderAndFileTheStoreMakesIsExcluded() async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            origin.serve(.generated(length: 3_000_000, seed: 71), at: "/pinned.mp4")
            origin.serve(.generated(length: 500_000, seed: 72), at: "/streamed.mp3")
            var configuration = CacheStore.Configuration()
            configuration.cacheDirectory = directory.appendingPathComponent("Caches/MediaCache")
            configuration = configuration.excludingFromBackup()
            let adapter = try #require(configuration.markCreated, "the adapter sets the hook")
            configuration.markCreated = { url in
                adapter(url)
                _ = Self.setFlag(url.path)
            }
            // The file system must keep the stand-in flag, or the check would prove nothing.
            #expect(Self.setFlag(directory.path) && Self.isFlagged(directory.path), "extended attributes: \(errno)")
            let home = directory.appendingPathComponent("Application Support/MediaCache")
            for launch in 1...2 {
                let store = try await CacheStore.open(directory: home, configuration: configuration)
                let fetcher = HTTPOriginFetcher()
                let reader = CachingReader(store: store, fetcher: fetcher)
                if launch == 1 {
                    let streamed = try await collect(try await reader.read(origin.url("/streamed.mp3")))
                    #expect(origin.resource(at: "/streamed.mp3")?.firstMismatch(in: streamed, at: 0) == nil)
                    let downloads = try DownloadQueue(reader: reader)
                    downloads.start()
                    let job = try await downloads.pin(origin.url("/pinned.mp4"))
                    try await waitUntil { downloads.job(matching: job.id)?.state == .completed }
                    await downloads.shutDown()
                }
                try await store.flush()
                let found = Self.items(under: home) + Self.items(under: configuration.cacheDirectory!)
                #expect(found.count >= 12, "folders, index, lock, records, data files: \(found)")
                let unmarked = found.filter { !Self.isFlagged($0) }
                #expect(unmarked.isEmpty, "launch \(launch): not excluded: \(unmarked)")
                await reader.shutDown()
                try await store.close()
                try await fetcher.shutdown()
            }
            try await origin.shutdown()
        }
    }
}
