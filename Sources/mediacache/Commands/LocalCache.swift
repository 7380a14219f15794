// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy

/// The cache folder opened in this process: each command runs on the library, and a download
/// it starts runs here until it settles.
struct LocalCache: CacheAccess {
    let store: CacheStore
    let reader: CachingReader
    let fetcher: HTTPOriginFetcher

    var isServer: Bool { false }

    func close() async {
        try? await store.close()
        try? await fetcher.shutdown()
    }

    func entries() async throws -> [CacheEntrySummary] { store.entrySummaries() }

    func verify(_ urls: [URL], repair: Bool) async throws -> [VerifyReport] {
        await StoreVerifier(store: store, repairingWith: repair ? reader : nil, as: .player)
            .verify(urls.isEmpty ? nil : urls.map(store.key(for:)))
    }

    func entry(_ url: URL) async throws -> CacheEntrySummary? { store.entrySummary(for: store.key(for: url)) }

    func stats() async throws -> AdminStats {
        AdminStats(
            store: store.summary(), proxy: ProxyStatistics.Snapshot(), downloadsInFlight: reader.activeDownloads,
            usage: store.usage)
    }

    func remove(_ url: URL) async throws -> Bool {
        let key = store.key(for: url)
        let existed = store.metadata(for: key) != nil
        try await store.remove(key)
        return existed
    }

    func clear() async throws -> Int {
        let count = store.summary().entries
        try await store.removeAll()
        return count
    }

    func prefetch(_ url: URL, _ request: PrefetchRequest, progress: @escaping @Sendable (PrefetchProgress) -> Void)
        async throws -> PrefetchProgress
    {
        try await Self.failing { try await request.run(url, source: reader, progress: progress) }
    }

    func downloads() async throws -> [DownloadJob] { try queue().jobs }

    func fills() async throws -> [FillOnPlay.Progress] { [] }

    func pin(
        _ url: URL, _ request: PrefetchRequest, rules: JobRuleOptions?, first: Bool,
        progress: @escaping @Sendable (DownloadJob) -> Void
    ) async throws -> DownloadJob {
        let queue = try queue()
        let own = try rules?.rules() ?? DownloadRules()
        return try await Self.run(queue, progress: progress) {
            let job = try await queue.pin(url, renditions: request.renditions, seconds: request.seconds, rules: own)
            return first ? try await queue.move(job.id) : job
        }
    }

    func unpin(_ url: URL, _ request: PrefetchRequest) async throws -> Bool {
        try await Self.failing { try await queue().unpin(url, renditions: request.renditions) }
    }

    func control(_ action: JobAction, _ text: String, progress: @escaping @Sendable (DownloadJob) -> Void)
        async throws -> DownloadJob?
    {
        let queue = try queue()
        let job = try Self.job(text, in: queue)
        switch action {
        case .pause: return try await Self.failing { try await queue.pause(job.id) }
        case .cancel:
            try await Self.failing { try await queue.cancel(job.id) }
            return nil
        case .resume: return try await Self.run(queue, progress: progress) { try await queue.resume(job.id) }
        }
    }

    func replaceURL(_ text: String, _ url: URL, progress: @escaping @Sendable (DownloadJob) -> Void) async throws
        -> DownloadJob
    {
        let queue = try queue()
        let job = try Self.job(text, in: queue)
        return try await Self.run(queue, progress: progress) { try await queue.replaceURL(job.id, with: url) }
    }

    func export(_ url: URL, to destination: URL, _ request: PrefetchRequest, oneFile: Bool) async throws
        -> ExportSummary
    {
        // A live URL that was recorded exports as its recording.
        let queue = try queue()
        if let job = queue.job(matching: url.absoluteString), job.isRecording {
            return try await Self.failing {
                oneFile
                    ? try await queue.recordings.exportFile(job.id, to: destination)
                    : try await queue.recordings.export(job.id, to: destination)
            }
        }
        if oneFile {
            return try await Self.failing {
                try await reader.exportFile(url, to: destination, renditions: request.renditions)
            }
        }
        return try await Self.failing {
            try await reader.export(url, to: destination, renditions: request.renditions, seconds: request.seconds)
        }
    }

    func setRules(_ text: String, _ rules: JobRuleOptions) async throws -> DownloadJob {
        let queue = try queue()
        let job = try Self.job(text, in: queue)
        return try await Self.failing { try await queue.setRules(job.id, try rules.rules()) }
    }

    func move(_ text: String, toFront: Bool) async throws -> DownloadJob {
        let queue = try queue()
        let job = try Self.job(text, in: queue)
        return try await Self.failing { try await queue.move(job.id, toFront: toFront) }
    }

    func network(_ mode: DownloadRules.NetworkOverride?) async throws -> NetworkReport {
        throw CommandFailure(
            "No server holds this cache folder: what the network is matters to a running `mediacache serve`, which reads it from the system."
        )
    }

    func record(_ url: URL, for duration: Duration?, renditions: RenditionChoice) async throws -> RecordingAnswer {
        let queue = try queue()
        let job = try await Self.run(queue, progress: { _ in }) {
            try await queue.record(url, for: duration, renditions: renditions)
        }
        return RecordingAnswer(job: job, url: "")
    }

    private func queue() throws -> DownloadQueue {
        try Self.failing { try DownloadQueue(reader: reader) }
    }

    /// Runs the job `start` gives in this process until it settles; a cancelled task stops it
    /// as a shutdown does (it resumes next time).
    static func run(
        _ queue: DownloadQueue, progress: @escaping @Sendable (DownloadJob) -> Void,
        start: () async throws -> DownloadJob
    ) async throws -> DownloadJob {
        let updates = queue.updates()
        let job = try await failing { try await start() }
        progress(job)
        queue.start()
        var last = queue.job(matching: job.id) ?? job
        if !last.state.isSettled {
            for await update in updates {
                guard case .changed(let changed) = update, changed.id == job.id else { continue }
                last = changed
                progress(changed)
                // A job that waits for its window, its network or disk space resumes with the next `serve`.
                if changed.state.isSettled || changed.waiting != nil { break }
            }
        }
        await queue.shutDown()
        return queue.job(matching: job.id) ?? last
    }

    /// The job `text` names (an ID or a URL), or a failure that says how to list them.
    static func job(_ text: String, in queue: DownloadQueue) throws -> DownloadJob {
        guard let job = queue.job(matching: text) else {
            throw CommandFailure("No download job is \(text.prefix(60)); `mediacache downloads` lists them.")
        }
        return job
    }

    /// `body`'s value, a ``CacheError`` turned into a ``CommandFailure``.
    static func failing<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as CacheError {
            throw CommandFailure(Advice.message(error))
        }
    }

    private static func failing<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CacheError {
            throw CommandFailure(Advice.message(error))
        }
    }
}
