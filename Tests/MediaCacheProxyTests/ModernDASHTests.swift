// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// The DASH shape of ``ModernHLSTests``: an MPD as a current packager writes it (a relative
/// base, a segment template, an image (thumbnail) adaptation set, a callback event, a
/// `Location`) read by a scripted player that resolves and substitutes as ISO/IEC 23009-1 says a
/// client does, through the proxy.
@Suite(.stallLimit, .endToEnd) struct ModernDASHTests {
    @Test func aScriptedPlayerMeetsOnlyURLsThatLeadBackThroughTheProxy() async throws {
        try await ProxyHarness.with { h in
            let text = """
                <?xml version="1.0"?>
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S">
                  <Location>\(h.origin.url("/d/m.mpd").absoluteString)</Location>
                  <BaseURL>media/</BaseURL>
                  <Period id="p0">
                    <EventStream schemeIdUri="urn:mpeg:dash:event:callback:2015" value="1" timescale="1">
                      <Event presentationTime="1" id="1" messageData="\(h.origin.url("/beacon?ad=1").absoluteString)"/>
                    </EventStream>
                    <AdaptationSet contentType="video" mimeType="video/mp4">
                      <Representation id="v0" bandwidth="300000" height="240">
                        <SegmentTemplate initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Number$.m4s" startNumber="1" duration="2" timescale="1"/>
                      </Representation>
                    </AdaptationSet>
                    <AdaptationSet contentType="image" mimeType="image/jpeg">
                      <Representation id="thumbs" bandwidth="1000"><SegmentTemplate media="thumbs/$Number$.jpg" startNumber="1" duration="4" timescale="1"/></Representation>
                    </AdaptationSet>
                  </Period>
                </MPD>
                """
            h.origin.serve(
                TestOrigin.Resource(body: .bytes(Array(text.utf8)), mimeType: "application/dash+xml"), at: "/d/m.mpd")
            let files = ["/d/media/v0/init.mp4", "/d/media/v0/1.m4s", "/d/media/v0/2.m4s", "/d/media/thumbs/1.jpg"]
            for (seed, path) in files.enumerated() {
                h.origin.serve(.generated(length: 12_000, seed: UInt64(400 + seed)), at: path)
            }
            h.origin.serve(TestOrigin.Resource(body: .bytes(Array("ok".utf8)), mimeType: "text/plain"), at: "/beacon")
            let originAddress = "127.0.0.1:\(h.origin.port)"
            // Each request named when it fails (a timeout was seen once, in a full run, unreproduced).
            func get(_ url: String) async throws -> ProxyHarness.Reply {
                do {
                    return try await h.get(url)
                } catch {
                    Issue.record("GET \(url): \(error)")
                    throw error
                }
            }
            var checks: [String: Bool] = [:]
            let reply = try await get(h.url("/d/m.mpd"))
            let served = String(buffer: reply.body)
            checks["manifest names no origin address"] = reply.status == 200 && !served.contains(originAddress)
            // The base, as a player resolves it: the one BaseURL the proxy wrote for the manifest.
            let bases = served.components(separatedBy: "<BaseURL>").dropFirst().compactMap {
                $0.components(separatedBy: "</BaseURL>").first
            }
            checks["one absolute base"] = bases.count == 1 && bases[0].hasPrefix("http://127.0.0.1:\(h.port)/o/")
            let base = try #require(URL(string: bases.first ?? ""))
            func fetch(_ relative: String, _ path: String) async throws -> Bool {
                let url = try #require(URL(string: relative, relativeTo: base)?.absoluteString)
                let answer = try await get(url)
                return answer.status == 200 && h.origin.resource(at: path)!.firstMismatch(in: answer.body, at: 0) == nil
            }
            checks["init section"] = try await fetch("v0/init.mp4", "/d/media/v0/init.mp4")
            let one = try await fetch("v0/1.m4s", "/d/media/v0/1.m4s")
            let two = try await fetch("v0/2.m4s", "/d/media/v0/2.m4s")
            checks["segments"] = one && two
            checks["thumbnail"] = try await fetch("thumbs/1.jpg", "/d/media/thumbs/1.jpg")
            // The callback the player fetches, and the manifest's new location, through the proxy.
            let callback =
                served.components(separatedBy: "messageData=\"").dropFirst().first?.components(separatedBy: "\"").first
                ?? ""
            let beacon = try await get(callback.replacingOccurrences(of: "&amp;", with: "&"))
            checks["callback event"] =
                callback.contains("127.0.0.1:\(h.port)") && beacon.status == 200 && String(buffer: beacon.body) == "ok"
            let location =
                served.components(separatedBy: "<Location>").dropFirst().first?.components(separatedBy: "</Location>")
                .first ?? ""
            let relocated = try await get(location)
            checks["location"] = location.contains("127.0.0.1:\(h.port)") && relocated.status == 200
            let failed = checks.filter { !$0.value }.map(\.key).sorted()
            #expect(
                checks.count == 7 && failed.isEmpty,
                "\(checks.count - failed.count) of \(checks.count) hold; failing: \(failed)\n\(served)")
        }
    }
}
