// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import NIOHTTP1

/// Side-loaded subtitles (`mediacache url --subtitles`): a master playlist whose proxy URL
/// names subtitle files gains a rendition for each, whose media playlist and WebVTT the proxy
/// makes from what the cache holds.
extension ProxyHandler {
    /// The side-loaded tracks of a master: their files, and the media playlist whose timeline
    /// they follow.
    struct SideLoaded {
        var files: Set<URL>
        var timeline: URL
    }

    /// `parsed` (the master at `url`, from `base`) with the tracks its proxy URL names; `nil`
    /// when it names none or `parsed` is no master.
    func sideLoading(_ parsed: HLSPlaylist, url: URL, base: URL, head: HTTPRequestHead) -> (HLSPlaylist, SideLoaded)? {
        guard parsed.isMaster, let target = try? ProxyTarget(reading: RequestTarget(head.uri)),
            !target.subtitles.isEmpty, let text = SideLoadedSubtitles.master(parsed, adding: target.subtitles),
            let first = parsed.variants.first.flatMap({ HLSPlaylist.resolve($0.uri, base: base) }),
            let augmented = try? HLSPlaylist(parsing: Array(text.utf8), url: url, imports: target.imports)
        else { return nil }
        return (augmented, SideLoaded(files: Set(target.subtitles.map(\.url)), timeline: first))
    }

    /// A side-loaded file's media playlist (one WebVTT segment as long as the stream, mapped to
    /// its first segment's timestamp) or its WebVTT.
    /// - Throws: ``ProxyRequestError`` `502` for a file that is neither SRT nor WebVTT, or too
    ///   large; ``CacheError`` for the origin's failures.
    func subtitles(
        _ role: ProxyTarget.SubtitleRole, file: URL, head: HTTPRequestHead, localPort: Int, headers: RequestHeaders
    ) async throws -> ProxyResponse {
        var fields = HTTPHeaders()
        fields.add(name: "Cache-Control", value: "no-cache")
        let text: String
        switch role {
        case .playlist(let timeline):
            let (duration, mpegts) = try await engine.bodies.subtitleTimeline(
                of: timeline, headers: headers, as: .player)
            var target = ProxyTarget(file)
            target.subtitleRole = .file(mpegts: mpegts)
            text = SideLoadedSubtitles.mediaPlaylist(
                duration: duration, uri: Self.proxyOrigin(head, localPort: localPort) + configuration.uri(of: target))
            fields.add(name: "Content-Type", value: "application/vnd.apple.mpegurl")
        case .file(let mpegts):
            do {
                text = try await engine.bodies.sideLoadedWebVTT(file, mpegts: mpegts, headers: headers)
            } catch let error as SubtitleText.Failure {
                configuration.logger.warning(
                    "Refused a side-loaded subtitle file",
                    metadata: ["url": "\(file.absoluteString.prefix(200))", "reason": "\(error)"])
                throw ProxyRequestError(status: .badGateway, error.description)
            } catch let error as CacheError where error.code == .originRejected {
                throw ProxyRequestError(
                    status: .badGateway,
                    "The subtitle file is larger than \(SideLoadedSubtitles.maximumFileSize) bytes, the most converted."
                )
            }
            fields.add(name: "Content-Type", value: "text/vtt; charset=utf-8")
        }
        fields.add(name: "Content-Length", value: String(text.utf8.count))
        return ProxyResponse(status: .ok, headers: fields, body: head.method == .HEAD ? .none : .text(text))
    }
}
