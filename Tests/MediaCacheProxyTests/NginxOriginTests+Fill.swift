// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

extension NginxOriginTests {
    /// A fill on play against nginx, counted from its access log: a player that starts an
    /// episode (`bytes=0-`) and hangs up after 256 KiB costs one origin request, and the file is
    /// then whole and nginx's byte for byte; one that asks a bounded range first costs one more.
    @Test func aFilledPlayCostsNginxOneRequest() async throws {
        // A podcast host's episodes are fresh for a day, so the stored file is read back as it is.
        try await Self.with(expires: ["/pod/": 86_400]) { nginx, h in
            for (index, firstRange) in ["bytes=0-", "bytes=0-65535"].enumerated() {
                let path = "/pod/episode-\(index).mp3"
                let bytes = Self.content(6 << 20, seed: UInt64(40 + index))
                let url = try nginx.serve(bytes, at: path)
                var request = HTTPClientRequest(url: h.proxyURL(for: url.absoluteString))
                request.headers.add(name: "Range", value: firstRange)
                let response = try await h.client.execute(request, timeout: .seconds(30))
                #expect(response.status == .partialContent)
                var got = ByteBuffer()
                for try await chunk in response.body {
                    got.writeImmutableBuffer(chunk)
                    if got.readableBytes >= 256 << 10 { break }
                }
                #expect(Data(got.readableBytesView) == bytes.prefix(got.readableBytes), "\(path)")
                try await waitUntil { h.base.reader.fills.progress.isEmpty }
                try await h.base.waitUntilQuiet(path)
                let key = h.base.store.key(for: url)
                #expect(h.base.store.spans(for: key).contains(ByteRange(0, Int64(bytes.count))), "\(path) whole")
                let stored = try #require(h.base.reader.cachedRead(url, range: ByteRange(0, Int64(bytes.count))))
                var all = Data()
                for try await chunk in stored { all.append(contentsOf: chunk.readableBytesView) }
                #expect(all == bytes, "\(path): the origin's bytes")
                #expect(nginx.requests(path).count == index + 1, "\(path): \(nginx.requests(path))")
            }
        }
    }

    /// A real player with every flag at its default: ffmpeg seeks into twenty different MP3s from
    /// nginx, one after another (as a listener skips through a playlist), and decodes two seconds
    /// of each through the proxy. Every decode equals the one straight from nginx; each play's
    /// fill stays the cache's own work (at most four at once) and every connection comes back.
    /// (On e48a7a1 the fills of the earlier songs held the connections the later ones needed.)
    @Test(.enabled(if: toolExists("ffmpeg"))) func ffmpegSeeksThroughTwentySongsInARow() async throws {
        // Only a mark on the cache's own requests (as `serve --cmcd` sends), so the access log
        // tells them from the player's; it changes nothing the cache does.
        var reader = CachingReader.Configuration()
        reader.ownRequestFields = [("CMCD-Request", "io.mediacache-own")]
        try await Self.with(reader: reader) { nginx, h in
            let songs = 20
            let folder = nginx.root.appendingPathComponent("songs")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // Twenty MP3s of a minute, each its own tone, made by one ffmpeg.
            var make = ["ffmpeg", "-v", "error", "-y"]
            for index in 0..<songs { make += ["-f", "lavfi", "-i", "sine=frequency=\(200 + 40 * index):duration=60"] }
            for index in 0..<songs {
                make += [
                    "-map", "\(index):a", "-c:a", "libmp3lame", "-b:a", "64k",
                    folder.appendingPathComponent("\(index).mp3").path,
                ]
            }
            let made = try await runTool(make)
            #expect(made.status == 0, "\(made.error)")
            for index in 0..<songs {
                let path = "/songs/\(index).mp3"
                let decode = ["ffmpeg", "-v", "error", "-ss", "\(10 + 2 * index)", "-t", "2"]
                let direct = try await runTool(decode + ["-i", nginx.url + path, "-f", "md5", "-"])
                let before = nginx.requests(path).count
                let proxied = try await runTool(decode + ["-i", h.proxyURL(for: nginx.url + path), "-f", "md5", "-"])
                #expect(proxied.status == 0, "\(path): \(proxied.error)")
                #expect(
                    proxied.output == direct.output && !direct.output.isEmpty,
                    "\(path): \(String(decoding: proxied.output, as: UTF8.self)) against \(String(decoding: direct.output, as: UTF8.self))"
                )
                let asked = nginx.requests(path).dropFirst(before)
                // Bytes, or a revalidation's `304` (files written a moment ago are stale at once).
                #expect(asked.allSatisfy { [200, 206, 304].contains($0.status) }, "\(path): \(asked)")
                #expect(h.base.reader.fills.progress.count <= 4, "\(path): fills under way")
            }
            try await waitUntil { h.base.reader.activeDownloads == 0 }
            let origin = try #require(URL(string: nginx.url))
            #expect(h.base.reader.fetcher.budget.usage(of: origin) == (0, 0), "every connection comes back")
        }
    }
}
