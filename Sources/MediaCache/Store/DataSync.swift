// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import CMediaCacheSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Forces the data files a commit names to the disk before the index claims their bytes.
///
/// One file at a time costs a blocking call each, and a thread's sleep and wake-up each: a
/// burst of misses (a page of thumbnails, a play's first segments) committed together paid one
/// per entry, three of a cold 64 KiB miss's twelve context switches. Where a commit has
/// ``wholeFolderAt`` files or more in one folder, Linux's `syncfs` on the folder forces the
/// whole file system in one call instead: every byte written before it, those files' among
/// them, as one `fdatasync` each would. Elsewhere (Apple platforms: `F_FULLFSYNC`, a file at a
/// time) and for fewer files, each file is forced alone.
///
/// The folders' descriptors stay open while the store is: a write-back error on the file system
/// since then is reported to the next `syncfs`, as a file's own error is to its `fdatasync`.
final class DataSync: Sendable {
    /// Files in one folder from which one call for the file system replaces a call each.
    static let wholeFolderAt = 4

    private let folders: [(path: String, descriptor: CInt)]

    /// Opens `folders` (the store's data folders) for ``synchronize(_:)``; a folder that cannot
    /// be opened has its files forced one by one.
    init(folders: Set<String>) {
        #if os(Linux)
            self.folders = folders.sorted().compactMap { path in
                let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                return descriptor >= 0 ? (path, descriptor) : nil
            }
        #else
            self.folders = []
        #endif
    }

    deinit {
        for folder in folders { close(folder.descriptor) }
    }

    /// Forces `files` (each a data file's path, and the file when it is open) to the disk.
    /// - Returns: the calls made: one per folder forced whole, one per file forced alone.
    /// - Throws: `.ioFailure` when the system reports that bytes could not be written.
    @discardableResult
    func synchronize(_ files: [(path: String, file: EntryFile?)]) throws -> (folders: Int, files: Int) {
        var alone = files
        var wholeFolders = 0
        for folder in folders {
            let inside = files.filter { Self.folder(of: $0.path) == folder.path }
            guard inside.count >= Self.wholeFolderAt else { continue }
            if mediacache_syncfs(folder.descriptor) == 0 {
                alone.removeAll { Self.folder(of: $0.path) == folder.path }
                wholeFolders += 1
            } else if errno != ENOSYS {
                let reason = String(cString: strerror(errno))
                throw CacheError(.ioFailure, "Flushing the data files in \(folder.path) to disk failed: \(reason).")
            }
        }
        for (path, file) in alone {
            try (file ?? EntryFile(path: path)).synchronize()
        }
        return (wholeFolders, alone.count)
    }

    private static func folder(of path: String) -> Substring {
        path[..<(path.lastIndex(of: "/") ?? path.startIndex)]
    }
}
