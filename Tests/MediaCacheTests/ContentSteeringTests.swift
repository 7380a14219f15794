// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Content steering, without I/O: the steering server's URI in an HLS playlist and a DASH
/// manifest, the steering manifest's own URLs, and the key rule that makes pathways share
/// entries.
@Suite(.stallLimit) struct ContentSteeringTests {
    static let base = URL(string: "https://steer.example/v1/steer.json?_HLS_pathway=A&_HLS_throughput=900000")!

    static func rewrite(_ json: String) throws -> (object: [String: JSONValue], dropped: [String]) {
        let (bytes, dropped) = try SteeringManifest.rewritten(
            Array(json.utf8), base: base, reload: { "R[" + $0.absoluteString + "]" },
            resource: { "P[" + $0.absoluteString + "]" })
        guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else {
            throw SteeringManifestError("not an object")
        }
        return (object, dropped)
    }

    @Test func theReloadURIAndPerVariantURIsLeadThroughTheProxyAndHostClonesAreLeftOut() throws {
        let (object, dropped) = try Self.rewrite(
            """
            {"VERSION":1,"TTL":300,"RELOAD-URI":"next.json?session=7","PATHWAY-PRIORITY":["CDN-B","CDN-A","CDN-C"],
             "PATHWAY-CLONES":[
               {"BASE-ID":"CDN-A","ID":"CDN-C","URI-REPLACEMENT":{"PER-VARIANT-URIS":{"v1":"https://c.example/v1/index.m3u8"},"PER-RENDITION-URIS":{"en":"/audio/en.m3u8"}}},
               {"BASE-ID":"CDN-A","ID":"CDN-D","URI-REPLACEMENT":{"HOST":"d.example"}},
               {"BASE-ID":"CDN-A","ID":"CDN-E","URI-REPLACEMENT":{"PARAMS":{"token":"x"}}}
             ]}
            """)
        #expect(object["RELOAD-URI"] == .string("R[https://steer.example/v1/next.json?session=7]"))
        #expect(object["TTL"] == .number(300) && object["VERSION"] == .number(1))
        #expect(object["PATHWAY-PRIORITY"] == .array([.string("CDN-B"), .string("CDN-A"), .string("CDN-C")]))
        guard case .array(let clones)? = object["PATHWAY-CLONES"], clones.count == 1,
            case .object(let clone) = clones[0],
            case .object(let replacement)? = clone["URI-REPLACEMENT"]
        else {
            Issue.record("clones: \(String(describing: object["PATHWAY-CLONES"]))")
            return
        }
        #expect(clone["ID"] == .string("CDN-C"))
        #expect(replacement["PER-VARIANT-URIS"] == .object(["v1": .string("P[https://c.example/v1/index.m3u8]")]))
        #expect(replacement["PER-RENDITION-URIS"] == .object(["en": .string("P[https://steer.example/audio/en.m3u8]")]))
        #expect(dropped == ["CDN-D", "CDN-E"])
    }

    @Test func aDASHManifestKeepsItsServiceLocations() throws {
        let (object, dropped) = try Self.rewrite(
            #"{"VERSION":1,"TTL":10,"SERVICE-LOCATION-PRIORITY":["beta","alpha"]}"#)
        #expect(
            object["SERVICE-LOCATION-PRIORITY"] == .array([.string("beta"), .string("alpha")])
                && object["RELOAD-URI"] == nil && dropped.isEmpty)
    }

    @Test(arguments: [
        ("[1,2]", "not a JSON object"), (#"{"VERSION":2}"#, "not of VERSION 1"), ("{", "not a JSON object"),
        (#"{"VERSION":1,"RELOAD-URI":"ftp://x/y"}"#, "RELOAD-URI is not an http"),
        (String(repeating: "[", count: 40_000), "nests deeper"), ("\u{FF}", "not a JSON object"),
    ])
    func whatIsNotASteeringManifestIsRefusedWithTheReason(_ text: String, _ reason: String) {
        #expect {
            _ = try SteeringManifest.rewritten(
                Array(text.utf8), base: Self.base, reload: { $0.absoluteString }, resource: { $0.absoluteString })
        } throws: { error in
            (error as? SteeringManifestError)?.message.contains(reason) == true
        }
    }

    @Test func onlyRequestsWithAPlayersSteeringParametersAreForTheSteeringServer() {
        #expect(SteeringManifest.isSteeringRequest(Self.base))
        #expect(SteeringManifest.isSteeringRequest(URL(string: "https://s.example/dash.json?_DASH_pathway=alpha")!))
        #expect(!SteeringManifest.isSteeringRequest(URL(string: "https://s.example/steer.json")!))
        #expect(!SteeringManifest.isSteeringRequest(URL(string: "https://s.example/index.m3u8?_HLS_msn=3")!))
    }

    @Test func theSteeringServerOfAPlaylistAndAManifestIsMapped() throws {
        let playlist = try HLSPlaylist(
            parsing: Array(
                "#EXTM3U\n#EXT-X-CONTENT-STEERING:SERVER-URI=\"/steer.json\",PATHWAY-ID=\"A\"\n#EXT-X-STREAM-INF:BANDWIDTH=1,PATHWAY-ID=\"A\",STABLE-VARIANT-ID=\"v1\"\na/v1.m3u8\n"
                    .utf8))
        let text = playlist.rewritten(base: URL(string: "https://a.example/show/master.m3u8")!) { url, tag in
            "\(tag ?? "-")[\(url.absoluteString)]"
        }
        #expect(
            text.contains(
                "#EXT-X-CONTENT-STEERING:SERVER-URI=\"EXT-X-CONTENT-STEERING[https://a.example/steer.json]\",PATHWAY-ID=\"A\""
            ), "\(text)")
        #expect(text.contains("\n-[https://a.example/show/a/v1.m3u8]\n"))
        let manifest = try DASHManifest(
            parsing: Array(
                """
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"><ContentSteering defaultServiceLocation="alpha" queryBeforeStart="true">https://steer.example/dash.json</ContentSteering><BaseURL serviceLocation="alpha">https://a.example/</BaseURL><BaseURL serviceLocation="beta">https://b.example/</BaseURL><Period/></MPD>
                """.utf8))
        let rewritten = manifest.rewritten(base: URL(string: "https://a.example/m.mpd")!) {
            "P[" + $0.absoluteString + "]"
        }
        #expect(
            rewritten.contains(">P[https://steer.example/dash.json]</ContentSteering>")
                && rewritten.contains("defaultServiceLocation=\"alpha\""), "\(rewritten)")
        #expect(rewritten.contains("<BaseURL serviceLocation=\"beta\">P[https://b.example/]</BaseURL>"))
    }

    /// A URL on any host of a group has the key of the same URL on the group's first host;
    /// the port, the path and the query still tell resources apart.
    @Test func hostsOfOneGroupShareKeysAndNothingElseDoes() {
        let rule = CacheKeyRule(
            ignoredQueryParameters: ["token"], sameContentHosts: [["cdn-a.example", "CDN-B.example"]])
        func key(_ text: String) -> CacheKey { rule.key(for: URL(string: text)!) }
        #expect(key("https://cdn-b.example/v/seg1.ts?token=1") == key("https://cdn-a.example/v/seg1.ts?token=2"))
        #expect(key("https://CDN-B.EXAMPLE/v/seg1.ts") == key("https://cdn-a.example/v/seg1.ts"))
        #expect(key("https://cdn-b.example/v/seg2.ts") != key("https://cdn-a.example/v/seg1.ts"))
        #expect(key("https://cdn-b.example:8443/v/seg1.ts") != key("https://cdn-a.example/v/seg1.ts"))
        #expect(key("https://cdn-c.example/v/seg1.ts") != key("https://cdn-a.example/v/seg1.ts"))
        #expect(
            CacheKeyRule().key(for: URL(string: "https://cdn-b.example/v/seg1.ts")!)
                != key("https://cdn-a.example/v/seg1.ts"))
    }
}
