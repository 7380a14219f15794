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

/// What the commands ask of a cache folder, answered here (``LocalCache``: the folder opened
/// in this process) or by the running `mediacache serve` that holds it (``ServerCache``:
/// through the admin table, ``AdminAPI``).
protocol CacheAccess: Sendable {
    /// Whether a server answers.
    var isServer: Bool { get }
    /// Commits and closes what was opened here.
    func close() async

    func entries() async throws -> [CacheEntrySummary]
    /// The entry for `url`, or `nil` when nothing of it is cached.
    func entry(_ url: URL) async throws -> CacheEntrySummary?
    /// The store's counts, with the server's request counts when a server answers.
    func stats() async throws -> AdminStats
    /// Removes the entry for `url`; whether there was one.
    func remove(_ url: URL) async throws -> Bool
    /// Removes every entry; how many there were.
    func clear() async throws -> Int
    /// Prefetches `url` as `request` says, reporting progress; cancel the task to stop.
    func prefetch(_ url: URL, _ request: PrefetchRequest, progress: @escaping @Sendable (PrefetchProgress) -> Void)
        async throws -> PrefetchProgress
    /// Every download job.
    func downloads() async throws -> [DownloadJob]
    /// The played files a server is fetching on to their end (none here: no player plays).
    func fills() async throws -> [FillOnPlay.Progress]
    /// Pins `url` and follows its download until it settles, reporting each change. Here, the
    /// download runs in this process (cancel the task to stop: it resumes later); with a
    /// server, the server runs it and cancelling only stops following it.
    func pin(
        _ url: URL, _ request: PrefetchRequest, rules: JobRuleOptions?, first: Bool,
        progress: @escaping @Sendable (DownloadJob) -> Void
    ) async throws -> DownloadJob
    /// Unpins `url`, or only the renditions `request` names; whether anything was released.
    func unpin(_ url: URL, _ request: PrefetchRequest) async throws -> Bool
    /// Does `action` to the job `text` names (an ID or a URL); the job after it, `nil` once
    /// cancelled. A job resumed here downloads in this process until it settles (as `pin`).
    func control(_ action: JobAction, _ text: String, progress: @escaping @Sendable (DownloadJob) -> Void)
        async throws -> DownloadJob?
    /// Gives the job `text` names the new URL `url` (a signed URL that expired) and follows it
    /// until it settles, as `pin` does.
    func replaceURL(_ text: String, _ url: URL, progress: @escaping @Sendable (DownloadJob) -> Void) async throws
        -> DownloadJob
    /// Writes what is cached of `url` to `destination` (a recorded live URL: its recording):
    /// as a folder, or with `oneFile` as one playable file.
    func export(_ url: URL, to destination: URL, _ request: PrefetchRequest, oneFile: Bool) async throws
        -> ExportSummary
    /// Checks the entries of `urls` (every entry when empty) against their checksums now, and
    /// fetches damaged bytes again when `repair` says so.
    func verify(_ urls: [URL], repair: Bool) async throws -> [VerifyReport]
    /// Gives the job `text` names rules of its own.
    func setRules(_ text: String, _ rules: JobRuleOptions) async throws -> DownloadJob
    /// Moves the job `text` names to the front of the queue (or the back).
    func move(_ text: String, toFront: Bool) async throws -> DownloadJob
    /// What the server takes the network to be; with `mode`, says it first.
    func network(_ mode: DownloadRules.NetworkOverride?) async throws -> NetworkReport
    /// Records the live stream at `url`: a server records it and answers at once; here, the
    /// recording runs until it ends (its `url` is then empty: no server plays it).
    func record(_ url: URL, for duration: Duration?, renditions: RenditionChoice) async throws -> RecordingAnswer
}

extension CacheAccess {
    func pin(_ url: URL, _ request: PrefetchRequest, progress: @escaping @Sendable (DownloadJob) -> Void)
        async throws -> DownloadJob
    {
        try await pin(url, request, rules: nil, first: false, progress: progress)
    }

    func unpin(_ url: URL) async throws -> Bool { try await unpin(url, PrefetchRequest()) }
}

/// What `pause`, `resume` and `cancel` do to a job.
enum JobAction: String {
    case pause, resume, cancel
}

/// The cache folder: opened here, or, when a running `mediacache serve` holds it, its server.
enum CacheFolder {
    /// The file a running server describes itself in, inside its cache folder.
    static func serverFile(in directory: URL) -> URL {
        directory.appendingPathComponent("server.json")
    }

    /// The key the LAN listener's URLs are minted with (`lan.key` in the store folder, readable
    /// by its owner only), made the first time: the URLs given to a TV stay good across restarts.
    /// - Throws: ``CommandFailure`` when the file cannot be read or written, or holds no key.
    static func lanCapabilities(in directory: URL) throws -> LANCapabilities {
        let file = directory.appendingPathComponent("lan.key")
        if let text = try? String(contentsOf: file, encoding: .utf8) {
            guard let capabilities = LANCapabilities(keyText: text.trimmingCharacters(in: .whitespacesAndNewlines))
            else {
                throw CommandFailure(
                    "\(file.path) holds no LAN key: remove it, and a new one is made (LAN URLs given before stop working)."
                )
            }
            return capabilities
        }
        let made = LANCapabilities.made()
        do {
            try Data((made.keyText + "\n").utf8).write(to: file, options: .withoutOverwriting)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        } catch {
            throw CommandFailure("Cannot keep the LAN key in \(file.path): \(error.localizedDescription)")
        }
        return made
    }

    /// Opens `directory` (with its streaming entries in `streamingDirectory` when the store has
    /// two folders), or finds the server that holds it. A folder opened here gets the
    /// limits and key rule its last `serve` recorded (``FolderSettings``), so a command never
    /// evicts what the server kept nor looks a URL up under another key.
    /// - Throws: ``CommandFailure`` with a one-line reason.
    static func open(_ directory: URL, streamingDirectory: URL? = nil, encryptionKey: SymmetricKey? = nil) async throws
        -> any CacheAccess
    {
        do {
            var configuration =
                try FolderSettings.load(from: directory)?.storeConfiguration() ?? CacheStore.Configuration()
            configuration.encryptionKey = encryptionKey
            configuration.cacheDirectory = streamingDirectory
            // What the store says at warning level (an index it rebuilt) reaches the user.
            configuration.logger = Logger(label: "mediacache") { StreamLogHandler.standardError(label: $0) }
            configuration.logger.logLevel = .warning
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            var fetcherConfiguration = HTTPOriginFetcher.Configuration()
            fetcherConfiguration.proxies = try OriginProxies.forCommand()
            let fetcher = HTTPOriginFetcher(configuration: fetcherConfiguration)
            return LocalCache(store: store, reader: CachingReader(store: store, fetcher: fetcher), fetcher: fetcher)
        } catch let error as CacheError where error.code == .storeLocked {
            guard let data = try? Data(contentsOf: serverFile(in: directory)),
                let info = try? JSONDecoder().decode(ServerInfo.self, from: data)
            else {
                throw CommandFailure(
                    "\(Advice.message(error)) (no server file \(serverFile(in: directory).path) says which server holds it)"
                )
            }
            return ServerCache(info)
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
