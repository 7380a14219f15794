// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// What manifests say serves the same bytes, and how a URL finds its alternates.
@Suite(.stallLimit) struct LearnedAlternatesTests {
    static func url(_ text: String) -> URL { URL(string: text)! }

    @Test func aURLUnderOneMemberHasItsAlternatesUnderTheOthers() {
        var learned = LearnedAlternates()
        learned.learn([Self.url("https://a.example/v/index.m3u8"), Self.url("https://b.example/w/index.m3u8")])
        #expect(
            learned.alternates(of: Self.url("https://a.example/v/index.m3u8?t=1")) == [
                Self.url("https://b.example/w/index.m3u8?t=1")
            ])
        #expect(
            learned.alternates(of: Self.url("https://a.example/v/seg7.ts")) == [Self.url("https://b.example/w/seg7.ts")]
        )
        #expect(
            learned.alternates(of: Self.url("https://b.example/w/x/seg.ts")) == [
                Self.url("https://a.example/v/x/seg.ts")
            ])
        #expect(
            learned.alternates(of: Self.url("https://a.example/v/index.m3u8x")) == [
                Self.url("https://b.example/w/index.m3u8x")
            ], "by its folder")
        #expect(learned.alternates(of: Self.url("https://a.example/other/seg.ts")).isEmpty)
    }

    @Test func aGroupSharingAMemberReplacesTheOldOneAndTheCountIsBounded() {
        var learned = LearnedAlternates()
        learned.learn([Self.url("https://a.example/v/"), Self.url("https://b.example/v/")])
        learned.learn([Self.url("https://a.example/v/"), Self.url("https://c.example/v/")])
        #expect(learned.alternates(of: Self.url("https://a.example/v/s.ts")) == [Self.url("https://c.example/v/s.ts")])
        for index in 0..<(LearnedAlternates.limit + 10) {
            learned.learn([Self.url("https://x\(index).example/"), Self.url("https://y\(index).example/")])
        }
        #expect(learned.groups.count == LearnedAlternates.limit)
    }

    @Test func mastersNameRedundantVariantsPathwaysAndStableRenditions() throws {
        let master = try HLSPlaylist(
            parsing: Array(
                """
                #EXTM3U
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="en",STABLE-RENDITION-ID="en",URI="a/en.m3u8"
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="b",NAME="en",STABLE-RENDITION-ID="en",URI="https://b.example/en.m3u8"
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="c",NAME="en",URI="c/en.m3u8"
                #EXT-X-STREAM-INF:BANDWIDTH=1000,RESOLUTION=640x360,AUDIO="a"
                low.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=2000,STABLE-VARIANT-ID="hi",PATHWAY-ID="A",AUDIO="a"
                hi.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=2000,STABLE-VARIANT-ID="hi",PATHWAY-ID="B",AUDIO="b"
                https://b.example/hi.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=1000,RESOLUTION=640x360,AUDIO="b"
                https://backup.example/low.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=1001,RESOLUTION=640x360
                other.m3u8
                """.utf8))
        let groups = master.sameStreams(base: Self.url("https://a.example/show/master.m3u8"))
        #expect(
            groups == [
                [Self.url("https://a.example/show/a/en.m3u8"), Self.url("https://b.example/en.m3u8")],
                [Self.url("https://a.example/show/low.m3u8"), Self.url("https://backup.example/low.m3u8")],
                [Self.url("https://a.example/show/hi.m3u8"), Self.url("https://b.example/hi.m3u8")],
            ])
    }

    @Test func manifestsNameSiblingBaseURLsResolvedAgainstTheirParent() throws {
        let manifest = try DASHManifest(
            parsing: Array(
                """
                <MPD><BaseURL>https://a.example/v/</BaseURL><BaseURL>../w/</BaseURL>\
                <Period><AdaptationSet><BaseURL>x/</BaseURL><BaseURL>y/</BaseURL></AdaptationSet>\
                <AdaptationSet><BaseURL>only/</BaseURL></AdaptationSet></Period></MPD>
                """.utf8))
        #expect(
            manifest.siblingBases(base: Self.url("https://origin.example/show/m.mpd")) == [
                [Self.url("https://a.example/v/"), Self.url("https://origin.example/w/")],
                [Self.url("https://a.example/v/x/"), Self.url("https://a.example/v/y/")],
            ])
    }
}
