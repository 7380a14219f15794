// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

extension DownloadQueue {
    /// The size of the requests a pinned file is fetched in (see ``fetchFile(_:progress:)``).
    static let piece: Int64 = 1 << 20

    /// Stores the file `job` pins through the read path: in pieces of ``piece`` bytes, one
    /// request each, so that a player that comes waits for at most one piece in flight on the
    /// link, not for a whole file's request the transfer stopped reading.
    func fetchFile(_ job: DownloadJob, progress: @escaping @Sendable (PrefetchProgress) -> Void) async throws {
        guard let length = job.bytesTotal, length > Self.piece else {
            _ = try await reader.prefetch(job.url, progress: progress)
            return
        }
        var offset: Int64 = 0
        while offset < length {
            let piece = ByteRange(offset, min(length, offset + Self.piece))
            let done = offset
            if !reader.isHeld(PrefetchItem(url: job.url, range: piece)) { try DownloadPacer.current?.admit(piece.length) }
            _ = try await reader.prefetch(job.url, range: piece) { partial in
                var whole = partial
                whole.bytesDone += done
                whole.bytesTotal = length
                whole.resourcesTotal = 1
                whole.resourcesDone = piece.upperBound == length && partial.isComplete ? 1 : 0
                progress(whole)
            }
            offset = piece.upperBound
        }
    }

    /// Takes a prefetch's progress into the job; has the store commit every
    /// ``Configuration/commitInterval`` bytes.
    func record(_ progress: PrefetchProgress, of id: String) {
        let now = ContinuousClock.now
        let commits = state.withLock { state -> Bool in
            guard state.jobs[id] != nil, let running = state.running[id], running.stop == nil else { return false }
            var job = state.jobs[id]!
            job.bytesDone = progress.bytesDone
            job.resourcesDone = progress.resourcesDone
            job.resourcesTotal = progress.resourcesTotal
            if let total = progress.bytesTotal {
                job.bytesTotal = total
                job.totalIsEstimate = false
            } else if let total = job.bytesTotal, progress.bytesDone > total {
                job.bytesTotal = progress.bytesDone
            }
            let elapsed = now - running.startedAt
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if seconds > 0.05 {
                let rate = Double(progress.bytesDone - progress.bytesAlreadyCached) / seconds
                job.bytesPerSecond = rate
                job.secondsLeft = rate > 0 ? job.bytesTotal.map { Double(max(0, $0 - job.bytesDone)) / rate } : nil
            }
            state.jobs[id] = job
            state.publish(.changed(job))
            let commits = job.bytesDone - running.committedBytes >= configuration.commitInterval
            if commits { state.running[id]!.committedBytes = job.bytesDone }
            return commits
        }
        if commits {
            store.scheduleFlush()
            if let plan = state.withLock({ $0.running[id]?.plan }), !plan.isEmpty {
                let states = renditionStates(plan)
                state.withLock { $0.jobs[id]?.renditions = states }
            }
        }
    }
}
