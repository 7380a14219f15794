// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// A master playlist filtered to what is held (issue 51's "serve only what is held"), as a
/// pure function over real-world shapes: three variants sharing one audio group, audio in two
/// languages, subtitles in two (one `FORCED`), closed captions in the video, I-frame playlists.
@Suite(.stallLimit, .cpuBound) struct HLSRenditionFilterTests {
    static let base = URL(string: "https://cdn.example/show/master.m3u8")!

    static let master = """
        #EXTM3U
        #EXT-X-INDEPENDENT-SEGMENTS
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="fr",NAME="Français",URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English",DEFAULT=YES,URI="subs/en.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="de",NAME="Deutsch",FORCED=YES,URI="subs/de.m3u8"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",LANGUAGE="en",NAME="CC",INSTREAM-ID="CC1"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aud",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        low/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2500000,RESOLUTION=1280x720,AUDIO="aud",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        mid/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=6000000,RESOLUTION=1920x1080,AUDIO="aud",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        high/index.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,URI="low/iframes.m3u8"
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=300000,URI="high/iframes.m3u8"

        """

    static func filtered(_ text: String, holding held: Set<String>) throws -> String? {
        let playlist = try HLSPlaylist(parsing: Array(text.utf8))
        return playlist.filteredMaster(base: base) { url in held.contains(String(url.path.dropFirst("/show/".count))) }
    }

    @Test func aLowVariantOneAudioOneSubtitleKeepsExactlyThose() throws {
        let output = try #require(
            try Self.filtered(Self.master, holding: ["low/index.m3u8", "audio/en.m3u8", "subs/en.m3u8"]))
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("#EXT-X-STREAM-INF") }.count == 1)
        #expect(
            lines.contains("low/index.m3u8") && !lines.contains("mid/index.m3u8") && !lines.contains("high/index.m3u8"))
        #expect(output.contains("audio/en.m3u8") && !output.contains("audio/fr.m3u8"))
        #expect(output.contains("subs/en.m3u8") && !output.contains("subs/de.m3u8"))
        #expect(output.contains("CLOSED-CAPTIONS,GROUP-ID=\"cc\""), "captions in the video stay")
        #expect(!output.contains("I-FRAME"))
        // Every other line is as it was, in its place.
        let original = Self.master.split(separator: "\n").map(String.init)
        #expect(lines.allSatisfy(original.contains))
        // It parses again, and names only what is held.
        let again = try HLSPlaylist(parsing: Array(output.utf8))
        #expect(again.variants.map(\.uri) == ["low/index.m3u8"])
        #expect(Set(again.renditions.map(\.uri)) == ["audio/en.m3u8", "subs/en.m3u8"])
    }

    @Test func aVariantWhoseAudioIsNotHeldIsLeftOutAndMissingSubtitlesAreTakenOff() throws {
        // No audio rendition held: no variant can play its sound.
        #expect(try Self.filtered(Self.master, holding: ["low/index.m3u8", "mid/index.m3u8"]) == nil)
        // Audio held, no subtitles: the variants lose their SUBTITLES reference, nothing else.
        let output = try #require(
            try Self.filtered(Self.master, holding: ["mid/index.m3u8", "audio/fr.m3u8", "high/iframes.m3u8"]))
        #expect(
            output.contains(
                "#EXT-X-STREAM-INF:BANDWIDTH=2500000,RESOLUTION=1280x720,AUDIO=\"aud\",CLOSED-CAPTIONS=\"cc\"\nmid/index.m3u8\n"
            ))
        #expect(!output.contains("SUBTITLES"))
        #expect(output.contains("URI=\"high/iframes.m3u8\"") && !output.contains("low/iframes.m3u8"))
        #expect(output.contains("audio/fr.m3u8") && !output.contains("audio/en.m3u8"))
    }

    @Test func audioOnlyVariantsAndMuxedAudio() throws {
        let audioOnly = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.5"
            aac/64.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=128000,CODECS="mp4a.40.2"
            aac/128.m3u8

            """
        let output = try #require(try Self.filtered(audioOnly, holding: ["aac/128.m3u8"]))
        #expect(output == "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=128000,CODECS=\"mp4a.40.2\"\naac/128.m3u8\n")
        // A group whose renditions name no URI is in the variant's own stream: it stays.
        let muxed = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="main",NAME="Main",DEFAULT=YES
            #EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO="main"
            v.m3u8

            """
        #expect(try Self.filtered(muxed, holding: ["v.m3u8"]) == muxed)
    }

    @Test func holdingEverythingChangesNothingAndAMediaPlaylistIsNotAMaster() throws {
        let all: Set<String> = [
            "low/index.m3u8", "mid/index.m3u8", "high/index.m3u8", "audio/en.m3u8", "audio/fr.m3u8", "subs/en.m3u8",
            "subs/de.m3u8",
            "low/iframes.m3u8", "high/iframes.m3u8",
        ]
        #expect(try Self.filtered(Self.master, holding: all) == Self.master)
        #expect(try Self.filtered("#EXTM3U\n#EXTINF:4,\na.ts\n#EXT-X-ENDLIST\n", holding: ["a.ts"]) == nil)
    }

    /// Random held sets: the output parses, names only held playlists, keeps every held variant
    /// whose audio is held, and drops no line that names nothing.
    @Test func randomHeldSetsGiveAPlayableMasterOfWhatIsHeld() throws {
        let uris = [
            "low/index.m3u8", "mid/index.m3u8", "high/index.m3u8", "audio/en.m3u8", "audio/fr.m3u8", "subs/en.m3u8",
            "subs/de.m3u8",
            "low/iframes.m3u8", "high/iframes.m3u8",
        ]
        var random = SplitMix(seed: 51)
        for _ in 0..<500 {
            let held = Set(uris.filter { _ in random.next() % 2 == 0 })
            let audioHeld = held.contains("audio/en.m3u8") || held.contains("audio/fr.m3u8")
            let variantsHeld = uris.prefix(3).filter(held.contains)
            guard let output = try Self.filtered(Self.master, holding: held) else {
                #expect(!audioHeld || variantsHeld.isEmpty, "nothing left although \(held) is held")
                continue
            }
            let again = try HLSPlaylist(parsing: Array(output.utf8))
            #expect(again.variants.map(\.uri) == variantsHeld)
            #expect(again.renditions.allSatisfy { held.contains($0.uri) })
            #expect(output.contains("#EXT-X-INDEPENDENT-SEGMENTS\n") && output.contains("INSTREAM-ID=\"CC1\""))
            #expect(
                output.contains("SUBTITLES=\"subs\"")
                    == (held.contains("subs/en.m3u8") || held.contains("subs/de.m3u8")))
        }
    }

    /// Found by `filteredMastersParseAgainAndNameOnlyWhatIsHeld`: an `EXT-X-STREAM-INF` with no
    /// attribute list still makes a variant of the URI line after it, which the filter let
    /// through unchecked.
    @Test func aVariantTagWithoutAttributesIsFilteredByItsURI() throws {
        let text =
            "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000\nlow/index.m3u8\n#EXT-X-STREAM-INF\n:BANDWIDTH=2560000\n/show/high.m3u8\n"
        let output = try #require(try Self.filtered(text, holding: ["low/index.m3u8"]))
        #expect(output == "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000\nlow/index.m3u8\n/show/high.m3u8\n")
        #expect(try HLSPlaylist(parsing: Array(output.utf8)).variants.map(\.uri) == ["low/index.m3u8"])
    }
}
