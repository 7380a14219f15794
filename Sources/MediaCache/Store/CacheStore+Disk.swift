// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The free space of the disk the store is on, as last measured, and the bytes the store took
/// (less those it let go) since: between measures, free space is estimated from them.
package struct DiskSpace: Sendable, Equatable {
    var free: Int64
    var volume: Int64
    var takenSince: Int64 = 0

    package init(free: Int64, volume: Int64) {
        self.free = free
        self.volume = volume
    }

    /// The floor a store keeps when its configuration sets none: 5 % of the volume, at most 1 GiB.
    var defaultFloor: Int64 { min(1 << 30, volume / 20) }
}

extension CacheStore.State {
    /// Bytes the store may still write before the disk's free space would fall below `floor`;
    /// `nil` when the disk was never measured.
    func diskHeadroom(floor: Int64) -> Int64? {
        disk.map { $0.free - $0.takenSince - floor }
    }

    /// Makes room on the disk for `incoming` bytes above the floor, evicting streaming entries
    /// as the eviction policy chooses; returns how many were evicted or trimmed.
    /// - Throws: `.capacityExceeded` when even that leaves too little.
    mutating func makeDiskRoom(for incoming: Int64, floor: Int64, now: Date) throws -> Int {
        guard incoming > 0, let headroom = diskHeadroom(floor: floor), incoming > headroom else { return 0 }
        let limit = max(0, totalBytes + reservedBytes + headroom)
        let evicted = evict(incomingBytes: incoming, limit: limit, maxAge: nil, now: now, reason: .disk)
        if let left = diskHeadroom(floor: floor), incoming > left {
            throw CacheError(
                .capacityExceeded,
                "The disk would have less free space than the \(ByteCountText.format(floor)) the cache keeps free; the bytes are not cached.",
                remedy: CacheError.Remedy(.freeDiskSpace))
        }
        return evicted
    }
}

extension CacheStore {
    /// The free space the store leaves on its disk (``CacheStore/Configuration/minFreeDiskBytes``, or
    /// its default: 5 % of the volume, at most 1 GiB).
    public var diskFloor: Int64 {
        configuration.minFreeDiskBytes ?? state.withLock { $0.disk?.defaultFloor } ?? 0
    }

    /// Bytes the store may still take on its disk before falling below ``diskFloor``,
    /// counting its streaming entries (evicted to make room) as room; `nil` when unknown.
    package var diskRoom: Int64? {
        let floor = diskFloor
        return state.withLock { state -> Int64? in
            guard let headroom = state.diskHeadroom(floor: floor) else { return nil }
            let evictable = state.records.values.reduce(Int64(0)) {
                $0 + ($1.isPinned || !$1.openBy.isEmpty ? 0 : $1.spans.byteCount)
            }
            return headroom + evictable
        }
    }

    /// Measures the free space of the cache folder's disk again (on the blocking pool).
    package func measureDisk() async {
        let (path, measure) = (cacheDataDirectory, configuration.diskSpace)
        let before = reservations
        let measured = try? await BlockingIO.run { measure(path) }
        if let measured = measured ?? nil { note(measured, since: before) }
    }

    /// The writes reserved now, and every byte ever reserved: what a measure starts from.
    var reservations: (pending: Int64, ever: Int64) { state.withLock { ($0.reservedBytes, $0.reservedEver) } }

    /// Takes a measure of the disk begun when the reservations were `before`. Writes that may
    /// not show in it count as taken: those reserved when it began and those reserved since
    /// (some may be on the disk already, so free space is rather under-estimated, never over:
    /// a write reserved and finished while the measure ran was in neither count before).
    func note(_ measured: DiskSpace, since before: (pending: Int64, ever: Int64)) {
        state.withLock { state in
            state.disk = measured
            state.disk!.takenSince = before.pending + (state.reservedEver - before.ever)
        }
        CacheMetrics.diskFree.record(measured.free)
    }

    /// The free space (for an unprivileged writer) and size of the file system holding `path`.
    static func diskSpace(at path: String) -> DiskSpace? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        let block = Int64(info.f_frsize > 0 ? info.f_frsize : info.f_bsize)
        let (free, overflowFree) = Int64(info.f_bavail).multipliedReportingOverflow(by: block)
        let (volume, overflowVolume) = Int64(info.f_blocks).multipliedReportingOverflow(by: block)
        return DiskSpace(free: overflowFree ? .max / 2 : free, volume: overflowVolume ? .max / 2 : volume)
    }
}

extension CacheStore.Configuration {
    /// The most bytes one entry may hold (see ``maxEntryFraction``).
    var maxEntryBytes: Int64 {
        Int64(Double(maxBytes) * min(1, max(0, maxEntryFraction)))
    }

    /// ``maxPinnedBytes`` as it applies: within `0...maxBytes`.
    public var pinnedQuota: Int64 {
        min(maxBytes, max(0, maxPinnedBytes ?? maxBytes / 2))
    }

    /// ``maxAge`` in seconds.
    var maxAgeSeconds: TimeInterval? {
        maxAge.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }
}
