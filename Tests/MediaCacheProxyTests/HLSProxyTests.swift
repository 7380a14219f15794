// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// HLS through the proxy, with streams ffmpeg makes at test time and ffmpeg as the player:
/// for each, the proxied play decodes to the direct play's md5, the playlists the player gets
/// name no origin address, and a second play makes no origin request. The cases run one at a
/// time and ffmpeg on one thread: five at once, each encoding and decoding, starved the timed
/// suites running beside them on 2 cores (a slow client's cut-off took 9.7 s instead of 0.5).
@Suite(.stallLimit, .serialized, .endToEnd) struct HLSProxyTests {
    static let hasFFmpeg = toolExists("ffmpeg")

    /// The kinds of HLS the test origin serves, each under `/hls/`.
    enum Stream: String, CaseIterable, CustomTestStringConvertible {
        /// A master playlist naming two TS variants, one relatively, one root-relatively.
        case masterWithTwoVariants
        /// fMP4 segments with an `EXT-X-MAP` init section.
        case fragmentedMP4
        /// One TS file, its segments `EXT-X-BYTERANGE`s of it.
        case singleFileByteRanges
        /// AES-128 segments with a key URI.
        case aes128
        /// A media playlist whose segment URIs are absolute, root-relative, `../` and tokenised.
        case mixedURIs

        var testDescription: String { rawValue }
        /// A tag the entry playlist (or the media playlist under it) must carry, so the case is what it says.
        var marker: String {
            switch self {
            case .masterWithTwoVariants: "#EXT-X-STREAM-INF:"
            case .fragmentedMP4: "#EXT-X-MAP:URI="
            case .singleFileByteRanges: "#EXT-X-BYTERANGE:"
            case .aes128: "#EXT-X-KEY:METHOD=AES-128,URI="
            case .mixedURIs: "token%3Dabc"
            }
        }
        /// The playlist the player is given.
        var entry: String {
            self == .masterWithTwoVariants
                ? "/hls/master.m3u8" : self == .mixedURIs ? "/hls/other/mixed.m3u8" : "/hls/v0/index.m3u8"
        }
    }

    static func ffmpeg(_ arguments: [String]) async throws {
        let result = try await runTool(
            [
                "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10",
                "-f", "lavfi", "-i", "sine=frequency=330:duration=3", "-shortest", "-threads", "1",
            ] + arguments)
        #expect(result.status == 0, "ffmpeg \(arguments): \(result.error)")
    }

    /// Makes `stream` in `directory`.
    static func make(_ stream: Stream, in directory: URL, originURL: String) async throws {
        let v0 = directory.appendingPathComponent("v0")
        try FileManager.default.createDirectory(at: v0, withIntermediateDirectories: true)
        let hls = ["-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod"]
        let ts = ["-c:v", "mpeg2video", "-q:v", "8", "-c:a", "mp2"]
        let playlist = v0.appendingPathComponent("index.m3u8").path
        let segments = ["-hls_segment_filename", v0.appendingPathComponent("seg%03d.ts").path]
        switch stream {
        case .masterWithTwoVariants:
            try await ffmpeg(ts + hls + segments + [playlist])
            let v1 = directory.appendingPathComponent("v1")
            try FileManager.default.createDirectory(at: v1, withIntermediateDirectories: true)
            try await ffmpeg(
                ["-s", "320x240"] + ts + hls + [
                    "-hls_segment_filename", v1.appendingPathComponent("seg%03d.ts").path,
                    v1.appendingPathComponent("index.m3u8").path,
                ])
            try
                "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120\nv0/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=320x240\n/hls/v1/index.m3u8\n"
                .write(to: directory.appendingPathComponent("master.m3u8"), atomically: true, encoding: .utf8)
        case .fragmentedMP4:
            try await ffmpeg(
                ["-c:v", "mpeg4", "-q:v", "8", "-c:a", "aac"] + hls + [
                    "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4",
                    "-hls_segment_filename", v0.appendingPathComponent("seg%03d.m4s").path, playlist,
                ])
        case .singleFileByteRanges:
            try await ffmpeg(ts + hls + ["-hls_flags", "single_file", playlist])
        case .aes128:
            let key = directory.appendingPathComponent("key.bin")
            try Data((0..<16).map { UInt8($0 &* 7 &+ 3) }).write(to: key)
            let info = directory.appendingPathComponent("key.info")
            try "../key.bin\n\(key.path)\n".write(to: info, atomically: true, encoding: .utf8)
            try await ffmpeg(ts + hls + segments + ["-hls_key_info_file", info.path, playlist])
        case .mixedURIs:
            try await ffmpeg(ts + hls + segments + [playlist])
            let other = directory.appendingPathComponent("other")
            try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
            var index = 0
            let lines = try String(contentsOf: v0.appendingPathComponent("index.m3u8"), encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false
            ).map {
                line -> String in
                guard line.hasPrefix("seg") else { return String(line) }
                defer { index += 1 }
                switch index % 3 {  // the clip has three segments
                case 0: return "\(originURL)/hls/v0/\(line)"  // absolute
                case 1: return "/hls/v0/\(line)"  // root-relative
                default: return "../v0/\(line)?token=abc%2Fdef&x=1"  // relative upwards, tokenised
                }
            }
            try lines.joined(separator: "\n").write(
                to: other.appendingPathComponent("mixed.m3u8"), atomically: true, encoding: .utf8)
        }
    }

    /// Serves every file of `directory` under `/hls/`; returns their paths.
    static func serve(_ directory: URL, on origin: TestOrigin) throws -> [String] {
        let files =
            FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }
            ?? []
        var paths: [String] = []
        for file in files where ["m3u8", "ts", "m4s", "mp4", "bin", "vtt"].contains(file.pathExtension) {
            let path = "/hls" + file.path.dropFirst(directory.path.count)
            let type =
                [
                    "m3u8": "application/vnd.apple.mpegurl", "ts": "video/mp2t", "m4s": "video/iso.segment",
                    "mp4": "video/mp4", "vtt": "text/vtt",
                ][file.pathExtension]
                ?? "application/octet-stream"
            origin.serve(TestOrigin.Resource(body: .bytes(Array(try Data(contentsOf: file))), mimeType: type), at: path)
            paths.append(path)
        }
        return paths
    }

    static func decodeHash(_ input: String) async throws -> String {
        let result = try await runTool([
            "ffmpeg", "-v", "error", "-allowed_extensions", "ALL", "-i", input, "-map", "0", "-threads", "1", "-f",
            "md5", "-",
        ])
        #expect(result.status == 0, "ffmpeg \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self)
    }

    /// A live playlist whose media sequence advances at the origin advances through the proxy
    /// within half its target duration, though the origin called it fresh for a minute; a VOD
    /// playlist with the same headers is served from the cache.
    @Test func aLivePlaylistAdvancesThroughTheProxy() async throws {
        let clock = ManualClock()
        var store = CacheStore.Configuration()
        store.clock = clock
        try await ProxyHarness.with(store: store) { h in
            h.origin.useClock(clock)
            func playlist(sequence: Int, live: Bool) -> TestOrigin.Resource {
                var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:\(sequence)\n"
                for index in sequence..<(sequence + 3) { text += "#EXTINF:2.0,\nseg\(index).ts\n" }
                if !live { text += "#EXT-X-ENDLIST\n" }
                var resource = TestOrigin.Resource(
                    body: .bytes(Array(text.utf8)), mimeType: "application/vnd.apple.mpegurl", etag: "\"s\(sequence)\"")
                resource.cacheControl = "max-age=60"
                return resource
            }
            for (path, live) in [("/live/index.m3u8", true), ("/vod/index.m3u8", false)] {
                h.origin.serve(playlist(sequence: 1, live: live), at: path)
                let first = String(buffer: try await h.get(h.url(path)).body)
                #expect(
                    first.contains("#EXT-X-MEDIA-SEQUENCE:1") && first.contains("seg1.ts?url="), "\(path): \(first)")
                h.origin.serve(playlist(sequence: 2, live: live), at: path)
                // Half the target duration is 1 s.
                clock.advance(by: 1.3)
                let later = String(buffer: try await h.get(h.url(path)).body)
                if live {
                    #expect(
                        later.contains("#EXT-X-MEDIA-SEQUENCE:2") && later.contains("seg4.ts?url="),
                        "\(path) did not advance: \(later)")
                } else {
                    #expect(later == first, "\(path): a VOD playlist fresh for a minute is served from the cache")
                }
            }
        }
    }

    /// A player that plays on through a VOD playlist has the next segment read ahead: when it
    /// asks for it, the bytes are on the way or stored, and its request costs the origin nothing
    /// more. Every segment is fetched from the origin once, and every byte is the origin's.
    @Test func thePlayingPlayersNextSegmentIsReadAheadAndFetchedOnce() async throws {
        try await ProxyHarness.with { h in
            h.origin.serveVODPlaylist(at: "/ra/", segments: 5, length: 300_000)
            let segments = Self.uris(in: String(buffer: try await h.get(h.url("/ra/index.m3u8")).body))
            try #require(segments.count == 5)
            func play(_ index: Int) async throws {
                let reply = try await h.get(segments[index])
                #expect(reply.status == 200 && reply.body.readableBytes == 300_000)
                #expect(
                    DeterministicContent(seed: UInt64(index + 1)).firstMismatch(in: reply.body, at: 0) == nil,
                    "segment \(index)")
            }
            try await Self.playOnAndExpectTheFourthReadAhead(play: play) { h.origin.requests("/ra/seg\($0).ts") }
        }
    }

    /// Plays segments 0 to 3 (`play` checks each one's bytes) as a player playing on does, and
    /// expects the fourth asked of the origin (`requests` of a segment) before the player asks
    /// for it, after the three before it, and each asked for once. (That the first two start
    /// nothing is `SegmentReadAheadTests`': here it would be a race.)
    static func playOnAndExpectTheFourthReadAhead(
        play: (Int) async throws -> Void, requests: @escaping @Sendable (Int) -> [TestOrigin.Request]
    ) async throws {
        try await play(0)
        try await play(1)
        try await play(2)
        try await waitUntil { requests(3).count == 1 }
        try await play(3)
        for index in 0..<4 {
            #expect(requests(index).count == 1, "segment \(index): \(requests(index))")
        }
    }

    /// The URIs of `text` (a rewritten playlist): its URI lines and quoted `http…` attribute values.
    static func uris(in text: String) -> [String] {
        text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map(String.init)
            + text.split(separator: "\"").filter { $0.hasPrefix("http") }.map(String.init)
    }

    /// The origin URL a rewritten URI names (its `url=`).
    static func originURL(in proxyURI: String) -> String? {
        URLComponents(string: proxyURI)?.queryItems?.first { $0.name == "url" }?.value
    }

    /// A playlist reached through a redirect names its segments relative to where it was
    /// redirected to (RFC 3986 §5.1.3), not to the URL the player asked for.
    @Test func aRedirectedPlaylistResolvesAgainstWhereItLanded() async throws {
        try await ProxyHarness.with { h in
            let segment: [UInt8] = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(Array("#EXTM3U\n#EXTINF:1,\nseg.ts?s=1\n#EXT-X-ENDLIST\n".utf8)),
                    mimeType: "application/x-mpegURL"),
                at: "/real/dir/list.m3u8")
            h.origin.serve(TestOrigin.Resource(body: .bytes(segment), mimeType: "video/mp2t"), at: "/real/dir/seg.ts")
            var moved = TestOrigin.Resource(body: .bytes([]), mimeType: "text/plain")
            moved.faults.redirect = (302, "/real/dir/list.m3u8")
            h.origin.serve(moved, at: "/short/x.m3u8")
            for _ in 0..<2 {  // from the origin, then from the cache (the final URL is stored with the entry)
                let text = String(buffer: try await h.get(h.url("/short/x.m3u8")).body)
                let uris = Self.uris(in: text)
                #expect(
                    uris.count == 1
                        && uris.first.flatMap(Self.originURL) == h.origin.url("/real/dir/seg.ts").absoluteString
                            + "?s=1",
                    "\(text)")
                let reply = try await h.get(try #require(uris.first))
                #expect(reply.status == 200 && Array(reply.body.readableBytesView) == segment)
            }
            #expect(h.origin.requests("/short/x.m3u8").count == 1 && h.origin.requests("/real/dir/seg.ts").count == 1)
        }
    }

    /// A key is fetched through the proxy, kept in memory (a second request costs the origin
    /// nothing) and never written to the store; a segment of the same playlist is stored.
    @Test func aKeyIsKeptInMemoryAndNeverStored() async throws {
        try await ProxyHarness.with { h in
            let key: [UInt8] = (0..<16).map { UInt8($0 &* 13 &+ 5) }
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(
                        Array(
                            "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k/key.bin\",IV=0x01\n#EXTINF:1,\ns.ts\n#EXT-X-ENDLIST\n"
                                .utf8)),
                    mimeType: "application/vnd.apple.mpegurl"), at: "/enc/index.m3u8")
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(key), mimeType: "application/octet-stream"), at: "/enc/k/key.bin")
            h.origin.serve(
                TestOrigin.Resource(
                    body: .generated(DeterministicContent(seed: 3), length: 9000), mimeType: "video/mp2t"),
                at: "/enc/s.ts")
            let text = String(buffer: try await h.get(h.url("/enc/index.m3u8")).body)
            let uris = Self.uris(in: text)
            let keyURI = try #require(uris.first { $0.contains("key.bin") })
            #expect(keyURI.hasSuffix("&memory=1") && uris.filter { $0.contains("memory=1") }.count == 1, "\(text)")
            for _ in 0..<3 {
                let reply = try await h.get(keyURI, headers: [("Range", "bytes=0-3")])
                #expect(
                    reply.status == 200 && Array(reply.body.readableBytesView) == key
                        && reply.headers.first(name: "cache-control") == "no-store")
            }
            #expect(h.origin.requests("/enc/k/key.bin").count == 1)
            let segment = try await h.get(try #require(uris.first { $0.contains("s.ts") }))
            #expect(
                segment.status == 200 && DeterministicContent(seed: 3).firstMismatch(in: segment.body, at: 0) == nil)
            #expect(h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/enc/k/key.bin"))) == nil)
            #expect(h.base.store.metadata(for: h.base.store.key(for: h.origin.url("/enc/s.ts")))?.length == 9000)
            try await h.base.store.flush()
            #expect(try Self.filesUnder(h.base.directory, contain: key) == [], "the key is on disk")
        }
    }

    /// The files under `directory` whose bytes contain `needle`.
    static func filesUnder(_ directory: URL, contain needle: [UInt8]) throws -> [String] {
        let files =
            FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }
            ?? []
        return try files.filter { file in
            guard (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { return false }
            let bytes = [UInt8](try Data(contentsOf: file))
            return bytes.count >= needle.count
                && (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
        }.map(\.lastPathComponent)
    }

    /// A blocking playlist reload (`_HLS_msn`, `_HLS_part`, `_HLS_skip`, appended by the player
    /// to the URL it was given) goes to the origin with its parameters every time, is
    /// answered rewritten, and is not stored.
    @Test func blockingReloadsGoStraightToTheOrigin() async throws {
        try await ProxyHarness.with { h in
            var live = TestOrigin.Resource(
                body: .bytes(
                    Array(
                        "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PART-INF:PART-TARGET=1\n#EXTINF:4,\na.ts\n#EXT-X-PART:DURATION=1,URI=\"a.1.ts\"\n"
                            .utf8)),
                mimeType: "application/vnd.apple.mpegurl")
            live.cacheControl = "max-age=60"
            h.origin.serve(live, at: "/ll/index.m3u8")
            let entry = h.url("/ll/index.m3u8")
            // Segment 0 is whole and part 0 of segment 1 is there: each is held.
            for (round, query) in ["_HLS_msn=1&_HLS_part=0", "_HLS_msn=0"].enumerated() {
                let reply = try await h.get(entry + "&" + query)
                let text = String(buffer: reply.body)
                #expect(
                    reply.status == 200
                        && text.contains("#EXT-X-PART:DURATION=1,URI=\"http://127.0.0.1:\(h.port)/a.1.ts?url="),
                    "\(text)")
                let seen = h.origin.requests("/ll/index.m3u8")
                #expect(seen.count == round + 1 && seen.last?.query == query, "\(seen.map { $0.query ?? "-" })")
            }
            // Part 1 of segment 1, and segment 2, are not: a retriable 503, never that playlist.
            for query in ["_HLS_msn=1&_HLS_part=1", "_HLS_msn=2", "_HLS_msn=2&_HLS_part=0"] {
                let reply = try await h.get(entry + "&" + query)
                #expect(
                    reply.status == 503 && reply.headers.first(name: "retry-after") == "1", "\(query): \(reply.status)")
                #expect(!String(buffer: reply.body).contains("#EXTM3U"))
                #expect(h.origin.requests("/ll/index.m3u8").last?.query == query, "it went to the origin")
            }
            let reload = try #require(
                URL(string: h.origin.url("/ll/index.m3u8").absoluteString + "?_HLS_msn=1&_HLS_part=0"))
            #expect(h.base.store.metadata(for: h.base.store.key(for: reload)) == nil)
        }
    }

    /// A playlist the parser refuses gets a 502 that says why; a body of a playlist type that
    /// is not one goes through unchanged; the proxy then still serves a good playlist.
    @Test func aBadPlaylistIsA502ThatSaysWhyAndTheProxyGoesOn() async throws {
        try await ProxyHarness.with { h in
            let type = "application/vnd.apple.mpegurl"
            let cases: [(path: String, body: [UInt8], reason: String)] = [
                (
                    "/bad/quote.m3u8",
                    Array("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\n#EXTINF:1,\na.ts\n".utf8),
                    "unbalanced quote"
                ),
                (
                    "/bad/range.m3u8",
                    Array("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:99999999999999999999999@0\na.ts\n".utf8),
                    "EXT-X-BYTERANGE"
                ),
                ("/bad/binary.m3u8", Array("#EXTM3U\n".utf8) + [0xFF, 0xFE, 0x00, 0x0A], "UTF-8"),
            ]
            for bad in cases {
                h.origin.serve(TestOrigin.Resource(body: .bytes(bad.body), mimeType: type), at: bad.path)
                let reply = try await h.get(h.url(bad.path))
                #expect(
                    reply.status == 502 && String(buffer: reply.body).contains(bad.reason),
                    "\(bad.path): \(reply.status) \(String(buffer: reply.body))")
            }
            // Typed as a playlist, but not one: the bytes as they came.
            let notPlaylist: [UInt8] = [0x00, 0x01, 0xFF, 0x47, 0x40, 0x11]
            h.origin.serve(TestOrigin.Resource(body: .bytes(notPlaylist), mimeType: type), at: "/bad/not.m3u8")
            let passed = try await h.get(h.url("/bad/not.m3u8"))
            #expect(passed.status == 200 && Array(passed.body.readableBytesView) == notPlaylist)
            h.origin.serve(
                TestOrigin.Resource(
                    body: .bytes(Array("#EXTM3U\n#EXTINF:1,\nok.ts\n#EXT-X-ENDLIST\n".utf8)), mimeType: type),
                at: "/good/index.m3u8")
            let good = try await h.get(h.url("/good/index.m3u8"))
            #expect(good.status == 200 && String(buffer: good.body).contains("/ok.ts?url="))
        }
    }
}
