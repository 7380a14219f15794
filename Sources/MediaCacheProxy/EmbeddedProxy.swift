// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
public import MediaCache
import MediaCacheHTTPFields
import ServiceLifecycle
import Synchronization

/// The proxy inside an app: listens on `127.0.0.1` on a free port, behind a random token,
/// until ``stop()``. An app's player is given ``url(for:)``; ``route(for:headers:)`` says whether a
/// resource needs the proxy at all (HLS does: a resource loader cannot see segment requests).
///
/// ```swift
/// let proxy = try await EmbeddedProxy.start(reader: reader)
/// let playerURL = proxy.url(for: URL(string: "https://cdn.example/show/master.m3u8")!)
/// // … when the app goes away:
/// await proxy.stop()
/// ```
public final class EmbeddedProxy: Sendable {
    /// The port the proxy listens on.
    public let port: Int
    /// The token every request carries (see ``ProxyConfiguration/token``).
    public let token: String?
    /// The read path it serves from.
    public let reader: CachingReader
    private let group: ServiceGroup
    private let running: Task<Void, any Error>
    let server: ProxyServer

    private init(
        port: Int, token: String?, reader: CachingReader, group: ServiceGroup, running: Task<Void, any Error>,
        server: ProxyServer
    ) {
        self.port = port
        self.token = token
        self.reader = reader
        self.group = group
        self.running = running
        self.server = server
    }

    /// A configuration for an app: loopback, any free port, a random 128-bit token (so that
    /// no other app on the device can use the proxy), and no request log.
    public static var appConfiguration: ProxyConfiguration {
        var configuration = ProxyConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.token = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        configuration.logger = Logger(label: "mediacache.proxy", factory: { _ in SwiftLogNoOpLogHandler() })
        return configuration
    }

    /// Starts a proxy over `reader` and returns once it listens.
    /// - Throws: ``ProxyError`` for an unsafe configuration; the bind's error when the port is taken.
    public static func start(reader: CachingReader, configuration: ProxyConfiguration = appConfiguration) async throws
        -> EmbeddedProxy
    {
        try configuration.validate()
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let server = ProxyServer.application(reader: reader, configuration: configuration) { port in
            portContinuation.yield(port)
            portContinuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [server], logger: configuration.logger))
        let running = Task {
            defer { portContinuation.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            // The server stopped before it listened: its error says why.
            try await running.value
            throw ProxyError("The proxy stopped before it listened.")
        }
        return EmbeddedProxy(
            port: port, token: configuration.token, reader: reader, group: group, running: running, server: server)
    }

    /// Makes sure the proxy listens: call it when the app comes back to the foreground. iOS
    /// closes an app's listening sockets while the device is locked or the app suspended; the
    /// proxy replaces a socket that closes on its own, and this also catches one the system
    /// left open but unusable. It returns once the proxy answers on ``port`` again, so the URLs
    /// given to players stay valid.
    public func ensureListening() async {
        await server.ensureListening()
    }

    /// Stops listening, ends every open connection, and returns when the last request has ended.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
    }

    /// The URL to give a player for `originURL`: `http://127.0.0.1:PORT/<file name>?url=…&token=…`.
    public func url(for originURL: URL) -> URL {
        url(for: originURL, subtitles: [])
    }

    /// The URL through this proxy of an HLS master playlist with `subtitles` added (see
    /// ``ProxyURL/path(for:token:subtitles:)``).
    public func url(for originURL: URL, subtitles: [SideLoadedSubtitle]) -> URL {
        URL(string: "http://127.0.0.1:\(port)" + ProxyURL.path(for: originURL, token: token, subtitles: subtitles))!
    }

    /// How a player should load `url`.
    public enum Route: Sendable, Equatable {
        /// Through the app's resource loader (a progressive file: MP3, MP4, …).
        case resourceLoader
        /// Through this proxy, at this URL (an HLS playlist).
        case proxy(URL)
    }

    /// Whether `url` is an HLS playlist, which only the proxy can serve (its segments are
    /// separate requests), or a file a resource loader can. Decided by what the origin
    /// says and sends (`CachingReader/isPlaylist(_:_:headers:)`), through the cache.
    /// - Throws: `CacheError` when the origin cannot be asked and nothing is cached.
    public func route(for url: URL, headers: RequestHeaders = []) async throws -> Route {
        let metadata = try await reader.contentInfo(for: url, headers: headers)
        return try await reader.isPlaylist(url, metadata, headers: headers, as: .player)
            ? .proxy(self.url(for: url)) : .resourceLoader
    }
}

/// The proxy's URLs for origin resources.
public enum ProxyURL {
    /// `/<file name>?url=<origin URL>[&token=…][&memory=1]`: the path ends with the
    /// resource's file name (ffmpeg's HLS reader refuses a segment URL without a media
    /// extension), and every byte outside RFC 3986's unreserved set is percent-encoded.
    public static func path(for originURL: URL, token: String?, memoryOnly: Bool = false) -> String {
        var target = ProxyTarget(originURL, token: token)
        target.memoryOnly = memoryOnly
        return target.uri
    }

    /// The query form of an HLS master playlist with subtitle files added: the proxy's master
    /// lists each as a `SUBTITLES` rendition (converted to WebVTT, aligned with the stream).
    public static func path(for originURL: URL, token: String?, subtitles: [SideLoadedSubtitle]) -> String {
        var target = ProxyTarget(originURL, token: token)
        target.subtitles = subtitles
        return target.uri
    }

    /// The path form, `/o/<origin>[.<token>]/<origin path>[?<origin query>]`, for resources
    /// whose relative references players resolve themselves (DASH manifests and segment
    /// templates): the origin's scheme and authority (base64url) and the proxy's token live in
    /// the first segment, the rest of the path and the query are the origin's as they are, so
    /// a relative reference resolved against a proxy URL is the proxy URL of what it names.
    public static func pathForm(for originURL: URL, token: String?) -> String {
        ProxyTarget(originURL, form: .path, token: token).uri
    }
}
