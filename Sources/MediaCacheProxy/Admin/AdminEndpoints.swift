// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import MediaCache
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
struct AdminEndpoints {
    static let prefix = "/_mediacache/"
    let handler: ProxyHandler

    /// The answer when `head` is an admin request (a path under ``prefix`` without `url=`); `nil` otherwise.
    func respond(to head: HTTPRequestHead, localPort: Int) async throws -> ProxyResponse? {
        // Most requests are for media: a look at the URI's start settles it without parsing.
        guard head.uri.hasPrefix(Self.prefix) || head.uri.hasPrefix("/metrics") || head.uri.hasPrefix("/status") else { return nil }
        let target = RequestTarget(head.uri)
        guard let path = target.path, path.hasPrefix(Self.prefix) || Self.pages.contains(path), target.query("url") == nil else { return nil }
        do {
            try handler.router.checkSender(head, localPort: localPort)
            // A web page may send a simple POST to 127.0.0.1 from anywhere; it cannot add this
            // field without a CORS preflight, which the proxy refuses to pages it does not list.
            if head.method != .GET, head.method != .HEAD, head.headers.first(name: "X-MediaCache-Admin") != "1" {
                throw ProxyRequestError(status: .forbidden, "Admin requests that change the cache need the header X-MediaCache-Admin: 1.", refusal: .admin)
            }
            guard handler.router.hasToken(target, head) else { throw ProxyRequestError(status: .forbidden, "Missing or wrong access token.", refusal: .token) }
        } catch {
            handler.router.noteRefusal(error, head)
            return ProxyResponse.failure(error)
        }
        do {
            if Self.pages.contains(path) {
                guard head.method == .GET || head.method == .HEAD else {
                    throw ProxyRequestError(status: .methodNotAllowed, "\(path) is read with GET.", headers: [("Allow", "GET, HEAD")])
                }
                var response = try page(path)
                if head.method == .HEAD { response.body = .none }
                return response
            }
            return try await answer(String(path.dropFirst(Self.prefix.count)), method: head.method, target: target)
        } catch let error as ProxyRequestError {
            return ProxyResponse.failure(error)
        }
    }

    /// The pages outside ``prefix``: the metrics and the status page.
    static let pages: Set<String> = ["/metrics", "/status", "/status.json"]

    private func page(_ path: String) throws -> ProxyResponse {
        switch path {
        case "/metrics":
            guard let export = handler.configuration.metricsExporter else {
                throw ProxyRequestError(status: .notFound, "This proxy exports no metrics (its app bootstrapped no Prometheus backend).")
            }
            reader.recordMetrics()
            return Self.text(export(), type: "text/plain; version=0.0.4; charset=utf-8")
        case "/status.json":
            return try Self.json(StatusPage.report(reader: reader, downloads: handler.downloads, statistics: handler.statistics))
        default:
            return Self.text(StatusPage.html(StatusPage.report(reader: reader, downloads: handler.downloads, statistics: handler.statistics)), type: "text/html; charset=utf-8")
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
            return try Self.json(AdminStats(store: store.summary(), proxy: handler.statistics.snapshot, downloadsInFlight: reader.activeDownloads))
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
                let job = try await downloads().pin(try originURL(target), renditions: request.renditions, seconds: request.seconds, rules: rules)
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
            return try await answering { try Self.json(["unpinned": try await downloads().unpin(try originURL(target), renditions: request.renditions)]) }
        case (.POST, "replace-url"):
            return try await answering { try Self.json(try await downloads().replaceURL(try job(target), with: try originURL(target))) }
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
                try Self.json(try await reader.export(try originURL(target), to: URL(fileURLWithPath: output), renditions: request.renditions, seconds: request.seconds))
            }
        case (.GET, "preload"):
            return try Self.json(reader.preloadStatus)
        case (.POST, "preload"):
            reader.preload(try preloadItems(target))
            return try Self.json(reader.preloadStatus)
        case (.DELETE, "preload"):
            reader.preload([])
            return try Self.json(reader.preloadStatus)
        case (_, "entries"), (_, "entry"), (_, "stats"), (_, "remove"), (_, "clear"), (_, "prefetch"), (_, "downloads"), (_, "pin"), (_, "unpin"), (_, "replace-url"),
            (_, "pause"), (_, "resume"), (_, "cancel"), (_, "export"), (_, "preload"), (_, "rules"), (_, "move"), (_, "network"):
            throw ProxyRequestError(status: .methodNotAllowed, "\(method.rawValue.prefix(20)) is not how /_mediacache/\(name) is asked.")
        default:
            throw ProxyRequestError(status: .notFound, "No admin endpoint /_mediacache/\(name.prefix(60)).")
        }
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
            throw ProxyRequestError(status: .notFound, "No download job is \((target.query("job") ?? "").prefix(60)); GET /_mediacache/downloads lists them.")
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
            guard let value = HLSPlaylist.decimal(Substring(text)) else { throw ProxyRequestError(status: .badRequest, "rate= takes bytes per second, not \(text.prefix(40)).") }
            rate = value
        }
        do {
            return try DownloadRules.parse(window: target.query("window"), network: target.query("network"), rate: rate, option: "")
        } catch let error as CacheError {
            throw ProxyRequestError(status: .badRequest, error.message)
        }
    }

    private func originURL(_ target: RequestTarget) throws -> URL {
        guard let text = target.query("target"), let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            throw ProxyRequestError(status: .badRequest, "Give the origin URL as target=<percent-encoded http or https URL>.")
        }
        return url
    }

    /// The queue `POST /_mediacache/preload` asks for: each `target=` with `seconds=` (5 by default).
    private func preloadItems(_ target: RequestTarget) throws -> [PreloadItem] {
        let texts = target.queries("target")
        guard !texts.isEmpty, texts.count <= CachingReader.maximumPreloadItems else {
            throw ProxyRequestError(
                status: .badRequest, "Give 1 to \(CachingReader.maximumPreloadItems) origin URLs as target=<percent-encoded http or https URL>, in the order they will play.")
        }
        let seconds = try PrefetchRequest(target).seconds ?? 5
        return try texts.map { text in
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
                throw ProxyRequestError(status: .badRequest, "Each target must be a percent-encoded http or https URL, not \(text.prefix(100)).")
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

/// `GET /_mediacache/stats`.
package struct AdminStats: Sendable, Codable, Equatable {
    package var store: CacheStoreSummary
    package var proxy: ProxyStatistics.Snapshot
    package var downloadsInFlight: Int

    package init(store: CacheStoreSummary, proxy: ProxyStatistics.Snapshot, downloadsInFlight: Int) {
        self.store = store
        self.proxy = proxy
        self.downloadsInFlight = downloadsInFlight
    }
}

/// `GET /_mediacache/network`: what downloads take the network to be, and who says so.
package struct NetworkReport: Sendable, Codable, Equatable {
    /// What downloads go by.
    package var effective: NetworkConditions
    /// What the system says.
    package var system: NetworkConditions
    /// What the user says over it (`mediacache network`).
    package var override: NetworkOverride

    package init(_ downloads: DownloadQueue) {
        (effective, system) = downloads.network
        override = downloads.networkOverride
    }
}

/// A prefetch, pin or export as the command line and the admin endpoints describe it.
package struct PrefetchRequest: Sendable, Equatable {
    package var range: ByteRange?
    package var seconds: Double?
    /// What of an HLS asset or a DASH presentation; parts left unsaid are empty (see ``RenditionChoice``).
    package var renditions = RenditionChoice()

    package init(range: ByteRange? = nil, seconds: Double? = nil, renditions: RenditionChoice = RenditionChoice()) {
        self.range = range
        self.seconds = seconds
        self.renditions = renditions
    }

    package init(range: ByteRange? = nil, seconds: Double? = nil, variant: HLSPrefetchOptions.VariantChoice) {
        self.init(range: range, seconds: seconds, renditions: RenditionChoice(variants: [variant]))
    }

    /// The first variant chosen (`.first` when none is said).
    package var variant: HLSPrefetchOptions.VariantChoice { renditions.variants.first ?? .first }

    /// The options an admin endpoint's query gives (``queryItems``).
    /// - Throws: ``ProxyRequestError`` (400) that says which is wrong.
    init(_ target: RequestTarget, range: Bool = false) throws {
        do {
            self = try Self.parse(
                range: range ? target.query("range") : nil, seconds: target.query("seconds"), variant: target.query("variant"), audio: target.query("audio"),
                subtitles: target.query("subtitles"), trickPlay: target.query("trick-play"))
        } catch {
            throw ProxyRequestError(status: .badRequest, error.message)
        }
    }

    /// The query an admin endpoint reads these options from.
    package var queryItems: [URLQueryItem] {
        var items: [URLQueryItem] = []
        if let range { items.append(URLQueryItem(name: "range", value: "\(range.lowerBound)-\(range.upperBound - 1)")) }
        if let seconds { items.append(URLQueryItem(name: "seconds", value: String(seconds))) }
        if let variant = renditions.variants.first { items.append(URLQueryItem(name: "variant", value: Self.text(of: variant))) }
        if let audio = renditions.audio { items.append(URLQueryItem(name: "audio", value: audio.text)) }
        if let subtitles = renditions.subtitles { items.append(URLQueryItem(name: "subtitles", value: subtitles.text)) }
        if renditions.trickPlay { items.append(URLQueryItem(name: "trick-play", value: "yes")) }
        return items
    }

    /// Parses the options' text forms: `range` `a-b` (inclusive, as in HTTP), `seconds` a
    /// positive number, `variant` `first`, `lowest`, `highest`, a height (`720p`) or a number
    /// of bits per second; `audio` and `subtitles` as ``LanguageChoice/parse(_:option:)``
    /// reads them; `trickPlay` `yes` or `no`.
    package static func parse(
        range: String?, seconds: String?, variant: String?, audio: String? = nil, subtitles: String? = nil, trickPlay: String? = nil
    ) throws(PrefetchRequestError) -> PrefetchRequest {
        var request = PrefetchRequest()
        if let range {
            let parts = range.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let first = HLSPlaylist.decimal(parts[0]), let last = HLSPlaylist.decimal(parts[1]), first <= last,
                last < ByteRange.maximumOffset
            else {
                throw PrefetchRequestError(message: "--range takes a-b, the first and last byte (0-1048575), not \(range.prefix(60)).")
            }
            request.range = ByteRange(first, last + 1)
        }
        if let seconds {
            guard let value = Double(seconds), value.isFinite, value > 0, value <= 1e7 else {
                throw PrefetchRequestError(message: "--seconds takes a positive number of seconds, not \(seconds.prefix(60)).")
            }
            request.seconds = value
        }
        switch variant?.lowercased() {
        case nil: break
        case "first": request.renditions.variants = [.first]
        case "lowest": request.renditions.variants = [.lowestBandwidth]
        case "highest": request.renditions.variants = [.highestBandwidth]
        case let text?:
            if text.hasSuffix("p"), let height = HLSPlaylist.decimal(text.dropLast()), height > 0, height <= 1 << 20 {
                request.renditions.variants = [.atMostHeight(height)]
            } else if let bps = HLSPlaylist.decimal(Substring(text)), bps > 0 {
                request.renditions.variants = [.atMost(bitsPerSecond: bps)]
            } else {
                throw PrefetchRequestError(
                    message: "--variant takes first, lowest, highest, a height (720p) or a number of bits per second, not \(text.prefix(60)).")
            }
        }
        if let audio { request.renditions.audio = try LanguageChoice.parse(audio, option: "--audio") }
        if let subtitles { request.renditions.subtitles = try LanguageChoice.parse(subtitles, option: "--subtitles") }
        switch trickPlay?.lowercased() {
        case nil, "no", "false", "0": break
        case "yes", "true", "1": request.renditions.trickPlay = true
        case let text?: throw PrefetchRequestError(message: "trick-play takes yes or no, not \(text.prefix(60)).")
        }
        return request
    }

    /// The text form of `variant` that ``parse(range:seconds:variant:audio:subtitles:trickPlay:)`` reads.
    package static func text(of variant: HLSPrefetchOptions.VariantChoice) -> String {
        switch variant {
        case .first: "first"
        case .lowestBandwidth: "lowest"
        case .highestBandwidth: "highest"
        case .atMost(let bps): String(bps)
        case .atMostHeight(let height): "\(height)p"
        }
    }

    /// Prefetches `url`: an HLS asset when it is a playlist, a DASH presentation when it is a manifest (``seconds`` and ``variant``
    /// apply), else the file (``range`` applies).
    package func run(_ url: URL, reader: CachingReader, progress: @escaping @Sendable (PrefetchProgress) -> Void) async throws -> PrefetchProgress {
        let metadata = try await reader.contentInfo(for: url)
        switch try await reader.manifestKind(url, metadata) {
        case .hls: return try await reader.prefetchHLS(url, options: HLSPrefetchOptions(renditions: renditions, seconds: seconds), progress: progress)
        case .dash: return try await reader.prefetchDASH(url, options: HLSPrefetchOptions(renditions: renditions, seconds: seconds), progress: progress)
        case nil: break
        }
        return try await reader.prefetch(url, range: range, progress: progress)
    }
}
