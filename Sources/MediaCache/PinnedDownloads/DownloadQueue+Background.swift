// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields

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
        var fields: [HeaderField] = []
        if let range = transfer.rangeField {
            fields.append(HeaderField(name: "Range", value: range))
            // The piece only of the version stored; another version comes whole (RFC 9110 §13.1.5).
            let stored = store.metadata(for: transfer.key)
            if let validator = stored?.etag.flatMap({ $0.hasPrefix("W/") ? nil : $0 }) ?? stored?.lastModified {
                fields.append(HeaderField(name: "If-Range", value: validator))
            }
        }
        if let cookies = reader.fetcher.cookieJar?.field(for: url, now: store.configuration.clock.now) {
            fields.append(HeaderField(name: "Cookie", value: cookies))
        }
        let network = (job(transfer.job)?.rules ?? DownloadRules()).over(configuration.rules).network ?? .unmetered
        return BackgroundTransferRequest(
            transfer: transfer, url: url, fields: fields, allowsExpensiveNetworkAccess: network.allowsExpensive,
            allowsConstrainedNetworkAccess: network.allowsConstrained, earliestBeginDate: nil)
    }
}
