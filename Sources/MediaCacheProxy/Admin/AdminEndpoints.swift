// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
package import MediaCache
import NIOCore
import NIOHTTP1

/// What `mediacache ls`, `info`, `rm`, `clear`, `stats` and `prefetch` ask a running server
/// for when it holds the cache folder, under `/_mediacache/`. They answer JSON, need the token
/// when one is set, and never proxy anything. An origin URL is given as `target=`.
///
/// | request | answer |
/// |---|---|
/// | `GET /_mediacache/entries` | `[CacheEntrySummary]` |
/// | `GET /_mediacache/entry?target=URL` | `CacheEntrySummary`, or 404 |
/// | `GET /_mediacache/stats` | ``AdminStats`` |
/// | `POST /_mediacache/remove?target=URL` | `{"removed": true|false}` |
/// | `POST /_mediacache/clear` | `{"removed": N}` |
/// | `POST /_mediacache/prefetch?target=URL[&range=a-b][&seconds=S][&variant=first|lowest|highest|BPS]` | one `PrefetchProgress` JSON per line as it goes, then `{"done": …}` or `{"error": …}` |
/// | `GET /_mediacache/downloads` | `[DownloadJob]` |
/// | `POST /_mediacache/pin?target=URL[&seconds=S][&variant=…][&window=…][&network=…][&rate=B][&first=1]` | `DownloadJob` (queued); 507 with the numbers when it cannot fit |
/// | `POST /_mediacache/rules?job=ID[&window=HH:MM-HH:MM|any][&network=any|unmetered|not-constrained][&rate=B]` | `DownloadJob`, under its new rules |
/// | `POST /_mediacache/move?job=ID[&to=first|last]` | `DownloadJob`, moved in the queue |
/// | `GET /_mediacache/network`, `POST /_mediacache/network?mode=auto|metered|unmetered` | ``NetworkReport`` |
/// | `POST /_mediacache/unpin?target=URL` | `{"unpinned": true|false}` |
/// | `POST /_mediacache/pause?job=ID`, `resume?job=ID` | `DownloadJob`; 404 for no such job |
/// | `POST /_mediacache/cancel?job=ID` | `{"cancelled": true}` |
/// | `POST /_mediacache/export?target=URL&output=ABSOLUTE-PATH[&seconds=S][&variant=…]` | `ExportSummary`; 504 naming what is not cached |
/// | `GET /_mediacache/preload` | `[PreloadItemStatus]`: the preload queue |
/// | `POST /_mediacache/preload?target=URL[&target=URL…][&seconds=S]` | the new queue (it replaces the old one; returns at once) |
/// | `DELETE /_mediacache/preload` | the queue, emptied |
/// | `POST /_mediacache/record?target=URL[&seconds=S][&variant=…]` | ``RecordingAnswer``: the job and the URL a player opens to watch it |
/// | `GET /_mediacache/recording.m3u8?job=ID[&track=N]` | the recording's playlist (`EVENT` while it records, `VOD` after), its URIs through the proxy; of a multivariant one, its multivariant playlist naming each track's (`track=0` the variant's, 1, … its renditions') |
/// | `GET /_mediacache/recording.mpd?job=ID` | a DASH recording's manifest (`dynamic` while it records, `static` after), the same |
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
            if name == "record" || name == "recording.m3u8" || name == "recording.mpd" {
                return try await recording(name, head: head, target: target, localPort: localPort)
            }
            return try await answer(name, method: head.method, target: target)
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
            reader.recordMetrics()
            return Self.text(export(), type: "text/plain; version=0.0.4; charset=utf-8")
        case "/status.json":
            return try Self.json(
                StatusPage.report(reader: reader, downloads: handler.downloads, statistics: handler.statistics))
        default:
            return Self.text(
                StatusPage.html(
                    StatusPage.report(reader: reader, downloads: handler.downloads, statistics: handler.statistics)),
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

    private var reader: CachingReader { handler.reader }
    private var store: CacheStore { handler.reader.store }

    private func answer(_ name: String, method: HTTPMethod, target: RequestTarget) async throws -> ProxyResponse {
        switch (method, name) {
        case (.GET, "entries"):
            return try Self.json(store.entrySummaries())
        case (.GET, "entry"):
            guard let summary = store.entrySummary(for: store.key(for: try originURL(target))) else {
                throw ProxyRequestError(status: .notFound, "Nothing is cached for that URL.")
            }
            return try Self.json(summary)
        case (.GET, "stats"):
            return try Self.json(
                AdminStats(
                    store: store.summary(), proxy: handler.statistics.snapshot,
                    downloadsInFlight: reader.activeDownloads))
        case (.POST, "remove"):
            let key = store.key(for: try originURL(target))
            let existed = store.metadata(for: key) != nil
            try await store.remove(key)
            return try Self.json(["removed": existed])
        case (.POST, "clear"):
            let count = store.summary().entries
            try await store.removeAll()
            return try Self.json(["removed": count])
        case (.POST, "prefetch"):
            return try prefetch(target)
        case (.GET, "downloads"):
            return try Self.json(try downloads().jobs)
        case (.POST, "pin"):
            let request = try PrefetchRequest(target)
            let rules = try Self.rules(target)
            return try await answering {
                let job = try await downloads().pin(
                    try originURL(target), renditions: request.renditions, seconds: request.seconds, rules: rules)
                return try Self.json(target.query("first") == "1" ? try await downloads().move(job.id) : job)
            }
        case (.POST, "rules"):
            let rules = try Self.rules(target)
            return try await answering { try Self.json(try await downloads().setRules(try job(target), rules)) }
        case (.POST, "move"):
            guard let toFront = ["first": true, "last": false, nil: true][target.query("to")] else {
                throw ProxyRequestError(status: .badRequest, "to= takes first or last.")
            }
            return try await answering { try Self.json(try await downloads().move(try job(target), toFront: toFront)) }
        case (.GET, "network"):
            return try Self.json(NetworkReport(try downloads()))
        case (.POST, "network"):
            guard let mode = target.query("mode").flatMap(NetworkOverride.init(rawValue:)) else {
                throw ProxyRequestError(status: .badRequest, "mode= takes auto, metered or unmetered.")
            }
            try downloads().networkOverride = mode
            return try Self.json(NetworkReport(try downloads()))
        case (.POST, "unpin"):
            let request = try PrefetchRequest(target)
            return try await answering {
                try Self.json([
                    "unpinned": try await downloads().unpin(try originURL(target), renditions: request.renditions)
                ])
            }
        case (.POST, "replace-url"):
            return try await answering {
                try Self.json(try await downloads().replaceURL(try job(target), with: try originURL(target)))
            }
        case (.POST, "pause"):
            return try await answering { try Self.json(try await downloads().pause(try job(target))) }
        case (.POST, "resume"):
            return try await answering { try Self.json(try await downloads().resume(try job(target))) }
        case (.POST, "cancel"):
            return try await answering {
                try await downloads().cancel(try job(target))
                return try Self.json(["cancelled": true])
            }
        case (.POST, "export"):
            let request = try PrefetchRequest(target)
            guard let output = target.query("output"), output.hasPrefix("/"), !output.contains("\u{0}") else {
                throw ProxyRequestError(status: .badRequest, "Give the destination as output=<absolute path>.")
            }
            return try await answering {
                let url = try originURL(target)
                // A live URL that was recorded exports as its recording.
                if let queue = handler.downloads, let job = queue.job(matching: url.absoluteString), job.isRecording {
                    return try Self.json(try await queue.recordings.export(job.id, to: URL(fileURLWithPath: output)))
                }
                return try Self.json(
                    try await reader.export(
                        url, to: URL(fileURLWithPath: output), renditions: request.renditions, seconds: request.seconds)
                )
            }
        case (.GET, "preload"):
            return try Self.json(reader.preloadStatus)
        case (.POST, "preload"):
            reader.preload(try preloadItems(target))
            return try Self.json(reader.preloadStatus)
        case (.DELETE, "preload"):
            reader.preload([])
            return try Self.json(reader.preloadStatus)
        case (_, "entries"), (_, "entry"), (_, "stats"), (_, "remove"), (_, "clear"), (_, "prefetch"), (_, "downloads"),
            (_, "pin"), (_, "unpin"), (_, "replace-url"),
            (_, "pause"), (_, "resume"), (_, "cancel"), (_, "export"), (_, "preload"), (_, "rules"), (_, "move"),
            (_, "network"):
            throw ProxyRequestError(
                status: .methodNotAllowed, "\(method.rawValue.prefix(20)) is not how /_mediacache/\(name) is asked.")
        default:
            throw ProxyRequestError(status: .notFound, "No admin endpoint /_mediacache/\(name.prefix(60)).")
        }
    }

    /// `record` (start a recording) and `recording.m3u8` (its playlist, for a player).
    private func recording(_ name: String, head: HTTPRequestHead, target: RequestTarget, localPort: Int) async throws
        -> ProxyResponse
    {
        let proxy = ProxyHandler.proxyOrigin(head, localPort: localPort)
        switch (head.method, name) {
        case (.POST, "record"):
            let request = try PrefetchRequest(target)
            return try await answering {
                let job = try await downloads().record(
                    try originURL(target), for: request.seconds.map { .milliseconds(Int64($0 * 1000)) },
                    renditions: request.renditions)
                return try Self.json(
                    RecordingAnswer(job: job, url: proxy + Self.recordingPath(job, token: handler.configuration.token)))
            }
        case (.GET, "recording.m3u8"), (.HEAD, "recording.m3u8"):
            let id = try job(target)
            let track = try target.query("track").map { text in
                guard let track = Int(text), track >= 0 else {
                    throw ProxyRequestError(status: .badRequest, "Give the track as a number from 0.")
                }
                return track
            }
            // A multivariant recording names each track's playlist here, relative to this one.
            let token = handler.configuration.token.map { "&token=" + HLSPlaylist.percentEncoded($0) } ?? ""
            let reference = { (track: Int) in
                "recording.m3u8?job=" + HLSPlaylist.percentEncoded(id) + "&track=\(track)" + token
            }
            guard let (text, base, master) = try downloads().recordings.playlist(id, track: track, reference: reference)
            else {
                throw ProxyRequestError(
                    status: .notFound,
                    track == nil ? "That job is not a recording." : "That recording has no such track.")
            }
            var metadata = ContentMetadata()
            metadata.mimeType = "application/vnd.apple.mpegurl"
            if master {
                return ProxyHandler.rewritten(
                    .text(text), length: text.utf8.count, metadata: metadata, type: "application/vnd.apple.mpegurl",
                    head: head)
            }
            let parsed: HLSPlaylist
            do {
                parsed = try HLSPlaylist(parsing: Array(text.utf8))
            } catch let error as HLSPlaylistError {
                throw ProxyRequestError(
                    status: .internalServerError, "The recording's playlist cannot be written: \(error.message)")
            }
            return handler.rewrite(parsed, metadata: metadata, url: base, head: head, localPort: localPort, headers: [])
        case (.GET, "recording.mpd"), (.HEAD, "recording.mpd"):
            guard let (text, base) = try downloads().recordings.manifest(try job(target)) else {
                throw ProxyRequestError(status: .notFound, "That job is not a DASH recording.")
            }
            let parsed: DASHManifest
            do {
                parsed = try DASHManifest(parsing: Array(text.utf8))
            } catch {
                throw ProxyRequestError(
                    status: .internalServerError, "The recording's manifest cannot be written: \(error.message)")
            }
            let rewritten = parsed.rewritten(base: base) {
                proxy + ProxyURL.pathForm(for: $0, token: handler.configuration.token)
            }
            var metadata = ContentMetadata()
            metadata.mimeType = "application/dash+xml"
            return ProxyHandler.rewritten(
                .text(rewritten), length: rewritten.utf8.count, metadata: metadata, type: "application/dash+xml",
                head: head)
        default:
            throw ProxyRequestError(
                status: .methodNotAllowed,
                "\(head.method.rawValue.prefix(20)) is not how /_mediacache/\(name) is asked.")
        }
    }

    /// The path of the recording `job`'s playlist (or DASH manifest), with the token when the
    /// proxy has one.
    static func recordingPath(_ job: DownloadJob, token: String?) -> String {
        Self.prefix + (job.recording?.isDASH == true ? "recording.mpd" : "recording.m3u8") + "?job=" + job.id
            + (token.map { "&token=" + HLSPlaylist.percentEncoded($0) } ?? "")
    }

    private func downloads() throws -> DownloadQueue {
        guard let downloads = handler.downloads else {
            throw ProxyRequestError(status: .notFound, "This server keeps no download queue.")
        }
        return downloads
    }

    /// The job named by `job=`: an id, or a URL a job pins.
    private func job(_ target: RequestTarget) throws -> String {
        guard let text = target.query("job"), let job = try downloads().job(matching: text) else {
            throw ProxyRequestError(
                status: .notFound,
                "No download job is \((target.query("job") ?? "").prefix(60)); GET /_mediacache/downloads lists them.")
        }
        return job.id
    }

    /// `body`'s answer, or the answer for the cache's error it throws.
    private func answering(_ body: () async throws -> ProxyResponse) async throws -> ProxyResponse {
        do {
            return try await body()
        } catch let error as CacheError {
            return ProxyResponse.failure(error)
        }
    }

    /// A job's rules as `window=`, `network=` and `rate=` (bytes per second) give them.
    private static func rules(_ target: RequestTarget) throws -> DownloadRules {
        var rate: Int64?
        if let text = target.query("rate") {
            guard let value = HLSPlaylist.decimal(Substring(text)) else {
                throw ProxyRequestError(status: .badRequest, "rate= takes bytes per second, not \(text.prefix(40)).")
            }
            rate = value
        }
        do {
            return try DownloadRules.parse(
                window: target.query("window"), network: target.query("network"), rate: rate, option: "")
        } catch let error as CacheError {
            throw ProxyRequestError(status: .badRequest, error.message)
        }
    }

    private func originURL(_ target: RequestTarget) throws -> URL {
        guard let text = target.query("target"), let url = URL(string: text),
            ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
        else {
            throw ProxyRequestError(
                status: .badRequest, "Give the origin URL as target=<percent-encoded http or https URL>.")
        }
        return url
    }

    /// The queue `POST /_mediacache/preload` asks for: each `target=` with `seconds=` (5 by default).
    private func preloadItems(_ target: RequestTarget) throws -> [PreloadItem] {
        let texts = target.queries("target")
        guard !texts.isEmpty, texts.count <= CachingReader.maximumPreloadItems else {
            throw ProxyRequestError(
                status: .badRequest,
                "Give 1 to \(CachingReader.maximumPreloadItems) origin URLs as target=<percent-encoded http or https URL>, in the order they will play."
            )
        }
        let seconds = try PrefetchRequest(target).seconds ?? 5
        return try texts.map { text in
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host != nil
            else {
                throw ProxyRequestError(
                    status: .badRequest,
                    "Each target must be a percent-encoded http or https URL, not \(text.prefix(100)).")
            }
            return PreloadItem(url, seconds: seconds)
        }
    }

    /// Runs a prefetch, streaming its progress as JSON lines; the client leaving cancels it.
    private func prefetch(_ target: RequestTarget) throws -> ProxyResponse {
        let url = try originURL(target)
        let request = try PrefetchRequest(target, range: true)
        let reader = reader
        let (lines, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(64))
        let task = Task {
            do {
                let done = try await request.run(url, reader: reader) { progress in
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
