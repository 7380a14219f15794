// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// The cache folder holds what the user played and files the store trusts: it is private to
/// its owner, a folder others could write to is refused with the reason, and a link planted in
/// it is never followed. See SECURITY.md.
@Suite(.stallLimit) struct StoreFolderTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    /// Opens a store in `folder`, writes 1000 bytes under `key` and closes it.
    static func storeOneEntry(in folder: URL, key: CacheKey = CacheKey("https://cdn.example/film.mp4")) async throws {
        let store = try await CacheStore.open(directory: folder)
        let handle = try store.openEntry(key)
        try await handle.write(DeterministicContent(seed: 3).buffer(offset: 0, length: 1000), at: 0)
        handle.close()
        try await store.flush()
        try await store.close()
    }

    @Test func theFolderIsPrivateAndSoIsEveryFileInIt() async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache")
            try await Self.storeOneEntry(in: folder)
            let dataFiles = try FileManager.default.contentsOfDirectory(
                atPath: folder.appendingPathComponent("data").path)
            #expect(dataFiles.count == 1)
            #expect(Self.mode(folder.path) == 0o700 && Self.mode(folder.appendingPathComponent("data").path) == 0o700)
            for name in ["index.sqlite", "lock", "data/" + (dataFiles.first ?? "")] {
                #expect(Self.mode(folder.appendingPathComponent(name).path) == 0o600, "\(name)")
            }
            // A folder an earlier version left readable by all (umask 022) is made private.
            chmod(folder.path, 0o755)
            chmod(folder.appendingPathComponent("index.sqlite").path, 0o644)
            let store = try await CacheStore.open(directory: folder)
            #expect(
                Self.mode(folder.path) == 0o700
                    && Self.mode(folder.appendingPathComponent("index.sqlite").path) == 0o600)
            #expect(store.summary().entries == 1, "nothing stored was lost")
            try await store.close()
        }
    }

    @Test(arguments: [0o777, 0o775, 0o1777])
    func aFolderOtherUsersCanWriteIsRefusedWithTheReason(mode: Int) async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("shared")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            chmod(folder.path, mode_t(mode))
            let error = await #expect(throws: CacheError.self) { try await CacheStore.open(directory: folder) }
            #expect(error?.code == .cannotOpenStore)
            #expect(
                error?.message.contains(
                    "Other users may write to the cache folder \(folder.path) (mode \(String(mode & 0o777, radix: 8)))")
                    == true, "\(String(describing: error))"
            )
            #expect(error?.message.contains("chmod 700") == true)
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "nothing was made in it")
            #expect(Self.mode(folder.path) == mode_t(mode & 0o777), "its mode is the user's to change")

            // The same for the data folder of an existing store.
            let store = directory.appendingPathComponent("store")
            try await Self.storeOneEntry(in: store)
            chmod(store.appendingPathComponent("data").path, mode_t(mode))
            let dataError = await #expect(throws: CacheError.self) { try await CacheStore.open(directory: store) }
            #expect(
                dataError?.message.contains(
                    "Other users may write to the cache folder \(store.appendingPathComponent("data").path)") == true)
        }
    }

    /// Someone who could write in the folder replaced a data file, then the index, with a link
    /// to a file of the user's: the store never writes through it, and the file is unchanged.
    @Test func aLinkPlantedInTheFolderIsNeverFollowed() async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache")
            let key = CacheKey("https://cdn.example/film.mp4")
            try await Self.storeOneEntry(in: folder, key: key)
            let victim = directory.appendingPathComponent("notes.txt")
            let original = Data(repeating: UInt8(ascii: "n"), count: 5000)
            try original.write(to: victim)
            let data = folder.appendingPathComponent("data")
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: data.path).first)
            try FileManager.default.removeItem(at: data.appendingPathComponent(name))
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent(name).path, withDestinationPath: victim.path)

            let store = try await CacheStore.open(directory: folder)
            await #expect(throws: CacheError.self) {
                let handle = try store.openEntry(key)
                defer { handle.close() }
                try await handle.write(DeterministicContent(seed: 4).buffer(offset: 0, length: 2000), at: 0)
            }
            try await store.close()
            #expect(try Data(contentsOf: victim) == original)

            let index = folder.appendingPathComponent("index.sqlite")
            try FileManager.default.removeItem(at: index)
            try FileManager.default.createSymbolicLink(atPath: index.path, withDestinationPath: victim.path)
            let error = await #expect(throws: CacheError.self) { try await CacheStore.open(directory: folder) }
            #expect(error?.code == .cannotOpenStore, "\(String(describing: error))")
            #expect(try Data(contentsOf: victim) == original)
        }
    }

    /// A folder that belongs to another user is refused (needs root to give it away, as on CI).
    @Test(.enabled(if: geteuid() == 0, "needs root to give a folder to another user"))
    func aFolderOfAnotherUserIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("theirs")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            chmod(folder.path, 0o700)
            #expect(chown(folder.path, 65534, 65534) == 0)
            let error = await #expect(throws: CacheError.self) { try await CacheStore.open(directory: folder) }
            #expect(
                error?.message.contains("belongs to another user (uid 65534)") == true, "\(String(describing: error))")
        }
    }
}
