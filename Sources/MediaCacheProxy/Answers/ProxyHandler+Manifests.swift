// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields
import NIOHTTP1

/// Playlists, manifests and steering answers: read (and validated when live), their URLs
/// rewritten to lead back through the proxy, answered from memory.
extension ProxyHandler {
    /// Whether `url` is a playlist or a manifest; and, when only its bytes can tell and it is
    /// not stored, its whole body. Not stored, its bytes can be read only once (one origin
    /// request per client request), so a small body that may be a playlist is read whole
    /// here, looked at, and answered from memory. A range that does not start at 0 or has an
    /// end is taken for media (a player asks for a playlist whole) and read as asked.
    func manifestKind(_ url: URL, _ metadata: ContentMetadata, asked: ProxyRouter.Asked) async throws -> (
        PlayerSource.ManifestKind?, (body: [UInt8], metadata: ContentMetadata)?
    ) {
        guard !metadata.isStorable, ManifestLook.mayBePlaylist(metadata) else {
            // A request from the middle of a resource of no particular type is for media (a
            // player opens a playlist from its start): its start is looked at only when stored,
            // so the request costs no second origin request for it.
            if engine.isMediaWithoutLook(url, metadata, from: asked.firstByte ?? 0) { return (nil, nil) }
            return (
                try await engine.manifestKind(url, metadata, headers: asked.forwarded, planned: metadata, as: .player),
                nil
            )
        }
        guard asked.firstByte == 0, asked.length == nil, metadata.length != nil else {
            return (ManifestLook.declaredKind(metadata), nil)
        }
        let read = try await engine.bodies.playlistBody(url, headers: asked.forwarded, planned: metadata, as: .player)
        return (ManifestLook.declaredKind(read.metadata) ?? ManifestLook.sniffedKind(read.body), read)
    }

    // MARK: HLS

    /// A blocking playlist reload or delta update, held by the origin until the next segment
    /// or part exists: never the cache's to answer, and never answered with a playlist that
    /// lacks what the player waits for (AVPlayer fails the stream with -15410 on one): a
    /// retriable `503` instead.
    func blockingReload(_ url: URL, head: HTTPRequestHead, localPort: Int, headers: RequestHeaders) async throws
        -> ProxyResponse
    {
        let (body, metadata) = try await engine.bodies.originBody(
            of: url, headers: headers, limit: HLSPlaylist.maximumSize, as: .player)
        guard let parsed = try parsedPlaylist(body, url: url, head: head) else {
            return Self.notAPlaylist(body, metadata: metadata, head: head)
        }
        if let awaited = HLSPlaylist.awaitedSegment(of: url),
            !parsed.contains(mediaSequence: awaited.mediaSequence, part: awaited.part)
        {
            let wanted = "segment \(awaited.mediaSequence)" + (awaited.part.map { " part \($0)" } ?? "")
            configuration.logger.warning(
                "Refused a blocking playlist reload that lacks what it waits for",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "wanted": "\(wanted)"])
            throw ProxyRequestError(
                status: .serviceUnavailable, "The origin's playlist does not hold \(wanted) yet; ask again.",
                headers: [("Retry-After", "1")])
        }
        return rewrite(parsed, metadata: metadata, url: url, head: head, localPort: localPort, headers: headers)
    }

    /// The body of a playlist or manifest (`read` when it was read already), read through the
    /// cache, validated first when it is live and older than its `lifetime`
    /// (``WholeBodies/livePlaylistBody(_:headers:planned:as:lifetime:)``).
    private func liveBody(
        _ url: URL, headers: RequestHeaders, planned: ContentMetadata,
        read: (body: [UInt8], metadata: ContentMetadata)?,
        lifetime: ([UInt8]) -> Duration?
    ) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        if let read { return read }
        return try await engine.bodies.livePlaylistBody(
            url, headers: headers, planned: planned, as: .player, lifetime: lifetime)
    }

    /// The playlist at `url` with every URI it names rewritten to come back through this proxy,
    /// at the host and port the player used. A body that is not a playlist after all goes
    /// through unchanged; one that cannot be read gets a 502 that says why.
    /// - Parameter read: the body and its metadata when they were read already (an answer
    ///   that is not stored: it was just fetched, and is not asked for again).
    func playlist(
        _ url: URL, head: HTTPRequestHead, localPort: Int, headers: RequestHeaders, planned: ContentMetadata,
        read: (body: [UInt8], metadata: ContentMetadata)?
    ) async throws -> ProxyResponse {
        // A live or EVENT playlist is never older than half its target duration (at least
        // 1 s), whatever the origin's freshness said: otherwise the player would see it frozen.
        // Each body is parsed once: the one looked at for its lifetime is the one served unless
        // it was too old.
        var last: (body: [UInt8], parsed: Result<HLSPlaylist?, any Error>)?
        func parse(_ body: [UInt8]) throws -> HLSPlaylist? {
            if let last, last.body == body { return try last.parsed.get() }
            let parsed = Result { try parsedPlaylist(body, url: url, head: head) }
            last = (body, parsed)
            return try parsed.get()
        }
        let (body, metadata) = try await liveBody(url, headers: headers, planned: planned, read: read) { body in
            guard let parsed = try? parse(body), !parsed.isFinal else { return nil }
            return .milliseconds(max(1000, (parsed.targetDuration ?? 2) * 500))
        }
        guard let parsed = try parse(body) else { return Self.notAPlaylist(body, metadata: metadata, head: head) }
        // Offline, or with the origin failing, a master lists only the renditions held; online,
        // the variants whose start is held first (a player that starts on the first listed
        // starts where the bytes are).
        let base = metadata.finalURL ?? url
        engine.learning.learnAlternates(fromMaster: parsed, base: base)
        var served = await engine.held.master(parsed, url: url, base: base)
        if served == nil { served = await engine.held.masterLeadingHeld(parsed, base: base) }
        let sideLoaded = sideLoading(served ?? parsed, url: url, base: base, head: head)
        return rewrite(
            sideLoaded?.0 ?? served ?? parsed, metadata: metadata, url: url, head: head, localPort: localPort,
            headers: headers, sideLoaded: sideLoaded?.1)
    }

    /// The DASH manifest at `url` with every URL it names (and a base for what it names
    /// relatively) rewritten to the proxy's path form (``ProxyURL/pathForm(for:token:)``), at
    /// the host and port the player used. A live (`dynamic`) manifest is never older than its
    /// `minimumUpdatePeriod` (at least 1 s), whatever the origin's freshness said. A body that
    /// is not a manifest after all goes through unchanged; one that cannot be read gets a 502.
    /// - Parameter read: as in ``playlist(_:head:localPort:headers:planned:read:)``.
    func manifest(
        _ url: URL, head: HTTPRequestHead, localPort: Int, headers: RequestHeaders, planned: ContentMetadata,
        read: (body: [UInt8], metadata: ContentMetadata)?
    ) async throws -> ProxyResponse {
        let (body, metadata) = try await liveBody(url, headers: headers, planned: planned, read: read) { body in
            guard DASHManifest.looksLikeManifest(body), let parsed = try? DASHManifest(parsing: body), parsed.isDynamic
            else { return nil }
            return .milliseconds(Int64(max(1, min(parsed.minimumUpdatePeriod ?? 2, 3600)) * 1000))
        }
        guard DASHManifest.looksLikeManifest(body) else {
            return ProxyHandler.rewritten(
                .bytes(body), length: body.count, metadata: metadata, type: "application/dash+xml", head: head)
        }
        let parsed: DASHManifest
        do {
            parsed = try DASHManifest(parsing: body)
        } catch {
            configuration.logger.warning(
                "Rejected an origin manifest",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(status: .badGateway, "The origin's manifest cannot be read: \(error.message)")
        }
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        engine.learning.learnSegments(of: parsed, at: url, base: metadata.finalURL ?? url)
        engine.learning.learnAlternates(fromManifest: parsed, base: metadata.finalURL ?? url)
        // Offline, or with the origin failing, only the representations held.
        let removed = await engine.held.manifestRemovals(parsed, url: url, base: metadata.finalURL ?? url) ?? []
        let text = parsed.rewritten(base: metadata.finalURL ?? url, removing: removed) { resolved in
            // A live manifest's bases are where its segments appear as they are made.
            if parsed.isDynamic, resolved.absoluteString.hasSuffix("/") { engine.learning.noteLive(resolved) }
            return proxy + configuration.pathForm(for: resolved)
        }
        return ProxyHandler.rewritten(
            .text(text), length: text.utf8.count, metadata: metadata, type: "application/dash+xml", head: head)
    }

    /// A steering manifest with its URLs leading back through the proxy (see
    /// ``SteeringManifest``): `RELOAD-URI` in the path form, a clone's playlists in the
    /// `?url=` form; clones that cannot go through the proxy left out, with a warning.
    func steering(_ body: [UInt8], metadata: ContentMetadata, url: URL, head: HTTPRequestHead, localPort: Int) throws
        -> ProxyResponse
    {
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        let rewritten: (bytes: [UInt8], droppedClones: [String])
        do {
            rewritten = try SteeringManifest.rewritten(
                body, base: metadata.finalURL ?? url,
                reload: { proxy + configuration.pathForm(for: $0) },
                resource: { proxy + configuration.uri(of: ProxyTarget($0)) })
        } catch {
            configuration.logger.warning(
                "Rejected a steering manifest",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(
                status: .badGateway, "The origin's steering manifest cannot be read: \(error.message)")
        }
        if !rewritten.droppedClones.isEmpty {
            configuration.logger.warning(
                "Left out pathway clones that would lead the player past the proxy (HOST or PARAMS replacement)",
                metadata: [
                    "url": "\(url.absoluteString.prefix(200))",
                    "clones": "\(rewritten.droppedClones.joined(separator: ","))",
                ])
        }
        return ProxyHandler.rewritten(
            .bytes(rewritten.bytes), length: rewritten.bytes.count, metadata: metadata, type: "application/json",
            head: head)
    }

    /// An interstitial's asset list with each asset's URI leading back through the proxy
    /// (``InterstitialAssetList``); never stored (made for one viewer).
    func assetList(_ body: [UInt8], metadata: ContentMetadata, url: URL, head: HTTPRequestHead, localPort: Int) throws
        -> ProxyResponse
    {
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        let bytes: [UInt8]
        do {
            bytes = try InterstitialAssetList.rewritten(body, base: metadata.finalURL ?? url) {
                proxy + configuration.uri(of: ProxyTarget($0))
            }
        } catch {
            configuration.logger.warning(
                "Rejected an interstitial asset list",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(status: .badGateway, "The origin's asset list cannot be read: \(error.message)")
        }
        var response = ProxyHandler.rewritten(
            .bytes(bytes), length: bytes.count, metadata: metadata, type: "application/json", head: head)
        response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return response
    }

    /// The CMCD to send for `url`, named in `playlist` by `tag` (`nil`: a URI line), in `session`.
    static func cmcd(for url: URL, tag: String?, in playlist: HLSPlaylist, session: CMCD, durations: [URL: Double])
        -> CMCD
    {
        var cmcd = CMCD(streamingFormat: "h", sessionID: session.sessionID)
        switch tag {
        case nil where playlist.isMaster: cmcd.objectType = "m"
        case let tag? where HLSPlaylist.choosableTags.contains(tag) || tag == "X-ASSET-URI": cmcd.objectType = "m"
        case "EXT-X-MAP": cmcd.objectType = "i"
        case let tag? where HLSPlaylist.keyTags.contains(tag): cmcd.objectType = "k"
        case nil:
            cmcd.duration = durations[url].map { Int(($0 * 1000).rounded()) }
            let ext = url.pathExtension.lowercased()
            if ["vtt", "webvtt", "srt", "ttml"].contains(ext) {
                cmcd.objectType = "c"
            } else if ["aac", "m4a", "mp3", "ac3", "ec3"].contains(ext) {
                cmcd.objectType = "a"
            }
        default: break
        }
        return cmcd
    }

    /// Each segment's duration, by its URL (the longest when a URL holds several, as byte ranges).
    static func segmentDurations(_ playlist: HLSPlaylist, base: URL) -> [URL: Double] {
        var durations: [URL: Double] = [:]
        for segment in playlist.segments.prefix(100_000) {
            guard let url = HLSPlaylist.resolve(segment.uri, base: base) else { continue }
            durations[url] = max(durations[url] ?? 0, min(segment.duration, 86_400))
        }
        return durations
    }

    /// `http://` and the host and port the player used to reach the proxy: where the URLs
    /// written into playlists, manifests and steering answers lead.
    static func proxyOrigin(_ head: HTTPRequestHead, localPort: Int) -> String {
        "http://" + (head.headers.first(name: "host") ?? "127.0.0.1:\(localPort)")
    }

    /// The answer with a playlist or manifest, rewritten (or, when it was not one after all,
    /// as it came): the player comes back for each reload, and the cache decides what that costs.
    static func rewritten(
        _ body: ProxyResponse.Body, length: Int, metadata: ContentMetadata, type: String, head: HTTPRequestHead
    ) -> ProxyResponse {
        var fields = HTTPHeaders()
        fields.add(name: "Content-Type", value: metadata.mimeType ?? type)
        if let date = metadata.responseHeader("date") { fields.add(name: "Date", value: date) }
        fields.add(name: "Cache-Control", value: "no-cache")
        fields.add(name: "Accept-Ranges", value: "none")
        fields.add(name: "Content-Length", value: String(length))
        return ProxyResponse(status: .ok, headers: fields, body: head.method == .HEAD ? .none : body)
    }

    /// A resource kept in memory only (an HLS key: see ``ProxyTarget/memoryOnly``),
    /// answered whole whatever the `Range`.
    func memoryOnly(_ url: URL, head: HTTPRequestHead, headers: RequestHeaders) async throws -> ProxyResponse {
        let (body, metadata) = try await engine.bodies.memoryOnlyBody(of: url, headers: headers, as: .player)
        var fields = HTTPHeaders()
        fields.add(name: "Content-Type", value: metadata.mimeType ?? "application/octet-stream")
        fields.add(name: "Cache-Control", value: "no-store")
        fields.add(name: "Accept-Ranges", value: "none")
        fields.add(name: "Content-Length", value: String(body.count))
        return ProxyResponse(status: .ok, headers: fields, body: head.method == .HEAD ? .none : .bytes(body))
    }

    func rewrite(
        _ body: [UInt8], metadata: ContentMetadata, url: URL, head: HTTPRequestHead, localPort: Int,
        headers: RequestHeaders
    ) throws -> ProxyResponse {
        guard let parsed = try parsedPlaylist(body, url: url, head: head) else {
            return Self.notAPlaylist(body, metadata: metadata, head: head)
        }
        return rewrite(parsed, metadata: metadata, url: url, head: head, localPort: localPort, headers: headers)
    }

    /// `body` read as the playlist at `url`, its variables resolved (with those the player's
    /// URL imports: the player gets no `EXT-X-DEFINE` it could not resolve); `nil` when it is
    /// not a playlist after all.
    /// - Throws: ``ProxyRequestError`` `502` saying why a playlist cannot be read.
    private func parsedPlaylist(_ body: [UInt8], url: URL, head: HTTPRequestHead) throws -> HLSPlaylist? {
        guard HLSPlaylist.looksLikePlaylist(body) else { return nil }
        do {
            let imports = (try? ProxyTarget(reading: RequestTarget(head.uri)))?.imports ?? [:]
            return try HLSPlaylist(parsing: body, url: url, imports: imports)
        } catch let error as HLSPlaylistError {
            configuration.logger.warning(
                "Rejected an origin playlist",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            throw ProxyRequestError(status: .badGateway, "The origin's playlist cannot be read: \(error.message)")
        }
    }

    /// A body that is not a playlist after all: the bytes as they came.
    private static func notAPlaylist(_ body: [UInt8], metadata: ContentMetadata, head: HTTPRequestHead) -> ProxyResponse
    {
        rewritten(
            .bytes(body), length: body.count, metadata: metadata, type: "application/vnd.apple.mpegurl", head: head)
    }

    /// The answer with the playlist `parsed` (from `url`), its URIs leading back through this
    /// proxy; with `serve --cmcd`, each carrying the CMCD to send for it in the session of the
    /// request (`headers`' `CMCD-Session`).
    func rewrite(
        _ parsed: HLSPlaylist, metadata: ContentMetadata, url: URL, head: HTTPRequestHead, localPort: Int,
        headers: RequestHeaders, sideLoaded: SideLoaded? = nil
    ) -> ProxyResponse {
        let proxy = Self.proxyOrigin(head, localPort: localPort)
        if !parsed.isFinal, let folder = URL(string: "./", relativeTo: metadata.finalURL ?? url)?.absoluteURL {
            engine.learning.noteLive(folder)
        }
        let session = configuration.addsCMCD ? CMCD.session(in: headers) : nil
        let durations = session == nil ? [:] : Self.segmentDurations(parsed, base: metadata.finalURL ?? url)
        engine.learning.learnSegments(of: parsed, at: url, base: metadata.finalURL ?? url)
        // Relative URIs resolve against where the playlist came from, after redirects.
        let text = parsed.rewritten(base: metadata.finalURL ?? url) { resolved, tag in
            // A steering server's URI in the path form: the parameters the player adds to it
            // (`_HLS_pathway`, `_HLS_throughput`) are then the origin URL's own.
            if tag == HLSPlaylist.steeringTag {
                return proxy + configuration.pathForm(for: resolved)
            }
            // A media playlist of a master that defines variables may import them.
            let imports =
                parsed.isMaster && (tag == nil || tag.map(HLSPlaylist.choosableTags.contains) == true)
                ? parsed.definitions : [:]
            var target = ProxyTarget(resolved)
            target.memoryOnly = tag.map(HLSPlaylist.keyTags.contains) == true
            target.assetList = tag == "X-ASSET-LIST"
            target.imports = imports
            if tag == "EXT-X-MEDIA", let sideLoaded, sideLoaded.files.contains(resolved) {
                target.subtitleRole = .playlist(timeline: sideLoaded.timeline)
            }
            target.cmcd = session.map {
                Self.cmcd(for: resolved, tag: tag, in: parsed, session: $0, durations: durations).text
            }
            return proxy + configuration.uri(of: target)
        }
        return ProxyHandler.rewritten(
            .text(text), length: text.utf8.count, metadata: metadata, type: "application/vnd.apple.mpegurl", head: head)
    }

}
