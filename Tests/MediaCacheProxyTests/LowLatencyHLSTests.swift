// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// Low-Latency HLS (RFC 8216bis) through the proxy, requested the way AVPlayer and hls.js
/// request it: a blocking playlist reload (`_HLS_msn`, `_HLS_part`) beside a request for the
/// part the preload hint names, both held by the origin until the part exists. The origin here
/// makes a part when the test says so (a gate per answer), not on a timer.
@Suite(.stallLimit, .endToEnd) struct LowLatencyHLSTests {
    static let type = "application/vnd.apple.mpegurl"

    /// A live media playlist of three whole segments and the parts of the fourth up to
    /// `parts` (exclusive), hinting the next part and reporting the audio rendition.
    static func playlist(parts: Int, skip: Bool = false) -> TestOrigin.Resource {
        var text = """
            #EXTM3U
            #EXT-X-VERSION:9
            #EXT-X-TARGETDURATION:2
            #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=12.0,PART-HOLD-BACK=1.5
            #EXT-X-PART-INF:PART-TARGET=0.5
            #EXT-X-MEDIA-SEQUENCE:0
            #EXT-X-MAP:URI="init.mp4"

            """
        if skip { text += "#EXT-X-SKIP:SKIPPED-SEGMENTS=2\n" }
        for segment in (skip ? 2 : 0)..<3 { text += "#EXTINF:2.0,\nseg\(segment).mp4\n" }
        for part in 0..<parts {
            text += "#EXT-X-PART:DURATION=0.5,URI=\"seg3.\(part).mp4\"\(part == 0 ? ",INDEPENDENT=YES" : "")\n"
        }
        text += "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg3.\(parts).mp4\"\n"
        text += "#EXT-X-RENDITION-REPORT:URI=\"../audio/index.m3u8\",LAST-MSN=3,LAST-PART=\(parts - 1)\n"
        var resource = TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: type)
        resource.cacheControl = "max-age=1"
        return resource
    }

    /// The quoted `URI` of the first `tag` line of `text`.
    static func uri(of tag: String, in text: String) -> String? {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(tag) }),
            let start = line.range(of: "URI=\"")
        else { return nil }
        return String(line[start.upperBound...].prefix { $0 != "\"" })
    }

    /// The origin URL a proxy URL (`…?url=<percent-encoded>`) stands for.
    static func origin(of proxyURL: String) -> String? {
        URLComponents(string: proxyURL)?.queryItems?.first { $0.name == "url" }?.value
    }

    /// Four players on the live edge: each asks for the hinted part and makes a blocking
    /// reload for it. The origin gets one request for the part, whatever the number of
    /// players; every player gets the part's bytes, and a playlist that holds the part.
    @Test func fourPlayersOnTheLiveEdgeShareEachHintedPart() async throws {
        try await ProxyHarness.with { h in
            let reload = "/ll/index.m3u8?_HLS_msn=3&_HLS_part=1"
            let (playlistMade, partMade) = (TestOrigin.Gate(), TestOrigin.Gate())
            h.origin.serve(Self.playlist(parts: 1), at: "/ll/index.m3u8")
            var blocked = Self.playlist(parts: 2)
            blocked.faults.gate = playlistMade
            h.origin.serve(blocked, at: reload)
            var part = TestOrigin.Resource.generated(length: 48_000, seed: 31, mimeType: "video/iso.segment")
            part.faults.gate = partMade
            h.origin.serve(part, at: "/ll/seg3.1.mp4")
            h.origin.serve(Self.playlist(parts: 1), at: "/audio/index.m3u8")

            let entry = h.url("/ll/index.m3u8")
            let first = String(buffer: try await h.get(entry).body)
            // The hint and the rendition report lead back through the proxy, to the origin's URLs.
            let hint = try #require(Self.uri(of: "#EXT-X-PRELOAD-HINT:", in: first), "\(first)")
            let report = try #require(Self.uri(of: "#EXT-X-RENDITION-REPORT:", in: first), "\(first)")
            #expect(
                hint.hasPrefix("http://127.0.0.1:\(h.port)/")
                    && Self.origin(of: hint) == h.origin.url("/ll/seg3.1.mp4").absoluteString, "\(hint)")
            #expect(
                report.hasPrefix("http://127.0.0.1:\(h.port)/")
                    && Self.origin(of: report) == h.origin.url("/audio/index.m3u8").absoluteString, "\(report)")

            try await withThrowingTaskGroup(of: (part: ProxyHarness.Reply, playlist: ProxyHarness.Reply).self) {
                group in
                for _ in 0..<4 {
                    group.addTask {
                        async let part = h.get(hint)
                        async let playlist = h.get(entry + "&_HLS_msn=3&_HLS_part=1")
                        return try await (part, playlist)
                    }
                }
                // Every player waits: the reloads at the origin, the part requests in the proxy.
                try await waitUntil {
                    h.origin.requests(reload).count == 4 && !h.origin.requests("/ll/seg3.1.mp4").isEmpty
                }
                try await waitUntil { h.base.reader.contentInfoWaiters >= 4 }
                partMade.open()
                playlistMade.open()
                for try await (part, playlist) in group {
                    #expect(
                        part.status == 200 && part.body.readableBytes == 48_000
                            && DeterministicContent(seed: 31).firstMismatch(in: part.body, at: 0) == nil)
                    let text = String(buffer: playlist.body)
                    #expect(
                        playlist.status == 200 && text.contains("seg3.1.mp4?url=")
                            && Self.uri(of: "#EXT-X-PRELOAD-HINT:", in: text)?.contains("seg3.2.mp4") == true, "\(text)"
                    )
                }
            }
            let asked = h.origin.requests("/ll/seg3.1.mp4")
            #expect(asked.count == 1, "the origin was asked \(asked.count) times for one part: \(asked)")
            #expect(h.origin.requests(reload).count == 4, "each blocking reload is the origin's to answer")
        }
    }

    /// A delta update (`_HLS_skip`) is answered by the origin each time and never stored, and
    /// a request without `_HLS_skip` never gets one, before or after.
    @Test func aDeltaUpdateIsNeverServedForTheWholePlaylist() async throws {
        try await ProxyHarness.with { h in
            var whole = Self.playlist(parts: 1)
            whole.cacheControl = "max-age=60"
            h.origin.serve(whole, at: "/ll/index.m3u8")
            h.origin.serve(Self.playlist(parts: 1, skip: true), at: "/ll/index.m3u8?_HLS_skip=YES")
            let entry = h.url("/ll/index.m3u8")
            for round in 1...2 {
                let delta = String(buffer: try await h.get(entry + "&_HLS_skip=YES").body)
                #expect(delta.contains("#EXT-X-SKIP:SKIPPED-SEGMENTS=2") && !delta.contains("seg0.mp4"), "\(delta)")
                #expect(h.origin.requests("/ll/index.m3u8?_HLS_skip=YES").count == round)
                let full = String(buffer: try await h.get(entry).body)
                #expect(!full.contains("#EXT-X-SKIP") && full.contains("seg0.mp4?url="), "\(full)")
            }
            let deltaURL = try #require(URL(string: h.origin.url("/ll/index.m3u8").absoluteString + "?_HLS_skip=YES"))
            #expect(h.base.store.metadata(for: h.base.store.key(for: deltaURL)) == nil)
        }
    }

    /// A part hinted by `BYTERANGE-START` alone, in a segment the origin is still making: the
    /// player asks for `bytes=<start>-` and gets each byte as the origin makes it, under the
    /// origin's own `Content-Range` (RFC 8673's indeterminate form), in one origin request.
    /// Nothing of it is stored as the segment: once made, the segment is answered whole and
    /// right. (Only the suite's `stallLimit`: with a time limit of a minute, on a two-core machine
    /// running the whole suite, the test's body had not started when its minute ran out, three
    /// runs in three; without, it started after 29 s and took 0.3 s. A proxy that held bytes back
    /// would hang it until the suite's limit.)
    @Test func anOpenEndedHintOnAGrowingSegmentIsStreamedAsItGrows() async throws {
        try await ProxyHarness.with { h in
            let (start, length): (Int64, Int64) = (30_000, 90_000)
            let growth = TestOrigin.Growth(made: start)
            var segment = TestOrigin.Resource.generated(length: length, seed: 41, mimeType: "video/iso.segment")
            segment.faults.growth = growth
            h.origin.serve(segment, at: "/br/seg3.mp4")
            var text = String(
                decoding: Self.playlist(parts: 0).bytes(0..<Self.playlist(parts: 0).length).readableBytesView,
                as: UTF8.self)
            text = text.replacingOccurrences(
                of: "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg3.0.mp4\"",
                with: """
                    #EXT-X-PART:DURATION=0.5,URI="seg3.mp4",BYTERANGE=\(start)@0,INDEPENDENT=YES
                    #EXT-X-PRELOAD-HINT:TYPE=PART,URI="seg3.mp4",BYTERANGE-START=\(start)
                    """)
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: Self.type), at: "/br/index.m3u8")

            let mapped = String(buffer: try await h.get(h.url("/br/index.m3u8")).body)
            let hint = try #require(Self.uri(of: "#EXT-X-PRELOAD-HINT:", in: mapped), "\(mapped)")
            #expect(
                Self.origin(of: hint) == h.origin.url("/br/seg3.mp4").absoluteString
                    && mapped.contains("BYTERANGE-START=\(start)"), "\(mapped)")

            var request = HTTPClientRequest(url: hint)
            request.headers.add(name: "Range", value: "bytes=\(start)-")
            // The proxy answers once it has the first byte: the origin makes some once asked.
            async let answered = h.client.execute(request, timeout: .seconds(30))
            try await waitUntil { !h.origin.requests("/br/seg3.mp4").isEmpty }
            growth.make(upTo: start + 15_000)
            let response = try await answered
            #expect(response.status == .partialContent)
            #expect(
                response.headers["content-range"] == ["bytes \(start)-999999999999/*"]
                    && response.headers["content-length"].isEmpty, "\(response.headers)")
            var received = ByteBuffer()
            var body = response.body.makeAsyncIterator()
            // Each piece the origin makes reaches the player before the next is made.
            for made in stride(from: start + 15_000, through: length, by: 15_000) {
                growth.make(upTo: made)
                while start + Int64(received.readableBytes) < made, var chunk = try await body.next() {
                    received.writeBuffer(&chunk)
                }
                #expect(start + Int64(received.readableBytes) == made)
            }
            growth.finish()
            while var chunk = try await body.next() { received.writeBuffer(&chunk) }
            #expect(
                Int64(received.readableBytes) == length - start && segment.firstMismatch(in: received, at: start) == nil
            )
            #expect(h.origin.requests("/br/seg3.mp4").map(\.range) == ["bytes=\(start)-"])

            // Made: a later player gets the finished segment's bytes, with its length.
            let later = try await h.get(h.url("/br/seg3.mp4"), headers: [("Range", "bytes=\(start)-")])
            #expect(
                later.status == 206
                    && later.headers.first(name: "content-range") == "bytes \(start)-\(length - 1)/\(length)")
            #expect(
                later.body.readableBytes == Int(length - start)
                    && segment.firstMismatch(in: later.body, at: start) == nil)
        }
    }
}
