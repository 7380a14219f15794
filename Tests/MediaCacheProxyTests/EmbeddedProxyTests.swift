// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// The proxy embedded in an app: started on loopback at a free port behind a random token,
/// URLs for players, the choice between the resource loader and the proxy, and a clean stop.
@Suite(.stallLimit, .endToEnd) struct EmbeddedProxyTests {
    static func get(_ client: HTTPClient, _ url: URL) async throws -> (status: Int, body: ByteBuffer) {
        let response = try await client.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(10))
        return (Int(response.status.code), try await response.body.collect(upTo: 16 << 20))
    }

    @Test func anAppStartsItUsesItAndStopsIt() async throws {
        try await Harness.with { h in
            let content = DeterministicContent(seed: 21)
            h.origin.serve(
                TestOrigin.Resource(body: .generated(content, length: 300_000), mimeType: "audio/mpeg"),
                at: "/music/song.mp3")
            let proxy = try await EmbeddedProxy.start(reader: h.reader)
            let client = HTTPClient.shared
            let token = try #require(proxy.token)
            #expect(proxy.port > 0 && token.count == 32 && token.allSatisfy(\.isHexDigit))
            let other = try await EmbeddedProxy.start(reader: h.reader)
            #expect(other.token != token && other.port != proxy.port)
            await other.stop()

            let url = proxy.url(for: h.origin.url("/music/song.mp3"))
            #expect(url.host == "127.0.0.1" && url.path == "/song.mp3" && url.absoluteString.contains("token=\(token)"))
            let reply = try await Self.get(client, url)
            #expect(
                reply.status == 200 && reply.body.readableBytes == 300_000
                    && content.firstMismatch(in: reply.body, at: 0) == nil)
            // Without the token (another app on the device): refused.
            let stranger = try #require(
                URL(string: url.absoluteString.replacingOccurrences(of: "&token=\(token)", with: "")))
            #expect(try await Self.get(client, stranger).status == 403)

            // Stopped: nothing listens (curl, since AsyncHTTPClient retries a refused
            // connection until the request's deadline).
            await proxy.stop()
            let curl = try await runTool(["curl", "-sS", "-o", "/dev/null", url.absoluteString])
            #expect(curl.status == 7, "curl: \(curl.error)")  // 7: could not connect
        }
    }

    /// The listening socket of this process on `port`, found as the system sees it (iOS
    /// closes such a socket under an app that is suspended; here the test does it).
    static func listeningSocket(on port: Int, address wanted: String = "127.0.0.1") -> Int32? {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in fds.compactMap(Int32.init) {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            guard named == 0, address.sin_family == sa_family_t(AF_INET),
                Int(UInt16(bigEndian: address.sin_port)) == port,
                inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count)) != nil,
                String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == wanted
            else { continue }
            var listening: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0, listening == 1 { return fd }
        }
        return nil
    }

    /// `/song.mp3` (100,000 bytes of `seed`) at the origin, and an embedded proxy over `h`
    /// whose log is kept.
    static func songAndLoggedProxy(_ h: Harness, seed: UInt64) async throws -> (
        DeterministicContent, LogRecorder, EmbeddedProxy
    ) {
        let content = DeterministicContent(seed: seed)
        h.origin.serve(
            TestOrigin.Resource(body: .generated(content, length: 100_000), mimeType: "audio/mpeg"), at: "/song.mp3")
        let log = LogRecorder()
        var configuration = EmbeddedProxy.appConfiguration
        configuration.logger = log.logger()
        return (content, log, try await EmbeddedProxy.start(reader: h.reader, configuration: configuration))
    }

    /// A listening socket that dies under the proxy (as iOS does to a suspended app's server
    /// sockets) is noticed, logged at warning level and replaced on the same port: the URLs
    /// the player holds work again, and the bytes are right.
    @Test func aListenerThatDiesIsReplacedOnTheSamePort() async throws {
        try await Harness.with { h in
            let (content, log, proxy) = try await Self.songAndLoggedProxy(h, seed: 22)
            let url = proxy.url(for: h.origin.url("/song.mp3"))
            #expect(try await Self.get(HTTPClient.shared, url).status == 200)
            for round in 1...2 {
                let socket = try #require(Self.listeningSocket(on: proxy.port))
                #expect(shutdown(socket, Int32(SHUT_RDWR)) == 0)
                try await waitUntil {
                    log.all.filter { $0.message.contains("listening again") && $0.level == .warning }.count == round
                }
                try await waitUntil { Self.listeningSocket(on: proxy.port) != nil }
                let reply = try await Self.get(HTTPClient.shared, url)
                #expect(
                    reply.status == 200 && reply.body.readableBytes == 100_000
                        && content.firstMismatch(in: reply.body, at: 0) == nil)
            }
            // The app's check on foreground: returns at once while all is well, and once the
            // proxy listens again when its socket was taken away.
            await proxy.ensureListening()
            let socket = try #require(Self.listeningSocket(on: proxy.port))
            #expect(shutdown(socket, Int32(SHUT_RDWR)) == 0)
            await proxy.ensureListening()
            let reply = try await Self.get(HTTPClient.shared, url)
            #expect(
                reply.status == 200 && content.firstMismatch(in: reply.body, at: 0) == nil
                    && reply.body.readableBytes == 100_000)
            await proxy.stop()
            #expect(Self.listeningSocket(on: proxy.port) == nil, "stopped: nothing listens")
        }
    }

    /// The LAN listener AirPlay's receiver fetches from is replaced too when its socket dies
    /// while external playback runs, on the same address and port; it closes when playback ends.
    @Test func aLANListenerThatDiesIsReplacedWhileExternalPlaybackRuns() async throws {
        try await Harness.with { h in
            let (content, log, proxy) = try await Self.songAndLoggedProxy(h, seed: 23)
            let source = try await proxy.externalSource(for: h.origin.url("/song.mp3"), lanAddress: "127.0.0.3")
            guard case .lan(let url) = source else {
                Issue.record("not a LAN URL: \(source)")
                return
            }
            #expect(try await Self.get(HTTPClient.shared, url).status == 200)
            let socket = try #require(Self.listeningSocket(on: proxy.port, address: "127.0.0.3"))
            #expect(shutdown(socket, Int32(SHUT_RDWR)) == 0)
            try await waitUntil { log.all.contains { $0.message.contains("listening again") && $0.level == .warning } }
            try await waitUntil { Self.listeningSocket(on: proxy.port, address: "127.0.0.3") != nil }
            let reply = try await Self.get(HTTPClient.shared, url)
            #expect(
                reply.status == 200 && reply.body.readableBytes == 100_000
                    && content.firstMismatch(in: reply.body, at: 0) == nil)
            await proxy.endExternalPlayback()
            try await waitUntil { Self.listeningSocket(on: proxy.port, address: "127.0.0.3") == nil }
            #expect(Self.listeningSocket(on: proxy.port) != nil, "loopback still listens")
            await proxy.stop()
        }
    }

    /// HLS goes to the proxy (a resource loader cannot see segment requests), whether the
    /// origin types the playlist or only its body says so; a progressive file goes to the
    /// resource loader; an origin that cannot be asked is an error, not a guess.
    @Test func routesPlaylistsToTheProxyAndFilesToTheResourceLoader() async throws {
        try await Harness.with { h in
            let playlist = Array("#EXTM3U\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n".utf8)
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(playlist), mimeType: "application/vnd.apple.mpegURL"), at: "/typed")
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(playlist), mimeType: "application/octet-stream"), at: "/untyped.bin")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: 2), length: 50_000), mimeType: "video/mp4"),
                at: "/film.mp4")
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array("just some text".utf8)), mimeType: "text/plain"),
                at: "/notes.txt")
            let proxy = try await EmbeddedProxy.start(reader: h.reader)
            for path in ["/typed", "/untyped.bin"] {
                #expect(
                    try await proxy.route(for: h.origin.url(path)) == .proxy(proxy.url(for: h.origin.url(path))),
                    "\(path)")
            }
            for path in ["/film.mp4", "/notes.txt"] {
                #expect(try await proxy.route(for: h.origin.url(path)) == .resourceLoader, "\(path)")
            }
            await #expect(throws: CacheError.self) {
                _ = try await proxy.route(for: URL(string: "http://127.0.0.1:1/x.m3u8")!)
            }
            await proxy.stop()
        }
    }

    /// A configuration that would expose the proxy to the network is refused before it listens.
    @Test func anUnsafeConfigurationIsRefused() async throws {
        try await Harness.with { h in
            var configuration = EmbeddedProxy.appConfiguration
            configuration.host = "0.0.0.0"
            await #expect(throws: ProxyError.self) {
                _ = try await EmbeddedProxy.start(reader: h.reader, configuration: configuration)
            }
        }
    }
}
