// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import MediaCacheHTTPFields
import Synchronization

extension DownloadQueue {
    /// The size of the requests a pinned file is fetched in (see ``fetchFile(_:progress:)``).
    static let piece = DownloadPacer.piece
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
    func fetchFile(
        _ job: DownloadJob, as requester: Requester, progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws {
        guard let length = job.bytesTotal, length > Self.piece else {
            _ = try await reader.prefetch(job.url, as: requester, progress: progress)
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
                    try requester.pacer?.admit(piece.length)
                }
                tally.started(index)
                group.addTask { [reader] in
                    do {
                        _ = try await reader.prefetch(job.url, range: piece, as: requester) { partial in
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

extension DownloadQueue {
    // MARK: Running

    /// Downloads the job `id` through the read path as `requester`'s work, then settles it.
    func run(_ id: String, as requester: Requester) async {
        guard let job = state.withLock({ $0.jobs[id] }) else { return }
        try? await persist(id)
        configuration.logger.info(
            "Downloading", metadata: ["job": "\(id)", "url": "\(job.url.absoluteString.prefix(200))"])
        var failure: String?
        var remedy: CacheError.Remedy?
        var refused = false
        var roomWanted: String?
        do {
            let progress: @Sendable (PrefetchProgress) -> Void = { [self] progress in record(progress, of: id) }
            if job.isRecording {
                try await recorder(as: requester).run(id)
            } else if let asset = job.asset {
                let options = HLSPrefetchOptions(renditions: asset.renditions, seconds: asset.seconds)
                let plan = try await reader.planner(for: requester).plan(job.url, kind: asset.format, options: options)
                state.withLock { $0.running[id]?.plan = plan.renditions }
                // A playlist may name more than when it was pinned: those are pinned too.
                let keys = Self.keys(of: plan, in: store)
                let added = addKeys(keys, to: id)
                if !added.isEmpty { try await store.pin(added) }
                if let transfers = configuration.backgroundTransfers {
                    try await fetchInBackground(id, items: plan.items, transfers: transfers, progress: progress)
                } else {
                    _ = try await Prefetcher(reader: reader, requester: requester).run(
                        plan.items, playlists: plan.playlists, options: options, progress: progress)
                }
            } else if let transfers = configuration.backgroundTransfers {
                let items = [PrefetchItem(url: job.url, range: job.bytesTotal.map { ByteRange(0, $0) })]
                try await fetchInBackground(id, items: items, transfers: transfers, progress: progress)
            } else {
                try await fetchFile(job, as: requester, progress: progress)
            }
            // Finished only when every byte is stored: the disk may have refused some.
            if !Task.isCancelled, !job.isRecording, let short = shortfall(id) { throw short }
        } catch is CancellationError {
        } catch let error as RoomWanted {
            roomWanted = error.message
            state.withLock { state in
                if state.running[id]?.stop == nil { state.running[id]?.stop = .wait(.space) }
            }
            configuration.logger.warning(
                "A download waits for disk space", metadata: ["job": "\(id)", "reason": "\(error.message)"])
        } catch let error as CacheError {
            failure = error.message
            remedy = error.remedy
            refused = [401, 403, 410].contains(error.originAnswer?.status ?? 0)
        } catch {
            failure = "\(error)"
        }
        let settled = state.withLock { $0.running[id]?.plan }.map(renditionStates)
        let stop = state.withLock { state -> Stop? in
            state.running[id]?.isSettling = true
            if let settled, !settled.isEmpty { state.jobs[id]?.renditions = settled }
            let stop = state.running[id]?.stop
            guard state.jobs[id] != nil else { return stop }
            state.jobs[id]!.bytesPerSecond = nil
            state.jobs[id]!.secondsLeft = nil
            switch stop {
            case .pause:
                state.jobs[id]!.state = .paused
                (state.jobs[id]!.waiting, state.jobs[id]!.waitingDetail) = (nil, nil)
            case .cancel: break
            case .shutDown: state.jobs[id]!.state = .downloading  // kept so: the next start resumes it
            case .wait(let reason):
                state.jobs[id]!.state = .queued
                state.jobs[id]!.waiting = reason
                if let roomWanted { state.jobs[id]!.waitingDetail = roomWanted + "; it resumes when space returns" }
            case nil:
                state.jobs[id]!.state = failure == nil ? .completed : .failed
                state.jobs[id]!.failure = failure
                state.jobs[id]!.remedy = remedy
                if failure == nil { state.jobs[id]!.totalIsEstimate = false }
            }
            if stop == .cancel { state.publish(.changed(state.jobs[id]!)) }
            return stop
        }
        if stop != .cancel {
            // Written on a task of its own: this one was cancelled to pause or stop the job, and
            // the index's writes give up at once in a cancelled task (a pause was not kept, so
            // the next start downloaded the paused job).
            await Task { [self] in
                try? await persist(id)
                try? await store.flush()
            }.value
            // Published once written: a client that sees a job settle may stop the queue and
            // close the store at once, and must find the job as it saw it.
            if stop != .shutDown { state.withLock { state in state.jobs[id].map { state.publish(.changed($0)) } } }
            if let job = state.withLock({ $0.jobs[id] }) {
                if let failure {
                    configuration.logger.warning(
                        "A download failed",
                        metadata: [
                            "job": "\(id)", "url": "\(job.url.absoluteString.prefix(200))", "reason": "\(failure)",
                        ])
                } else {
                    configuration.logger.info(
                        "Download \(job.state.rawValue)", metadata: ["job": "\(id)", "bytes": "\(job.bytesDone)"])
                }
            }
        }
        state.withLock { _ = $0.running.removeValue(forKey: id) }
        if stop != .shutDown { schedule() }
        if refused, stop == nil, let freshURL = configuration.freshURL, let job = state.withLock({ $0.jobs[id] }) {
            // The origin refused the URL: the app may have a new one (a fresh signature).
            if let url = await freshURL(job) { _ = try? await replaceURL(id, with: url) }
        }
    }

    // MARK: Recording

    /// Records the live stream at `url`: an HLS media playlist, or a multivariant playlist whose
    /// `variant` is followed, or a DASH manifest (the representation `variant` picks of its
    /// video, and its default audio). A job that fetches each segment as it appears and keeps
    /// it pinned, from the segments the live window shows now, until `duration` has passed or
    /// the presentation ends (`EXT-X-ENDLIST`, a static manifest), or the job is cancelled or
    /// paused. Its playlist (the proxy's `/_mediacache/recording.m3u8?job=ID`, for DASH
    /// `recording.mpd`) plays what it holds from the first segment, while it records and
    /// after. Segments it missed are a discontinuity; one it could not fetch a gap.
    /// - Throws: ``CacheError`` `.originRejected` for what is neither; origin errors.
    @discardableResult
    public func record(_ url: URL, for duration: Duration? = nil, variant: HLSPrefetchOptions.VariantChoice = .first)
        async throws -> DownloadJob
    {
        try await record(url, for: duration, renditions: RenditionChoice(variants: [variant]))
    }

    /// Records the live stream at `url` (see ``record(_:for:variant:)``), taking the renditions
    /// `renditions` chooses as a pin does: the variant (or DASH video representation) and the
    /// audio and subtitle languages it names (by default the default audio, no subtitles).
    /// - Throws: ``CacheError`` `.originRejected` for what is neither an HLS playlist nor a DASH
    ///   manifest; `.outOfBounds` (when the recording starts) for a language the stream lacks.
    @discardableResult
    public func record(_ url: URL, for duration: Duration? = nil, renditions: RenditionChoice) async throws
        -> DownloadJob
    {
        try reader.checkOrigin(url)
        if let existing = job(matching: url.absoluteString), existing.isRecording, existing.recording?.finished == false
        {
            return existing
        }
        let metadata = try await reader.contentInfo(for: url, as: .own(.recording))
        guard let kind = try await reader.manifestKind(url, metadata, as: .own(.recording)) else {
            throw CacheError(
                .originRejected,
                "\(url.absoluteString.prefix(200)) is neither an HLS playlist nor a DASH manifest; a recording follows a live stream."
            )
        }
        let now = store.configuration.clock.now
        var job = DownloadJob(id: Self.makeID(), url: url, state: .queued, createdAt: now)
        let seconds = duration.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        job.recording = Recording(kind, choice: renditions, until: seconds.map { now.addingTimeInterval($0) })
        job.keys = [store.key(for: url)]
        job.resourcesTotal = 0
        // A recording runs whatever the queue's window and network rules say: what it misses is gone.
        job.rules = DownloadRules(window: .anyTime, network: .any)
        try await store.pin(job.keys)
        state.withLock { state in
            state.jobs[job.id] = job
            state.publish(.changed(job))
        }
        configuration.logger.info(
            "Recording", metadata: ["job": "\(job.id)", "url": "\(url.absoluteString.prefix(200))"])
        try await persist(job.id)
        schedule()
        return job
    }
}
// MARK: Through the system's transfer service

extension DownloadQueue {
    /// Has the system session fetch what `items` (the job `id`'s resources) still miss, and
    /// waits while its files come in (``BackgroundTransfers``): each round reconciles the
    /// session's tasks of this job with the pieces missing, then waits for a file of the job
    /// to be stored or a task to fail. A piece that fails three times fails the job. Paused,
    /// cancelled or held back by its rules, the job's tasks are cancelled; at a shutdown they
    /// run on (that is the point: the app is going away).
    func fetchInBackground(
        _ id: String, items: [PrefetchItem], transfers: BackgroundTransfers,
        progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws {
        var events = transfers.events(of: id).makeAsyncIterator()
        var failures: [BackgroundTransfer: Int] = [:]
        let before = backgroundProgress(items, job: id, pieceSize: transfers.pieceSize).progress.bytesDone
        do {
            while true {
                try Task.checkCancellation()
                guard let session = transfers.session else {
                    throw CacheError(
                        .originUnavailable, "No background transfer session is connected to the downloads.")
                }
                // The tasks first, then what is stored: a session lists a task until its file is
                // imported, so a piece whose task is gone from the list is in the spans read after.
                let running = await session.tasks()
                var (report, wanted, urls) = backgroundProgress(items, job: id, pieceSize: transfers.pieceSize)
                report.bytesAlreadyCached = before
                progress(report)
                let plan = BackgroundReconciliation.plan(
                    wanted: wanted, deciding: [id], known: Set(jobs.map(\.id)), running: running)
                // Done, the job's tasks left (a piece that came whole with another) are cancelled.
                for task in plan.cancel { session.cancel(task) }
                if wanted.isEmpty { return }
                for transfer in plan.start {
                    if let url = urls[transfer.key] { session.start(backgroundRequest(transfer, url: url)) }
                }
                // The next file of the job stored, or a task of it that failed.
                if case .failed(let transfer, let reason) = await events.next() {
                    failures[transfer, default: 0] += 1
                    if failures[transfer]! >= 3 {
                        throw CacheError(
                            .originUnavailable,
                            "A background transfer (\(transfer.rangeField ?? "whole")) failed three times: \(reason)")
                    }
                }
            }
        } catch {
            if state.withLock({ $0.running[id]?.stop }) != .shutDown { await forgetBackgroundTasks(of: [id]) }
            throw error
        }
    }

    /// Cancels the session's tasks of the jobs `ids`, and of any job the queue does not have.
    func forgetBackgroundTasks(of ids: Set<String>) async {
        guard let session = configuration.backgroundTransfers?.session else { return }
        let plan = BackgroundReconciliation.plan(
            wanted: [], deciding: ids, known: Set(jobs.map(\.id)).subtracting(ids), running: await session.tasks())
        for task in plan.cancel { session.cancel(task) }
        if !plan.cancel.isEmpty {
            configuration.logger.info(
                "Cancelled background transfers no job wants", metadata: ["tasks": "\(plan.cancel.count)"])
        }
    }

    /// At launch: the tasks of jobs that are gone, paused, failed or done are cancelled (the
    /// runs of the others reconcile their own).
    func reconcileBackgroundAtLaunch() async {
        let settled = Set(jobs.filter { $0.state.isSettled }.map(\.id))
        await forgetBackgroundTasks(of: settled)
    }

    /// How much of `items` is stored, the pieces still missing, and each item's URL by its key.
    private func backgroundProgress(_ items: [PrefetchItem], job id: String, pieceSize: Int64) -> (
        progress: PrefetchProgress, wanted: [BackgroundTransfer], urls: [CacheKey: URL]
    ) {
        var progress = PrefetchProgress()
        progress.resourcesTotal = items.count
        var total: Int64? = 0
        var wanted: [BackgroundTransfer] = []
        var urls: [CacheKey: URL] = [:]
        for item in items {
            let key = store.key(for: item.url)
            urls[key] = item.url
            let spans = store.spans(for: key)
            let length = store.metadata(for: key)?.length
            let range = item.range ?? length.map { ByteRange(0, $0) }
            progress.bytesDone += range.map { spans.byteCount(in: $0) } ?? spans.byteCount
            total = range.flatMap { range in total.map { $0 + range.length } }
            if let range, spans.contains(range) { progress.resourcesDone += 1 }
            wanted += BackgroundReconciliation.pieces(
                range: item.range, length: length, spans: spans, pieceSize: pieceSize
            ).map { BackgroundTransfer(job: id, key: key, range: $0) }
        }
        progress.bytesTotal = total
        return (progress, wanted, urls)
    }

    /// The request for `transfer`: its range (with `If-Range` when a validator is stored), the
    /// jar's cookies, and what the job's rules allow of the network.
    private func backgroundRequest(_ transfer: BackgroundTransfer, url: URL) -> BackgroundTransferRequest {
        var fields: [ContentMetadata.HeaderField] = []
        if let range = transfer.rangeField {
            fields.append(ContentMetadata.HeaderField(name: "Range", value: range))
            // The piece only of the version stored; another version comes whole (RFC 9110 §13.1.5).
            let stored = store.metadata(for: transfer.key)
            if let validator = stored?.etag.flatMap({ $0.hasPrefix("W/") ? nil : $0 }) ?? stored?.lastModified {
                fields.append(ContentMetadata.HeaderField(name: "If-Range", value: validator))
            }
        }
        if let cookies = reader.fetcher.cookieJar?.field(for: url, now: store.configuration.clock.now) {
            fields.append(ContentMetadata.HeaderField(name: "Cookie", value: cookies))
        }
        let network = (job(transfer.job)?.rules ?? DownloadRules()).over(configuration.rules).network ?? .unmetered
        return BackgroundTransferRequest(
            transfer: transfer, url: url, fields: fields, allowsExpensiveNetworkAccess: network.allowsExpensive,
            allowsConstrainedNetworkAccess: network.allowsConstrained, earliestBeginDate: nil)
    }
}
