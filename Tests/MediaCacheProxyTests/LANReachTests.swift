// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTP
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheProxy

/// What a LAN URL reaches, end to end (`serve --lan 127.0.0.3`; the origin on 127.0.0.1 stands
/// for a NAS the user named, another test origin for a service of the host): a pinned HLS
/// asset's master plays through what its playlists name with the origin stopped; the same
/// credential on another path, on another origin (which gets no request at all), or on the
/// proxy's own port is refused, counted and logged with the client's address; a URL a playlist
/// names on another local origin is refused before anything is fetched.
@Suite(.stallLimit, .endToEnd, .enabled(if: toolExists("ffmpeg")))
struct LANReachTests {
    static let capabilities = LANCapabilities.made()

    /// The URIs of a playlist's lines that are not tags or blank, and of its tags' `URI="…"`.
    static func uris(of playlist: String) -> [String] {
        playlist.split(separator: "\n").flatMap { line -> [String] in
            if !line.hasPrefix("#") { return line.isEmpty ? [] : [String(line)] }
            guard let start = line.range(of: "URI=\"") else { return [] }
            return [String(line[start.upperBound...].prefix { $0 != "\"" })]
        }
    }

    @Test func aPinnedAssetsLANURLReachesWhatItsPlaylistsNameAndNothingElse() async throws {
        let logs = LogRecorder()
        let service = try await TestOrigin.start()
        defer { Task { try? await service.shutdown() } }
        service.serve(TestOrigin.Resource(body: .bytes(Array("private notes".utf8))), at: "/secret.txt")
        service.serve(TestOrigin.Resource(body: .bytes(Array("a host service".utf8))), at: "/hls/index.m3u8")
        try await ProxyHarness.with(
            token: "loopback-t0ken",
            configure: {
                var configuration = $0
                configuration.lanAddress = "127.0.0.3"
                configuration.lanCapabilities = Self.capabilities
                configuration.logger = logs.logger("proxy")
                configuration.addressResolver = AddressResolver { name in
                    name == "intranet.example" ? [.privateNetwork] : []
                }
                return configuration
            }
        ) { proxy in
            try await withTemporaryDirectory { directory in
                let origin = proxy.origin
                var files = try await LANListenerTests.serveStreams(["hls"], in: directory, on: origin)
                let masterText = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=500000,RESOLUTION=320x180\nindex.m3u8\n"
                files["/hls/master.m3u8"] = Array(masterText.utf8)
                origin.serve(
                    TestOrigin.Resource(
                        body: .bytes(Array(masterText.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                    at: "/hls/master.m3u8")
                // A playlist of the named origin that names a segment of another local origin.
                // and one of a name that resolves to the home network.
                let mixed =
                    "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n\(service.url("/secret.txt"))\n"
                    + "#EXTINF:2,\nhttp://intranet.example/a.ts\n#EXT-X-ENDLIST\n"
                origin.serve(
                    TestOrigin.Resource(body: .bytes(Array(mixed.utf8)), mimeType: "application/vnd.apple.mpegurl"),
                    at: "/mixed.m3u8")

                let lan = "http://127.0.0.3:\(proxy.port)"
                // What another origin's playlist names on this machine is refused, and not asked for.
                let rewritten = try await proxy.get(lan + Self.capabilities.pathForm(for: origin.url("/mixed.m3u8")))
                #expect(rewritten.status == 200)
                let named = Self.uris(of: rewritten.text)
                #expect(named.count == 2)
                for (uri, scope) in zip(named, ["loopback", "private"]) {
                    #expect(uri.hasPrefix(lan + "/") && uri.contains("token=p"), "\(uri)")
                    let refused = try await proxy.get(uri)
                    #expect(refused.status == 403 && refused.text.contains("a \(scope) address"), "\(refused.text)")
                }

                // Pinned, then the origin stops.
                let queue = try DownloadQueue(reader: proxy.base.reader)
                queue.start()
                let job = try await queue.pin(origin.url("/hls/master.m3u8"))
                try await waitUntil { queue.job(matching: job.id)?.state == .completed }
                await queue.shutDown()
                try await origin.shutdown()

                // Every URI the master and its media playlist name answers with the origin's bytes.
                let masterURL = lan + Self.capabilities.pathForm(for: origin.url("/hls/master.m3u8"))
                let master = try await proxy.get(masterURL)
                #expect(master.status == 200)
                var checked = 0
                for variant in Self.uris(of: master.text) {
                    let variantURL = try #require(URL(string: variant, relativeTo: URL(string: masterURL)))
                    #expect(variantURL.absoluteString.hasPrefix(lan + "/"), "\(variantURL)")
                    let media = try await proxy.get(variantURL.absoluteString)
                    #expect(media.status == 200)
                    for segment in Self.uris(of: media.text) {
                        let segmentURL = try #require(URL(string: segment, relativeTo: variantURL))
                        #expect(segmentURL.absoluteString.hasPrefix(lan + "/"), "\(segmentURL)")
                        let name = "/hls/" + segmentURL.lastPathComponent
                        // Of the named origin: minted with the master's grant.
                        #expect(segmentURL.absoluteString.contains("token=r."), "\(segmentURL)")
                        let answer = try await proxy.get(segmentURL.absoluteString)
                        #expect(answer.status == 200 && Array(answer.body.readableBytesView) == files[name], "\(name)")
                        checked += 1
                    }
                }
                #expect(checked == files.keys.filter { $0.hasSuffix(".ts") }.count && checked > 0)
                // A player plays it.
                let play = try await runTool(["ffmpeg", "-v", "error", "-i", masterURL, "-f", "null", "-"])
                #expect(play.status == 0, "\(play.error)")

                // The same credential elsewhere: another path, another origin, the proxy itself.
                let credential = try #require(RequestTarget(URL(string: masterURL)!.path).token)
                func withCredential(_ url: URL) -> String {
                    var target = ProxyTarget(url, form: .path)
                    target.token = credential
                    return lan + target.uri
                }
                let beforeRefusals = logs.all.filter { $0.message.hasPrefix("Refused a request") }.count
                for (url, cause) in [
                    (origin.url("/hls/secret.txt"), "capability"), (origin.url("/hls/seg0.ts"), "capability"),
                    (service.url("/hls/master.m3u8"), "capability"), (service.url("/secret.txt"), "capability"),
                ] {
                    #expect(try await proxy.get(withCredential(url)).status == 403, "\(url) \(cause)")
                }
                // The proxy's own port, even minted: refused as the proxy itself.
                for path in ["/status.json", "/_mediacache/entries", "/metrics"] {
                    let own = URL(string: "http://127.0.0.1:\(proxy.port)\(path)")!
                    let answer = try await proxy.get(lan + Self.capabilities.pathForm(for: own))
                    #expect(answer.status == 403 && answer.text.contains("never fetches from itself"), "\(answer.text)")
                }
                #expect(service.notFoundPaths.isEmpty)
                #expect(service.requests("/secret.txt").isEmpty && service.requests("/hls/index.m3u8").isEmpty)
                let refusals = logs.all.filter { $0.message.hasPrefix("Refused a request") }.dropFirst(beforeRefusals)
                #expect(refusals.count == 7, "\(refusals.map(\.message))")
                #expect(refusals.allSatisfy { $0.level == .warning && $0.metadata["client"] == "127.0.0.1" })
                #expect(
                    Array(refusals.map { $0.metadata["cause"] ?? "" }) == Array(repeating: "capability", count: 4)
                        + Array(repeating: "loop", count: 3))
                // No credential in the log.
                #expect(!logs.all.contains { "\($0.message)\($0.metadata)".contains(credential) })
            }
        }
    }

    /// A NAS the user named (the origin on 127.0.0.1) may redirect within itself; a redirect it
    /// answers to another service of the host (another loopback port), at once or after a hop
    /// within itself, is refused with a 403 before anything is sent there, and logged at warning
    /// level with the client's address and the target, never the credential. A loopback client
    /// is led there as before (an origin inside may redirect anywhere).
    @Test func aLANRequestsRedirectsLeadOnlyToItsOwnOriginOrTheInternet() async throws {
        let logs = LogRecorder()
        let service = try await TestOrigin.start()
        defer { Task { try? await service.shutdown() } }
        service.serve(TestOrigin.Resource(body: .bytes(Array("private notes".utf8))), at: "/secret.txt")
        var fetcher = HTTPOriginFetcher.Configuration()
        fetcher.logger = logs.logger("origin")
        try await ProxyHarness.with(
            fetcher: fetcher,
            configure: {
                var configuration = $0
                configuration.lanAddress = "127.0.0.3"
                configuration.lanCapabilities = Self.capabilities
                configuration.logger = logs.logger("proxy")
                return configuration
            }
        ) { proxy in
            let origin = proxy.origin
            func redirect(_ path: String, to location: String) {
                var faults = TestOrigin.Faults()
                faults.redirect = (302, location)
                origin.serve(.generated(length: 10, faults: faults), at: path)
            }
            let film = TestOrigin.Resource.generated(length: 50_000, seed: 9)
            origin.serve(film, at: "/film.mp4")
            redirect("/moved", to: "/film.mp4")
            redirect("/to-service", to: service.url("/secret.txt").absoluteString)
            redirect("/hop", to: origin.url("/to-service").absoluteString)
            let lan = "http://127.0.0.3:\(proxy.port)"

            let moved = try await proxy.get(lan + Self.capabilities.pathForm(for: origin.url("/moved")))
            #expect(moved.status == 200 && moved.body == film.bytes(0..<50_000))
            var credentials: [String] = []
            for path in ["/to-service", "/hop"] {
                let url = lan + Self.capabilities.pathForm(for: origin.url(path))
                credentials.append(try #require(RequestTarget(URL(string: url)!.path).token))
                let refused = try await proxy.get(url)
                #expect(refused.status == 403 && refused.text.contains("a loopback address"), "\(refused.text)")
            }
            #expect(service.requests("/secret.txt").isEmpty && service.notFoundPaths.isEmpty)
            let logged = logs.all.filter { $0.message.hasPrefix("Refused a LAN request's redirect") }
            #expect(logged.count == 2, "\(logged.map(\.message))")
            #expect(
                logged.allSatisfy {
                    $0.level == .warning && $0.metadata["client"] == "127.0.0.1"
                        && $0.metadata["target"] == service.url("/secret.txt").absoluteString
                })
            #expect(
                !logs.all.contains { entry in credentials.contains { "\(entry.message)\(entry.metadata)".contains($0) }
                })

            // From loopback, the same redirect is followed.
            let loopback = try await proxy.get(proxy.url("/to-service"))
            #expect(loopback.status == 200 && loopback.text == "private notes")
        }
    }

    /// A LAN URL minted for two seconds plays, on a kept-alive connection too, and answers 403
    /// with the reason once its time has passed (the request checks again: a repeated request
    /// reuses no earlier check); one minted without an expiry of the same origin plays on.
    @Test func aLANURLMintedForTwoSecondsPlaysThenAnswers403WithTheReason() async throws {
        try await ProxyHarness.with(configure: {
            var configuration = $0
            configuration.lanAddress = "127.0.0.3"
            configuration.lanCapabilities = Self.capabilities
            return configuration
        }) { proxy in
            let film = TestOrigin.Resource.generated(length: 40_000, seed: 12)
            proxy.origin.serve(film, at: "/film.mp4")
            proxy.origin.serve(film, at: "/other.mp4")
            let lan = "http://127.0.0.3:\(proxy.port)"
            let until = ProxyRouter.now() + 2
            let brief = lan + Self.capabilities.pathForm(for: proxy.origin.url("/film.mp4"), until: until)
            let lasting = lan + Self.capabilities.pathForm(for: proxy.origin.url("/other.mp4"))
            for range in ["bytes=0-9999", "bytes=10000-19999"] {
                let played = try await proxy.get(brief, headers: [("Range", range)])
                // A machine slow enough to answer after the expiry may refuse, only as expired.
                guard played.status != 403 || ProxyRouter.now() < until else {
                    #expect(played.text.contains("expired"), "\(played.text)")
                    continue
                }
                #expect(played.status == 206 && played.body.readableBytes == 10_000)
                let start = Int64(range.dropFirst(6).prefix { $0 != "-" })!
                #expect(film.firstMismatch(in: played.body, at: start) == nil)
            }
            try await waitUntil { ProxyRouter.now() >= until }
            let expired = try await proxy.get(brief, headers: [("Range", "bytes=0-9999")])
            #expect(expired.status == 403 && expired.text.contains("expired"), "\(expired.text)")
            let other = try await proxy.get(lasting)
            #expect(other.status == 200 && other.body == film.bytes(0..<40_000))
        }
    }
}
