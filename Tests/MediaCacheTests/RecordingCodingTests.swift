// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// A recording as its job writes it: the layout of today (`version` 2, one object per kind)
/// reads back as written, and the flat layout jobs were written in before (HLS and DASH fields
/// side by side) reads as the recording it was.
@Suite(.stallLimit) struct RecordingCodingTests {
    static func decode(_ json: String) throws -> Recording {
        try JSONDecoder().decode(Recording.self, from: Data(json.utf8))
    }

    /// A segment as version 1 wrote it.
    static func segment(_ sequence: Int, _ url: String, gap: Bool = false) -> String {
        #"{"sequence":\#(sequence),"duration":2,"url":"\#(url)","discontinuity":false,"gap":\#(gap)}"#
    }

    @Test func aVersion1RecordingOfAMultivariantPlaylistReadsAsHLS() throws {
        let variant = "#EXT-X-STREAM-INF:BANDWIDTH=1000,AUDIO=\\\"a\\\""
        let audio = "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\\\"a\\\",URI=\\\"https://cdn.example/a.m3u8\\\""
        let json = """
            {"variant":{"first":{}},"until":800000000,"finished":true,\
            "mediaPlaylist":"https://cdn.example/v.m3u8",\
            "timeline":{"segments":[\(Self.segment(7, "https://cdn.example/v7.ts")),\
            \(Self.segment(8, "https://cdn.example/v8.ts", gap: true))],"lastSequence":8,"originEnded":false},\
            "chosen":{"variants":[{"first":{}}],"audio":{"includesDefault":false,"includesAll":false,"languages":["en"]},"trickPlay":false},\
            "renditions":[{"url":"https://cdn.example/a.m3u8","line":"\(audio)",\
            "timeline":{"segments":[\(Self.segment(3, "https://cdn.example/a3.aac"))],"lastSequence":3,\
            "originEnded":false}}],\
            "variantLine":"\(variant)","carried":["#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS"]}
            """
        let recording = try Self.decode(json)
        let hls = try #require(recording.hls)
        #expect(!recording.isDASH && recording.finished && recording.until == Date(timeIntervalSinceReferenceDate: 8e8))
        #expect(hls.mediaPlaylist == URL(string: "https://cdn.example/v.m3u8"))
        #expect(hls.timeline.segments.map(\.sequence) == [7, 8] && hls.timeline.segments.map(\.gap) == [false, true])
        #expect(hls.master?.variantLine == variant.replacingOccurrences(of: "\\", with: ""))
        #expect(hls.renditions.map(\.url.absoluteString) == ["https://cdn.example/a.m3u8"])
        #expect(hls.renditions.first?.timeline.lastSequence == 3 && hls.master?.carried.count == 1)
        #expect(hls.timelines.count == 2 && recording.duration == 2, "the gap is left out")
        #expect(recording.choice.variants == [.first] && recording.choice.audio == .languages(["en"]))
    }

    /// A recording started of a media playlist, before it read it: no choice but its variant.
    @Test func aVersion1RecordingNotBegunTakesItsVariant() throws {
        let json = """
            {"variant":{"lowestBandwidth":{}},"finished":false,\
            "timeline":{"segments":[],"originEnded":false}}
            """
        let recording = try Self.decode(json)
        #expect(recording == .hls(HLSRecording(choice: RenditionChoice(variants: [.lowestBandwidth]), until: nil)))
    }

    @Test func aVersion1DASHRecordingReadsAsDASH() throws {
        let json = """
            {"variant":{"first":{}},"finished":false,"format":"dash",\
            "timeline":{"segments":[],"originEnded":false},\
            "tracks":[{"key":"p|variant||v","period":"p","periodStart":0,"timescale":10,"offset":0,\
            "adaptationSet":"<AdaptationSet>","representation":"<Representation id=\\"v\\">",\
            "timeline":{"segments":[\(Self.segment(20, "https://cdn.example/v20.m4s"))],"lastSequence":20,\
            "originEnded":false}}],\
            "namespaces":"xmlns:cenc=\\"urn:mpeg:cenc:2013\\"","anchor":790000000}
            """
        let recording = try Self.decode(json)
        let dash = try #require(recording.dash)
        #expect(recording.isDASH && !recording.finished && recording.until == nil)
        #expect(dash.tracks.map(\.key) == ["p|variant||v"] && dash.tracks[0].timeline.lastSequence == 20)
        #expect(dash.namespaces == "xmlns:cenc=\"urn:mpeg:cenc:2013\"")
        #expect(dash.anchor == Date(timeIntervalSinceReferenceDate: 7.9e8) && recording.duration == 2)
    }

    @Test func bothKindsReadBackAsWritten() throws {
        var hls = HLSRecording(
            choice: RenditionChoice(variants: [.highestBandwidth]), until: Date(timeIntervalSince1970: 1))
        hls.mediaPlaylist = URL(string: "https://cdn.example/v.m3u8")
        hls.master = HLSRecording.Master(
            variantLine: "#EXT-X-STREAM-INF:BANDWIDTH=1",
            renditions: [
                RecordedPlaylist(url: URL(string: "https://cdn.example/a.m3u8")!, line: "#EXT-X-MEDIA:TYPE=AUDIO")
            ],
            carried: [])
        var dash = DASHRecording(choice: RenditionChoice(audio: .default))
        dash.finished = true
        dash.namespaces = ""
        for recording in [Recording.hls(hls), .dash(dash)] {
            let data = try JSONEncoder().encode(recording)
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(object["version"] as? Int == 2 && object.count == 2, "\(object.keys)")
            #expect(try JSONDecoder().decode(Recording.self, from: data) == recording)
        }
    }

    /// A job written by a newer MediaCache is refused, saying so, not read as something else.
    @Test func aNewerLayoutIsRefused() throws {
        #expect {
            try Self.decode(#"{"version":3,"hls":{}}"#)
        } throws: { error in
            "\(error)".contains("newer MediaCache")
        }
    }
}
