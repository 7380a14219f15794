// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1

/// Answers one proxy request: the ``ProxyRouter`` checks it and says where it goes, an
/// ``AnswerPlan`` says what to answer from what is known of the resource, and the handler
/// carries that out with the engine (content information, reads, playlists).
struct ProxyHandler: Sendable {
    /// What the answers need of the read path, and all they reach of it.
    let engine: any PlayerSource
    /// What the admin endpoints manage (``AdminSide``).
    let admin: AdminSide
    /// What the log says of every request when the origin's connections are not checked.
    let securityWarning: String?
    private(set) var configuration: ProxyConfiguration
    /// What it answered, since it started.
    let statistics: ProxyStatistics
    let router: ProxyRouter

    init(
        engine: any PlayerSource, admin: AdminSide, securityWarning: String?,
        checkOrigin: @escaping @Sendable (URL) throws -> Void, configuration: ProxyConfiguration,
        statistics: ProxyStatistics
    ) {
        self.engine = engine
        self.admin = admin
        self.securityWarning = securityWarning
        self.configuration = configuration
        self.statistics = statistics
        self.router = ProxyRouter(configuration: configuration, checkOrigin: checkOrigin)
        ProxyMetrics.register()
    }

    typealias CheckedRequest = ProxyRouter.CheckedRequest

    /// Answers `head`, which arrived on a connection to `localPort` from `client` (its address).
    /// - Parameter checked: what ``respondFromStore(to:localPort:checking:)`` found when it could not
    ///   answer, so its checks are not run again.
    func respond(to head: HTTPRequestHead, localPort: Int, client: String? = nil, checked: CheckedRequest? = nil) async
        -> ProxyResponse
    {
        var log = requestLog(for: head)
        var response: ProxyResponse
        do {
            response = try await answer(head, localPort: localPort, client: client, checked: checked, log: &log)
        } catch {
            router.noteRefusal(error, head, client: client)
            response = log.finish(ProxyResponse.failure(error), error: error)
        }
        Self.finish(&response, for: head, router: router)
        return response
    }

    /// Every answer's last step, whichever path made it: `Cache-Status` (RFC 9211), the CORS
    /// fields for a listed page, and no body for a `HEAD`, whatever the status (RFC 9110 §9.3.2).
    /// In place: a copy would share the fields' storage, and adding one would copy them all.
    static func finish(_ response: inout ProxyResponse, for head: HTTPRequestHead, router: ProxyRouter) {
        // This cache's member of the list, after any the origin's answer carries from caches
        // before it (RFC 9211 §2: the last member is the one nearest the player).
        response.headers.add(name: "Cache-Status", value: (response.cacheStatus ?? .local("local")).headerValue)
        router.addCORSHeaders(to: &response, for: head)
        if head.method == .HEAD {
            switch response.body {
            case .stream(let stream, let log):
                stream.cancel()
                log.end(stream.statistics, error: nil)
            case .file(_, let log): log.end(ReadStatistics(), error: nil)
            case .none, .text, .bytes, .lines: break
            }
            response.body = .none
        }
    }

    /// What ``respondFromStore(to:localPort:checking:)`` did.
    enum StoreAnswer {
        /// The store alone answered.
        case answered(ProxyResponse)
        /// The answer needs the general path: ``respond(to:localPort:checked:)`` with what the
        /// checks found (`nil` when a check failed or the request is not a proxy `GET`).
        case needsGeneralPath(CheckedRequest?)
    }

    /// Answers `head` at once when the store alone can: a `GET` of a stored, current range.
    /// Otherwise (the origin, a revalidation, an error page) the general path answers it.
    /// Never waits, so an event loop can call it.
    /// - Parameter repeated: the connection's last checked request, used and updated.
    func respondFromStore(to head: HTTPRequestHead, localPort: Int, checking repeated: inout RepeatedRequestCheck)
        -> StoreAnswer
    {
        // (Blocking reloads and steering answers are never stored: only a key needs looking at.)
        guard head.method == .GET,
            case .request(let checked)? = try? repeated.check(head, localPort: localPort, router: router),
            !checked.proxy.memoryOnly, checked.proxy.subtitleRole == nil
        else { return .needsGeneralPath(nil) }
        let asked = checked.asked
        guard asked.conditions.isEmpty else { return .needsGeneralPath(checked) }
        // The answer is planned from what the store holds, looked up once; the bytes planned
        // are then taken from the same lease: one region of the data file when they lie in one,
        // else a read of stored bytes (an encrypted store's, a long range's).
        guard
            let lease = engine.storedLease(
                for: asked.url, headers: asked.forwarded, range: asked.specifier, as: .player),
            // A playlist (or what may be one) is rewritten; the general path's look decides.
            engine.isMediaWithoutLook(asked.url, lease.metadata, from: asked.firstByte ?? 0),
            case .read(let wanted, let specifier) = AnswerPlan.plan(asked, metadata: lease.metadata, sendsBody: true)
        else { return .needsGeneralPath(checked) }
        let body: (StoredRegion?, ReadStream?)
        if let region = lease.region(wanted) {
            body = (region, nil)
        } else if let stream = lease.read(wanted) {
            body = (nil, stream)
        } else {
            return .needsGeneralPath(checked)
        }
        engine.learning.readAhead(of: asked.url, headers: asked.forwarded)
        var log = requestLog(for: head)
        log.url = asked.url.absoluteString
        var response = media(lease.metadata, range: wanted, isPartial: specifier != nil, log: &log) { log in
            if let region = body.0 { .file(region, log: log) } else { .stream(body.1!, log: log) }
        }
        response.cacheStatus = .hit(freshUntil: lease.metadata.freshUntil, now: engine.now)
        Self.finish(&response, for: head, router: router)
        return .answered(response)
    }

    private func requestLog(for head: HTTPRequestHead) -> RequestLog {
        RequestLog(
            method: Self.clipped(head.method.rawValue, to: 20),
            range: head.headers.first(name: "range").map { Self.clipped($0, to: 100) },
            started: ContinuousClock.now, logger: configuration.logger, warning: securityWarning,
            statistics: statistics)
    }

    /// The CMCD fields for a request whose player sent none: what the URI the proxy wrote for
    /// it says (``ProxyURL``'s `c=`), in a new session when it says none (a playback starts).
    static func cmcdFields(for request: CheckedRequest) -> [(name: String, value: String)] {
        guard !CMCD.isPresent(fields: request.asked.forwarded, query: request.url.query) else { return [] }
        var cmcd = CMCD(parsing: request.proxy.cmcd ?? "")
        if cmcd.sessionID == nil { cmcd.sessionID = CMCD.newSessionID() }
        return cmcd.fields
    }

    /// `text`, cut to its first `limit` characters (a short one as it is, not copied).
    private static func clipped(_ text: String, to limit: Int) -> String {
        text.utf8.count <= limit ? text : String(text.prefix(limit))
    }

    /// Checks the request (unless `checked`), then answers it by its route.
    private func answer(
        _ head: HTTPRequestHead, localPort: Int, client: String?, checked: CheckedRequest?, log: inout RequestLog
    ) async throws -> ProxyResponse {
        var request: CheckedRequest
        if let checked {
            request = checked
        } else {
            switch try router.check(head, localPort: localPort) {
            case .preflight(let response): return log.finish(response)
            case .admin(let path, let target):
                return try await AdminEndpoints(handler: self).respond(
                    to: head, path: path, target: target, localPort: localPort)
            case .request(let found): request = found
            }
        }
        log.url = request.url.absoluteString
        if configuration.addsCMCD { request.asked.forwarded += Self.cmcdFields(for: request) }
        guard configuration.isLANListener else {
            return try await carryOut(request, head: head, localPort: localPort, log: &log)
        }
        // On the LAN: a URL that reaches only the internet is refused before anything is fetched
        // if its name resolves to this machine or its networks; what the answer names is minted
        // for what this request may reach.
        if request.grant == .publicAddressesOnly, let host = HostAndPort(authorityOf: request.url)?.name,
            let scope = await configuration.addressResolver.nonPublicScope(of: host)
        {
            throw ProxyRouter.privateAddress(host, scope)
        }
        var minting = self
        minting.configuration.minting = .init(
            authority: LANCapabilities.authority(of: request.url), grant: request.grant, until: request.until)
        // Its redirects lead only to its own origin or to the internet, on every hop (``LANReach``).
        var carried = log
        defer { log = carried }
        return try await LANReach.$current.withValue(LANReach(mintedFor: request.url, client: client)) {
            try await minting.carryOut(request, head: head, localPort: localPort, log: &carried)
        }
    }

    /// Answers a checked request by its route.
    private func carryOut(_ request: CheckedRequest, head: HTTPRequestHead, localPort: Int, log: inout RequestLog)
        async throws -> ProxyResponse
    {
        let (url, asked) = (request.url, request.asked)
        var response: ProxyResponse
        switch ProxyRouter.route(request) {
        case .memoryOnly:
            response = try await memoryOnly(url, head: head, headers: asked.forwarded)
        case .blockingReload:
            response = try await blockingReload(url, head: head, localPort: localPort, headers: asked.forwarded)
        case .steering:
            // A steering server's answer depends on what the player says of its pathway and
            // throughput: the origin's, never stored.
            let (body, metadata) = try await engine.bodies.originBody(
                of: url, headers: asked.forwarded, limit: SteeringManifest.maximumSize, as: .player)
            response = try steering(body, metadata: metadata, url: url, head: head, localPort: localPort)
        case .assetList:
            let (body, metadata) = try await engine.bodies.originBody(
                of: url, headers: asked.forwarded, limit: InterstitialAssetList.maximumSize, as: .player)
            response = try assetList(body, metadata: metadata, url: url, head: head, localPort: localPort)
        case .subtitles(let role):
            response = try await subtitles(role, file: url, head: head, localPort: localPort, headers: asked.forwarded)
            response.cacheStatus = .local("side-loaded")
            return log.finish(response)
        case .cache:
            let held = engine.statusSnapshot(of: url)
            let before = CacheStatus.Before(metadata: held.metadata, spans: held.spans, validated: held.validated)
            response = try await throughCache(request, head: head, localPort: localPort, stored: held.spans, log: &log)
            if response.cacheStatus == nil {
                response.cacheStatus = cacheStatus(of: response, before: before, url: url, log: log)
            }
            return response
        }
        log.passesThrough = true
        response.cacheStatus = .bypass
        return log.finish(response)
    }

    /// What the cache did for `response`, an answer through the cache: judged from what the
    /// store held `before` the request and what it holds now (``CacheStatus/judge``).
    private func cacheStatus(of response: ProxyResponse, before: CacheStatus.Before, url: URL, log: RequestLog)
        -> CacheStatus
    {
        if response.status.code >= 400 {
            return CacheStatus(forward: .uriMiss, forwardStatus: Int(response.status.code))
        }
        let after = engine.statusSnapshot(of: url)
        let answered: ContentMetadata?
        let range: ByteRange?
        switch response.body {
        case .stream(let stream, _): (answered, range) = (stream.metadata, stream.range)
        case .file(let region, _): (answered, range) = (after.metadata, region.range)
        case .none, .text, .bytes, .lines:
            (answered, range) = (after.metadata, nil)
        }
        guard let answered else { return .bypass }
        return CacheStatus.judge(
            before: before, answered: answered, range: range, validated: after.validated,
            passesThrough: log.passesThrough, now: engine.now)
    }

    /// A request answered through the cache: its content information (one ranged `GET` of
    /// what it asks for when nothing is stored), a playlist or manifest rewritten, else the
    /// ``AnswerPlan`` for it carried out.
    /// - Parameter stored: what the store held of the resource when the request came.
    private func throughCache(
        _ request: CheckedRequest, head: HTTPRequestHead, localPort: Int, stored: SpanSet, log: inout RequestLog
    ) async throws -> ProxyResponse {
        let (url, asked) = (request.url, request.asked)
        if head.method == .GET { engine.learning.readAhead(of: url, headers: asked.forwarded) }
        // What was stored when the request came: its bytes count as served from the cache,
        // the rest as from the origin (a download started for this request may store some
        // before the read reaches them).
        log.storedAtArrival = .init(spans: stored, start: 0)
        // A probe's bytes that are not stored (`no-store`) wait for this request's read,
        // which takes them; whatever this request does, they are let go when it is answered.
        let ask = PlayerAsk(
            firstByte: asked.firstByte, length: asked.length, headers: asked.forwarded,
            conditions: asked.conditions.fields, inPlay: asked.specifier != nil)
        return try await engine.answering(url, ask) { metadata in
            // A playlist is answered whole, rewritten, whatever the Range (RFC 9110 §14.2
            // lets a server ignore it; ffmpeg asks for `bytes=0-`).
            let (kind, unstored) = try await manifestKind(url, metadata, asked: asked)
            switch kind {
            case .hls:
                return log.finish(
                    try await playlist(
                        url, head: head, localPort: localPort, headers: asked.forwarded, planned: metadata,
                        read: unstored))
            case .dash:
                return log.finish(
                    try await manifest(
                        url, head: head, localPort: localPort, headers: asked.forwarded, planned: metadata,
                        read: unstored))
            case nil: break
            }
            let plan = AnswerPlan.plan(asked, metadata: metadata, sendsBody: head.method != .HEAD)
            return try await carryOut(plan, for: request, metadata: metadata, unstored: unstored, log: &log)
        }
    }

    /// Carries `plan` out for `request`, of the version `metadata` describes; `unstored` is its
    /// whole body when it was read to be looked at and not stored.
    private func carryOut(
        _ plan: AnswerPlan, for request: CheckedRequest, metadata: ContentMetadata,
        unstored: (body: [UInt8], metadata: ContentMetadata)?,
        log: inout RequestLog
    ) async throws -> ProxyResponse {
        let now = engine.now
        switch plan {
        case .notModified:
            return log.finish(
                ProxyResponse(
                    status: .notModified, headers: ProxyResponse.notModifiedFields(metadata, now: now), body: .none))
        case .preconditionFailed:
            return log.finish(
                ProxyResponse.error(
                    .preconditionFailed,
                    "A precondition of the request (If-Match or If-Unmodified-Since) does not hold for the current version."
                ))
        case .unsatisfiable(let total):
            return log.finish(ProxyResponse.unsatisfiable(total: total))
        case .headOnly(let status, let range, let isPartial):
            return log.finish(
                ProxyResponse(
                    status: status,
                    headers: ProxyResponse.fields(metadata, range: range, isPartial: isPartial, now: now), body: .none))
        case .stream(let firstByte, let length):
            log.storedAtArrival = nil
            log.passesThrough = true
            return try await lengthless(
                request.url, from: firstByte, length: length, headers: request.asked.forwarded, planned: metadata,
                log: log, now: now)
        case .read(let wanted, let specifier)
        where unstored.map({ Int64($0.body.count) == metadata.length && $0.metadata.isSameVersion(as: metadata) })
            == true:
            // Read whole to be looked at, and not stored: answered from those bytes.
            let unstored = unstored!
            log.passesThrough = true
            let fields = ProxyResponse.fields(unstored.metadata, range: wanted, isPartial: specifier != nil, now: now)
            let bytes = Array(unstored.body[Int(wanted.lowerBound)..<Int(wanted.upperBound)])
            return log.finish(
                ProxyResponse(status: specifier != nil ? .partialContent : .ok, headers: fields, body: .bytes(bytes)))
        case .read(_, let specifier):
            // The range is resolved again if the read finds another version (see `read`).
            let stream = try await engine.read(
                request.url, headers: request.asked.forwarded, planned: metadata, lengthless: (0, nil),
                takesReservation: true,
                as: .player
            ) { total in
                specifier.map { $0.resolve(length: total) } ?? ByteRange(0, total)
            }
            log.storedAtArrival?.start = stream.range.lowerBound
            return media(stream, isPartial: specifier != nil, log: &log)
        }
    }

    /// The answer carrying `stream`: its head written from the stream's own metadata and
    /// range, so it always describes the bytes that follow it.
    private func media(_ stream: ReadStream, isPartial: Bool, log: inout RequestLog) -> ProxyResponse {
        media(stream.metadata, range: stream.range, isPartial: isPartial, log: &log) { .stream(stream, log: $0) }
    }

    /// The answer carrying `range` of the version `metadata` describes, whose body `body` makes
    /// with the request's log line.
    private func media(
        _ metadata: ContentMetadata, range: ByteRange, isPartial: Bool, log: inout RequestLog,
        body: (RequestLog) -> ProxyResponse.Body
    ) -> ProxyResponse {
        let now = engine.now
        let status: HTTPResponseStatus
        let fields: HTTPHeaders
        if metadata.length == nil {  // a version without a length, found by the read
            status = .ok
            fields = ProxyResponse.fields(metadata, range: nil, isPartial: false, now: now)
        } else {
            status = isPartial ? .partialContent : .ok
            fields = ProxyResponse.fields(metadata, range: range, isPartial: isPartial, now: now)
        }
        log.status = Int(status.code)
        log.passesThrough = log.passesThrough || !metadata.isStorable
        return ProxyResponse(status: status, headers: fields, body: body(log))
    }

    /// The answer for a resource whose length the origin does not say, streamed as it
    /// arrives without a length. A range from `firstByte` is asked for as it is: an origin
    /// that serves it (a resource that grows while it is read, such as a low-latency HLS
    /// segment hinted from `BYTERANGE-START`) gives a `206` whose `Content-Range` the player
    /// gets as the origin wrote it; one that answers whole (internet radio, a generated file)
    /// gives the whole body, `200` (a `Range` is ignored, as RFC 9110 §14.2 allows).
    private func lengthless(
        _ url: URL, from firstByte: Int64?, length: Int64?, headers: RequestHeaders, planned: ContentMetadata,
        log: RequestLog, now: Date
    ) async throws -> ProxyResponse {
        var (log, planned) = (log, Optional(planned))
        if let firstByte {
            let stream = try await engine.read(
                url, offset: firstByte, length: length, headers: headers, planned: planned, as: .player)
            if stream.isPartOfUnknownLength {
                var fields = ProxyResponse.fields(stream.metadata, range: nil, isPartial: false, now: now)
                fields.replaceOrAdd(name: "Accept-Ranges", value: "bytes")
                fields.replaceOrAdd(
                    name: "Content-Range", value: ContentRange(range: stream.range, totalLength: nil).headerValue)
                log.status = 206
                return ProxyResponse(status: .partialContent, headers: fields, body: .stream(stream, log: log))
            }
            if firstByte == 0, length == nil {
                log.status = 200
                return ProxyResponse(
                    status: .ok, headers: ProxyResponse.fields(stream.metadata, range: nil, isPartial: false, now: now),
                    body: .stream(stream, log: log))
            }
            // The origin answered whole after all: the player gets the whole body, from its start.
            stream.cancel()
            planned = nil
        }
        let stream = try await engine.read(
            url, offset: 0, length: nil, headers: headers, planned: planned, as: .player)
        log.status = 200
        return ProxyResponse(
            status: .ok, headers: ProxyResponse.fields(stream.metadata, range: nil, isPartial: false, now: now),
            body: .stream(stream, log: log))
    }
}
