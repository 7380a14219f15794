// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import NIOHTTP1

/// The admin endpoints of recordings: `record` starts one, `recording.m3u8` and
/// `recording.mpd` give a player what it holds, its URIs through this proxy (the `head` and
/// `localPort` of the request say how the player reached it).
struct AdminRecordings: Sendable {
    let handler: ProxyHandler
    let head: HTTPRequestHead
    let localPort: Int

    private var proxy: String { ProxyHandler.proxyOrigin(head, localPort: localPort) }
    private var token: String? { handler.configuration.token }

    func record(_ query: AssetQuery, downloads: DownloadQueue) async throws -> RecordingAnswer {
        let job = try await downloads.record(
            query.target, for: query.request.seconds.map { .milliseconds(Int64($0 * 1000)) },
            renditions: query.request.renditions)
        return RecordingAnswer(job: job, url: proxy + AdminEndpoints.recordingPath(job, token: token))
    }

    /// The playlist of the recording `id`'s `track` (with none, of a multivariant recording,
    /// its multivariant playlist naming each track's here, relative to this one).
    func playlist(_ id: String, track: Int?, downloads: DownloadQueue) throws -> ProxyResponse {
        let token = token.map { "&token=" + HLSPlaylist.percentEncoded($0) } ?? ""
        let reference = { (track: Int) in
            "recording.m3u8?job=" + HLSPlaylist.percentEncoded(id) + "&track=\(track)" + token
        }
        guard let (text, base, master) = downloads.recordings.playlist(id, track: track, reference: reference) else {
            throw ProxyRequestError(
                status: .notFound, track == nil ? "That job is not a recording." : "That recording has no such track.")
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
    }

    /// The manifest of the DASH recording `id`.
    func manifest(_ id: String, downloads: DownloadQueue) throws -> ProxyResponse {
        guard let (text, base) = downloads.recordings.manifest(id) else {
            throw ProxyRequestError(status: .notFound, "That job is not a DASH recording.")
        }
        let parsed: DASHManifest
        do {
            parsed = try DASHManifest(parsing: Array(text.utf8))
        } catch {
            throw ProxyRequestError(
                status: .internalServerError, "The recording's manifest cannot be written: \(error.message)")
        }
        let rewritten = parsed.rewritten(base: base) { proxy + ProxyURL.pathForm(for: $0, token: token) }
        var metadata = ContentMetadata()
        metadata.mimeType = "application/dash+xml"
        return ProxyHandler.rewritten(
            .text(rewritten), length: rewritten.utf8.count, metadata: metadata, type: "application/dash+xml",
            head: head)
    }
}
