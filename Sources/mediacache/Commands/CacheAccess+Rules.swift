// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheProxy

extension CacheAccess {
    /// Gives the job `text` names rules of its own (``DownloadQueue/setRules(_:_:)``).
    func setRules(_ text: String, _ rules: JobRuleOptions) async throws -> DownloadJob {
        switch self {
        case .local(_, let reader, _):
            let queue = try Self.queue(reader)
            let job = try Self.job(text, in: queue)
            return try await Self.failing { try await queue.setRules(job.id, try rules.rules()) }
        case .server(let info):
            let query =
                [URLQueryItem(name: "job", value: text)] + rules.query.map { URLQueryItem(name: $0.0, value: $0.1) }
            return try await Self.ask(info, .POST, "rules", query: query)
        }
    }

    /// Moves the job `text` names to the front of the queue (or the back).
    func move(_ text: String, toFront: Bool) async throws -> DownloadJob {
        switch self {
        case .local(_, let reader, _):
            let queue = try Self.queue(reader)
            let job = try Self.job(text, in: queue)
            return try await Self.failing { try await queue.move(job.id, toFront: toFront) }
        case .server(let info):
            return try await Self.ask(
                info, .POST, "move",
                query: [
                    URLQueryItem(name: "job", value: text), URLQueryItem(name: "to", value: toFront ? "first" : "last"),
                ])
        }
    }

    /// What the server takes the network to be; with `mode`, says it first.
    func network(_ mode: NetworkOverride?) async throws -> NetworkReport {
        guard case .server(let info) = self else {
            throw CommandFailure(
                "No server holds this cache folder: what the network is matters to a running `mediacache serve`, which reads it from the system."
            )
        }
        guard let mode else { return try await Self.ask(info, .GET, "network", query: []) }
        return try await Self.ask(info, .POST, "network", query: [URLQueryItem(name: "mode", value: mode.rawValue)])
    }

    /// Records the live stream at `url`: a server records it and answers at once; here, the
    /// recording runs until it ends (its `url` is then empty: no server plays it).
    func record(_ url: URL, for duration: Duration?, renditions: RenditionChoice) async throws -> RecordingAnswer {
        switch self {
        case .local(_, let reader, _):
            let queue = try Self.queue(reader)
            let job = try await Self.localRun(queue) {
                try await queue.record(url, for: duration, renditions: renditions)
            } progress: { _ in
            }
            return RecordingAnswer(job: job, url: "")
        case .server(let info):
            var query =
                [URLQueryItem(name: "target", value: url.absoluteString)]
                + PrefetchRequest(renditions: renditions).queryItems
            if let duration {
                query.append(
                    URLQueryItem(
                        name: "seconds",
                        value: String(
                            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)))
            }
            return try await Self.ask(info, .POST, "record", query: query)
        }
    }

    /// The job `text` names (an id or a URL), or a failure that says how to list them.
    static func job(_ text: String, in queue: DownloadQueue) throws -> DownloadJob {
        guard let job = queue.job(matching: text) else {
            throw CommandFailure("No download job is \(text.prefix(60)); `mediacache downloads` lists them.")
        }
        return job
    }
}
