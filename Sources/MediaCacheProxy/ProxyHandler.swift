// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import NIOCore
import NIOHTTP1

/// What the proxy answers to one request: a status, headers and where the body comes from.
struct ProxyResponse {
    enum Body {
        case none
        case text(String)
        case bytes([UInt8])
        /// Lines sent as they come, each flushed (chunked: no length); the stream's end ends the body.
        case lines(AsyncStream<String>)
        /// The bytes of a read, in order; `log` is finished when the body ends.
        case stream(ReadStream, log: RequestLog)
    }

    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: Body
}

/// Answers one proxy request: checks it, resolves the range, starts the read.
struct ProxyHandler: Sendable {
    let reader: CachingReader
    let configuration: ProxyConfiguration
    /// What it answered, since it started.
    let statistics: ProxyStatistics
    private let recentTargets = RecentTargets()

    /// The pinned downloads the admin endpoints control, if the app keeps a queue.
    let downloads: DownloadQueue?

    init(reader: CachingReader, downloads: DownloadQueue? = nil, configuration: ProxyConfiguration, statistics: ProxyStatistics = ProxyStatistics()) {
        self.reader = reader
        self.downloads = downloads
        self.configuration = configuration
        self.statistics = statistics
        ProxyMetrics.register()
    }

    /// Answers `head`, which arrived on a connection to `localPort`.
    /// - Parameter checked: what ``respondFromStore(to:localPort:)`` found when it could not
    ///   answer, so its checks are not run again.
    func respond(to head: HTTPRequestHead, localPort: Int, checked: CheckedRequest? = nil) async -> ProxyResponse {
        var response = await answer(head, localPort: localPort, checked: checked)
        addCORSHeaders(to: &response, for: head)
        if head.method == .HEAD {
            // A HEAD answer has no body, whatever the status (RFC 9110 §9.3.2).
            if case .stream(let stream, _) = response.body { stream.cancel() }
            response.body = .none
        }
        return response
    }

    /// A request that passed the checks every proxy request passes, with what they found.
    struct CheckedRequest: Sendable {
        fileprivate let url: URL
        fileprivate let target: RequestTarget
        fileprivate let asked: Asked
    }

    /// What ``respondFromStore(to:localPort:)`` did.
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
    func respondFromStore(to head: HTTPRequestHead, localPort: Int) -> StoreAnswer {
        guard head.method == .GET, (try? checkRequest(head, localPort: localPort)) != nil, let (url, target) = try? checkedOriginURL(head),
            !target.isMemoryOnly, let asked = try? parse(head, url: url)
        else { return .needsGeneralPath(nil) }
        let checked = CheckedRequest(url: url, target: target, asked: asked)
        guard asked.conditions.isEmpty, let metadata = reader.cachedContentInfo(for: asked.url, headers: asked.forwarded),
            let total = metadata.length
        else { return .needsGeneralPath(checked) }
        // A playlist (or what may be one) is rewritten: the general path.
        if CachingReader.mayBePlaylist(metadata) { return .needsGeneralPath(checked) }
        var wanted = ByteRange(0, total)
        if let specifier = asked.specifier {
            guard let resolved = specifier.resolve(length: total) else { return .needsGeneralPath(checked) }
            wanted = resolved
        }
        guard let stream = reader.cachedRead(asked.url, range: wanted, headers: asked.forwarded) else { return .needsGeneralPath(checked) }
        guard stream.metadata.length == total, stream.range == wanted else {
            stream.cancel()
            return .needsGeneralPath(checked)
        }
        let status: HTTPResponseStatus = asked.specifier != nil ? .partialContent : .ok
        var log = requestLog(for: head)
        log.url = asked.url.absoluteString
        log.status = Int(status.code)
        var response = ProxyResponse(
            status: status,
            headers: Self.headers(
                stream.metadata, range: wanted, isPartial: asked.specifier != nil,
                now: reader.store.configuration.clock.now),
            body: .stream(stream, log: log))
        addCORSHeaders(to: &response, for: head)
        return .answered(response)
    }

    private func requestLog(for head: HTTPRequestHead) -> RequestLog {
        RequestLog(
            method: String(head.method.rawValue.prefix(20)), range: head.headers.first(name: "range").map { String($0.prefix(100)) },
            started: ContinuousClock.now, logger: configuration.logger, warning: reader.securityWarning, statistics: statistics)
    }

    /// What a checked `GET` or `HEAD` asks for.
    fileprivate struct Asked: Sendable {
        var url: URL
        /// The first range of the `Range` header, if any.
        var specifier: RangeSpecifier?
        /// Where the body will start, when known before the length: an uncached resource is
        /// then asked for with one ranged GET rather than a HEAD and a GET.
        var firstByte: Int64?
        /// How many bytes from ``firstByte`` are asked for, when the range says (`bytes=a-b`).
        var length: Int64?
        /// The player's fields for the origin.
        var forwarded: RequestHeaders
        /// The player's own conditions (`If-None-Match`, …).
        var conditions: PlayerConditions
    }

    /// The range and fields of a `GET` or `HEAD` for `url` (from ``checkedOriginURL(_:)``).
    private func parse(_ head: HTTPRequestHead, url: URL) throws -> Asked {
        // RFC 9110: a Range that is not a valid bytes range is ignored; we say so instead.
        var specifier: RangeSpecifier?
        if let rangeHeader = head.headers.first(name: "range") {
            switch RangeSpecifier.parse(rangeHeader) {
            case .invalid:
                throw ProxyRequestError(status: .badRequest, "Malformed Range header \"\(rangeHeader.prefix(100))\": use bytes=a-b, bytes=a- or bytes=-n.")
            case .single(let one): specifier = one
            case .multiple(let first): specifier = first  // answered with the first range only
            }
        }
        var firstByte: Int64?
        var length: Int64?
        if head.method != .HEAD {
            switch specifier {
            case nil: firstByte = 0
            case .from(let first, let last)?:
                firstByte = first
                length = last.map { $0 - first + 1 }  // the parser guarantees first <= last <= 2^60
            case .suffix?: firstByte = nil
            }
        }
        return Asked(
            url: url, specifier: specifier, firstByte: firstByte, length: length, forwarded: Self.endToEndHeaders(head.headers),
            conditions: PlayerConditions(head.headers))
    }

    private func answer(_ head: HTTPRequestHead, localPort: Int, checked: CheckedRequest?) async -> ProxyResponse {
        let sendsBody = head.method != .HEAD
        var log = requestLog(for: head)
        do {
            let url: URL
            let target: RequestTarget
            let asked: Asked
            if let checked {
                (url, target, asked) = (checked.url, checked.target, checked.asked)
            } else {
                if let admin = try await AdminEndpoints(handler: self).respond(to: head, localPort: localPort) { return admin }
                try checkRequest(head, localPort: localPort)
                if head.method == .OPTIONS { return log.finish(try preflight(head)) }
                (url, target) = try checkedOriginURL(head)
                asked = try parse(head, url: url)
            }
            log.url = url.absoluteString
            // What was stored when the request came: its bytes count as served from the cache,
            // the rest as from the origin (a download started for this request may store some
            // before the read reaches them).
            let key = reader.store.key(for: url)
            let storedAtArrival = reader.store.spans(for: key)
            if target.isMemoryOnly {
                log.passesThrough = true
                return log.finish(try await memoryOnly(url, head: head, headers: asked.forwarded))
            }
            if HLSPlaylist.isBlockingReload(url) {
                // Held by the origin until the next segment or part exists: never the cache's to answer.
                log.passesThrough = true
                let (body, metadata) = try await reader.originBody(of: url, headers: asked.forwarded, limit: HLSPlaylist.maximumSize)
                if let awaited = HLSPlaylist.awaitedSegment(of: url), HLSPlaylist.looksLikePlaylist(body),
                    let parsed = try? HLSPlaylist(parsing: body), !parsed.contains(mediaSequence: awaited.mediaSequence, part: awaited.part)
                {
                    // Never a playlist without what the player waits for (AVPlayer fails the
                    // stream with -15410): a retriable 503 instead.
                    let wanted = "segment \(awaited.mediaSequence)" + (awaited.part.map { " part \($0)" } ?? "")
                    configuration.logger.warning(
                        "Refused a blocking playlist reload that lacks what it waits for", metadata: ["url": "\(url.absoluteString.prefix(200))", "wanted": "\(wanted)"])
                    throw ProxyRequestError(status: .serviceUnavailable, "The origin's playlist does not hold \(wanted) yet; ask again.", headers: [("Retry-After", "1")])
                }
                return log.finish(try rewrite(body, metadata: metadata, url: url, head: head, localPort: localPort))
            }
            if SteeringManifest.isSteeringRequest(url) {
                // A steering server's answer depends on what the player says of its pathway
                // and throughput: the origin's, never stored.
                log.passesThrough = true
                let (body, metadata) = try await reader.originBody(of: url, headers: asked.forwarded, limit: SteeringManifest.maximumSize)
                return log.finish(try steering(body, metadata: metadata, url: url, head: head, localPort: localPort))
            }
            var (specifier, forwarded) = (asked.specifier, asked.forwarded)
            // The player's conditions go to the origin when the cache holds nothing to answer
            // them with (RFC 9111 §4.3.2); its `304` then comes back as it is.
            let holdsVersion = asked.conditions.isEmpty || reader.store.metadata(for: key)?.length != nil
            let asking = holdsVersion ? forwarded : forwarded + asked.conditions.fields
            // A probe's bytes that are not stored (`no-store`) wait for this request's read,
            // which takes them; whatever this request does, they are let go when it is answered.
            defer { reader.releaseReservation(for: url) }
            var metadata: ContentMetadata
            if let firstByte = asked.firstByte {
                metadata = try await reader.contentInfoForRead(url, from: firstByte, length: asked.length, headers: asking)
            } else {
                metadata = try await reader.contentInfo(for: url, headers: asking)
            }
            // A playlist is answered whole, rewritten, whatever the Range (RFC 9110 §14.2
            // lets a server ignore it; ffmpeg asks for `bytes=0-`).
            let (kind, unstored) = try await manifestKind(url, metadata, asked: asked)
            switch kind {
            case .hls: return log.finish(try await playlist(url, head: head, localPort: localPort, headers: forwarded, planned: metadata, read: unstored))
            case .dash: return log.finish(try await manifest(url, head: head, localPort: localPort, headers: forwarded, planned: metadata, read: unstored))
            case nil: break
            }
            let now = reader.store.configuration.clock.now
            switch asked.conditions.evaluate(against: metadata) {
            case .notModified:
                return log.finish(ProxyResponse(status: .notModified, headers: Self.notModifiedHeaders(metadata, now: now), body: .none))
            case .preconditionFailed:
                return log.finish(Self.error(.preconditionFailed, "A precondition of the request (If-Match or If-Unmodified-Since) does not hold for the current version."))
            case .proceed:
                break
            }
            if !asked.conditions.rangeApplies(to: metadata) { specifier = nil }  // If-Range names another version: the whole body
            var planned: ContentMetadata? = metadata
            // The head is planned from what is known now; if the read then finds another
            // version at the origin, it is planned again from what the read found, so the
            // head always describes the bytes that follow it.
            for _ in 0..<3 {
                guard let total = metadata.length else {
                    guard sendsBody else { return log.finish(ProxyResponse(status: .ok, headers: Self.headers(metadata, range: nil, isPartial: false, now: now), body: .none)) }
                    return try await lengthless(url, asked: asked, specifier: specifier, headers: forwarded, planned: planned, log: log, now: now)
                }
                var wanted = ByteRange(0, total)
                if let specifier {
                    guard let resolved = specifier.resolve(length: total) else {
                        return log.finish(Self.unsatisfiable(total: total))
                    }
                    wanted = resolved
                }
                let status: HTTPResponseStatus = specifier != nil ? .partialContent : .ok
                guard sendsBody, !wanted.isEmpty else {
                    return log.finish(ProxyResponse(status: status, headers: Self.headers(metadata, range: wanted, isPartial: specifier != nil, now: now), body: .none))
                }
                if let unstored, Int64(unstored.body.count) == total, unstored.metadata.isSameVersion(as: metadata) {
                    // Read whole to be looked at, and not stored: answered from those bytes.
                    let bytes = Array(unstored.body[Int(wanted.lowerBound)..<Int(wanted.upperBound)])
                    log.passesThrough = true
                    return log.finish(
                        ProxyResponse(
                            status: status, headers: Self.headers(unstored.metadata, range: wanted, isPartial: specifier != nil, now: now), body: .bytes(bytes)))
                }
                let stream = try await reader.read(url, offset: wanted.lowerBound, length: wanted.length, headers: forwarded, planned: planned)
                planned = nil
                guard stream.metadata.length == total, stream.range == wanted, metadata.isSameVersion(as: stream.metadata) else {
                    stream.cancel()
                    metadata = stream.metadata
                    continue
                }
                log.status = Int(status.code)
                log.passesThrough = !stream.metadata.isStorable
                log.storedAtArrival = (storedAtArrival, stream.range.lowerBound)
                return ProxyResponse(
                    status: status, headers: Self.headers(stream.metadata, range: stream.range, isPartial: specifier != nil, now: now),
                    body: .stream(stream, log: log))
            }
            throw CacheError(.resourceChanged, "\(url.absoluteString) kept changing at the origin while the answer was planned; try again.")
        } catch {
            noteRefusal(error, head)
            return log.finish(Self.response(for: error), error: error)
        }
    }

    /// The answer for a resource whose length the origin does not say, streamed as it
    /// arrives without a length. A range from a known first byte is asked for as it is: an
    /// origin that serves it (a resource that grows while it is read, such as a low-latency
    /// HLS segment hinted from `BYTERANGE-START`) gives a `206` whose `Content-Range` the
    /// player gets as the origin wrote it; one that answers whole (internet radio, a generated
    /// file) gives the whole body, `200` (a `Range` is ignored, as RFC 9110 §14.2 allows).
    private func lengthless(
        _ url: URL, asked: Asked, specifier: RangeSpecifier?, headers: RequestHeaders, planned: ContentMetadata?, log: RequestLog, now: Date
    ) async throws -> ProxyResponse {
        var (log, planned) = (log, planned)
        log.passesThrough = true
        // The probe's answer says which: a `206` is the origin serving ranges.
        if specifier != nil, let firstByte = asked.firstByte, planned?.acceptsRanges ?? true {
            let stream = try await reader.read(url, offset: firstByte, length: asked.length, headers: headers, planned: planned)
            if stream.isPartOfUnknownLength {
                var fields = Self.headers(stream.metadata, range: nil, isPartial: false, now: now)
                fields.replaceOrAdd(name: "Accept-Ranges", value: "bytes")
                fields.replaceOrAdd(name: "Content-Range", value: ContentRange(range: stream.range, totalLength: nil).headerValue)
                log.status = 206
                return ProxyResponse(status: .partialContent, headers: fields, body: .stream(stream, log: log))
            }
            if firstByte == 0, asked.length == nil {
                log.status = 200
                return ProxyResponse(status: .ok, headers: Self.headers(stream.metadata, range: nil, isPartial: false, now: now), body: .stream(stream, log: log))
            }
            // The origin answered whole after all: the player gets the whole body, from its start.
            stream.cancel()
            planned = nil
        }
        let stream = try await reader.read(url, offset: 0, length: nil, headers: headers, planned: planned)
        log.status = 200
        return ProxyResponse(status: .ok, headers: Self.headers(stream.metadata, range: nil, isPartial: false, now: now), body: .stream(stream, log: log))
    }

    /// Whether `url` is a playlist or a manifest; and, when only its bytes can tell and it is
    /// not stored, its whole body. Not stored, its bytes can be read only once (one origin
    /// request per client request), so a small body that may be a playlist is read whole
    /// here, looked at, and answered from memory. A range that does not start at 0 or has an
    /// end is taken for media (a player asks for a playlist whole) and read as asked.
    private func manifestKind(_ url: URL, _ metadata: ContentMetadata, asked: Asked) async throws -> (
        CachingReader.ManifestKind?, (body: [UInt8], metadata: ContentMetadata)?
    ) {
        guard !metadata.isStorable, CachingReader.mayBePlaylist(metadata) else {
            return (try await reader.manifestKind(url, metadata, headers: asked.forwarded, planned: metadata), nil)
        }
        guard asked.firstByte == 0, asked.length == nil, metadata.length != nil else { return (CachingReader.declaredKind(metadata), nil) }
        let read = try await reader.playlistBody(url, headers: asked.forwarded, planned: metadata)
        return (CachingReader.declaredKind(read.metadata) ?? CachingReader.sniffedKind(read.body), read)
    }

    // MARK: HLS

    /// The playlist at `url` with every URI it names rewritten to come back through this proxy,
    /// at the host and port the player used. A body that is not a playlist after all goes
    /// through unchanged; one that cannot be read gets a 502 that says why.
    /// - Parameter read: the body and its metadata when they were read already (an answer
    ///   that is not stored: it was just fetched, and is not asked for again).
    private func playlist(
        _ url: URL, head: HTTPRequestHead, localPort: Int, headers: RequestHeaders, planned: ContentMetadata,
        read: (body: [UInt8], metadata: ContentMetadata)?
    ) async throws -> ProxyResponse {
        var (body, metadata) = if let read { read } else { try await reader.playlistBody(url, headers: headers, planned: planned) }
        // A live or EVENT playlist is never older than half its target duration (at least
        // 1 s), whatever the origin's freshness said: otherwise the player would see it frozen.
        // The version read was checked against the origin's freshness before it was read;
        // one the origin gave or confirmed longer ago than that is validated, then read again.
        if read == nil, HLSPlaylist.looksLikePlaylist(body), let parsed = try? HLSPlaylist(parsing: body), !parsed.isFinal {
            let lifetime = Duration.milliseconds(max(1000, (parsed.targetDuration ?? 2) * 500))
            if !reader.wasConfirmed(url, within: lifetime) {
                let current = try await reader.contentInfo(for: url, headers: headers, maximumAge: lifetime)
                (body, metadata) = try await reader.playlistBody(url, headers: headers, planned: current)
            }
        }
        return try rewrite(body, metadata: metadata, url: url, head: head, localPort: localPort)
    }

    /// The DASH manifest at `url` with every URL it names (and a base for what it names
    /// relatively) rewritten to the proxy's path form (``ProxyURL/pathForm(for:token:)``), at
    /// the host and port the player used. A live (`dynamic`) manifest is never older than its
    /// `minimumUpdatePeriod` (at least 1 s), whatever the origin's freshness said. A body that
    /// is not a manifest after all goes through unchanged; one that cannot be read gets a 502.
    /// - Parameter read: as in ``playlist(_:head:localPort:headers:planned:read:)``.
    private func manifest(
        _ url: URL, head: HTTPRequestHead, localPort: Int, headers: RequestHeaders, planned: ContentMetadata,
        read: (body: [UInt8], metadata: ContentMetadata)?
    ) async throws -> ProxyResponse {
        var (body, metadata) = if let read { read } else { try await reader.playlistBody(url, headers: headers, planned: planned) }
        if read == nil, DASHManifest.looksLikeManifest(body), let parsed = try? DASHManifest(parsing: body), parsed.isDynamic {
            let lifetime = Duration.milliseconds(Int64(max(1, min(parsed.minimumUpdatePeriod ?? 2, 3600)) * 1000))
            if !reader.wasConfirmed(url, within: lifetime) {
                let current = try await reader.contentInfo(for: url, headers: headers, maximumAge: lifetime)
                (body, metadata) = try await reader.playlistBody(url, headers: headers, planned: current)
            }
        }
        guard DASHManifest.looksLikeManifest(body) else {
            return Self.rewritten(.bytes(body), length: body.count, metadata: metadata, type: "application/dash+xml", head: head)
        }
        let parsed: DASHManifest
        do {
            parsed = try DASHManifest(parsing: body)
        } catch {
            configuration.logger.warning("Rejected an origin manifest", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(status: .badGateway, "The origin's manifest cannot be read: \(error.message)")
        }
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        let text = parsed.rewritten(base: metadata.finalURL ?? url) { resolved in
            proxy + ProxyURL.pathForm(for: resolved, token: configuration.token)
        }
        return Self.rewritten(.text(text), length: text.utf8.count, metadata: metadata, type: "application/dash+xml", head: head)
    }

    /// A steering manifest with its URLs leading back through the proxy (see
    /// ``SteeringManifest``): `RELOAD-URI` in the path form, a clone's playlists in the
    /// `?url=` form; clones that cannot go through the proxy left out, with a warning.
    private func steering(_ body: [UInt8], metadata: ContentMetadata, url: URL, head: HTTPRequestHead, localPort: Int) throws -> ProxyResponse {
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        let rewritten: (bytes: [UInt8], droppedClones: [String])
        do {
            rewritten = try SteeringManifest.rewritten(
                body, base: metadata.finalURL ?? url,
                reload: { proxy + ProxyURL.pathForm(for: $0, token: configuration.token) },
                resource: { proxy + ProxyURL.path(for: $0, token: configuration.token) })
        } catch {
            configuration.logger.warning("Rejected a steering manifest", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(status: .badGateway, "The origin's steering manifest cannot be read: \(error.message)")
        }
        if !rewritten.droppedClones.isEmpty {
            configuration.logger.warning(
                "Left out pathway clones that would lead the player past the proxy (HOST or PARAMS replacement)",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "clones": "\(rewritten.droppedClones.joined(separator: ","))"])
        }
        return Self.rewritten(.bytes(rewritten.bytes), length: rewritten.bytes.count, metadata: metadata, type: "application/json", head: head)
    }

    /// `http://` and the host and port the player used to reach the proxy: where the URLs
    /// written into playlists, manifests and steering answers lead.
    private static func proxyOrigin(_ head: HTTPRequestHead, localPort: Int) -> String {
        "http://" + (head.headers.first(name: "host") ?? "127.0.0.1:\(localPort)")
    }

    /// The answer with a playlist or manifest, rewritten (or, when it was not one after all,
    /// as it came): the player comes back for each reload, and the cache decides what that costs.
    private static func rewritten(_ body: ProxyResponse.Body, length: Int, metadata: ContentMetadata, type: String, head: HTTPRequestHead) -> ProxyResponse {
        var fields = HTTPHeaders()
        fields.add(name: "Content-Type", value: metadata.mimeType ?? type)
        if let date = metadata.responseHeader("date") { fields.add(name: "Date", value: date) }
        fields.add(name: "Cache-Control", value: "no-cache")
        fields.add(name: "Accept-Ranges", value: "none")
        fields.add(name: "Content-Length", value: String(length))
        return ProxyResponse(status: .ok, headers: fields, body: head.method == .HEAD ? .none : body)
    }

    /// A resource kept in memory only (an HLS key: see ``RequestTarget/isMemoryOnly``),
    /// answered whole whatever the `Range`.
    private func memoryOnly(_ url: URL, head: HTTPRequestHead, headers: RequestHeaders) async throws -> ProxyResponse {
        let (body, metadata) = try await reader.memoryOnlyBody(of: url, headers: headers)
        var fields = HTTPHeaders()
        fields.add(name: "Content-Type", value: metadata.mimeType ?? "application/octet-stream")
        fields.add(name: "Cache-Control", value: "no-store")
        fields.add(name: "Accept-Ranges", value: "none")
        fields.add(name: "Content-Length", value: String(body.count))
        return ProxyResponse(status: .ok, headers: fields, body: head.method == .HEAD ? .none : .bytes(body))
    }

    private func rewrite(_ body: [UInt8], metadata: ContentMetadata, url: URL, head: HTTPRequestHead, localPort: Int) throws -> ProxyResponse {
        guard HLSPlaylist.looksLikePlaylist(body) else {
            // Not a playlist after all: the bytes as they came.
            return Self.rewritten(.bytes(body), length: body.count, metadata: metadata, type: "application/vnd.apple.mpegurl", head: head)
        }
        let parsed: HLSPlaylist
        do {
            parsed = try HLSPlaylist(parsing: body)
        } catch let error as HLSPlaylistError {
            configuration.logger.warning("Rejected an origin playlist", metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(status: .badGateway, "The origin's playlist cannot be read: \(error.message)")
        }
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        // Relative URIs resolve against where the playlist came from, after redirects.
        let text = parsed.rewritten(base: metadata.finalURL ?? url) { resolved, tag in
            // A steering server's URI in the path form: the parameters the player adds to it
            // (`_HLS_pathway`, `_HLS_throughput`) are then the origin URL's own.
            if tag == HLSPlaylist.steeringTag { return proxy + ProxyURL.pathForm(for: resolved, token: configuration.token) }
            return proxy + ProxyURL.path(for: resolved, token: configuration.token, memoryOnly: tag.map(HLSPlaylist.keyTags.contains) == true)
        }
        return Self.rewritten(.text(text), length: text.utf8.count, metadata: metadata, type: "application/vnd.apple.mpegurl", head: head)
    }

    /// Fields of a player's request that the proxy does not send on: hop-by-hop ones (RFC
    /// 9110 §7.6.1, plus those the request's `Connection` names), the target's `Host`, the
    /// range, validator and caching fields the cache manages itself, its encoding (bodies are
    /// cached as sent), and the proxy's own token.
    static let fieldsNotForwarded: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authorization", "proxy-authenticate", "host", "content-length", "expect",
        "range", "if-range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
        "cache-control", "pragma", "accept-encoding", "x-mediacache-token",
    ]

    /// The player's end-to-end request fields, for the origin: credentials, cookies,
    /// referer, user agent, languages (one cache serves one user).
    static func endToEndHeaders(_ headers: HTTPHeaders) -> RequestHeaders {
        var dropped = fieldsNotForwarded
        for value in headers["connection"] {
            for token in value.split(separator: ",") { dropped.insert(String(token).trimmingCharacters(in: .whitespaces).lowercased()) }
        }
        return headers.filter { !dropped.contains($0.name.lowercased()) }.map { (name: $0.name, value: $0.value) }
    }

    /// The head of an answer carrying `range` of the resource `metadata` describes, at `now`:
    /// the fields the cache writes from what it serves, then the origin's end-to-end fields
    /// kept with the entry (``ContentMetadata/responseHeaders``), the origin's `Date` (or
    /// `now` when it sent none) and `Age` (RFC 9111 §5.1: how long ago the origin generated
    /// the stored answer).
    /// With no `range` (a body without a length) there is no `Content-Length` and ranges are
    /// not offered.
    static func headers(_ metadata: ContentMetadata, range: ByteRange?, isPartial: Bool, now: Date) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for field in metadata.responseHeaders {
            // A stored whole answer's odd `Content-Range` never rides on a partial one.
            if isPartial || range == nil, field.name.utf8.count == 13, field.name.lowercased() == "content-range" { continue }
            headers.add(name: field.name, value: field.value)
        }
        if !headers.contains(name: "date") { headers.add(name: "Date", value: HTTPDate.format(Int64(now.timeIntervalSince1970))) }
        if let generatedAt = metadata.generatedAt {
            headers.add(name: "Age", value: String(Int64(max(0, min(now.timeIntervalSince(generatedAt), Double(CacheControl.maximumSeconds))))))
        }
        // The origin's Content-Type as it spelled it, kept with the entry; else the type known.
        if !headers.contains(name: "content-type") { headers.add(name: "Content-Type", value: metadata.mimeType ?? "application/octet-stream") }
        guard let range else {
            headers.add(name: "Accept-Ranges", value: "none")
            return headers
        }
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(name: "Content-Length", value: String(range.length))
        if let etag = metadata.etag { headers.add(name: "ETag", value: etag) }
        if let lastModified = metadata.lastModified { headers.add(name: "Last-Modified", value: lastModified) }
        if isPartial, let total = metadata.length {
            headers.add(name: "Content-Range", value: ContentRange(range: range, totalLength: total).headerValue)
        }
        return headers
    }

    /// The head of a `304 Not Modified` for the version `metadata` describes (RFC 9110
    /// §15.4.5): the fields a `200` would carry less those that describe the body.
    static func notModifiedHeaders(_ metadata: ContentMetadata, now: Date) -> HTTPHeaders {
        var fields = headers(metadata, range: nil, isPartial: false, now: now)
        for name in ["content-type", "content-length", "content-range", "accept-ranges", "content-encoding", "content-language", "content-disposition"] {
            fields.remove(name: name)
        }
        if let etag = metadata.etag { fields.add(name: "ETag", value: etag) }
        if let lastModified = metadata.lastModified { fields.add(name: "Last-Modified", value: lastModified) }
        return fields
    }

    /// The checks every request passes before its URL is looked at: the method, then
    /// ``checkSender(_:localPort:)``.
    private func checkRequest(_ head: HTTPRequestHead, localPort: Int) throws {
        let allowsPreflight = head.method == .OPTIONS && !configuration.corsOrigins.isEmpty
        guard head.method == .GET || head.method == .HEAD || allowsPreflight else {
            throw ProxyRequestError(status: .methodNotAllowed, "Only GET and HEAD are served.", headers: [("Allow", "GET, HEAD")])
        }
        try checkSender(head, localPort: localPort)
    }

    /// The checks every request passes first, admin ones included, before anything of the
    /// cache is looked at (so a refusal's timing says nothing of what is cached): the
    /// request's size, a `Host` that names this proxy (so a web page that rebinds its own name
    /// to 127.0.0.1 cannot reach it), and the site that sent it (``checkSite(_:)``).
    func checkSender(_ head: HTTPRequestHead, localPort: Int) throws {
        guard head.uri.utf8.count <= configuration.maxURIBytes else {
            throw ProxyRequestError(status: .uriTooLong, "The request target is longer than \(configuration.maxURIBytes) bytes.")
        }
        let headerBytes = head.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        guard headerBytes <= configuration.maxHeaderBytes else {
            throw ProxyRequestError(status: .requestHeaderFieldsTooLarge, "The request's header fields are larger than \(configuration.maxHeaderBytes) bytes.")
        }
        let hosts = head.headers["host"]
        if hosts.isEmpty {
            // RFC 9112 §3.2: an HTTP/1.1 request without Host is malformed; HTTP/1.0 has none.
            guard head.version == .http1_0 else { throw ProxyRequestError(status: .badRequest, "The request has no Host header.") }
            return
        }
        guard hosts.count == 1, let host = HostAndPort(parsing: hosts[0]) else {
            throw ProxyRequestError(status: .badRequest, "The request's Host header is malformed.")
        }
        guard configuration.accepts(host, localPort: localPort) else {
            throw ProxyRequestError(
                status: .misdirectedRequest,
                "This proxy answers requests for 127.0.0.1:\(localPort), localhost:\(localPort) or [::1]:\(localPort), not \(hosts[0].prefix(100)) (add a name with --server-name).",
                refusal: .host)
        }
        try checkSite(head)
    }

    /// The `Sec-Fetch-Site` values a request may carry: the proxy's own pages, pages of the
    /// same site (another port of the same host), and what the user typed or bookmarked.
    static let sitesServed: Set<String> = ["same-origin", "same-site", "none"]

    /// Fetch Metadata resource isolation: a request a browser sent for a page of another site
    /// (`Sec-Fetch-Site: cross-site`, or a value the proxy does not know) is refused, unless it
    /// is a CORS request from a web origin listed in ``ProxyConfiguration/corsOrigins``. Any page
    /// could otherwise make the proxy fetch addresses on the user's network, fill and evict the
    /// cache, and time a request to learn what the user played. Players and tools send no
    /// `Sec-Fetch-*` field and are not concerned.
    private func checkSite(_ head: HTTPRequestHead) throws {
        let sites = head.headers["sec-fetch-site"]
        if sites.isEmpty { return }
        if sites.count == 1, Self.sitesServed.contains(sites[0].lowercased()) { return }
        if allowedWebOrigin(head) != nil { return }
        throw ProxyRequestError(
            status: .forbidden,
            "A page of another site asked for this (Sec-Fetch-Site: \(sites.joined(separator: ", ").prefix(40))): the proxy serves players, the user, and pages listed with --cors-origin asking in CORS mode.",
            refusal: .crossSite)
    }

    /// Whether the request carries the access token (as `token=` or `X-MediaCache-Token`),
    /// compared in time that does not depend on where a guess first differs.
    func hasToken(_ target: RequestTarget, _ head: HTTPRequestHead) -> Bool {
        guard let token = configuration.token else { return true }
        guard let given = target.token ?? head.headers.first(name: "X-MediaCache-Token") else { return false }
        let (expected, offered) = (Array(token.utf8), Array(given.utf8))
        var difference = expected.count ^ offered.count
        for index in expected.indices { difference |= Int(expected[index] ^ (index < offered.count ? offered[index] : 0)) }
        return difference == 0
    }

    /// Logs a request a guard refused (a page of another site, a wrong `Host`, a missing token,
    /// an origin not allowed) at warning level with its cause, and counts it by cause.
    func noteRefusal(_ error: any Error, _ head: HTTPRequestHead) {
        guard let refused = error as? ProxyRequestError, let refusal = refused.refusal else { return }
        ProxyMetrics.refused(refusal)
        var metadata: Logger.Metadata = ["cause": "\(refusal.rawValue)", "status": "\(refused.status.code)"]
        for name in ["sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "origin", "host"] {
            if let value = head.headers.first(name: name) { metadata[name] = "\(value.prefix(100))" }
        }
        // The referring page's origin only: its path and query may hold what is not ours to log.
        if let referer = head.headers.first(name: "referer").flatMap(URL.init(string:)), let scheme = referer.scheme, let host = referer.host {
            metadata["referer"] = "\(scheme)://\(host.prefix(100))\(referer.port.map { ":\($0)" } ?? "")"
        }
        configuration.logger.warning("Refused a request: \(refused.message)", metadata: metadata)
    }

    // MARK: CORS (opt-in)

    /// The request's `Origin`, if it is one of ``ProxyConfiguration/corsOrigins``.
    private func allowedWebOrigin(_ head: HTTPRequestHead) -> String? {
        guard !configuration.corsOrigins.isEmpty, let origin = head.headers.first(name: "origin") else { return nil }
        return configuration.corsOrigins.contains(origin) ? origin : nil
    }

    /// Lets a listed web origin's page read the answer, and its player see the range fields.
    private func addCORSHeaders(to response: inout ProxyResponse, for head: HTTPRequestHead) {
        guard !configuration.corsOrigins.isEmpty else { return }
        response.headers.add(name: "Vary", value: "Origin")
        guard let origin = allowedWebOrigin(head) else { return }
        response.headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: origin)
        if head.method != .OPTIONS {
            response.headers.add(name: "Access-Control-Expose-Headers", value: "Content-Range, Content-Length, Accept-Ranges, ETag, Last-Modified")
        }
    }

    /// The answer to a CORS preflight (`OPTIONS`): `204` for a listed web origin, with the
    /// methods, the request fields it asked for and, if asked, Private Network Access.
    private func preflight(_ head: HTTPRequestHead) throws -> ProxyResponse {
        guard allowedWebOrigin(head) != nil else {
            throw ProxyRequestError(status: .forbidden, "Pages from this origin may not read through the proxy (add it with --cors-origin).")
        }
        var headers = HTTPHeaders()
        headers.add(name: "Access-Control-Allow-Methods", value: "GET, HEAD")
        let asked = head.headers["access-control-request-headers"].joined(separator: ",").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && $0.utf8.allSatisfy(CacheControl.isTokenByte) }
        if !asked.isEmpty { headers.add(name: "Access-Control-Allow-Headers", value: asked.joined(separator: ", ")) }
        if head.headers.first(name: "access-control-request-private-network")?.lowercased() == "true" {
            headers.add(name: "Access-Control-Allow-Private-Network", value: "true")
        }
        headers.add(name: "Access-Control-Max-Age", value: "600")
        headers.add(name: "Content-Length", value: "0")
        return ProxyResponse(status: .noContent, headers: headers, body: .none)
    }

    /// The origin URL from `url=`, after the token, scheme and origin checks, and the target it came in.
    private func checkedOriginURL(_ head: HTTPRequestHead) throws -> (URL, RequestTarget) {
        let parsed = recentTargets.parse(head.uri) { [reader] url throws(ProxyRequestError) in
            do {
                try reader.checkOrigin(url)
            } catch {
                throw ProxyRequestError(status: .forbidden, (error as? CacheError)?.message ?? "The origin is not allowed.", refusal: .origin)
            }
        }
        guard hasToken(parsed.target, head) else { throw ProxyRequestError(status: .forbidden, "Missing or wrong access token.", refusal: .token) }
        return (try parsed.originURL.get(), parsed.target)
    }

    // MARK: Error responses

    static func response(for error: any Error) -> ProxyResponse {
        if let error = error as? ProxyRequestError {
            var response = Self.error(error.status, error.message)
            for (name, value) in error.headers { response.headers.add(name: name, value: value) }
            return response
        }
        guard let error = error as? CacheError else {
            return Self.error(.badGateway, "The origin request failed.")
        }
        if let answer = error.originAnswer { return passedOn(answer) }
        switch error.code {
        case .rangeNotSatisfiable:
            if let total = error.resourceLength { return unsatisfiable(total: total) }
            return Self.error(.rangeNotSatisfiable, error.message)
        case .originTimedOut, .offline:
            return Self.error(.gatewayTimeout, error.message)
        case .originUnavailable, .originRejected, .resourceChanged:
            return Self.error(.badGateway, error.message)
        case .originNotAllowed:
            return Self.error(.forbidden, error.message)
        case .capacityExceeded:
            return Self.error(.insufficientStorage, error.message)
        case .notCached:
            return Self.error(.notFound, error.message)
        default:
            return Self.error(.internalServerError, error.message)
        }
    }

    /// The origin's own answer as it gave it: status, reason, end-to-end fields, body.
    static func passedOn(_ answer: OriginAnswer) -> ProxyResponse {
        var headers = HTTPHeaders()
        for field in answer.headers { headers.add(name: field.name, value: field.value) }
        // 1xx, 204 and 304 carry no body (RFC 9110 §6.4.1) and so no length of one.
        let hasBody = !(100..<200).contains(answer.status) && answer.status != 204 && answer.status != 304
        if hasBody { headers.add(name: "Content-Length", value: String(answer.body.count)) }
        return ProxyResponse(
            status: HTTPResponseStatus(statusCode: answer.status, reasonPhrase: answer.reason), headers: headers,
            body: hasBody && !answer.body.isEmpty ? .bytes(answer.body) : .none)
    }

    static func unsatisfiable(total: Int64) -> ProxyResponse {
        var response = Self.error(.rangeNotSatisfiable, "The range is outside the \(total)-byte resource.")
        response.headers.add(name: "Content-Range", value: ContentRange(range: nil, totalLength: total).headerValue)
        return response
    }

    static func error(_ status: HTTPResponseStatus, _ message: String) -> ProxyResponse {
        let line = message.replacingOccurrences(of: "\n", with: " ") + "\n"
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(line.utf8.count))
        return ProxyResponse(status: status, headers: headers, body: .text(line))
    }
}

/// A request the proxy refuses, with its status.
struct ProxyRequestError: Error, Sendable {
    /// Which guard refused a request (see ``ProxyHandler/noteRefusal(_:_:)``); the label of
    /// `mediacache_refused_requests_total`.
    enum Refusal: String, CaseIterable, Sendable {
        /// A page of another site (Fetch Metadata).
        case crossSite = "cross-site"
        /// A `Host` that does not name the proxy (DNS rebinding).
        case host
        /// A missing or wrong access token.
        case token
        /// An origin host not on the allow-list.
        case origin
        /// A changing admin request without `X-MediaCache-Admin: 1`.
        case admin
    }

    var status: HTTPResponseStatus
    var message: String
    var headers: [(String, String)]
    var refusal: Refusal?
    init(status: HTTPResponseStatus, _ message: String, headers: [(String, String)] = [], refusal: Refusal? = nil) {
        self.status = status
        self.message = message
        self.headers = headers
        self.refusal = refusal
    }
}

/// The one log line per request: method, range, status, bytes from cache and origin, time
/// to first byte.
struct RequestLog: Sendable {
    var method: String
    var range: String?
    var started: ContinuousClock.Instant
    var logger: Logger
    /// The fetcher's security warning, carried by every line (``OriginFetcher/securityWarning``).
    var warning: String?
    /// Where the request is counted.
    var statistics: ProxyStatistics?
    var url = "-"
    /// Answered straight from the origin without storing (see ``CacheResult/passThrough``).
    var passesThrough = false
    /// The spans stored when the request came, and where the body starts: when set, the
    /// body's bytes within those spans count as from the cache and the others as from the origin.
    var storedAtArrival: (spans: SpanSet, start: Int64)?
    var status = 0
    var firstByte: ContinuousClock.Instant?

    /// Logs an answer made without reading (an error, a `HEAD`, a `416`), with the error's
    /// reason if it is one.
    func finish(_ response: ProxyResponse, error: (any Error)? = nil) -> ProxyResponse {
        var line = self
        line.status = Int(response.status.code)
        line.firstByte = ContinuousClock.now
        line.end(ReadStatistics(), error: error)
        return response
    }

    /// How the request was answered, from its status and where its bytes came from.
    func result(_ read: ReadStatistics) -> CacheResult {
        if status >= 400 || status == 0 { return .error }
        if passesThrough { return .passThrough }
        switch (read.bytesFromCache > 0, read.bytesFromOrigin > 0) {
        case (true, false): return .hit
        case (true, true): return .partial
        case (false, true): return .miss
        case (false, false): return .none
        }
    }

    func end(_ read: ReadStatistics, error: (any Error)?) {
        var statistics = read
        if let (spans, start) = storedAtArrival {
            let sent = read.bytesFromCache + read.bytesFromOrigin
            statistics.bytesFromCache = spans.spans(in: ByteRange(start, start + sent)).reduce(0) { $0 + $1.length }
            statistics.bytesFromOrigin = sent - statistics.bytesFromCache
        }
        let result = result(statistics)
        ProxyMetrics.record(result, cache: statistics.bytesFromCache, origin: statistics.bytesFromOrigin, duration: ContinuousClock.now - started)
        self.statistics?.record(
            ProxyStatistics.RecentRequest(
                at: Date(), method: method, url: url.utf8.count > 300 ? String(url.prefix(300)) : url, range: range,
                status: status, result: result.rawValue, bytesFromCache: statistics.bytesFromCache,
                bytesFromOrigin: statistics.bytesFromOrigin), result: result)
        guard logger.logLevel <= .info else { return }  // the line costs a tenth of a hot request
        let ttfb = firstByte.map { ($0 - started).formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))) } ?? "-"
        var metadata: Logger.Metadata = [
            "range": "\(range ?? "-")", "status": "\(status)", "result": "\(result.rawValue)", "cache": "\(statistics.bytesFromCache)",
            "origin": "\(statistics.bytesFromOrigin)", "retries": "\(statistics.originRetries)", "ttfb": "\(ttfb)", "url": "\(url)",
        ]
        if let error { metadata["error"] = "\((error as? ProxyRequestError)?.message ?? "\(error)")" }
        if let warning { metadata["warning"] = "\(warning)" }
        logger.info("\(method)", metadata: metadata)
    }
}
