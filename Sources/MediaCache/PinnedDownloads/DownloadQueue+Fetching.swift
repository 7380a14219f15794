// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

extension DownloadQueue {
    /// The size of the requests a pinned file is fetched in (see ``fetchFile(_:progress:)``).
    static let piece: Int64 = 512 << 10
    /// How much the pieces in flight may have left when the next is asked for: about what a
    /// 60 ms round trip holds at 40 Mbit/s, so the link does not idle between pieces.
    static let ahead: Int64 = 384 << 10

    /// Stores the file `job` pins through the read path: in pieces of ``piece`` bytes, one
    /// request each, so that a player that comes waits behind little of the cache's own on the
    /// link, not behind a whole file's request the transfer stopped reading. The next piece is
    /// asked for while the last one still arrives, once it has ``ahead`` bytes left: the link
    /// does not idle a round trip between pieces, and at most two are in flight. (A window
    /// measured from the pieces' round trip and rate was tried: pieces that waited behind
    /// others read as a longer round trip, the window grew, and players waited behind it.)
    func fetchFile(_ job: DownloadJob, progress: @escaping @Sendable (PrefetchProgress) -> Void) async throws {
        guard let length = job.bytesTotal, length > Self.piece else {
            _ = try await reader.prefetch(job.url, progress: progress)
            return
        }
        let pieces = stride(from: Int64(0), to: length, by: Int(Self.piece)).map {
            ByteRange($0, min(length, $0 + Self.piece))
        }
        let tally = PieceTally(pieces.map(\.length))
        let (ticks, tick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let report: @Sendable () -> Void = {
            let (bytes, whole) = tally.state.withLock { ($0.done.reduce(0, +), $0.whole) }
            var total = PrefetchProgress()
            total.bytesDone = bytes
            total.bytesTotal = length
            total.resourcesTotal = 1
            total.resourcesDone = whole == pieces.count ? 1 : 0
            progress(total)
            tick.yield()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            var waiting = ticks.makeAsyncIterator()
            for (index, piece) in pieces.enumerated() {
                if !reader.held.isHeld(PrefetchItem(url: job.url, range: piece)) {
                    try DownloadPacer.current?.admit(piece.length)
                }
                tally.started(index)
                group.addTask { [reader] in
                    do {
                        _ = try await reader.prefetch(job.url, range: piece) { partial in
                            tally.arrived(partial.bytesDone, of: index)
                            report()
                        }
                    } catch {
                        tally.state.withLock { $0.failed = true }
                        tick.yield()
                        throw error
                    }
                    tally.ended(index)
                    report()
                }
                // The next piece is asked for once what is in flight is about a round trip's worth.
                while tally.outstanding > Self.ahead, !tally.state.withLock({ $0.failed }) {
                    guard await waiting.next() != nil else { break }
                }
                try Task.checkCancellation()
                // A piece that failed ends the file: its error, not another request.
                if tally.state.withLock({ $0.failed }) { try await group.waitForAll() }
            }
            try await group.waitForAll()
        }
        tick.finish()
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

/// The pieces of a pinned file: the bytes each has stored, those in flight, whether one failed.
final class PieceTally: Sendable {
    struct State {
        var lengths: [Int64]
        var done: [Int64]
        var inFlight: Set<Int> = []
        var whole = 0
        var failed = false
    }

    let state: Mutex<State>

    init(_ lengths: [Int64]) {
        state = Mutex(State(lengths: lengths, done: lengths.map { _ in 0 }))
    }

    /// What the pieces in flight have yet to bring.
    var outstanding: Int64 {
        state.withLock { state in state.inFlight.reduce(Int64(0)) { $0 + state.lengths[$1] - state.done[$1] } }
    }

    func started(_ index: Int) {
        _ = state.withLock { $0.inFlight.insert(index) }
    }

    func arrived(_ bytes: Int64, of index: Int) {
        state.withLock { $0.done[index] = bytes }
    }

    func ended(_ index: Int) {
        state.withLock { state in
            state.inFlight.remove(index)
            state.whole += 1
        }
    }
}
