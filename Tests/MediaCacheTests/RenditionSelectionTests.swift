// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Which renditions a choice takes, as pure functions over parsed playlists and manifests,
/// in the shapes real services publish.
@Suite(.stallLimit) struct RenditionSelectionTests {
    static let base = URL(string: "https://cdn.example/show/master.m3u8")!

    /// The file names (last two path parts) of what `choice` takes of `master`.
    static func chosen(_ master: String, _ choice: RenditionChoice) throws -> [String] {
        let playlist = try HLSPlaylist(parsing: Array(master.utf8))
        return try choice.renditions(of: playlist, base: base).map {
            $0.url.pathComponents.suffix(2).joined(separator: "/")
        }
    }

    /// Three heights sharing one audio group in two languages, subtitles in two with a forced
    /// track each, closed captions in the picture, I-frame and image playlists (an Apple-style
    /// catalogue master).
    static let catalogue = """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en",NAME="English",DEFAULT=YES,AUTOSELECT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="fr-CA",NAME="Français",AUTOSELECT=YES,URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English",AUTOSELECT=YES,URI="subs/en.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="en",NAME="English (forced)",FORCED=YES,AUTOSELECT=YES,URI="subs/en-forced.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="fr",NAME="Français",AUTOSELECT=YES,URI="subs/fr.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",LANGUAGE="fr",NAME="Français (forcé)",FORCED=YES,AUTOSELECT=YES,URI="subs/fr-forced.m3u8"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",LANGUAGE="en",NAME="CC",INSTREAM-ID="CC1"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        v360/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=3000000,RESOLUTION=1280x720,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        v720/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=6000000,RESOLUTION=1920x1080,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        v1080/index.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,RESOLUTION=640x360,URI="v360/iframes.m3u8"
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=300000,RESOLUTION=1280x720,URI="v720/iframes.m3u8"
        #EXT-X-IMAGE-STREAM-INF:BANDWIDTH=20000,RESOLUTION=320x180,CODECS="jpeg",URI="thumbs/small.m3u8"
        #EXT-X-IMAGE-STREAM-INF:BANDWIDTH=60000,RESOLUTION=640x360,CODECS="jpeg",URI="thumbs/large.m3u8"
        """

    /// (Forced subtitles in a chosen audio language always come along: they say what a viewer
    /// of that language would not understand, shown whether or not subtitles are on.)
    @Test(arguments: [
        // (choice, what it takes)
        (RenditionChoice(), ["v360/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8"]),
        (RenditionChoice(variants: [.atMostHeight(720)]), ["v720/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8"]),
        (RenditionChoice(variants: [.atMostHeight(200)]), ["v360/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8"]),
        (
            RenditionChoice(variants: [.atMostHeight(4000)]),
            ["v1080/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8"]
        ),
        // A language tag takes its regions (fr takes fr-CA).
        (RenditionChoice(audio: .languages(["fr"])), ["v360/index.m3u8", "audio/fr.m3u8", "subs/fr-forced.m3u8"]),
        (
            RenditionChoice(audio: .all),
            ["v360/index.m3u8", "audio/en.m3u8", "audio/fr.m3u8", "subs/en-forced.m3u8", "subs/fr-forced.m3u8"]
        ),
        (
            RenditionChoice(subtitles: .languages(["en"])),
            ["v360/index.m3u8", "audio/en.m3u8", "subs/en.m3u8", "subs/en-forced.m3u8"]
        ),
        (
            RenditionChoice(audio: .languages(["fr"]), subtitles: .languages(["en"])),
            ["v360/index.m3u8", "audio/fr.m3u8", "subs/en.m3u8", "subs/fr-forced.m3u8"]
        ),
        (
            RenditionChoice(subtitles: .all),
            ["v360/index.m3u8", "audio/en.m3u8", "subs/en.m3u8", "subs/fr.m3u8", "subs/en-forced.m3u8"]
        ),
        // Names match as well as tags, without case.
        (
            RenditionChoice(audio: .languages(["FRANÇAIS"])),
            ["v360/index.m3u8", "audio/fr.m3u8", "subs/fr-forced.m3u8"]
        ),
        // Trick play: the I-frame playlist of each variant's height (else the lightest), the lightest images.
        (
            RenditionChoice(variants: [.atMostHeight(720)], trickPlay: true),
            ["v720/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8", "v720/iframes.m3u8", "thumbs/small.m3u8"]
        ),
        (
            RenditionChoice(variants: [.highestBandwidth], trickPlay: true),
            ["v1080/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8", "v360/iframes.m3u8", "thumbs/small.m3u8"]
        ),
        // Two variants chosen (a pin extended with another quality).
        (
            RenditionChoice(variants: [.lowestBandwidth, .highestBandwidth]),
            ["v360/index.m3u8", "v1080/index.m3u8", "audio/en.m3u8", "subs/en-forced.m3u8"]
        ),
    ])
    func aCatalogueMasterIsChosenFrom(_ choice: RenditionChoice, _ expected: [String]) throws {
        #expect(try Self.chosen(Self.catalogue, choice) == expected)
    }

    @Test func aLanguageTheAssetLacksIsRefusedNamingWhatItHas() throws {
        let playlist = try HLSPlaylist(parsing: Array(Self.catalogue.utf8))
        #expect(throws: RenditionSelectionError(message: "The asset has no audio in de; it has en, fr-CA.")) {
            try RenditionChoice(audio: .languages(["de"])).renditions(of: playlist, base: Self.base)
        }
        #expect(throws: RenditionSelectionError.self) {
            try RenditionChoice(subtitles: .languages(["ja"])).renditions(of: playlist, base: Self.base)
        }
    }

    /// Each variant listed once per audio codec (an AAC group and an AC-3 group): the audio
    /// comes from the chosen variant's group only.
    @Test func variantsInTwoAudioGroupsTakeTheirOwnGroup() throws {
        let master = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en",NAME="English",DEFAULT=YES,URI="aac/en.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="ac3",LANGUAGE="en",NAME="English",DEFAULT=YES,URI="ac3/en.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=2000000,RESOLUTION=1280x720,CODECS="avc1.64001f,mp4a.40.2",AUDIO="aac"
            v720/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2400000,RESOLUTION=1280x720,CODECS="avc1.64001f,ac-3",AUDIO="ac3"
            v720/index.m3u8
            """
        #expect(try Self.chosen(master, RenditionChoice(audio: .all)) == ["v720/index.m3u8", "aac/en.m3u8"])
        #expect(
            try Self.chosen(master, RenditionChoice(variants: [.highestBandwidth], audio: .all)) == [
                "v720/index.m3u8", "ac3/en.m3u8",
            ])
    }

    /// An audio-only master (a podcast or a radio stream: `CODECS` with no picture, no
    /// `RESOLUTION`): a height cap takes the first; audio-only variants beside video ones are
    /// passed over by a height cap.
    @Test func audioOnlyVariantsAndHeightCaps() throws {
        let audioOnly = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.5"
            a64/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=128000,CODECS="mp4a.40.2"
            a128/index.m3u8
            """
        #expect(try Self.chosen(audioOnly, RenditionChoice(variants: [.atMostHeight(720)])) == ["a64/index.m3u8"])
        #expect(try Self.chosen(audioOnly, RenditionChoice(variants: [.highestBandwidth])) == ["a128/index.m3u8"])
        let mixed = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.5"
            a64/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=640x360
            v360/index.m3u8
            """
        #expect(try Self.chosen(mixed, RenditionChoice(variants: [.atMostHeight(720)])) == ["v360/index.m3u8"])
    }

    /// Closed captions are carried in the picture: nothing to take, and the filtered master
    /// keeps their rendition and the variant's reference to it.
    @Test func closedCaptionsStayWithThePicture() throws {
        let playlist = try HLSPlaylist(parsing: Array(Self.catalogue.utf8))
        let chosen = try RenditionChoice(variants: [.atMostHeight(720)]).renditions(of: playlist, base: Self.base)
        #expect(!chosen.contains { $0.url.absoluteString.contains("cc") })
        let held = Set(chosen.map(\.url))
        let filtered = try #require(playlist.filteredMaster(base: Self.base, isHeld: held.contains))
        #expect(filtered.contains("TYPE=CLOSED-CAPTIONS") && filtered.contains("CLOSED-CAPTIONS=\"cc\""))
        #expect(
            filtered.contains("v720/index.m3u8") && !filtered.contains("v1080") && !filtered.contains("audio/fr")
                && !filtered.contains("iframes"))
        #expect(
            filtered.contains("subs/en-forced.m3u8") && !filtered.contains("subs/en.m3u8")
                && filtered.contains("SUBTITLES=\"subs\""))
        let pictureOnly = try #require(
            playlist.filteredMaster(base: Self.base, isHeld: { held.contains($0) && !$0.path.contains("subs") }))
        #expect(
            !pictureOnly.contains("SUBTITLES=\"subs\"") && pictureOnly.contains("CLOSED-CAPTIONS=\"cc\""),
            "no subtitle held: the reference goes")
    }

    /// A DASH presentation as packagers write one: a video set of three heights, audio in two
    /// languages (English with role `main`), subtitles with a forced French set, a thumbnail
    /// (image) set and a trick-mode video set.
    static let presentation = """
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S">
          <Period>
            <AdaptationSet id="1" contentType="video" mimeType="video/mp4">
              <Representation id="v360" bandwidth="800000" height="360"><BaseURL>v360.mp4</BaseURL></Representation>
              <Representation id="v720" bandwidth="3000000" height="720"><BaseURL>v720.mp4</BaseURL></Representation>
              <Representation id="v1080" bandwidth="6000000" height="1080"><BaseURL>v1080.mp4</BaseURL></Representation>
            </AdaptationSet>
            <AdaptationSet id="2" mimeType="audio/mp4" lang="fr"><Representation id="afr" bandwidth="128000"><BaseURL>afr.mp4</BaseURL></Representation></AdaptationSet>
            <AdaptationSet id="3" mimeType="audio/mp4" lang="en"><Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>
              <Representation id="aen" bandwidth="128000"><BaseURL>aen.mp4</BaseURL></Representation>
            </AdaptationSet>
            <AdaptationSet id="4" contentType="text" mimeType="application/mp4" lang="en"><Representation id="ten" bandwidth="1000" codecs="stpp"><BaseURL>ten.mp4</BaseURL></Representation></AdaptationSet>
            <AdaptationSet id="5" mimeType="text/vtt" lang="fr"><Role schemeIdUri="urn:mpeg:dash:role:2011" value="forced-subtitle"/>
              <Representation id="tfrf" bandwidth="1000"><BaseURL>tfrf.vtt</BaseURL></Representation>
            </AdaptationSet>
            <AdaptationSet id="6" contentType="image" mimeType="image/jpeg"><Representation id="thumbs" bandwidth="10000"><BaseURL>thumbs.jpg</BaseURL></Representation></AdaptationSet>
            <AdaptationSet id="7" mimeType="video/mp4"><EssentialProperty schemeIdUri="http://dashif.org/guidelines/trickmode" value="1"/>
              <Representation id="trick" bandwidth="100000" height="360"><BaseURL>trick.mp4</BaseURL></Representation>
            </AdaptationSet>
          </Period>
        </MPD>
        """

    @Test(arguments: [
        (RenditionChoice(), ["v360", "aen"]),
        (RenditionChoice(variants: [.atMostHeight(720)]), ["v720", "aen"]),
        (RenditionChoice(audio: .languages(["fr"])), ["v360", "afr", "tfrf"]),
        (RenditionChoice(audio: .all, subtitles: .languages(["en"])), ["v360", "afr", "aen", "ten", "tfrf"]),
        (
            RenditionChoice(variants: [.lowestBandwidth, .highestBandwidth], trickPlay: true),
            ["v360", "v1080", "aen", "thumbs", "trick"]
        ),
    ])
    func aPresentationIsChosenFrom(_ choice: RenditionChoice, _ expected: [String]) throws {
        let manifest = try DASHManifest(parsing: Array(Self.presentation.utf8))
        let url = URL(string: "https://cdn.example/show/m.mpd")!
        let chosen = try choice.representations(of: manifest.presentation(base: url), url: url)
        #expect(chosen.map { $0.0.representation ?? "" } == expected)
        #expect(chosen.allSatisfy { $0.1.resources.count == 1 })
    }

    @Test func aPresentationWithoutALanguageSaysSo() throws {
        let manifest = try DASHManifest(parsing: Array(Self.presentation.utf8))
        let url = URL(string: "https://cdn.example/show/m.mpd")!
        #expect(throws: RenditionSelectionError(message: "The presentation has no audio in de; it has en, fr.")) {
            try RenditionChoice(audio: .languages(["de"])).representations(
                of: manifest.presentation(base: url), url: url)
        }
    }

    @Test func choicesAddUpAndResolveToTheDefaults() {
        let first = RenditionChoice(variants: [.atMostHeight(720)], audio: .languages(["en"]))
        let more = first.adding(
            RenditionChoice(audio: .languages(["FR", "en"]), subtitles: .languages(["fr"]), trickPlay: true))
        #expect(
            more
                == RenditionChoice(
                    variants: [.atMostHeight(720)], audio: .languages(["en", "FR"]), subtitles: .languages(["fr"]),
                    trickPlay: true))
        #expect(
            RenditionChoice().resolved
                == RenditionChoice(variants: [.first], audio: .default, subtitles: RenditionChoice.Languages.none))
        #expect(RenditionChoice().isEmpty && !more.isEmpty)
        #expect(
            RenditionChoice.Languages.default.union(.languages(["fr"]))
                == RenditionChoice.Languages(includesDefault: true, languages: ["fr"])
        )
    }

    /// A job written before renditions were chosen (its JSON names only `variant`) reads as
    /// that variant with the default audio and no subtitles.
    @Test func aJobWrittenBeforeRenditionsReadsAsItsVariant() throws {
        let old = #"{"format":"hls","variant":{"atMost":{"bitsPerSecond":2000000}},"seconds":30}"#
        let asset = try JSONDecoder().decode(DownloadJob.AssetChoice.self, from: Data(old.utf8))
        #expect(
            asset.renditions
                == RenditionChoice(
                    variants: [.atMost(bitsPerSecond: 2_000_000)], audio: .default,
                    subtitles: RenditionChoice.Languages.none))
        #expect(asset.seconds == 30 && asset.variant == .atMost(bitsPerSecond: 2_000_000))
        let again = try JSONDecoder().decode(DownloadJob.AssetChoice.self, from: try JSONEncoder().encode(asset))
        #expect(again == asset)
    }
}
