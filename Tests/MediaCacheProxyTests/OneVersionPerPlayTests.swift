// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// A podcast host that stitches other ads into each download, behind three redirecting
/// trackers: each visit of the last tracker makes a new version (another length, another
/// `ETag`, other bytes) at a new resolved URL, which keeps it. A play through the proxy gets
/// the first version's bytes only, however it seeks, and visits the trackers once.
@Suite(.endToEnd) struct OneVersionPerPlayTests {
    static let baseLength: Int64 = 6 << 20

    /// The host: `/t1/ep.mp3` → `/t2/ep.mp3` → `/t3/ep.mp3` → `/host/ep-N.mp3`, N counting the
    /// visits of `/t3`; version N is `baseLength + N × 50,000` bytes of seed `100 + N`.
    final class AdStitchingHost: Sendable {
        let origin: TestOrigin
        let visits = Atomic<Int>(0)
        let bytesPerSecond: Int64?

        init(_ origin: TestOrigin, bytesPerSecond: Int64? = nil) {
            self.origin = origin
            self.bytesPerSecond = bytesPerSecond
            for (from, to) in [("/t1/ep.mp3", "/t2/ep.mp3"), ("/t2/ep.mp3", "/t3/ep.mp3")] {
                var tracker = TestOrigin.Resource.generated(length: 1)
                tracker.faults.redirect = (302, origin.url(to).absoluteString)
                origin.serve(tracker, at: from)
            }
            // The versions exist before they are visited (the origin's handler holds its paths
            // while it answers, so the answer cannot add one).
            for version in 1...Self.versions {
                var episode = Self.version(version)
                episode.faults.bytesPerSecond = bytesPerSecond
                origin.serve(episode, at: "/host/ep-\(version).mp3")
            }
            var last = TestOrigin.Resource.generated(length: 1)
            let base = origin.url("/host/").absoluteString
            last.faults.rawResponse = { [self] _ in
                let version = min(Self.versions, visits.add(1, ordering: .relaxed).newValue)
                let location = base + "ep-\(version).mp3"
                return Array("HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Length: 0\r\n\r\n".utf8)
            }
            origin.serve(last, at: "/t3/ep.mp3")
        }

        /// How many visits make a new version (later ones get the last).
        static let versions = 8

        static func version(_ number: Int) -> TestOrigin.Resource {
            var resource = TestOrigin.Resource.generated(
                length: length(of: number), seed: UInt64(100 + number), mimeType: "audio/mpeg")
            resource.etag = "\"ad-\(number)\""
            return resource
        }

        static func length(of version: Int) -> Int64 { baseLength + Int64(version) * 50_000 }

        /// Every request of the chain and the host, by path.
        func requests() -> [String: Int] {
            var counts: [String: Int] = [:]
            let hosts = (1...max(1, visits.load(ordering: .relaxed))).map { "/host/ep-\($0).mp3" }
            for path in ["/t1/ep.mp3", "/t2/ep.mp3", "/t3/ep.mp3"] + hosts {
                counts[path] = origin.requests(path).count
            }
            return counts
        }
    }

    /// Reads `range` of the episode through the proxy, checking every byte against version 1.
    static func read(_ proxy: ProxyHarness, from offset: Int64, bytes: Int? = nil) async throws -> Int {
        var request = HTTPClientRequest(url: proxy.url("/t1/ep.mp3"))
        request.headers.add(name: "Range", value: "bytes=\(offset)-")
        let response = try await proxy.client.execute(request, timeout: .seconds(60))
        #expect(response.status == .partialContent, "at \(offset)")
        #expect(response.headers.first(name: "Content-Range")?.hasSuffix("/\(AdStitchingHost.length(of: 1))") == true)
        var got = ByteBuffer()
        for try await chunk in response.body {
            got.writeImmutableBuffer(chunk)
            if let bytes, got.readableBytes >= bytes { break }
        }
        #expect(DeterministicContent(seed: 101).firstMismatch(in: got, at: offset) == nil, "at \(offset)")
        return got.readableBytes
    }

    /// A play, a seek forward to 80 % at once (the host sends slowly: the fill is far behind)
    /// and back to 10 %: every byte is version 1's, the chain is followed once, and the seek
    /// goes to the URL the chain led to.
    @Test func aSeekAheadOfTheFillKeepsTheVersionThePlayBeganWith() async throws {
        try await ProxyHarness.with { proxy in
            let host = AdStitchingHost(proxy.origin, bytesPerSecond: 2 << 20)
            let length = AdStitchingHost.length(of: 1)
            _ = try await Self.read(proxy, from: 0, bytes: 128 << 10)
            _ = try await Self.read(proxy, from: length * 8 / 10, bytes: 256 << 10)
            _ = try await Self.read(proxy, from: length / 10, bytes: 256 << 10)
            #expect(host.visits.load(ordering: .relaxed) == 1, "\(host.requests())")
            let requests = host.requests()
            #expect(requests["/t1/ep.mp3"] == 1 && requests["/t2/ep.mp3"] == 1 && requests["/t3/ep.mp3"] == 1)
        }
    }

    /// Once the fill holds the file, a second play costs the origin nothing.
    @Test func aFilledEpisodePlaysAgainWithoutTheOrigin() async throws {
        try await ProxyHarness.with { proxy in
            let host = AdStitchingHost(proxy.origin)
            let length = AdStitchingHost.length(of: 1)
            _ = try await Self.read(proxy, from: 0, bytes: 128 << 10)
            try await waitUntil { proxy.base.reader.fills.progress.isEmpty }
            try await proxy.base.waitUntilQuiet("/host/ep-1.mp3")
            proxy.origin.resetCounters()
            #expect(try await Self.read(proxy, from: 0) == Int(length))
            _ = try await Self.read(proxy, from: length * 8 / 10, bytes: 256 << 10)
            #expect(host.requests().values.allSatisfy { $0 == 0 }, "\(host.requests())")
            #expect(host.visits.load(ordering: .relaxed) == 1)
        }
    }
}
