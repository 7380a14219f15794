// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import NIOSSL
import Testing

/// HTTPS origins as they are served: failures that say why at once, private CAs, skipped
/// verification that cannot go unnoticed, HTTP/2, connection reuse, redirects across schemes.
/// (The read path, freshness and the proxy contract run over HTTPS too: see `OriginScheme`.)
@Suite(.stallLimit, .endToEnd) struct HTTPSOriginTests {
    /// A TLS origin that cannot be used, and what the player must be told.
    struct Failure: CustomStringConvertible, Sendable {
        var name: String
        /// How the origin presents itself; `nil`: a plain HTTP port asked for with https.
        var tls: @Sendable () throws -> TestOrigin.TLSOptions?
        /// Text the answer's body and the log line must hold.
        var says: [String]
        var description: String { name }
    }

    static let failures: [Failure] = [
        Failure(
            name: "certificate from an unknown CA",
            tls: {
                TestOrigin.TLSOptions(identity: try TestCertificateAuthority(commonName: "Unknown Media CA").issue())
            },
            says: [
                "certificate not trusted:", "issued by CN=Unknown Media CA",
                "trust roots (HTTPOriginFetcher.Configuration.trustRoots)",
            ]),
        Failure(
            name: "self-signed certificate",
            tls: {
                TestOrigin.TLSOptions(identity: try TestCertificateAuthority.selfSigned())
            }, says: ["certificate not trusted:", "is self-signed (CN=Self-Signed Media Server)"]),
        Failure(
            name: "expired certificate",
            tls: {
                TestOrigin.TLSOptions(
                    identity: try TestCertificateAuthority.shared.issue(
                        notValidBefore: Date() - 10 * 86400, notValidAfter: Date() - 86400))
            }, says: ["certificate not trusted:", "expired on"]),
        Failure(
            name: "certificate for another host",
            tls: {
                TestOrigin.TLSOptions(identity: try TestCertificateAuthority.shared.issue(for: ["media.example"]))
            }, says: ["certificate not valid for 127.0.0.1", "names media.example"]),
        Failure(
            name: "handshake refused by the server",
            tls: {
                var options = try TestOrigin.TLSOptions.trusted()
                options.requiresClientCertificate = true
                return options
            }, says: ["TLS handshake failed:", "refused it"]),
        Failure(
            name: "https to a plain HTTP port", tls: { nil }, says: ["TLS handshake failed:", "did not answer in TLS"]),
    ]

    /// Each failure is a `502` whose body and log line say why, long before any timeout, and
    /// the origin gets no request. The timeouts are 120 s here and the answer must come within
    /// half of that: a failure that waited for a timeout takes 120 s. Measured on 2 cores: 0.7 s
    /// per case alone, even beside four CPU burners; 5.6–7.7 s per case in two full debug runs,
    /// all six together (they run at the start of the suite with every other suite, and debug
    /// TLS and certificate checks are CPU-bound); up to 10.6 s once, past the 10 s this check
    /// allowed against 30 s timeouts.
    @Test(arguments: failures)
    func aTLSFailureIsA502ThatSaysWhyAtOnce(_ failure: Failure) async throws {
        let logs = LogRecorder()
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.connectTimeout = .seconds(120)
        fetcher.responseTimeout = .seconds(120)
        fetcher.logger = logs.logger("origin")
        try await ProxyHarness.with(
            fetcher: fetcher,
            configure: logs.proxyLogger
        ) { h in
            let origin = try await TestOrigin.start(tls: try failure.tls())
            origin.serve(.generated(length: 100_000, seed: 90), at: "/a.mp3")
            let url = "https://127.0.0.1:\(origin.port)/a.mp3"
            let started = ContinuousClock.now
            let reply = try await h.get(h.proxyURL(for: url))
            let elapsed = ContinuousClock.now - started
            let body = String(buffer: reply.body)
            #expect(reply.status == 502, "\(failure): \(body)")
            for text in failure.says { #expect(body.contains(text), "\(failure): \(body)") }
            #expect(elapsed < .seconds(60), "\(failure): answered after \(elapsed), as if it had waited for a timeout")
            #expect(origin.requests("/a.mp3").isEmpty, "no request is sent over a connection that failed")
            let line = try #require(logs.all.last { $0.metadata["url"] == url && $0.metadata["status"] != nil })
            #expect(line.metadata["status"] == "502")
            for text in failure.says { #expect(line.metadata["error"]?.contains(text) == true, "\(line.metadata)") }
            #expect(
                logs.all.contains {
                    $0.level == .warning && $0.message == "TLS with the origin failed"
                        && $0.metadata["reason"]?.contains(failure.says[0]) == true
                })
            try await origin.shutdown()
            // The proxy goes on serving a trusted origin.
            let resource =
                h.origin.resource(at: "/ok.mp3")
                ?? {
                    h.origin.serve(.generated(length: 50_000, seed: 91), at: "/ok.mp3")
                    return h.origin.resource(at: "/ok.mp3")!
                }()
            let ok = try await h.get(h.url("/ok.mp3"))
            #expect(ok.status == 200 && resource.firstMismatch(in: ok.body, at: 0) == nil)
        }
    }

    /// `--insecure-skip-verify` reads from an origin whose certificate fails every check,
    /// and every request's log line says that nothing was verified.
    @Test func skippingVerificationReadsAnyCertificateAndEveryLogLineSaysSo() async throws {
        let logs = LogRecorder()
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.skipsCertificateVerification = true
        try await ProxyHarness.with(
            fetcher: fetcher,
            configure: logs.proxyLogger
        ) { h in
            let stranger = try TestCertificateAuthority(commonName: "Stranger CA")
            let identity = try stranger.issue(
                for: ["elsewhere.example"], notValidBefore: Date() - 10 * 86400, notValidAfter: Date() - 86400)
            let origin = try await TestOrigin.start(tls: TestOrigin.TLSOptions(identity: identity))
            origin.serve(.generated(length: 200_000, seed: 93), at: "/any.mp3")
            let reply = try await h.get(
                h.proxyURL(for: origin.url("/any.mp3").absoluteString), headers: [("Range", "bytes=500-")])
            #expect(reply.status == 206)
            #expect(
                origin.resource(at: "/any.mp3")!.firstMismatch(in: reply.body, at: 500) == nil
                    && reply.body.readableBytes == 199_500)
            // A streamed answer's line is written once its last byte is in the socket.
            try await waitUntil { logs.all.contains(where: { $0.metadata["status"] != nil }) }
            let lines = logs.all.filter { $0.metadata["status"] != nil }
            #expect(!lines.isEmpty)
            #expect(lines.allSatisfy { $0.metadata["warning"]?.contains("NOT verified") == true })
            try await origin.shutdown()
        }
    }

    /// `http` → `https` redirects are followed with the allow-list and the hop checks, and
    /// the cache keeps the file under the URL the player asked for.
    @Test func aRedirectToHTTPSIsCheckedAndCachedUnderTheAskedURL() async throws {
        try await ProxyHarness.with(allowedHosts: ["127.0.0.1"]) { h in
            let secure = try await TestOrigin.start(tls: try .trusted())
            secure.serve(.generated(length: 400_000, seed: 97, mimeType: "audio/mpeg"), at: "/song.mp3")
            let resource = secure.resource(at: "/song.mp3")!
            var upgrade = TestOrigin.Faults()
            upgrade.redirect = (301, secure.url("/song.mp3").absoluteString)
            h.origin.serve(.generated(length: 10, faults: upgrade), at: "/song.mp3")
            var offList = TestOrigin.Faults()
            offList.redirect = (302, "https://localhost:\(secure.port)/song.mp3")
            h.origin.serve(.generated(length: 10, faults: offList), at: "/elsewhere.mp3")

            let asked = h.origin.url("/song.mp3")
            let reply = try await h.get(h.url("/song.mp3"), headers: [("Authorization", "Bearer abc")])
            #expect(
                reply.status == 200 && resource.firstMismatch(in: reply.body, at: 0) == nil
                    && reply.body.readableBytes == 400_000)
            let served = secure.requests("/song.mp3")
            #expect(
                !served.isEmpty && served.allSatisfy { $0.header("Authorization") == nil },
                "credentials do not cross to another scheme and port")
            #expect(h.base.store.metadata(for: h.base.store.key(for: asked))?.length == 400_000)
            #expect(h.base.store.metadata(for: h.base.store.key(for: secure.url("/song.mp3"))) == nil)

            // A replay is served from the cache: neither origin is asked.
            h.origin.resetCounters()
            secure.resetCounters()
            let replay = try await h.get(h.url("/song.mp3"), headers: [("Range", "bytes=1000-1999")])
            #expect(replay.status == 206 && resource.firstMismatch(in: replay.body, at: 1000) == nil)
            #expect(h.origin.requests("/song.mp3").isEmpty && secure.requests("/song.mp3").isEmpty)

            // A hop to a host off the allow-list is refused, and never requested.
            let refused = try await h.get(h.url("/elsewhere.mp3"))
            #expect(
                refused.status == 502 && String(buffer: refused.body).contains("allow-list"),
                "\(String(buffer: refused.body))")
            #expect(secure.requests("/song.mp3").isEmpty)
            try await secure.shutdown()
        }
    }
}

extension LogRecorder {
    /// A proxy configuration whose log goes to this recorder, labelled `proxy`.
    func proxyLogger(_ configuration: ProxyConfiguration) -> ProxyConfiguration {
        var configuration = configuration
        configuration.logger = logger("proxy")
        return configuration
    }
}
