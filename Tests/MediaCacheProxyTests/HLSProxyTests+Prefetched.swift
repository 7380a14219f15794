// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

extension HLSProxyTests {
    /// An asset prefetched through the engine (the lowest variant of a master playlist)
    /// then plays through the proxy with the direct play's md5 and no origin request; the
    /// other variant was never fetched.
    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func aPrefetchedAssetPlaysWithoutTheOrigin() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("hls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await ProxyHarness.with { h in
            try await Self.make(
                .masterWithTwoVariants, in: directory, originURL: String(h.origin.url("/").absoluteString.dropLast()))
            let paths = try Self.serve(directory, on: h.origin)
            let direct = try await Self.decodeHash(h.origin.url("/hls/v0/index.m3u8").absoluteString)
            h.origin.resetCounters()
            let result = try await h.base.reader.prefetchHLS(
                h.origin.url("/hls/master.m3u8"), options: .init(variant: .lowestBandwidth))
            #expect(
                result.isComplete && result.resourcesTotal == 3
                    && result.playlists.map(\.path) == ["/hls/v0/index.m3u8"])
            let fetched = paths.filter { !h.origin.requests($0).isEmpty }
            #expect(
                fetched.allSatisfy { !$0.hasPrefix("/hls/v1/") } && fetched.contains("/hls/v0/seg000.ts"), "\(fetched)")
            h.origin.resetCounters()
            #expect(try await Self.decodeHash(h.url("/hls/v0/index.m3u8")) == direct)
            let asked = paths.flatMap { h.origin.requests($0) }
            #expect(asked.isEmpty, "the play after the prefetch reached the origin: \(asked)")
        }
    }

    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"), arguments: Stream.allCases)
    func playsThroughTheProxyThenFromTheCache(_ stream: Stream) async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("hls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await ProxyHarness.with { h in
            let origin = String(h.origin.url("/").absoluteString.dropLast())  // http://127.0.0.1:PORT
            try await Self.make(stream, in: directory, originURL: origin)
            let paths = try Self.serve(directory, on: h.origin)
            // Every playlist the player gets sends each URI back through the proxy and names no origin address.
            for path in paths where path.hasSuffix(".m3u8") {
                let reply = try await h.get(h.url(path))
                let text = String(buffer: reply.body)
                #expect(reply.status == 200 && text.hasPrefix("#EXTM3U"), "\(path): \(reply.status)")
                #expect(!text.contains(origin), "\(path) names the origin: \(text)")
                let uris =
                    text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                    + text.split(separator: "\"").filter { $0.hasPrefix("http") }
                #expect(
                    !uris.isEmpty
                        && uris.allSatisfy { $0.hasPrefix("http://127.0.0.1:\(h.port)/") && $0.contains("?url=") },
                    "\(path): \(uris)")
            }
            let entry = String(buffer: try await h.get(h.url(stream.entry)).body)
            #expect(entry.contains(stream.marker), "\(stream.entry): \(entry)")
            let direct = try await Self.decodeHash(h.origin.url(stream.entry).absoluteString)
            let proxied = try await Self.decodeHash(h.url(stream.entry))
            #expect(direct.hasPrefix("MD5=") && proxied == direct, "direct \(direct), proxied \(proxied)")
            // A second play costs the origin nothing.
            h.origin.resetCounters()
            #expect(try await Self.decodeHash(h.url(stream.entry)) == direct)
            let asked = paths.flatMap { h.origin.requests($0) }
            #expect(asked.isEmpty, "second play reached the origin: \(asked)")
            if stream == .aes128 {
                try await h.base.store.flush()
                let key = [UInt8](try Data(contentsOf: directory.appendingPathComponent("key.bin")))
                #expect(try Self.filesUnder(h.base.directory, contain: key) == [], "the key is on disk")
            }
        }
    }
}
