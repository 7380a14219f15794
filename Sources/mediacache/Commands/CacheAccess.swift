// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheProxy
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// The cache folder as the commands reach it: opened here, or, when a running
/// `mediacache serve` holds it, through that server's admin endpoints (`/_mediacache/…`).
enum CacheAccess {
    case local(store: CacheStore, reader: CachingReader, fetcher: HTTPOriginFetcher)
    case server(ServerInfo)

    /// The file a running server describes itself in, inside its cache folder.
    static func serverFile(in directory: URL) -> URL {
        directory.appendingPathComponent("server.json")
    }

    /// Opens `directory`, or finds the server that holds it. A folder opened here gets the
    /// limits and key rule its last `serve` recorded (``FolderSettings``), so a command never
    /// evicts what the server kept nor looks a URL up under another key.
    /// - Throws: ``CommandFailure`` with a one-line reason.
    static func open(_ directory: URL, encryptionKey: SymmetricKey? = nil) async throws -> CacheAccess {
        do {
            var configuration =
                try FolderSettings.load(from: directory)?.storeConfiguration() ?? CacheStore.Configuration()
            configuration.encryptionKey = encryptionKey
            // What the store says at warning level (an index it rebuilt) reaches the user.
            configuration.logger = Logger(label: "mediacache") { StreamLogHandler.standardError(label: $0) }
            configuration.logger.logLevel = .warning
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            var fetcherConfiguration = HTTPOriginFetcher.Configuration()
            fetcherConfiguration.proxies = try OriginProxies.forCommand()
            let fetcher = HTTPOriginFetcher(configuration: fetcherConfiguration)
            return .local(store: store, reader: CachingReader(store: store, fetcher: fetcher), fetcher: fetcher)
        } catch let error as CacheError where error.code == .storeLocked {
            guard let data = try? Data(contentsOf: serverFile(in: directory)),
                let info = try? JSONDecoder().decode(ServerInfo.self, from: data)
            else {
                throw CommandFailure(
                    "\(Advice.message(error)) (no server file \(serverFile(in: directory).path) says which server holds it)"
                )
            }
            return .server(info)
        } catch let error as CacheError {
            throw CommandFailure(Advice.message(error))
        }
    }

    /// Commits and closes a store opened here.
    func close() async {
        if case .local(let store, _, let fetcher) = self {
            try? await store.close()
            try? await fetcher.shutdown()
        }
    }

    var isServer: Bool {
        if case .server = self { return true }
        return false
    }

    // MARK: Questions and changes

    func entries() async throws -> [CacheEntrySummary] {
        switch self {
        case .local(let store, _, _): return store.entrySummaries()
        case .server(let info): return try await Self.ask(info, .GET, "entries")
        }
    }

    /// The entry for `url`, or `nil` when nothing of it is cached.
    func entry(_ url: URL) async throws -> CacheEntrySummary? {
        switch self {
        case .local(let store, _, _): return store.entrySummary(for: store.key(for: url))
        case .server(let info):
            do {
                return try await Self.ask(info, .GET, "entry", target: url)
            } catch let failure as CommandFailure where failure.status == 404 {
                return nil
            }
        }
    }

    /// The store's counts, with the server's request counts when a server answers.
    func stats() async throws -> AdminStats {
        switch self {
        case .local(let store, let reader, _):
            return AdminStats(
                store: store.summary(), proxy: ProxyStatistics.Snapshot(), downloadsInFlight: reader.activeDownloads)
        case .server(let info): return try await Self.ask(info, .GET, "stats")
        }
    }

    /// Removes the entry for `url`; whether there was one.
    func remove(_ url: URL) async throws -> Bool {
        switch self {
        case .local(let store, _, _):
            let key = store.key(for: url)
            let existed = store.metadata(for: key) != nil
            try await store.remove(key)
            return existed
        case .server(let info):
            let answer: [String: Bool] = try await Self.ask(info, .POST, "remove", target: url)
            return answer["removed"] ?? false
        }
    }

    /// Removes every entry; how many there were.
    func clear() async throws -> Int {
        switch self {
        case .local(let store, _, _):
            let count = store.summary().entries
            try await store.removeAll()
            return count
        case .server(let info):
            let answer: [String: Int] = try await Self.ask(info, .POST, "clear")
            return answer["removed"] ?? 0
        }
    }

    /// Prefetches `url` as `request` says, reporting progress; cancel the task to stop.
    func prefetch(_ url: URL, _ request: PrefetchRequest, progress: @escaping @Sendable (PrefetchProgress) -> Void)
        async throws -> PrefetchProgress
    {
        switch self {
        case .local(_, let reader, _):
            do {
                return try await request.run(url, reader: reader, progress: progress)
            } catch let error as CacheError {
                throw CommandFailure(Advice.message(error))
            }
        case .server(let info):
            let query = [URLQueryItem(name: "target", value: url.absoluteString)] + request.queryItems
            let response = try await HTTPClient.shared.execute(
                try Self.request(info, .POST, "prefetch", query: query), timeout: .hours(24))
            guard response.status == .ok else { throw try await Self.failure(response) }
            var pending: [UInt8] = []
            for try await chunk in response.body {
                pending += chunk.readableBytesView
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = Data(pending[..<newline])
                    pending.removeSubrange(...newline)
                    if let update = try? JSONDecoder().decode(PrefetchProgress.self, from: line) {
                        progress(update)
                    } else if let done = try? JSONDecoder().decode([String: PrefetchProgress].self, from: line),
                        let result = done["done"]
                    {
                        return result
                    } else if let failed = try? JSONDecoder().decode([String: String].self, from: line),
                        let message = failed["error"]
                    {
                        throw CommandFailure(message)
                    }
                }
            }
            throw CommandFailure("The server at \(info.baseURL) ended the prefetch without a result.")
        }
    }

    // MARK: Pinned downloads

    /// Every download job.
    func downloads() async throws -> [DownloadJob] {
        switch self {
        case .local(_, let reader, _): return try Self.queue(reader).jobs
        case .server(let info): return try await Self.ask(info, .GET, "downloads")
        }
    }

    /// Pins `url` and follows its download until it settles, reporting each change. Here,
    /// the download runs in this process (cancel the task to stop: it resumes later); with a
    /// server, the server runs it and cancelling only stops following it.
    func pin(
        _ url: URL, _ request: PrefetchRequest, rules: JobRuleOptions? = nil, first: Bool = false,
        progress: @escaping @Sendable (DownloadJob) -> Void
    ) async throws -> DownloadJob {
        switch self {
        case .local(_, let reader, _):
            let queue = try Self.queue(reader)
            let own = try rules?.rules() ?? DownloadRules()
            return try await Self.localRun(queue) {
                let job = try await queue.pin(url, renditions: request.renditions, seconds: request.seconds, rules: own)
                return first ? try await queue.move(job.id) : job
            } progress: {
                progress($0)
            }
        case .server(let info):
            let ruleItems = (rules?.query ?? []).map { URLQueryItem(name: $0.0, value: $0.1) }
            let query =
                [URLQueryItem(name: "target", value: url.absoluteString)] + request.queryItems + ruleItems
                + (first ? [URLQueryItem(name: "first", value: "1")] : [])
            let job: DownloadJob = try await Self.ask(info, .POST, "pin", query: query)
            return try await Self.follow(job, on: info, progress: progress)
        }
    }

    /// Unpins `url`, or only the renditions `request` names; whether anything was released.
    func unpin(_ url: URL, _ request: PrefetchRequest = PrefetchRequest()) async throws -> Bool {
        switch self {
        case .local(_, let reader, _):
            return try await Self.failing { try await Self.queue(reader).unpin(url, renditions: request.renditions) }
        case .server(let info):
            let query = [URLQueryItem(name: "target", value: url.absoluteString)] + request.queryItems
            let answer: [String: Bool] = try await Self.ask(info, .POST, "unpin", query: query)
            return answer["unpinned"] ?? false
        }
    }

    /// What `pause`, `resume` and `cancel` do to a job.
    enum JobAction: String {
        case pause, resume, cancel
    }

    /// Does `action` to the job `text` names (an id or a URL); the job after it, `nil` once cancelled.
    /// A job resumed here downloads in this process until it settles (see ``pin(_:_:progress:)``).
    func control(_ action: JobAction, _ text: String, progress: @escaping @Sendable (DownloadJob) -> Void) async throws
        -> DownloadJob?
    {
        switch self {
        case .local(_, let reader, _):
            let queue = try Self.queue(reader)
            let job = try Self.job(text, in: queue)
            switch action {
            case .pause: return try await Self.failing { try await queue.pause(job.id) }
            case .cancel:
                try await Self.failing { try await queue.cancel(job.id) }
                return nil
            case .resume:
                return try await Self.localRun(queue) {
                    try await queue.resume(job.id)
                } progress: {
                    progress($0)
                }
            }
        case .server(let info):
            let query = [URLQueryItem(name: "job", value: text)]
            if action == .cancel {
                let _: [String: Bool] = try await Self.ask(info, .POST, action.rawValue, query: query)
                return nil
            }
            let job: DownloadJob = try await Self.ask(info, .POST, action.rawValue, query: query)
            return action == .resume ? try await Self.follow(job, on: info, progress: progress) : job
        }
    }

    /// Gives the job `text` names the new URL `url` (a signed URL that expired) and follows it
    /// until it settles, as ``pin(_:_:progress:)`` does.
    func replaceURL(_ text: String, _ url: URL, progress: @escaping @Sendable (DownloadJob) -> Void) async throws
        -> DownloadJob
    {
        switch self {
        case .local(_, let reader, _):
            let queue = try Self.queue(reader)
            let job = try Self.job(text, in: queue)
            return try await Self.localRun(queue) {
                try await queue.replaceURL(job.id, with: url)
            } progress: {
                progress($0)
            }
        case .server(let info):
            let query = [
                URLQueryItem(name: "job", value: text), URLQueryItem(name: "target", value: url.absoluteString),
            ]
            let job: DownloadJob = try await Self.ask(info, .POST, "replace-url", query: query)
            return try await Self.follow(job, on: info, progress: progress)
        }
    }

    /// Writes what is cached of `url` to `destination` (see ``CachingReader/export(_:to:renditions:seconds:)``).
    func export(_ url: URL, to destination: URL, _ request: PrefetchRequest) async throws -> ExportSummary {
        switch self {
        case .local(_, let reader, _):
            // A live URL that was recorded exports as its recording.
            let queue = try Self.queue(reader)
            if let job = queue.job(matching: url.absoluteString), job.isRecording {
                return try await Self.failing { try await queue.recordings.export(job.id, to: destination) }
            }
            return try await Self.failing {
                try await reader.export(url, to: destination, renditions: request.renditions, seconds: request.seconds)
            }
        case .server(let info):
            let query =
                [
                    URLQueryItem(name: "target", value: url.absoluteString),
                    URLQueryItem(name: "output", value: destination.path),
                ] + request.queryItems
            return try await Self.ask(info, .POST, "export", query: query)
        }
    }

    static func queue(_ reader: CachingReader) throws -> DownloadQueue {
        try failing { try DownloadQueue(reader: reader) }
    }

    /// Runs the job `start` gives in this process until it settles; a cancelled task stops it
    /// as a shutdown does (it resumes next time).
    static func localRun(
        _ queue: DownloadQueue, start: () async throws -> DownloadJob,
        progress: @escaping @Sendable (DownloadJob) -> Void
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

    /// Asks the server for `job` until it settles.
    static func follow(_ job: DownloadJob, on info: ServerInfo, progress: @escaping @Sendable (DownloadJob) -> Void)
        async throws -> DownloadJob
    {
        var job = job
        progress(job)
        while !job.state.isSettled, job.waiting == nil {
            try await Task.sleep(for: .milliseconds(200))
            let jobs: [DownloadJob] = try await ask(info, .GET, "downloads")
            guard let current = jobs.first(where: { $0.id == job.id }) else {
                throw CommandFailure("The server no longer has the download job \(job.id) (cancelled?).")
            }
            job = current
            progress(job)
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

/// A command that cannot do what it was asked, with a one-line reason (exit status 1).
struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    var status: Int?
    init(_ message: String, status: Int? = nil) {
        self.message = message
        self.status = status
    }
    var description: String { message }
}

/// What `serve` records in its cache folder (`settings.json`) for the commands that open the
/// folder without it: the limits and the key rule it serves with.
struct FolderSettings: Codable, Equatable {
    var maxBytes: Int64
    var maxPinnedBytes: Int64?
    var maxAgeSeconds: Double?
    var ignoredQueryParameters: [String]
    var sameContentHosts: [[String]]?
    var minFreeDiskBytes: Int64?

    static func file(in directory: URL) -> URL {
        directory.appendingPathComponent("settings.json")
    }

    init(_ configuration: CacheStore.Configuration) {
        maxBytes = configuration.maxBytes
        maxPinnedBytes = configuration.maxPinnedBytes
        maxAgeSeconds = configuration.maxAge.map {
            Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18
        }
        ignoredQueryParameters = configuration.keyRule.ignoredQueryParameters.sorted()
        sameContentHosts = configuration.keyRule.sameContentHosts.isEmpty ? nil : configuration.keyRule.sameContentHosts
        minFreeDiskBytes = configuration.minFreeDiskBytes
    }

    func storeConfiguration() -> CacheStore.Configuration {
        var configuration = CacheStore.Configuration()
        configuration.maxBytes = maxBytes
        configuration.maxPinnedBytes = maxPinnedBytes
        configuration.maxAge = maxAgeSeconds.map { .seconds($0) }
        configuration.keyRule = CacheKeyRule(
            ignoredQueryParameters: Set(ignoredQueryParameters), sameContentHosts: sameContentHosts ?? [])
        configuration.minFreeDiskBytes = minFreeDiskBytes
        return configuration
    }

    /// The settings recorded in `directory`, or `nil` when there are none.
    /// - Throws: ``CommandFailure`` when the file is there but cannot be read.
    static func load(from directory: URL) throws -> FolderSettings? {
        guard let data = try? Data(contentsOf: file(in: directory)) else { return nil }
        do {
            let settings = try JSONDecoder().decode(FolderSettings.self, from: data)
            guard settings.maxBytes > 0, (settings.maxPinnedBytes ?? 0) >= 0,
                settings.ignoredQueryParameters.count <= 1000,
                (settings.sameContentHosts ?? []).joined().count <= 1000
            else {
                throw CommandFailure("limits out of range")
            }
            return settings
        } catch {
            throw CommandFailure(
                "\(file(in: directory).path) cannot be read (\(error)); remove it, and `mediacache serve` writes it again."
            )
        }
    }

    /// Records these settings in `directory`, readable by this user only.
    func save(in directory: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let path = Self.file(in: directory)
        try encoder.encode(self).write(to: path, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path.path)
    }
}
