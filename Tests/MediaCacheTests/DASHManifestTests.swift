// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Reading and rewriting MPDs: which URLs change and how, what never changes, and what is refused.
@Suite(.stallLimit) struct DASHManifestTests {
    static let base = URL(string: "https://cdn.example/show/m.mpd?token=abc")!

    static func rewrite(_ text: String, base: URL = base) throws -> String {
        try DASHManifest(parsing: Array(text.utf8)).rewritten(base: base) { "P[" + $0.absoluteString + "]" }
    }

    @Test func nestedRelativeBasesAreResolvedAndWrittenAbsolute() throws {
        let text = """
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static">
              <BaseURL>media/</BaseURL>
              <Period><BaseURL>p1/</BaseURL>
                <AdaptationSet><BaseURL>../v/</BaseURL><BaseURL>https://other.example/x/</BaseURL>
                  <Representation id="1"><BaseURL>r1/</BaseURL>
                    <SegmentTemplate media="s-$Number$.m4s" initialization="https://cdn.example/i/$RepresentationID$.mp4"/>
                  </Representation>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let out = try Self.rewrite(text)
        #expect(out.contains("<BaseURL>P[https://cdn.example/show/media/]</BaseURL>"))
        #expect(out.contains("<BaseURL>P[https://cdn.example/show/media/p1/]</BaseURL>"))
        #expect(out.contains("<BaseURL>P[https://cdn.example/show/media/v/]</BaseURL>"))
        // An alternative base at the same level resolves against the parent, not its sibling.
        #expect(out.contains("<BaseURL>P[https://other.example/x/]</BaseURL>"))
        // The first base of a level is what its children resolve against.
        #expect(out.contains("<BaseURL>P[https://cdn.example/show/media/v/r1/]</BaseURL>"))
        // Relative templates stay (they resolve under the rewritten base); absolute ones are mapped.
        #expect(out.contains("media=\"s-$Number$.m4s\""))
        #expect(out.contains("initialization=\"P[https://cdn.example/i/$RepresentationID$.mp4]\""))
        // Nothing else changed: the rest is byte for byte.
        #expect(
            out.hasPrefix(
                "<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\">\n  <BaseURL>"))
    }

    /// An export's rewrite: the representations not chosen left out whole, and every reference
    /// written relative to the base it resolves against (RFC 3986), so that resolved level by
    /// level, as a player does, each names the local path `map` gave.
    @Test func anExportLeavesOutRepresentationsAndWritesReferencesRelative() throws {
        let text = """
            <MPD type="static"><BaseURL>media/</BaseURL>
              <Period><BaseURL>p1/</BaseURL>
                <AdaptationSet><BaseURL>../v/</BaseURL><BaseURL>https://other.example/x/</BaseURL>
                  <Representation id="1" bandwidth="1"><BaseURL>r1/</BaseURL>
                    <SegmentTemplate media="s-$Number$.m4s" initialization="https://cdn.example/i/$RepresentationID$.mp4"/>
                  </Representation>
                  <Representation id="2" bandwidth="2"><BaseURL>r2/</BaseURL><SegmentList><SegmentURL media="https://cdn.example/gone.m4s"/></SegmentList></Representation>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let manifest = try DASHManifest(parsing: Array(text.utf8))
        let representations = manifest.presentation(base: Self.base).periods[0].adaptationSets[0].representations
        #expect(representations.map(\.id) == ["1", "2"])
        let out = manifest.rewritten(base: Self.base, removing: [representations[1].element], relative: true) { url in
            url.host == "cdn.example" ? "o0" + url.path(percentEncoded: false) : url.absoluteString
        }
        #expect(out.contains("<BaseURL>o0/show/media/</BaseURL>"), "\(out)")
        #expect(out.contains("<BaseURL>p1/</BaseURL>"))
        #expect(out.contains("<BaseURL>../v/</BaseURL>"))
        #expect(out.contains("<BaseURL>https://other.example/x/</BaseURL>"))
        #expect(out.contains("<BaseURL>r1/</BaseURL>"))
        #expect(out.contains("initialization=\"../../../../i/$RepresentationID$.mp4\""), "\(out)")
        #expect(!out.contains("r2/") && !out.contains("gone.m4s") && !out.contains("id=\"2\""), "\(out)")
        #expect(out.components(separatedBy: "<Representation").count == 2)
        // What was left is read again as it was, less the one representation.
        let again = try DASHManifest(parsing: Array(out.utf8))
        #expect(again.elements.count == manifest.elements.count - 4)
    }

    @Test(arguments: [
        ("o0/a/b.m4s", "o0/a/", "b.m4s"), ("o0/a/", "o0/a/", "./"), ("o1/x/", "o0/a/", "../../o1/x/"),
        ("https://x.example/", "o0/", "https://x.example/"), ("o0/a/", "", "o0/a/"),
        ("o0/b.mp4", "o0/a/c/", "../../b.mp4"),
    ])
    func referencesBetweenLocalPaths(path: String, folder: String, expected: String) {
        #expect(DASHManifest.relativeReference(to: path, from: folder) == expected)
    }

    @Test func aManifestWithoutABaseGetsTheFolderItCameFrom() throws {
        let out = try Self.rewrite(
            "<MPD><Period><AdaptationSet><SegmentList><SegmentURL media=\"a.m4s\"/><SegmentURL media=\"http://cdn.example/b.m4s?x=1&amp;y=2\"/></SegmentList></AdaptationSet></Period></MPD>"
        )
        #expect(out.hasPrefix("<MPD><BaseURL>P[https://cdn.example/show/]</BaseURL><Period>"), "\(out)")
        #expect(out.contains("media=\"a.m4s\""))
        #expect(
            out.contains("media=\"P[http://cdn.example/b.m4s?x=1&amp;y=2]\""),
            "entities decoded, then escaped again: \(out)")
    }

    @Test func locationsLinksAndTheirNeighbours() throws {
        let text = """
            <MPD type="dynamic" minimumUpdatePeriod="PT2.5S" xmlns:xlink="http://www.w3.org/1999/xlink">
            <Location>next.mpd</Location><PatchLocation ttl="60">patch.mpp</PatchLocation>
            <UTCTiming schemeIdUri="urn:mpeg:dash:utc:http-xsdate:2014" value="https://time.example/now"/>
            <Period xlink:href="remote-period.xml" xlink:actuate="onLoad"/>
            <Period xlink:href="urn:mpeg:dash:resolve-to-zero:2013"/>
            <Period><AdaptationSet><ContentProtection schemeIdUri="urn:uuid:x"><dashif:Laurl xmlns:dashif="https://dashif.org/">https://licence.example/</dashif:Laurl></ContentProtection>
            <!-- <BaseURL>commented/</BaseURL> --><![CDATA[ <BaseURL>cdata/</BaseURL> ]]></AdaptationSet></Period>
            </MPD>
            """
        let manifest = try DASHManifest(parsing: Array(text.utf8))
        #expect(manifest.isDynamic && manifest.minimumUpdatePeriod == 2.5)
        let out = try Self.rewrite(text)
        #expect(out.contains("<Location>P[https://cdn.example/show/next.mpd]</Location>"))
        #expect(out.contains("<PatchLocation ttl=\"60\">P[https://cdn.example/show/patch.mpp]</PatchLocation>"))
        #expect(out.contains("value=\"https://time.example/now\""), "UTCTiming is left alone")
        #expect(out.contains("xlink:href=\"P[https://cdn.example/show/remote-period.xml]\""))
        #expect(out.contains("xlink:href=\"urn:mpeg:dash:resolve-to-zero:2013\""))
        #expect(out.contains(">https://licence.example/</dashif:Laurl>"), "licence URLs are left alone")
        #expect(out.contains("<!-- <BaseURL>commented/</BaseURL> --><![CDATA[ <BaseURL>cdata/</BaseURL> ]]>"))
    }

    /// A callback event's URL (the player fetches it: an ad beacon) leads through the mapping;
    /// another scheme's event data is not a URL and stays; so does an image set's template,
    /// which resolves under the mapped base as any other.
    @Test func callbackEventsAndImageSetsLeadThroughTheMapping() throws {
        let text = """
            <MPD type="static"><Period>
            <EventStream schemeIdUri="urn:mpeg:dash:event:callback:2015" value="1"><Event id="1" messageData="https://beacon.example/t?ad=1"/></EventStream>
            <EventStream schemeIdUri="urn:scte:scte35:2014:xml+bin"><Event id="2" messageData="https://not-a-fetch.example/"/></EventStream>
            <AdaptationSet contentType="image" mimeType="image/jpeg"><Representation id="thumbs" bandwidth="1000">
            <SegmentTemplate media="thumbs/$Number$.jpg" duration="10"/></Representation></AdaptationSet>
            </Period></MPD>
            """
        let out = try Self.rewrite(text)
        #expect(out.contains(#"messageData="P[https://beacon.example/t?ad=1]""#), "\(out)")
        #expect(out.contains(#"messageData="https://not-a-fetch.example/""#))
        #expect(
            out.contains(#"media="thumbs/$Number$.jpg""#)
                && out.contains("<BaseURL>P[https://cdn.example/show/]</BaseURL>"))
    }

    @Test func badManifestsAreRefusedWithAReason() {
        let cases = [
            "<MPD><Period></MPD>": "does not close",
            "<MPD><Period>": "not closed",
            "<Manifest/>": "not MPD",
            "<MPD a=b/>": "quoted value",
            "<MPD a=\"b/>": "not closed",
            "<MPD/><MPD/>": "more than one root",
            "<MPD><!-- open": "comment",
            "": "no element",
            String(repeating: "<a>", count: 70): "deeper",
        ]
        for (text, reason) in cases {
            #expect(throws: DASHManifestError.self, "\(text.prefix(40))") {
                try DASHManifest(parsing: Array(text.utf8))
            }
            do {
                _ = try DASHManifest(parsing: Array(text.utf8))
            } catch {
                #expect(error.message.contains(reason), "\(text.prefix(40)): \(error.message)")
            }
        }
        #expect(throws: DASHManifestError.self) { try DASHManifest(parsing: [0x3C, 0x4D, 0xFF, 0x3E]) }
    }

    @Test func manifestsAreToldApartFromOtherBodies() {
        #expect(
            DASHManifest.looksLikeManifest(Array("\u{FEFF}<?xml version=\"1.0\"?>\n<!-- made by x -->\n<MPD>".utf8)))
        #expect(DASHManifest.looksLikeManifest(Array("<dash:MPD xmlns:dash=\"urn:mpeg:dash:schema:mpd:2011\">".utf8)))
        #expect(!DASHManifest.looksLikeManifest(Array("#EXTM3U\n".utf8)))
        #expect(!DASHManifest.looksLikeManifest(Array("<html><body>".utf8)))
        #expect(!DASHManifest.looksLikeManifest([0x00, 0x00, 0x00, 0x18, 0x66, 0x74, 0x79, 0x70]))
    }

    @Test func durationsAreReadWithBounds() {
        #expect(DASHManifest.seconds(ofISO8601Duration: "PT2S") == 2)
        #expect(DASHManifest.seconds(ofISO8601Duration: "PT1M30.5S") == 90.5)
        #expect(DASHManifest.seconds(ofISO8601Duration: "P1DT2H") == 93600)
        for bad in ["2S", "PT", "P", "PTS", "PT-1S", "PT1.2.3S", "P400D", "PT1X", "PT1e9S", "P1H"] {
            #expect(DASHManifest.seconds(ofISO8601Duration: bad) == nil, "\(bad)")
        }
    }

    @Test func templatesExpandTheirIdentifiersOrAreRefused() {
        #expect(
            DASHManifest.expand("c-$RepresentationID$-$Number%05d$.m4s", id: "v1", bandwidth: 9, number: 42, time: nil)
                == "c-v1-00042.m4s")
        #expect(
            DASHManifest.expand("t/$Time$/$Bandwidth$/$$.m4s", id: "", bandwidth: 800000, number: nil, time: 12288)
                == "t/12288/800000/$.m4s")
        #expect(DASHManifest.expand("$Number$", id: "", bandwidth: 0, number: nil, time: 1) == nil)
        #expect(DASHManifest.expand("$Unknown$", id: "", bandwidth: 0, number: 1, time: 1) == nil)
        #expect(DASHManifest.expand("$Number%5d$", id: "", bandwidth: 0, number: 1, time: 1) == nil)
        #expect(DASHManifest.expand("$Number%099d$", id: "", bandwidth: 0, number: 1, time: 1) == nil)
        #expect(DASHManifest.expand("open $Number", id: "", bandwidth: 0, number: 1, time: 1) == nil)
    }

    @Test func aPresentationListsEachRepresentationsResources() throws {
        let text = """
            <MPD mediaPresentationDuration="PT5S">
              <Period>
                <AdaptationSet><SegmentTemplate timescale="10" duration="20" initialization="i-$RepresentationID$.mp4" media="s-$RepresentationID$-$Number$.m4s" startNumber="3"/>
                  <Representation id="lo" bandwidth="100"/>
                  <Representation id="hi" bandwidth="900"><SegmentTemplate media="h-$Time$.m4s"><SegmentTimeline><S t="10" d="20" r="1"/><S d="5"/></SegmentTimeline></SegmentTemplate></Representation>
                </AdaptationSet>
                <AdaptationSet><Representation id="a" bandwidth="64"><SegmentList><Initialization sourceURL="one.mp4" range="0-99"/><SegmentURL media="one.mp4" mediaRange="100-199"/><SegmentURL mediaRange="200-299"/></SegmentList><BaseURL>sub/one.mp4</BaseURL></Representation></AdaptationSet>
                <AdaptationSet><Representation id="b" bandwidth="64"><BaseURL>whole.mp4</BaseURL><SegmentBase indexRange="10-20"/></Representation></AdaptationSet>
              </Period>
            </MPD>
            """
        let presentation = try DASHManifest(parsing: Array(text.utf8)).presentation(
            base: URL(string: "https://o.example/d/m.mpd")!)
        let sets = try #require(presentation.periods.first?.adaptationSets)
        #expect(sets.count == 3)
        let lo = sets[0].representations[0].resources
        // 5 s in 2 s segments: three, numbered from 3; the template is inherited from the set.
        #expect(lo.map(\.url.path) == ["/d/i-lo.mp4", "/d/s-lo-3.m4s", "/d/s-lo-4.m4s", "/d/s-lo-5.m4s"])
        #expect(lo.map(\.duration) == [0, 2, 2, 1])
        let hi = sets[0].representations[1].resources
        #expect(hi.map(\.url.path) == ["/d/i-hi.mp4", "/d/h-10.m4s", "/d/h-30.m4s", "/d/h-50.m4s"])
        let list = sets[1].representations[0].resources
        #expect(list.map(\.url.path) == ["/d/sub/one.mp4", "/d/sub/one.mp4", "/d/sub/one.mp4"])
        #expect(list.map(\.range) == [ByteRange(0, 100), ByteRange(100, 200), ByteRange(200, 300)])
        #expect(sets[2].representations[0].resources.map(\.url.path) == ["/d/whole.mp4"])
        #expect(sets[2].representations[0].resources.first?.range == nil)
    }

    /// A hostile manifest costs bounded work to read (the proxy reads each static manifest it
    /// serves, to read ahead of its players): timelines whose `S` entries repeat a billion
    /// times stop at the segment limit (the entries after it were once each walked through up
    /// to the limit: 2 billion steps for this manifest), and many representations share one
    /// limit of resources.
    @Test func hugeRepeatsAndManyRepresentationsStopAtTheLimits() throws {
        let huge = String(repeating: "<S d=\"1\" r=\"999999999\"/>", count: 20_000)
        let timeline =
            "<MPD><Period><AdaptationSet><Representation id=\"t\"><SegmentTemplate media=\"$Number$.m4s\"><SegmentTimeline>"
            + huge + "</SegmentTimeline></SegmentTemplate></Representation></AdaptationSet></Period></MPD>"
        let one = try DASHManifest(parsing: Array(timeline.utf8)).presentation(
            base: URL(string: "https://o.example/m.mpd")!)
        let segments = try #require(one.periods.first?.adaptationSets.first?.representations.first?.resources)
        #expect(segments.count == DASHPresentation.maximumSegments)
        #expect(segments.last?.url.lastPathComponent == "\(DASHPresentation.maximumSegments).m4s")

        // Five representations of 100,000 segments each: the first two fill the budget.
        let many = String(repeating: "<Representation id=\"r\" bandwidth=\"1\"/>", count: 5)
        let template =
            "<MPD mediaPresentationDuration=\"PT100000S\"><Period><AdaptationSet>"
            + "<SegmentTemplate duration=\"1\" media=\"$RepresentationID$-$Number$.m4s\"/>" + many
            + "</AdaptationSet></Period></MPD>"
        let all = try DASHManifest(parsing: Array(template.utf8)).presentation(
            base: URL(string: "https://o.example/m.mpd")!)
        let counts = try #require(all.periods.first?.adaptationSets.first?.representations.map(\.resources.count))
        #expect(counts == [100_000, 100_000, 0, 0, 0])
        #expect(counts.reduce(0, +) == DASHPresentation.maximumResources)
    }

    /// Found by `manifestsParseOrAreRefusedAndRewriteOnlyURLs`: a template whose segments last
    /// 1e-300 s (a `timescale` of 1e300) made the segment count too large for an integer, and
    /// reading the manifest trapped, in the proxy for every player that asked for it. The count
    /// is now clamped to the limit (and a timescale is an integer: `1e300` is not one, and
    /// counts as 1).
    @Test func aSegmentDurationTooSmallForAnIntegerCountIsClampedNotATrap() throws {
        for (timescale, count) in [("1e300", 5), ("9223372036854775807", DASHPresentation.maximumSegments)] {
            let text = """
                <MPD mediaPresentationDuration="PT5S"><Period><AdaptationSet>
                  <SegmentTemplate timescale="\(timescale)" duration="1" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/>
                </AdaptationSet></Period></MPD>
                """
            let presentation = try DASHManifest(parsing: Array(text.utf8)).presentation(
                base: URL(string: "https://o.example/m.mpd")!)
            #expect(
                presentation.periods.first?.adaptationSets.first?.representations.first?.resources.count == count,
                "\(timescale)")
        }
        #expect(
            DASHManifest.clampedInteger(.nan, limit: 5) == 0 && DASHManifest.clampedInteger(.infinity, limit: 5) == 5)
        #expect(DASHManifest.clampedInteger(-3, limit: 5) == 0 && DASHManifest.clampedInteger(3.7, limit: 5) == 3)
        #expect(DASHManifest.clampedInteger(1e300, limit: .max) == .max)
    }
}
