// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// `mediacache serve` behind Debian's Squid, started by the test: an HTTPS origin whose name
/// only the proxy knows plays through `https_proxy` (`CONNECT`), `no_proxy` sends a host
/// direct, and two servers with their own folders behind one caching Squid cost the origin one
/// fetch between them: the second's cold play comes from Squid's store.
@Suite(
    .stallLimit,
    .endToEnd,
    .enabled(
        if: ChildProcess.toolExists("squid") || FileManager.default.isExecutableFile(atPath: "/usr/sbin/squid"),
        "needs squid"))
struct ParentProxyTests {
    /// Plays `url` through the server `info` whole: the status and the body.
    static func play(_ info: ServerInfo, _ url: URL) async throws -> (status: UInt, body: [UInt8]) {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: info.baseURL + ProxyURL.path(for: url, token: nil)), timeout: .seconds(60))
        return (response.status.code, Array(try await response.body.collect(upTo: 64 << 20).readableBytesView))
    }

    static func film(length: Int64, seed: UInt64) -> TestOrigin.Resource {
        var resource = TestOrigin.Resource.generated(length: length, seed: seed, mimeType: "video/mp4")
        resource.cacheControl = "max-age=3600"
        return resource
    }

    @Test func anHTTPSOriginOnlyTheProxyReachesPlaysThroughHTTPSProxy() async throws {
        let identity = try TestCertificateAuthority.shared.issue(for: ["origin.test"])
        let origin = try await TestOrigin.start(tls: TestOrigin.TLSOptions(identity: identity))
        defer { Task { try? await origin.shutdown() } }
        origin.serve(Self.film(length: 3_000_000, seed: 31), at: "/p/film.mp4")
        try await withTemporaryDirectory { directory in
            let squid = try await SquidProxy.start(
                in: directory.appendingPathComponent("squid"), caches: false, hosts: ["origin.test": "127.0.0.1"])
            defer { Task { await squid.stop() } }
            let ca = directory.appendingPathComponent("ca.pem")
            try TestCertificateAuthority.shared.certificatePEM.write(to: ca, atomically: true, encoding: .utf8)
            // `origin.test` resolves nowhere but in Squid: the proxy is the only way there.
            let url = URL(string: "https://origin.test:\(origin.port)/p/film.mp4")!
            try await RunningServer.with(
                ["--ca-file", ca.path], environment: ["https_proxy=\(squid.url)", "no_proxy="], origin: origin
            ) { server in
                let played = try await Self.play(server.info, url)
                #expect(played.status == 200 && played.body.count == 3_000_000)
                #expect(DeterministicContent(seed: 31).firstMismatch(in: ByteBuffer(bytes: played.body), at: 0) == nil)
                #expect(!origin.requests("/p/film.mp4").isEmpty)
            }
            // Squid logs a tunnel when it closes: with the server gone.
            try await waitUntil { squid.accessLog.contains("CONNECT origin.test:\(origin.port)") }
            // Without the proxy, the same URL cannot be reached at all.
            try await RunningServer.with(["--ca-file", ca.path], environment: ["https_proxy="], origin: origin) {
                server in
                let refused = try await Self.play(server.info, url)
                #expect(refused.status == 502)
            }
        }
    }

    @Test func noProxySendsAHostDirectAndAProxyThatIsDownIsNamed() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        origin.serve(Self.film(length: 200_000, seed: 32), at: "/d/clip.mp4")
        let dead = try unusedLoopbackPort()
        try await RunningServer.with(
            [], environment: ["http_proxy=http://127.0.0.1:\(dead)", "no_proxy=localhost,127.0.0.0/8"], origin: origin
        ) { server in
            let played = try await Self.play(server.info, origin.url("/d/clip.mp4"))
            #expect(played.status == 200 && played.body.count == 200_000)
        }
        try await RunningServer.with(
            [], environment: ["http_proxy=http://user:hunter2@127.0.0.1:\(dead)", "no_proxy="], origin: origin
        ) { server in
            let response = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: server.info.baseURL + ProxyURL.path(for: origin.url("/d/clip.mp4"), token: nil)),
                timeout: .seconds(60))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
            #expect(
                response.status.code == 502 && body.contains("through the proxy http://127.0.0.1:\(dead)")
                    && !body.contains("hunter2"), "\(body)")
        }
        // A proxy setting that cannot be used stops `serve` at once, saying which and why.
        let refused = try await CacheCommandTests.mediacache([
            "serve", "--port", "0", "--parent-proxy", "https://user:hunter2@squid.lan",
        ])
        #expect(
            refused.status != 0 && refused.error.contains("TLS to a proxy is not supported")
                && !refused.error.contains("hunter2"), "\(refused.error)")
    }

    /// Two servers, two folders, one caching Squid as their parent: the first cold play
    /// fetches from the origin once, the second is served by Squid's store: 0 origin
    /// requests, the same bytes.
    @Test func twoServersBehindOneCachingSquidFetchOnceBetweenThem() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        origin.serve(Self.film(length: 4_000_000, seed: 33), at: "/s/film.mp4")
        try await withTemporaryDirectory { directory in
            let squid = try await SquidProxy.start(in: directory.appendingPathComponent("squid"), caches: true)
            defer { Task { await squid.stop() } }
            let url = origin.url("/s/film.mp4")
            for instance in 0..<2 {
                try await RunningServer.with(["--parent-proxy", squid.url], origin: origin) { server in
                    let played = try await Self.play(server.info, url)
                    #expect(played.status == 200 && played.body.count == 4_000_000, "instance \(instance)")
                    #expect(
                        DeterministicContent(seed: 33).firstMismatch(in: ByteBuffer(bytes: played.body), at: 0) == nil,
                        "instance \(instance)")
                }
                #expect(
                    origin.requests("/s/film.mp4").count == 1,
                    "after instance \(instance): \(origin.requests("/s/film.mp4")); \(squid.accessLog)")
            }
            #expect(squid.accessLog.contains("HIT/"), "the second play was Squid's: \(squid.accessLog)")
        }
    }

    /// The same with Varnish (a reverse proxy in front of one origin) as the parent, with the
    /// configuration docs/operating.md gives.
    @Test(.enabled(if: VarnishCache.isInstalled, "needs varnish"))
    func twoServersBehindOneVarnishFetchOnceBetweenThem() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        origin.serve(Self.film(length: 3_000_000, seed: 34), at: "/v/film.mp4")
        try await withTemporaryDirectory { directory in
            let varnish = try await VarnishCache.start(
                in: directory.appendingPathComponent("varnish"), backendPort: origin.port)
            defer { Task { await varnish.stop() } }
            for instance in 0..<2 {
                try await RunningServer.with(["--parent-proxy", varnish.url], origin: origin) { server in
                    let played = try await Self.play(server.info, origin.url("/v/film.mp4"))
                    #expect(played.status == 200 && played.body.count == 3_000_000, "instance \(instance)")
                    #expect(
                        DeterministicContent(seed: 34).firstMismatch(in: ByteBuffer(bytes: played.body), at: 0) == nil,
                        "instance \(instance)")
                }
                #expect(
                    origin.requests("/v/film.mp4").count == 1,
                    "after instance \(instance): \(origin.requests("/v/film.mp4"))")
            }
        }
    }
}
