// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

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
}
