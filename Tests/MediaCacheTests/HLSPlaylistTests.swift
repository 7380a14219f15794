// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The playlist parser and rewriter, without I/O: every tag that names a resource, relative
/// URIs resolved by RFC 3986, every other byte kept, and bad playlists refused with a reason.
@Suite(.stallLimit) struct HLSPlaylistTests {
    static let base = URL(string: "https://cdn.example/video/hls/720p/index.m3u8?token=abc")!

    /// The proxy's mapping in miniature: the resolved URL, marked, so tests can read it back.
    static func mark(_ url: URL, _ tag: String?) -> String { "P(" + url.absoluteString + ")" }

    static func rewrite(_ text: String, base: URL = base) throws -> String {
        try HLSPlaylist(parsing: Array(text.utf8)).rewritten(base: base, map: mark)
    }

    @Test func uriLinesResolveByRFC3986() throws {
        let playlist = """
            #EXTM3U
            #EXT-X-TARGETDURATION:6
            #EXTINF:6.0,
            seg001.ts
            #EXTINF:6.0,
            ../480p/seg002.ts
            #EXTINF:6.0,
            /root/seg003.ts
            #EXTINF:6.0,
            https://other.example/abs/seg004.ts?sig=1&x=%2F
            #EXTINF:6.0,
            seg005.ts?part=5
            #EXTINF:6.0,
            //cdn2.example/seg006.ts
            #EXT-X-ENDLIST

            """
        let out = try Self.rewrite(playlist)
        #expect(
            out == """
                #EXTM3U
                #EXT-X-TARGETDURATION:6
                #EXTINF:6.0,
                P(https://cdn.example/video/hls/720p/seg001.ts)
                #EXTINF:6.0,
                P(https://cdn.example/video/hls/480p/seg002.ts)
                #EXTINF:6.0,
                P(https://cdn.example/root/seg003.ts)
                #EXTINF:6.0,
                P(https://other.example/abs/seg004.ts?sig=1&x=%2F)
                #EXTINF:6.0,
                P(https://cdn.example/video/hls/720p/seg005.ts?part=5)
                #EXTINF:6.0,
                P(https://cdn2.example/seg006.ts)
                #EXT-X-ENDLIST

                """)
        let parsed = try HLSPlaylist(parsing: Array(playlist.utf8))
        #expect(parsed.segments.count == 6 && parsed.segments.allSatisfy { $0.duration == 6 })
        #expect(parsed.isFinal && !parsed.isMaster && parsed.targetDuration == 6)
    }

    /// Every tag with a `URI` attribute, with other attributes (and commas inside quotes) around it.
    @Test(arguments: [
        (
            "EXT-X-KEY", #"METHOD=AES-128,URI="key.bin",IV=0x0123456789ABCDEF0123456789ABCDEF"#,
            #"METHOD=AES-128,URI="P(https://cdn.example/video/hls/720p/key.bin)",IV=0x0123456789ABCDEF0123456789ABCDEF"#
        ),
        (
            "EXT-X-SESSION-KEY", #"METHOD=SAMPLE-AES,URI="../keys/k1",KEYFORMAT="identity""#,
            #"METHOD=SAMPLE-AES,URI="P(https://cdn.example/video/hls/keys/k1)",KEYFORMAT="identity""#
        ),
        (
            "EXT-X-MAP", #"URI="init.mp4",BYTERANGE="720@0""#,
            #"URI="P(https://cdn.example/video/hls/720p/init.mp4)",BYTERANGE="720@0""#
        ),
        (
            "EXT-X-MEDIA", #"TYPE=AUDIO,GROUP-ID="aac",NAME="English, main",URI="/audio/en.m3u8""#,
            #"TYPE=AUDIO,GROUP-ID="aac",NAME="English, main",URI="P(https://cdn.example/audio/en.m3u8)""#
        ),
        (
            "EXT-X-I-FRAME-STREAM-INF", #"BANDWIDTH=86000,URI="iframes.m3u8""#,
            #"BANDWIDTH=86000,URI="P(https://cdn.example/video/hls/720p/iframes.m3u8)""#
        ),
        (
            "EXT-X-SESSION-DATA", #"DATA-ID="com.example.lyrics",URI="lyrics.json""#,
            #"DATA-ID="com.example.lyrics",URI="P(https://cdn.example/video/hls/720p/lyrics.json)""#
        ),
        (
            "EXT-X-PART", #"DURATION=0.5,URI="part1.1.mp4",INDEPENDENT=YES"#,
            #"DURATION=0.5,URI="P(https://cdn.example/video/hls/720p/part1.1.mp4)",INDEPENDENT=YES"#
        ),
        (
            "EXT-X-PRELOAD-HINT", #"TYPE=PART,URI="part1.2.mp4""#,
            #"TYPE=PART,URI="P(https://cdn.example/video/hls/720p/part1.2.mp4)""#
        ),
        (
            "EXT-X-RENDITION-REPORT", #"URI="../1080p/index.m3u8",LAST-MSN=7"#,
            #"URI="P(https://cdn.example/video/hls/1080p/index.m3u8)",LAST-MSN=7"#
        ),
    ])
    func uriAttributesAreRewrittenAndNothingElse(tag: String, attributes: String, expected: String) throws {
        let out = try Self.rewrite("#EXTM3U\n#\(tag):\(attributes)\n")
        #expect(out == "#EXTM3U\n#\(tag):\(expected)\n")
    }

    /// Found by the fuzz target (seeds 1–3, a million inputs): a last line cut after its CR
    /// kept the CR in the URI, which became `%0D` in the rewritten URL; the CR is the line's end.
    @Test func aLastLineCutAfterItsCarriageReturnKeepsItAsItsEnd() throws {
        #expect(
            try Self.rewrite("#EXTM3U\r\n#EXTINF:1,\r\na.ts\r")
                == "#EXTM3U\r\n#EXTINF:1,\r\nP(https://cdn.example/video/hls/720p/a.ts)\r")
        #expect(
            try Self.rewrite("#EXTM3U\n#EXTINF:1,\na.ts\n\r")
                == "#EXTM3U\n#EXTINF:1,\nP(https://cdn.example/video/hls/720p/a.ts)\n\r")
    }

    /// Found by the fuzz target: an attribute name with a space before its `=` is still the
    /// `URI` (a lenient player reads it so), so it is rewritten rather than left naming the origin.
    @Test func aSpaceBeforeTheEqualsSignIsStillTheURI() throws {
        let out = try Self.rewrite("#EXTM3U\n#EXT-X-PART:DURATION=0.5,URI =\"p.mp4\",INDEPENDENT=YES\n")
        #expect(
            out
                == "#EXTM3U\n#EXT-X-PART:DURATION=0.5,URI =\"P(https://cdn.example/video/hls/720p/p.mp4)\",INDEPENDENT=YES\n"
        )
    }

    @Test func nonHTTPURIsAndUnknownTagsAreLeftAlone() throws {
        let playlist =
            "#EXTM3U\r\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://key-id-42\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\r\n"
            + "#EXT-X-SESSION-DATA:DATA-ID=\"x\",URI=\"data:text/plain;base64,SGk=\"\r\n#EXT-X-FUTURE-TAG:URI=\"kept.bin\"\r\n"
            + "# a comment with URI=\"x\"\r\n#EXT-X-MEDIA-SEQUENCE:1234\r\n#EXTINF:4.004,title, with comma\r\nseg.ts\r\n"
        let out = try Self.rewrite(playlist)
        #expect(
            out
                == playlist.replacingOccurrences(
                    of: "\r\nseg.ts\r\n", with: "\r\nP(https://cdn.example/video/hls/720p/seg.ts)\r\n"))
        #expect(try HLSPlaylist(parsing: Array(playlist.utf8)).mediaSequence == 1234)
    }

    @Test func masterPlaylistVariantsAreReadWithTheirBandwidth() throws {
        let playlist = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360,CODECS="avc1.42e00a,mp4a.40.2"
            low/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2560000,RESOLUTION=1280x720
            high/index.m3u8
            """
        let parsed = try HLSPlaylist(parsing: Array(playlist.utf8))
        #expect(
            parsed.variants == [
                .init(bandwidth: 1_280_000, uri: "low/index.m3u8", height: 360),
                .init(bandwidth: 2_560_000, uri: "high/index.m3u8", height: 720),
            ])
        #expect(parsed.isMaster && parsed.isFinal && parsed.segments.isEmpty)
        // No final line end: none is added.
        #expect(try Self.rewrite(playlist).hasSuffix("P(https://cdn.example/video/hls/720p/high/index.m3u8)"))
    }

    /// The mapping is told which tag each URI is in (the proxy keeps keys out of the store).
    @Test func theMappingIsToldEachURIsTag() throws {
        let playlist =
            "#EXTM3U\n#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"s.key\"\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.key\"\n#EXTINF:2,\na.m4s\n"
        var seen: [String] = []
        _ = try HLSPlaylist(parsing: Array(playlist.utf8)).rewritten(base: Self.base) { url, tag in
            seen.append("\(tag ?? "line") \(url.lastPathComponent)")
            return url.absoluteString
        }
        #expect(seen == ["EXT-X-SESSION-KEY s.key", "EXT-X-MAP init.mp4", "EXT-X-KEY k.key", "line a.m4s"])
    }

    /// Audio renditions with their group, variants with the group they use, and the init
    /// section in force for each segment (with its byte range).
    @Test func renditionsAndInitSectionsAreRead() throws {
        let master = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",DEFAULT=YES,URI="audio/en.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="fr",URI="audio/fr.m3u8"
            #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="cc1",INSTREAM-ID="CC1"
            #EXT-X-STREAM-INF:BANDWIDTH=500000,AUDIO="aud"
            v.m3u8
            """
        let parsed = try HLSPlaylist(parsing: Array(master.utf8))
        #expect(
            parsed.renditions == [
                .init(type: "AUDIO", groupID: "aud", uri: "audio/en.m3u8", isDefault: true, name: "en"),
                .init(type: "AUDIO", groupID: "aud", uri: "audio/fr.m3u8", isDefault: false, name: "fr"),
            ])
        #expect(parsed.variants == [.init(bandwidth: 500_000, uri: "v.m3u8", audioGroup: "aud")])
        let media = """
            #EXTM3U
            #EXTINF:2,
            a.ts
            #EXT-X-MAP:URI="all.mp4",BYTERANGE="720@0"
            #EXTINF:2,
            #EXT-X-BYTERANGE:1000@720
            all.mp4
            #EXT-X-MAP:URI="init2.mp4"
            #EXTINF:2,
            b.m4s
            """
        let segments = try HLSPlaylist(parsing: Array(media.utf8)).segments
        #expect(
            segments.map(\.initSection) == [
                nil, .init(uri: "all.mp4", byteRange: ByteRange(0, 720)), .init(uri: "init2.mp4", byteRange: nil),
            ])
    }

    @Test func byteRangeSegmentsOfOneFile() throws {
        let playlist = """
            #EXTM3U
            #EXT-X-VERSION:4
            #EXTINF:10,
            #EXT-X-BYTERANGE:75232@0
            all.ts
            #EXTINF:10,
            #EXT-X-BYTERANGE:82112
            all.ts
            #EXTINF:10,
            #EXT-X-BYTERANGE:69864@200000
            all.ts
            #EXT-X-ENDLIST
            """
        let parsed = try HLSPlaylist(parsing: Array(playlist.utf8))
        #expect(
            parsed.segments.map(\.byteRange) == [
                ByteRange(0, 75232), ByteRange(75232, 157_344), ByteRange(200_000, 269_864),
            ])
        #expect(Set(parsed.segments.map(\.uri)) == ["all.ts"])
    }

    @Test func liveAndEventPlaylistsAreNotFinal() throws {
        let live = try HLSPlaylist(
            parsing: Array("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:10\n#EXTINF:4,\na.ts\n".utf8))
        #expect(!live.isFinal && live.mediaSequence == 10)
        let event = try HLSPlaylist(parsing: Array("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:EVENT\n#EXTINF:4,\na.ts\n".utf8))
        #expect(!event.isFinal)
        let vod = try HLSPlaylist(parsing: Array("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:4,\na.ts\n".utf8))
        #expect(vod.isFinal)
    }

    @Test func aByteOrderMarkIsToleratedAndKept() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("#EXTM3U\n#EXTINF:1,\na.ts\n".utf8)
        #expect(HLSPlaylist.looksLikePlaylist(bytes))
        let out = try HLSPlaylist(parsing: bytes).rewritten(base: Self.base, map: Self.mark)
        #expect(
            Array(out.utf8) == [0xEF, 0xBB, 0xBF]
                + Array("#EXTM3U\n#EXTINF:1,\nP(https://cdn.example/video/hls/720p/a.ts)\n".utf8))
    }

    @Test func percentEncodingKeepsOnlyUnreservedBytes() {
        #expect(
            HLSPlaylist.percentEncoded("https://a.example:8443/p/a b.ts?x=1&y=é~_-.")
                == "https%3A%2F%2Fa.example%3A8443%2Fp%2Fa%20b.ts%3Fx%3D1%26y%3D%C3%A9~_-.")
        for text in ["", "a/b?c=d&e", "%2F%25", "é𝄞", "\u{0}\r\n"] {
            #expect(HLSPlaylist.percentEncoded(text).removingPercentEncoding == text)
        }
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// A bad playlist for a test case; its body is made when the case runs (Swift Testing
    /// describes each argument, and describing 16 MiB took seconds).
    struct BadPlaylist: Sendable, CustomTestStringConvertible {
        var name: String
        var body: @Sendable () -> [UInt8]
        var reason: String
        var testDescription: String { name }
    }

    static let badPlaylists: [BadPlaylist] = [
        .init(name: "no marker", body: { bytes("#EXTINF:1,\na.ts\n") }, reason: "#EXTM3U"),
        .init(name: "not UTF-8", body: { bytes("#EXTM3U\n") + [0xFF, 0xFE, 0x0A] }, reason: "UTF-8"),
        .init(
            name: "unbalanced quote", body: { bytes("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\n") },
            reason: "unbalanced quote"),
        .init(name: "quote inside a value", body: { bytes("#EXTM3U\n#EXT-X-MAP:URI=in\"it.mp4\n") }, reason: "quote"),
        .init(
            name: "absurd byte range",
            body: { bytes("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:99999999999999999999999@0\na.ts\n") },
            reason: "EXT-X-BYTERANGE"),
        .init(
            name: "byte range past the bound",
            body: { bytes("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:1152921504606846976@1\na.ts\n") },
            reason: "EXT-X-BYTERANGE"),
        .init(
            name: "byte range without an offset first",
            body: { bytes("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:100\na.ts\n") }, reason: "offset"),
        .init(
            name: "map without a URI", body: { bytes("#EXTM3U\n#EXT-X-MAP:BYTERANGE=\"10@0\"\n") },
            reason: "EXT-X-MAP needs a URI"),
        .init(
            name: "absurd map byte range",
            body: { bytes("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"1152921504606846976@1\"\n") },
            reason: "BYTERANGE"),
        .init(name: "negative duration", body: { bytes("#EXTM3U\n#EXTINF:-1,\na.ts\n") }, reason: "EXTINF"),
        .init(name: "infinite duration", body: { bytes("#EXTM3U\n#EXTINF:inf,\na.ts\n") }, reason: "EXTINF"),
        .init(
            name: "overlong line",
            body: { bytes("#EXTM3U\n") + [UInt8](repeating: UInt8(ascii: "a"), count: (64 << 10) + 1) },
            reason: "longer than"),
        .init(
            name: "too large", body: { bytes("#EXTM3U\n") + [UInt8](repeating: UInt8(ascii: "\n"), count: 16 << 20) },
            reason: "larger than"),
    ]

    /// Each bad playlist is refused with a reason that names the problem; none traps.
    @Test(arguments: badPlaylists)
    func badPlaylistsAreRefusedWithAReason(_ bad: BadPlaylist) {
        let (name, reason) = (bad.name, bad.reason)
        do {
            _ = try HLSPlaylist(parsing: bad.body())
            Issue.record("\(name): parsed")
        } catch let error as HLSPlaylistError {
            #expect(error.message.contains(reason), "\(name): \(error.message)")
        } catch {
            Issue.record("\(name): \(error)")
        }
    }
}
