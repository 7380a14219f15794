// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

/// Real players and clients through the proxy: curl, ffprobe and ffmpeg.
@Suite(.stallLimit, .endToEnd) struct RealClientTests {
    static let hasFFmpeg = toolExists("ffmpeg") && toolExists("ffprobe")

    /// A chunked origin body read by curl as HTTP/1.1 (chunked) and HTTP/1.0 (the proxy
    /// closes the connection at its end): every byte, in order.
    @Test(.enabled(if: toolExists("curl"), "curl is installed by .ci/run"))
    func curlReadsABodyWithoutALengthOverHTTP11AndHTTP10() async throws {
        try await ProxyHarness.with { h in
            var resource = TestOrigin.Resource.generated(length: 1_500_000, seed: 46, mimeType: "audio/mpeg")
            resource.faults.lengthless = .chunked
            resource.cacheControl = "no-store"  // both reads stream through (a stored one would have a length)
            h.origin.serve(resource, at: "/live.mp3")
            for version in ["--http1.1", "--http1.0"] {
                let result = try await runTool([
                    "curl", "-s", "-f", "--max-time", "30", version, "-D", "/dev/stderr", h.url("/live.mp3"),
                ])
                #expect(result.status == 0, "curl \(version): \(result.error)")
                #expect(
                    result.output.count == 1_500_000
                        && resource.firstMismatch(in: ByteBuffer(bytes: result.output), at: 0) == nil, "curl \(version)"
                )
                let head = result.error.lowercased()
                #expect(!head.contains("content-length"), "\(head)")
                #expect(
                    head.contains(version == "--http1.1" ? "transfer-encoding: chunked" : "connection: close"),
                    "\(head)")
            }
        }
    }

    @Test(.enabled(if: toolExists("curl"), "curl is installed by .ci/run"))
    func curlFetchesRangesThroughTheProxy() async throws {
        try await ProxyHarness.with { h in
            h.origin.serve(.generated(length: 2_000_000, seed: 41, mimeType: "audio/mpeg"), at: "/c.mp3")
            let resource = try #require(h.origin.resource(at: "/c.mp3"))
            for (range, start, length) in [
                ("0-1", 0, 2), ("1000-1999", 1000, 1000), ("1999000-", 1_999_000, 1000), ("-300", 1_999_700, 300),
            ] as [(String, Int64, Int)] {
                let result = try await runTool(["curl", "-s", "-f", "-r", range, h.url("/c.mp3")])
                #expect(result.status == 0, "curl -r \(range): \(result.error)")
                #expect(result.output.count == length)
                #expect(
                    resource.firstMismatch(in: ByteBuffer(bytes: result.output), at: start) == nil, "curl -r \(range)")
            }
            let whole = try await runTool(["curl", "-s", "-f", h.url("/c.mp3")])
            #expect(whole.output.count == 2_000_000)
            #expect(resource.firstMismatch(in: ByteBuffer(bytes: whole.output), at: 0) == nil)
            let head = try await runTool(["curl", "-s", "-I", "-r", "10-19", h.url("/c.mp3")])
            let headers = String(decoding: head.output, as: UTF8.self).lowercased()
            #expect(headers.contains("206"))
            #expect(headers.contains("content-range: bytes 10-19/2000000"))
            #expect(headers.contains("content-type: audio/mpeg"))
        }
    }

    /// Makes a 4 s MP3 and a 3 s MP4 (moov at the end, ffmpeg's default) in `directory`.
    static func makeMedia(in directory: URL) async throws -> (mp3: Data, mp4: Data) {
        let mp3 = directory.appendingPathComponent("tone.mp3").path
        let mp4 = directory.appendingPathComponent("clip.mp4").path
        let a = try await runTool([
            "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=4", "-c:a", "libmp3lame",
            "-b:a", "128k", mp3,
        ])
        #expect(a.status == 0, "\(a.error)")
        let v = try await runTool([
            "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=320x240:rate=25",
            "-f", "lavfi", "-i", "sine=frequency=220:duration=3", "-c:v", "mpeg4", "-q:v", "5", "-c:a", "aac",
            "-shortest", mp4,
        ])
        #expect(v.status == 0, "\(v.error)")
        return (try Data(contentsOf: URL(fileURLWithPath: mp3)), try Data(contentsOf: URL(fileURLWithPath: mp4)))
    }

    static func probe(_ input: String) async throws -> String {
        let result = try await runTool([
            "ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name,codec_type", "-of", "compact",
            input,
        ])
        #expect(result.status == 0, "ffprobe \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self)
    }

    static func decodeHash(_ input: String) async throws -> String {
        let result = try await runTool(["ffmpeg", "-v", "error", "-i", input, "-f", "md5", "-"])
        #expect(result.status == 0, "ffmpeg \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self)
    }

    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func ffprobeAndFFmpegReadTheSameMediaThroughTheProxy() async throws {
        try await withTemporaryDirectory { directory in
            let (mp3, mp4) = try await Self.makeMedia(in: directory)
            // The MP4 must have its moov box after mdat, so players read the tail first.
            let moov = try #require(mp4.range(of: Data("moov".utf8))).lowerBound
            let mdat = try #require(mp4.range(of: Data("mdat".utf8))).lowerBound
            #expect(moov > mdat)
            try await ProxyHarness.with { h in
                h.origin.serve(TestOrigin.Resource(body: .bytes(Array(mp3)), mimeType: "audio/mpeg"), at: "/tone.mp3")
                h.origin.serve(TestOrigin.Resource(body: .bytes(Array(mp4)), mimeType: "video/mp4"), at: "/clip.mp4")
                for (name, path) in [("tone.mp3", "/tone.mp3"), ("clip.mp4", "/clip.mp4")] {
                    let file = directory.appendingPathComponent(name).path
                    let direct = try await Self.probe(file)
                    #expect(direct.contains("duration="))
                    #expect(try await Self.probe(h.url(path)) == direct, "\(name)")
                    let hash = try await Self.decodeHash(file)
                    #expect(hash.hasPrefix("MD5="))
                    #expect(
                        try await Self.decodeHash(h.url(path)) == hash,
                        "\(name): decoding through the proxy must give the same samples")
                    // Played again: from cache, the origin not asked.
                    let requests = h.origin.requests(path).count
                    #expect(try await Self.decodeHash(h.url(path)) == hash)
                    #expect(h.origin.requests(path).count == requests, "\(name) replay")
                }
                #expect(try await Self.probe(h.url("/tone.mp3")).contains("codec_name=mp3"))
                #expect(try await Self.probe(h.url("/clip.mp4")).contains("codec_name=mpeg4"))
            }
        }
    }
}
