// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The text work of side-loaded subtitles: the master's new renditions, SRT to WebVTT, and
/// a transport stream's first timestamp.
@Suite(.stallLimit) struct SideLoadedSubtitlesTests {
    static let english = SideLoadedSubtitle(language: "en", url: URL(string: "https://s.example/en.srt")!)!

    static func master(_ text: String, adding tracks: [SideLoadedSubtitle] = [english]) throws -> HLSPlaylist {
        let output = try #require(
            SideLoadedSubtitles.master(try HLSPlaylist(parsing: Array(text.utf8)), adding: tracks))
        return try HLSPlaylist(parsing: Array(output.utf8))
    }

    @Test func variantsWithASubtitleGroupGetTheTrackInTheirGroupWithAFreeName() throws {
        let read = try Self.master(
            """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="en",LANGUAGE="en",URI="en.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=1000,SUBTITLES="subs"
            a.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2000
            b.m3u8
            """)
        #expect(read.variants.map(\.subtitlesGroup) == ["subs", SideLoadedSubtitles.groupID])
        let added = read.renditions.filter { $0.uri == Self.english.url.absoluteString }
        #expect(added.map(\.groupID).sorted() == [SideLoadedSubtitles.groupID, "subs"].sorted())
        #expect(added.first { $0.groupID == "subs" }?.name == "en (2)", "a name is unique in its group")
    }

    /// Found by `mastersWithSideLoadedTracksListThemOnEveryVariant`: a variant tag whose list
    /// ends with a comma got `,,SUBTITLES=`, which no reader takes.
    @Test func aVariantTagEndingWithACommaGetsTheGroupToo() throws {
        let read = try Self.master("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000,\nlow.m3u8\n")
        #expect(read.variants.map(\.subtitlesGroup) == [SideLoadedSubtitles.groupID])
    }

    @Test func aMediaPlaylistGetsNoTracks() throws {
        let media = try HLSPlaylist(parsing: Array("#EXTM3U\n#EXTINF:4,\na.ts\n#EXT-X-ENDLIST\n".utf8))
        #expect(SideLoadedSubtitles.master(media, adding: [Self.english]) == nil)
    }

    @Test func srtBecomesWebVTT() throws {
        let srt =
            "\u{FEFF}1\r\n0:00:01,5 --> 0:00:02,25 X1:10\r\nA <font face=\"x\">b</font> {\\an8}c &amp <tag>\r\n\r\n\r\n2\r\nbroken\r\n\r\n3\r\n01:00:00,000 --> 01:00:01,000\r\n<B>Loud</B>\r\n"
        let vtt = try SubtitleText.webVTT(Array(srt.utf8), mpegts: 126_000)
        #expect(
            vtt
                == "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000\n\n00:00:01.500 --> 00:00:02.250\nA b c &amp;amp &lt;tag&gt;\n\n01:00:00.000 --> 01:00:01.000\n<b>Loud</b>\n"
        )
    }

    @Test func windowsEncodedSRTIsRead() throws {
        let bytes: [UInt8] = Array("1\n00:00:01,000 --> 00:00:02,000\nd".utf8) + [0xE9, 0x6A, 0xE0, 0x0A]
        #expect(try SubtitleText.webVTT(bytes, mpegts: nil).hasSuffix("\ndéjà\n"))
    }

    @Test func aWebVTTFileKeepsItsCuesAndGetsTheMap() throws {
        let vtt =
            "WEBVTT\nX-TIMESTAMP-MAP=LOCAL:00:00:00.000,MPEGTS:1\n\nNOTE kept\n\n00:01.000 --> 00:02.000\n<v A>Hi\n"
        #expect(
            try SubtitleText.webVTT(Array(vtt.utf8), mpegts: 900_000)
                == "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\nNOTE kept\n\n00:01.000 --> 00:02.000\n<v A>Hi\n"
        )
    }

    @Test func filesThatAreNotSubtitlesAreRefusedSayingWhy() {
        for (bytes, reason) in [
            (Array("\u{89}PNG\r\n".utf8), "neither WebVTT nor SRT"),
            (Array("WEBVTTX\n".utf8), "neither WebVTT nor SRT"),
            ([UInt8](repeating: 0x41, count: SideLoadedSubtitles.maximumFileSize + 1), "at most"),
        ] {
            #expect(throws: SubtitleText.Failure.self) { try SubtitleText.webVTT(bytes, mpegts: nil) }
            #expect((try? SubtitleText.webVTT(bytes, mpegts: nil)) == nil)
            do {
                _ = try SubtitleText.webVTT(bytes, mpegts: nil)
            } catch {
                #expect(error.description.contains(reason), "\(error)")
            }
        }
    }

    @Test func aTransportStreamsFirstTimestampIsRead() {
        #expect(MPEGTSTimestamps.earliestPTS(SyntheticTransportStream.segment(pts: 8_589_934_591)) == 8_589_934_591)
        #expect(MPEGTSTimestamps.earliestPTS(SyntheticTransportStream.segment(pts: 126_000)) == 126_000)
        #expect(MPEGTSTimestamps.earliestPTS(Array(repeating: 0x47, count: 100)) == nil)
        #expect(MPEGTSTimestamps.earliestPTS(Array("#EXTM3U".utf8)) == nil)
    }

    @Test func subtitleArgumentsAreRead() {
        let track = SideLoadedSubtitle(parsing: "pt-BR=https://s.example/a,b.srt?x=1,Português")
        #expect(track?.language == "pt-BR" && track?.name == "Português")
        #expect(track?.url.absoluteString == "https://s.example/a,b.srt?x=1")
        #expect(SideLoadedSubtitle(parsing: "en=https://s.example/en.srt")?.name == "en")
        for refused in [
            "english=https://s.example/a.srt", "en=ftp://s.example/a.srt", "en", "=https://s/a", "e=https://s/a",
        ] {
            #expect(SideLoadedSubtitle(parsing: refused) == nil, "\(refused)")
        }
    }
}
