// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// `serve --origin-piece HOST=SIZE` against the real binary and real clients: curl's bytes are
/// the origin's, mpv plays the file through the proxy (and seeks in it), and no request to the
/// host asks for more than SIZE, each after a read's first under `If-Range`.
@Suite(.stallLimit, .endToEnd) struct OriginPieceCommandTests {
    @Test(.enabled(if: ChildProcess.toolExists("mpv") && ChildProcess.toolExists("ffmpeg"), "needs mpv and ffmpeg"))
    func curlAndMPVReadAHostAskedInPieces() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("film.mp4").path
            let made = try await ChildProcess.run([
                "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f",
                "lavfi", "-i", "sine=frequency=330", "-t", "8", "-c:v", "libx264", "-preset", "ultrafast", "-b:v",
                "800k",
                "-c:a", "aac", path,
            ])
            try #require(made.status == 0, "ffmpeg: \(made.error)")
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            let piece = 64 << 10
            try #require(bytes.count > 4 * piece, "a file of several pieces: \(bytes.count) bytes")
            origin.serve(
                TestOrigin.Resource(body: .bytes(bytes), mimeType: "video/mp4", etag: "\"film\""), at: "/film.mp4")
            try await RunningServer.with(["--origin-piece", "127.0.0.1=64K"], origin: origin) { server in
                let proxied = server.info.baseURL + ProxyURL.path(for: origin.url("/film.mp4"), token: nil)
                let fetched = try await ChildProcess.run(["curl", "-s", "-f", proxied])
                #expect(fetched.status == 0 && Array(fetched.output) == bytes, "curl got the origin's bytes")
                let played = try await ChildProcess.run([
                    "mpv", "--no-config", "--vo=null", "--ao=null", "--msg-level=all=error", "--start=80%", proxied,
                ])
                #expect(played.status == 0, "mpv: \(String(decoding: played.output, as: UTF8.self))\(played.error)")
                let requests = origin.requests("/film.mp4").filter { $0.method == "GET" }
                #expect(!requests.isEmpty)
                for request in requests {
                    let range = try #require(request.range.flatMap(OriginPieceTests.parse), "\(request)")
                    #expect(range.count <= piece, "\(request)")
                    if range.lowerBound > 0 { #expect(request.ifRange == "\"film\"", "\(request)") }
                }
            }
        }
    }
}

/// `bytes=a-b` as the half-open range `a..<b+1`.
enum OriginPieceTests {
    static func parse(_ text: String) -> Range<Int64>? {
        guard text.hasPrefix("bytes=") else { return nil }
        let parts = text.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Int64(parts[0]), let end = Int64(parts[1]) else { return nil }
        return start..<(end + 1)
    }
}
