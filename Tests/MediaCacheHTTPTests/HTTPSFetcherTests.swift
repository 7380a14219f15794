// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import NIOSSL
import Testing

@testable import MediaCacheHTTP
@testable import MediaCacheHTTPFields

/// The origin fetcher over HTTPS: trust roots from a CA file, HTTP/2 connection sharing,
/// connection reuse across files (the failures a player sees are in `HTTPSOriginTests`).
@Suite(.stallLimit, .endToEnd) struct HTTPSFetcherTests {
    /// Only a failed handshake is a TLS failure (never retried); a TLS connection that is
    /// cut later is a connection failing like any other (retried by the read path).
    @Test func onlyAFailedHandshakeIsATLSFailure() {
        #expect(OriginTLSFailure.kind(of: NIOSSLError.uncleanShutdown) == nil)
        #expect(OriginTLSFailure.kind(of: NIOSSLError.readInInvalidTLSState) == nil)
        #expect(OriginTLSFailure.kind(of: NIOSSLExtraError.failedToValidateHostname) == .wrongName)
        #expect(
            OriginTLSFailure.libraryReason(
                in:
                    "[Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at x.cc:320]"
            )
                == "CERTIFICATE_VERIFY_FAILED")
    }

    /// `--ca-file`: a PEM file with one or more certificates adds trust roots; the system's
    /// roots stay; a file that is not one says what is wrong with it.
    @Test func aPrivateCAFileIsTrustedAlongsideTheSystemRoots() async throws {
        try await withTemporaryDirectory { directory in
            let other = try TestCertificateAuthority(commonName: "Another CA")
            let file = directory.appendingPathComponent("roots.pem")
            let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            try [other.certificatePEM, key, TestCertificateAuthority.shared.certificatePEM].joined(separator: "\n")
                .write(to: file, atomically: true, encoding: .utf8)
            let roots = try TrustRoots.load(pemFile: file.path)
            #expect(roots.count == 2)

            let origin = try await TestOrigin.start(tls: try .trusted())
            origin.serve(.generated(length: 300_000, seed: 92), at: "/private.mp4")
            let url = origin.url("/private.mp4")
            var configuration = HTTPOriginFetcher.Configuration()
            configuration.trustRoots = roots
            let trusting = HTTPOriginFetcher(configuration: configuration)
            #expect(trusting.tlsConfiguration.trustRoots == .default, "the system's roots stay trusted")
            #expect(trusting.tlsConfiguration.certificateVerification == .fullVerification)
            let response = try await trusting.fetch(url, range: ByteRange(1000, 101_000), ifRange: nil, headers: [])
            var body = ByteBuffer()
            for try await var part in response.body { body.writeBuffer(&part) }
            #expect(response.bodyOffset == 1000 && body.readableBytes == 100_000)
            #expect(origin.resource(at: "/private.mp4")!.firstMismatch(in: body, at: 1000) == nil)
            try await trusting.shutdown()

            let plain = HTTPOriginFetcher()
            await #expect {
                _ = try await plain.fetch(url, range: ByteRange(0, 10), ifRange: nil, headers: [])
            } throws: { error in
                (error as? CacheError)?.code == .originRejected
                    && (error as? CacheError)?.message.hasPrefix("certificate not trusted:") == true
            }
            try await plain.shutdown()
            try await origin.shutdown()

            // Files that are no CA file.
            let cases: [(String, String?, String)] = [
                ("missing.pem", nil, "Cannot read the CA file"),
                ("empty.pem", "", "holds no certificate"),
                ("key.pem", key, "holds no certificate"),
                ("cut.pem", String(other.certificatePEM.prefix(200)), "has no -----END CERTIFICATE----- line"),
                (
                    "garbled.pem", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
                    "is not a valid X.509 certificate"
                ),
            ]
            for (name, content, message) in cases {
                let path = directory.appendingPathComponent(name)
                if let content { try content.write(to: path, atomically: true, encoding: .utf8) }
                #expect { _ = try TrustRoots.load(pemFile: path.path) } throws: { error in
                    let text = (error as? TrustRootsError)?.message ?? ""
                    return text.contains(message) && text.contains(name)
                }
            }
        }
    }

    /// Over HTTP/2 a player's concurrent range requests share one connection; over HTTP/1.1
    /// the same reads need one connection each.
    @Test func aPlayersRangeRequestsShareOneHTTP2Connection() async throws {
        var connections: [OriginScheme: Int] = [:]
        for scheme in [OriginScheme.http2, .https] {
            try await Harness.with(scheme: scheme) { h in
                var faults = TestOrigin.Faults()
                faults.bytesPerSecond = 8_000_000  // slow enough that the four reads overlap
                h.origin.serve(.generated(length: 8_000_000, seed: 94, faults: faults), at: "/film.mp4")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for offset in [0, 2_000_000, 4_000_000, 6_000_000] as [Int64] {
                        group.addTask { _ = try await h.readAndCheck("/film.mp4", offset: offset, length: 1_000_000) }
                    }
                    try await group.waitForAll()
                }
                let requests = h.origin.requests("/film.mp4")
                #expect(requests.count >= 4)
                #expect(requests.allSatisfy { $0.version == scheme.requestVersion }, "\(requests.map(\.version))")
                connections[scheme] = h.origin.connectionsAccepted
            }
        }
        #expect(connections[.http2] == 1)
        #expect((connections[.https] ?? 0) >= 4, "\(connections)")
    }

    /// Over HTTP/2 every stream opens with a window of 1 MiB, not the protocol's 65,535 bytes:
    /// an answer larger than that does not wait a round trip for the client's first
    /// `WINDOW_UPDATE` (on a far origin, a round trip per request). The bytes are the origin's.
    @Test func http2StreamsOpenWithAWindowOfOneMebibyte() async throws {
        try await Harness.with(scheme: .http2) { h in
            h.origin.serve(.generated(length: 3_000_000, seed: 95), at: "/wide.mp4")
            for offset in [0, 1_000_000, 2_000_000] as [Int64] {
                _ = try await h.readAndCheck("/wide.mp4", offset: offset, length: 500_000)
            }
            let requests = h.origin.requests("/wide.mp4")
            #expect(
                requests.count >= 1 && requests.allSatisfy { $0.version == "HTTP/2.0" }, "\(requests.map(\.version))")
            let windows = h.origin.streamWindows
            #expect(windows.count == requests.count)
            #expect(windows.allSatisfy { $0 == HTTPOriginFetcher.initialStreamWindow }, "\(windows)")
        }
    }

    /// A second cold file from the same HTTPS host starts on a connection already open, so
    /// its first byte pays no TLS handshake. (Over HTTP/1.1 a later request of the same read
    /// may still open a connection, when it overlaps another; over HTTP/2 none does.)
    @Test(arguments: [OriginScheme.https, .http2])
    func aSecondColdFileFromTheSameHostPaysNoNewHandshake(scheme: OriginScheme) async throws {
        try await Harness.with(scheme: scheme) { h in
            h.origin.serve(.generated(length: 1_500_000, seed: 95), at: "/one.mp3")
            h.origin.serve(.generated(length: 1_500_000, seed: 96), at: "/two.mp3")
            _ = try await h.readAndCheck("/one.mp3")
            try await h.waitUntilQuiet("/one.mp3")
            let afterFirst = h.origin.connectionsAccepted
            #expect(afterFirst >= 1)
            _ = try await h.readAndCheck("/two.mp3")
            let first = try #require(h.origin.requests("/two.mp3").first)
            #expect(
                first.connection <= afterFirst,
                "the second file's first request came on connection \(first.connection), opened after the first file")
            if scheme == .http2 { #expect(h.origin.connectionsAccepted == 1) }
        }
    }

}
