// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Synchronization

/// The scrub: every pinned entry checked again in the background, block by block against its
/// checksums (and, when whole and not yet matched, against its origin's digests), so damage
/// to a download kept for a plane is found while the origin can still give the bytes again;
/// damaged blocks are fetched again as the cache's own work, which yields the origin to
/// players. It reads at most ``Configuration/bytesPerSecond``, a step at a time on the I/O
/// pool at a low priority, so a player's reads never queue behind it. One pass starts
/// ``Configuration/firstDelay`` after ``start()``, the next ``Configuration/interval`` after
/// one ends. What it did shows on the status page (``progress``).
package final class PinScrubber: Sendable {
    package struct Configuration: Sendable {
        /// From the end of one pass to the start of the next; `nil`: no scrub.
        package var interval: Duration? = .seconds(24 * 3600)
        /// From ``PinScrubber/start()`` to the first pass: a server just started serves its
        /// players first.
        package var firstDelay: Duration = .seconds(600)
        /// The most bytes checked per second.
        package var bytesPerSecond: Int64 = 16 << 20
        /// What the pauses between steps wait on.
        package var timer: any PauseTimer = SystemPauseTimer()

        package init() {}
    }

    /// Where the scrub stands.
    package struct Progress: Sendable, Codable, Equatable {
        /// Passes completed since the server started (one shutting down cut short is not counted).
        package var passes = 0
        /// Whether a pass runs now.
        package var isRunning = false
        /// Of the pass running now, or the last one: pinned entries checked and their number.
        package var entriesChecked = 0
        package var entriesTotal = 0
        /// Of the same pass: bytes checked and the pinned bytes there were.
        package var bytesChecked: Int64 = 0
        package var bytesTotal: Int64 = 0
        /// Of the same pass: entries found damaged, and of those the ones still damaged after
        /// the repair.
        package var entriesDamaged = 0
        package var entriesLeftDamaged = 0
        /// When the last pass ended.
        package var lastPassEnded: Date?
    }

    private struct State {
        var progress = Progress()
        var task: Task<Void, Never>?
        var isShutDown = false
    }

    let reader: CachingReader
    let configuration: Configuration
    private let state = Mutex(State())

    package init(reader: CachingReader, configuration: Configuration = Configuration()) {
        self.reader = reader
        self.configuration = configuration
    }

    package var progress: Progress { state.withLock { $0.progress } }

    /// Starts the passes, unless there is no ``Configuration/interval``.
    package func start() {
        guard let interval = configuration.interval else { return }
        let timer = configuration.timer
        let firstDelay = configuration.firstDelay
        state.withLock { state in
            guard !state.isShutDown, state.task == nil else { return }
            state.task = Task(priority: .background) {
                guard (try? await timer.sleep(for: firstDelay)) != nil else { return }
                while !Task.isCancelled {
                    _ = await self.pass()
                    guard (try? await timer.sleep(for: interval)) != nil else { return }
                }
            }
        }
    }

    /// Stops the passes; a step under way ends first.
    package func shutDown() async {
        let task = state.withLock { state in
            state.isShutDown = true
            return state.task
        }
        task?.cancel()
        await task?.value
    }

    /// One pass over the pinned entries now, one after the other; returns what each showed.
    package func pass() async -> [VerifyReport] {
        let store = reader.store
        let pinned = store.entrySummaries().filter(\.isPinned).sorted { $0.key < $1.key }
        let last = state.withLock { state in
            let last = state.progress
            state.progress = Progress(
                passes: last.passes, isRunning: true, entriesTotal: pinned.count,
                bytesTotal: pinned.reduce(0) { $0 + $1.storedBytes }, lastPassEnded: last.lastPassEnded)
            return last
        }
        var verifier = StoreVerifier(store: store, repairingWith: reader, as: .own(.pin))
        verifier.rechecksDigests = false
        let (rate, timer) = (max(1, configuration.bytesPerSecond), configuration.timer)
        verifier.pace = { bytes in
            self.state.withLock { $0.progress.bytesChecked += bytes }
            let seconds = Double(bytes) / Double(rate)
            try? await timer.sleep(for: .milliseconds(Int64((seconds * 1000).rounded(.up))))
        }
        var reports: [VerifyReport] = []
        for entry in pinned {
            guard !Task.isCancelled else { break }
            guard let report = await verifier.verify(CacheKey(entry.key)) else { continue }
            reports.append(report)
            state.withLock { state in
                state.progress.entriesChecked += 1
                if !report.found.isEmpty || report.originDigest == .mismatched { state.progress.entriesDamaged += 1 }
                if !report.isSound { state.progress.entriesLeftDamaged += 1 }
            }
        }
        let now = store.configuration.clock.now
        let cutShort = Task.isCancelled
        state.withLock { state in
            // A pass that shutting down cut short is no pass: the progress stays the last one's.
            guard !cutShort else {
                state.progress = last
                state.progress.isRunning = false
                return
            }
            state.progress.isRunning = false
            state.progress.passes += 1
            state.progress.lastPassEnded = now
        }
        return reports
    }
}
