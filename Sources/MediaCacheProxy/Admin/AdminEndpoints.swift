// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import NIOCore
import NIOHTTP1

/// The server's side of the admin table (``AdminAPI``): checks an admin request's sender,
/// token and header, answers the pages outside `/_mediacache/` (metrics, status), and routes
/// the rest by the table to the handler this type gives each endpoint.
struct AdminEndpoints {
    static let prefix = ProxyRouter.adminPrefix
    let handler: ProxyHandler

    /// Checks and answers the admin request `head` for `path` (the router's
    /// ``ProxyRouter/Checked/admin(path:target:)``). A refusal is counted, not logged as a
    /// request of a player.
    func respond(to head: HTTPRequestHead, path: String, target: RequestTarget, localPort: Int) async throws
        -> ProxyResponse
    {
        do {
            try handler.router.checkSender(head, localPort: localPort)
            // A web page may send a simple POST to 127.0.0.1 from anywhere; it cannot add this
            // field without a CORS preflight, which the proxy refuses to pages it does not list.
            if head.method != .GET, head.method != .HEAD, head.headers.first(name: "X-MediaCache-Admin") != "1" {
                throw ProxyRequestError(
                    status: .forbidden, "Admin requests that change the cache need the header X-MediaCache-Admin: 1.",
                    refusal: .admin)
            }
            guard handler.router.hasToken(target, head) else {
                throw ProxyRequestError(status: .forbidden, "Missing or wrong access token.", refusal: .token)
            }
        } catch {
            handler.router.noteRefusal(error, head)
            return ProxyResponse.failure(error)
        }
        do {
            if Self.pages.contains(path) {
                guard head.method == .GET || head.method == .HEAD else {
                    throw ProxyRequestError(
                        status: .methodNotAllowed, "\(path) is read with GET.", headers: [("Allow", "GET, HEAD")])
                }
                var response = try page(path)
                if head.method == .HEAD { response.body = .none }
                return response
            }
            let name = String(path.dropFirst(Self.prefix.count))
            return try await routes(head: head, localPort: localPort).respond(
                name, method: head.method, query: AdminQueryItems(target.items))
        } catch let error as ProxyRequestError {
            return ProxyResponse.failure(error)
        }
    }

    /// The pages outside ``prefix``: the metrics and the status page.
    static let pages = ProxyRouter.adminPages

    private func page(_ path: String) throws -> ProxyResponse {
        switch path {
        case "/metrics":
            guard let export = handler.configuration.metricsExporter else {
                throw ProxyRequestError(
                    status: .notFound, "This proxy exports no metrics (its app bootstrapped no Prometheus backend).")
            }
            engine.recordMetrics()
            return Self.text(export(), type: "text/plain; version=0.0.4; charset=utf-8")
        case "/status.json":
            return try Self.json(
                StatusPage.report(engine: engine, downloads: handler.admin.downloads, statistics: handler.statistics))
        default:
            return Self.text(
                StatusPage.html(
                    StatusPage.report(
                        engine: engine, downloads: handler.admin.downloads, statistics: handler.statistics)),
                type: "text/html; charset=utf-8")
        }
    }

    static func text(_ text: String, type: String) -> ProxyResponse {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: String(text.utf8.count))
        headers.add(name: "Cache-Control", value: "no-store")
        return ProxyResponse(status: .ok, headers: headers, body: .text(text))
    }

    private var engine: any AdminSource { handler.admin.engine }
    private var store: CacheStore { handler.admin.engine.store }

    /// A handler for each endpoint of the table; `head` and `localPort` are the request's.
    func routes(head: HTTPRequestHead, localPort: Int) -> AdminRouter {
        var router = AdminRouter()
        router.on(AdminAPI.entries) { _ in store.entrySummaries() }
        router.on(AdminAPI.entry) { query in
            guard let summary = store.entrySummary(for: store.key(for: query.target)) else {
                throw ProxyRequestError(status: .notFound, "Nothing is cached for that URL.")
            }
            return summary
        }
        router.on(AdminAPI.stats) { _ in
            handler.statistics.reportLifetime()
            return AdminStats(
                store: store.summary(), proxy: handler.statistics.snapshot,
                downloadsInFlight: engine.activity.downloads.count,
                usage: store.usage)
        }
        router.on(AdminAPI.remove) { query in
            let key = store.key(for: query.target)
            let existed = store.metadata(for: key) != nil
            try await store.remove(key)
            return AdminAPI.Removed(removed: existed)
        }
        router.on(AdminAPI.clear) { _ in
            let count = store.summary().entries
            try await store.removeAll()
            return AdminAPI.Cleared(removed: count)
        }
        router.on(AdminAPI.lanRevoke) { query in
            guard let credential = query.credential, LANRevocations.id(of: credential) != nil else {
                throw ProxyRequestError(status: .badRequest, "That URL carries no LAN credential of this server.")
            }
            return AdminAPI.LANRevoked(
                revoked: try await handler.configuration.lanRevocations.revoke(credential: credential))
        }
        router.responding(AdminAPI.prefetch) { query in prefetch(query) }
        router.on(AdminAPI.downloads) { _ in try downloads().jobs }
        router.on(AdminAPI.pin) { query in
            let rules = try query.rules.rules()
            let job = try await downloads().pin(
                query.asset.target, renditions: query.asset.request.renditions, seconds: query.asset.request.seconds,
                rules: rules)
            return query.first ? try await downloads().move(job.id) : job
        }
        router.on(AdminAPI.rules) { query in
            try await downloads().setRules(try job(query.job), try query.rules.rules())
        }
        router.on(AdminAPI.move) { query in try await downloads().move(try job(query.job), toFront: query.toFront) }
        router.on(AdminAPI.network) { _ in NetworkReport(try downloads()) }
        router.on(AdminAPI.setNetwork) { query in
            try downloads().networkOverride = query.mode
            return NetworkReport(try downloads())
        }
        router.on(AdminAPI.unpin) { query in
            AdminAPI.Unpinned(
                unpinned: try await downloads().unpin(query.target, renditions: query.request.renditions))
        }
        router.on(AdminAPI.replaceURL) { query in
            try await downloads().replaceURL(try job(query.job), with: query.target)
        }
        router.on(AdminAPI.pause) { query in try await downloads().pause(try job(query)) }
        router.on(AdminAPI.resume) { query in try await downloads().resume(try job(query)) }
        router.on(AdminAPI.cancel) { query in
            try await downloads().cancel(try job(query))
            return AdminAPI.Cancelled()
        }
        router.on(AdminAPI.verify) { query in
            await engine.verify(query.targets.isEmpty ? nil : query.targets.map(store.key(for:)), repair: query.repair)
        }
        router.on(AdminAPI.export) { query in
            let url = query.asset.target
            let destination = URL(fileURLWithPath: query.output)
            // A live URL that was recorded exports as its recording.
            if let queue = handler.admin.downloads, let job = queue.job(matching: url.absoluteString), job.isRecording {
                return query.oneFile
                    ? try await queue.recordings.exportFile(job.id, to: destination)
                    : try await queue.recordings.export(job.id, to: destination)
            }
            return try await engine.exportAsset(
                url, to: destination, renditions: query.asset.request.renditions, seconds: query.asset.request.seconds,
                oneFile: query.oneFile)
        }
        router.on(AdminAPI.preloadStatus) { _ in engine.activity.preloads }
        router.on(AdminAPI.fills) { _ in engine.activity.fills }
        router.on(AdminAPI.preload) { query in
            engine.replacePreloads(with: query.targets.map { PreloadItem($0, seconds: query.seconds) })
        }
        router.on(AdminAPI.stopPreload) { _ in engine.replacePreloads(with: []) }
        let recordings = AdminRecordings(handler: handler, head: head, localPort: localPort)
        router.on(AdminAPI.record) { query in try await recordings.record(query, downloads: try downloads()) }
        router.responding(AdminAPI.recordingPlaylist) { query in
            try recordings.playlist(try job(query.job), track: query.track, downloads: try downloads())
        }
        router.responding(AdminAPI.recordingManifest) { query in
            try recordings.manifest(try job(query), downloads: try downloads())
        }
        return router
    }

    /// The path of the recording `job`'s playlist (or DASH manifest), with the token when the
    /// proxy has one.
    static func recordingPath(_ job: DownloadJob, token: String?) -> String {
        Self.prefix + (job.recording?.isDASH == true ? "recording.mpd" : "recording.m3u8") + "?job=" + job.id
            + (token.map { "&token=" + HLSPlaylist.percentEncoded($0) } ?? "")
    }

    private func downloads() throws -> DownloadQueue {
        guard let downloads = handler.admin.downloads else {
            throw ProxyRequestError(status: .notFound, "This server keeps no download queue.")
        }
        return downloads
    }

    /// The job `query` names: an ID, or a URL a job pins.
    private func job(_ query: JobQuery) throws -> String {
        guard let job = try downloads().job(matching: query.job) else {
            throw ProxyRequestError(
                status: .notFound,
                "No download job is \(query.job.prefix(60)); GET /_mediacache/downloads lists them.")
        }
        return job.id
    }

    /// Runs a prefetch, streaming its progress as JSON lines; the client leaving cancels it.
    private func prefetch(_ query: AssetQuery) -> ProxyResponse {
        let (url, request) = (query.target, query.request)
        let engine = engine
        let (lines, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(64))
        let task = Task {
            do {
                let done = try await request.run(url, source: engine) { progress in
                    if let line = try? Self.line(progress) { continuation.yield(line) }
                }
                continuation.yield((try? Self.line(["done": done])) ?? "")
            } catch {
                continuation.yield((try? Self.line(["error": (error as? CacheError)?.message ?? "\(error)"])) ?? "")
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/x-ndjson")
        return ProxyResponse(status: .ok, headers: headers, body: .lines(lines))
    }

    static func line(_ value: some Encodable) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self) + "\n"
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func json(_ value: some Encodable) throws -> ProxyResponse {
        let body = Array(try encoder.encode(value)) + [UInt8(ascii: "\n")]
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Cache-Control", value: "no-store")
        return ProxyResponse(status: .ok, headers: headers, body: .bytes(body))
    }
}
