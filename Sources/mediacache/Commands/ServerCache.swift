// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// The cache folder a running `mediacache serve` holds, asked through its admin table
/// (``AdminAPI``): each operation one endpoint, its query and answer of the endpoint's types.
struct ServerCache: CacheAccess {
    let info: ServerInfo

    init(_ info: ServerInfo) { self.info = info }

    var isServer: Bool { true }

    func close() async {}

    func entries() async throws -> [CacheEntrySummary] { try await ask(AdminAPI.entries, NoQuery()) }

    func entry(_ url: URL) async throws -> CacheEntrySummary? {
        do {
            return try await ask(AdminAPI.entry, URLQuery(url))
        } catch let failure as CommandFailure where failure.status == 404 {
            return nil
        }
    }

    func stats() async throws -> AdminStats { try await ask(AdminAPI.stats, NoQuery()) }

    func remove(_ url: URL) async throws -> Bool { try await ask(AdminAPI.remove, URLQuery(url)).removed }

    func clear() async throws -> Int { try await ask(AdminAPI.clear, NoQuery()).removed }

    func verify(_ urls: [URL], repair: Bool) async throws -> [VerifyReport] {
        try await ask(AdminAPI.verify, VerifyQuery(urls, repair: repair), timeout: .hours(24))
    }

    func prefetch(_ url: URL, _ request: PrefetchRequest, progress: @escaping @Sendable (PrefetchProgress) -> Void)
        async throws -> PrefetchProgress
    {
        let response = try await HTTPClient.shared.execute(
            try Self.request(info, AdminAPI.prefetch, AssetQuery(url, request)), timeout: .hours(24))
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

    func downloads() async throws -> [DownloadJob] { try await ask(AdminAPI.downloads, NoQuery()) }

    func fills() async throws -> [FillOnPlay.Progress] { try await ask(AdminAPI.fills, NoQuery()) }

    func pin(
        _ url: URL, _ request: PrefetchRequest, rules: JobRuleOptions?, first: Bool,
        progress: @escaping @Sendable (DownloadJob) -> Void
    ) async throws -> DownloadJob {
        let query = PinQuery(AssetQuery(url, request), rules: rules?.text ?? RulesText(), first: first)
        return try await follow(try await ask(AdminAPI.pin, query), progress: progress)
    }

    func unpin(_ url: URL, _ request: PrefetchRequest) async throws -> Bool {
        try await ask(AdminAPI.unpin, AssetQuery(url, request)).unpinned
    }

    func control(_ action: JobAction, _ text: String, progress: @escaping @Sendable (DownloadJob) -> Void)
        async throws -> DownloadJob?
    {
        switch action {
        case .pause: return try await ask(AdminAPI.pause, JobQuery(text))
        case .resume: return try await follow(try await ask(AdminAPI.resume, JobQuery(text)), progress: progress)
        case .cancel:
            _ = try await ask(AdminAPI.cancel, JobQuery(text))
            return nil
        }
    }

    func replaceURL(_ text: String, _ url: URL, progress: @escaping @Sendable (DownloadJob) -> Void) async throws
        -> DownloadJob
    {
        try await follow(try await ask(AdminAPI.replaceURL, ReplaceURLQuery(text, url)), progress: progress)
    }

    func export(_ url: URL, to destination: URL, _ request: PrefetchRequest, oneFile: Bool) async throws
        -> ExportSummary
    {
        try await ask(
            AdminAPI.export, ExportQuery(AssetQuery(url, request), output: destination.path, oneFile: oneFile))
    }

    func setRules(_ text: String, _ rules: JobRuleOptions) async throws -> DownloadJob {
        try await ask(AdminAPI.rules, RulesQuery(text, rules.text))
    }

    func move(_ text: String, toFront: Bool) async throws -> DownloadJob {
        try await ask(AdminAPI.move, MoveQuery(text, toFront: toFront))
    }

    func network(_ mode: DownloadRules.NetworkOverride?) async throws -> NetworkReport {
        guard let mode else { return try await ask(AdminAPI.network, NoQuery()) }
        return try await ask(AdminAPI.setNetwork, NetworkQuery(mode))
    }

    func record(_ url: URL, for duration: Duration?, renditions: RenditionChoice) async throws -> RecordingAnswer {
        let seconds = duration.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        return try await ask(
            AdminAPI.record, AssetQuery(url, PrefetchRequest(seconds: seconds, renditions: renditions)))
    }

    // MARK: The preload queue

    /// The server answers a preload at once: a port nobody answers on is told in seconds, not
    /// after the minute AsyncHTTPClient would go on trying to connect.
    static let preloadTimeout: TimeAmount = .seconds(5)

    /// The server's preload queue.
    func preloadStatus() async throws -> [PreloadItem.Status] {
        try await ask(AdminAPI.preloadStatus, NoQuery(), timeout: Self.preloadTimeout)
    }

    /// Whether the server answers (its preload queue, in seconds at most): a `server.json` a
    /// killed server left names a port nobody, or someone else, answers on.
    func answers() async -> Bool { (try? await preloadStatus()) != nil }

    /// Replaces the server's preload queue (an empty `urls` empties it).
    func preload(_ urls: [URL], seconds: Double) async throws -> [PreloadItem.Status] {
        guard !urls.isEmpty else { return try await ask(AdminAPI.stopPreload, NoQuery(), timeout: Self.preloadTimeout) }
        return try await ask(AdminAPI.preload, PreloadQuery(urls, seconds: seconds), timeout: Self.preloadTimeout)
    }

    // MARK: Talking to the server

    /// Asks the server for `job` until it settles.
    private func follow(_ job: DownloadJob, progress: @escaping @Sendable (DownloadJob) -> Void) async throws
        -> DownloadJob
    {
        var job = job
        progress(job)
        while !job.state.isSettled, job.waiting == nil {
            try await Task.sleep(for: .milliseconds(200))
            guard let current = try await downloads().first(where: { $0.id == job.id }) else {
                throw CommandFailure("The server no longer has the download job \(job.id) (cancelled?).")
            }
            job = current
            progress(job)
        }
        return job
    }

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    static func request<Query, Answer>(_ info: ServerInfo, _ endpoint: AdminEndpoint<Query, Answer>, _ query: Query)
        throws -> HTTPClientRequest
    {
        // Every byte outside RFC 3986's unreserved set is encoded (`+` and `&` in a URL too).
        let text = query.queryItems.map { $0.name + "=" + HLSPlaylist.percentEncoded($0.value ?? "") }
            .joined(separator: "&")
        var request = HTTPClientRequest(
            url: info.baseURL + "/_mediacache/" + endpoint.name + (text.isEmpty ? "" : "?" + text))
        request.method = endpoint.method
        if let token = info.token { request.headers.add(name: "X-MediaCache-Token", value: token) }
        if endpoint.method != .GET, endpoint.method != .HEAD {
            request.headers.add(name: "X-MediaCache-Admin", value: "1")
        }
        return request
    }

    /// The answer of `endpoint` to `query`.
    /// - Throws: ``CommandFailure`` saying what the server answered, or that it does not.
    func ask<Query, Answer>(
        _ endpoint: AdminEndpoint<Query, Answer>, _ query: Query, timeout: TimeAmount = .seconds(60)
    ) async throws -> Answer {
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(
                try Self.request(info, endpoint, query), timeout: timeout)
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            guard info.pid > 0 else {
                // Addressed by port (`preload --port`), not found through a cache folder.
                throw CommandFailure(
                    "No MediaCache server answers at \(info.baseURL) (is `mediacache serve` running on that port?): \(error)."
                )
            }
            throw CommandFailure(
                "The server that holds the cache folder (\(info.baseURL), process \(info.pid)) does not answer: \(error)."
            )
        }
        guard response.status == .ok else { throw try await Self.failure(response) }
        let body = try await response.body.collect(upTo: 256 << 20)
        do {
            return try Self.decoder.decode(Answer.self, from: Data(buffer: body))
        } catch {
            throw CommandFailure(
                "The server at \(info.baseURL) answered /_mediacache/\(endpoint.name) with something unreadable: \(error)."
            )
        }
    }

    static func failure(_ response: HTTPClientResponse) async throws -> CommandFailure {
        let body = try await response.body.collect(upTo: 64 << 10)
        let message = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)
        let remedy = response.headers.first(name: "X-MediaCache-Remedy").flatMap(CacheError.Remedy.init(parsing:))
        return CommandFailure(
            Advice.joined("The server answered \(response.status.code): \(message)", Advice.words(for: remedy)),
            status: Int(response.status.code))
    }
}
