// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// `serve --lan ADDRESS`: loopback answers as without it (no token unless `--token` is given;
/// `mediacache url URL` plays, the status page opens); the LAN address answers only URLs with a
/// credential minted for what they name, under the key kept in the store folder (`lan.key`,
/// never printed): `mediacache url --lan --running` prints one that a device plays with the
/// origin's bytes, and answers the Cast receiver's page in CORS mode; the same file without it,
/// or another file with it, is refused.
@Suite(.stallLimit, .endToEnd, .enabled(if: ChildProcess.toolExists("curl")))
struct LANCommandTests {
    @Test func loopbackAsBeforeAndURLPrintsACapabilityURLOnTheLANAddress() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("lan-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        try await RunningServer.with(["--lan", "127.0.0.3"], errorFile: log) { server in
            #expect(server.info.token == nil, "no token on loopback unless given")
            let key = try #require(server.info.lanKey, "the LAN key, for `url --lan`")
            #expect(server.info.lanHost == "127.0.0.3" && !server.line.contains(key))
            let keyFile = URL(fileURLWithPath: server.folder).appendingPathComponent("lan.key")
            let kept = try String(contentsOf: keyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            let mode = try FileManager.default.attributesOfItem(atPath: keyFile.path)[.posixPermissions] as? Int
            #expect(kept == key && mode == 0o600)
            let songURL = server.origin.url("/a/song.mp3").absoluteString
            // Loopback as before: the URL `mediacache url` prints plays, the status page opens.
            let local = try await CacheCommandTests.mediacache([
                "url", "--running", "--cache-dir", server.folder, songURL,
            ])
            let localURL = local.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let song = server.origin.resource(at: "/a/song.mp3")!
            let localBytes = try await ChildProcess.run(["curl", "-sf", localURL])
            #expect(
                localBytes.status == 0 && localURL.hasPrefix("http://127.0.0.1:")
                    && Array(localBytes.output) == Array(song.bytes(0..<song.length).readableBytesView), "\(localURL)")
            let status = try await ChildProcess.run([
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(server.info.port)/status",
            ])
            #expect(String(decoding: status.output, as: UTF8.self) == "200")
            let printed = try await CacheCommandTests.mediacache([
                "url", "--lan", "--running", "--cache-dir", server.folder, songURL,
            ])
            let url = printed.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(printed.status == 0 && url.hasPrefix("http://127.0.0.3:\(server.info.port)/o/"), "\(printed)")
            let played = try await ChildProcess.run([
                "curl", "-sf", "-D", "-", "-o", "/dev/null", "-H", "Origin: https://www.gstatic.com", url,
            ])
            let head = String(decoding: played.output, as: UTF8.self).lowercased()
            #expect(
                played.status == 0 && head.contains("access-control-allow-origin: https://www.gstatic.com"), "\(head)")
            let bytes = try await ChildProcess.run(["curl", "-sf", url])
            #expect(
                Array(bytes.output)
                    == Array(server.origin.resource(at: "/a/song.mp3")!.bytes(0..<300_000).readableBytesView))
            // Without its credential, or with it on another path: refused.
            let other = url.replacingOccurrences(of: "/a/song.mp3", with: "/a/other.mp3")
            for refused in [
                "http://127.0.0.3:\(server.info.port)" + ProxyURL.pathForm(for: URL(string: songURL)!, token: nil),
                other,
            ] {
                let code = try await ChildProcess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", refused])
                #expect(String(decoding: code.output, as: UTF8.self) == "403", "\(refused)")
            }
            // Without --running there is no key to mint with.
            let unminted = try await CacheCommandTests.mediacache([
                "url", "--lan", "--host", "127.0.0.3", "--port", "\(server.info.port)", songURL,
            ])
            #expect(unminted.status != 0 && unminted.error.contains("--running"), "\(unminted)")
        }
    }

    /// `url --lan --for 2s` prints a URL that plays, then answers 403 saying it expired; `lan
    /// revoke URL` stops one URL at once while another URL of the same origin plays on; a
    /// `--for` that is no duration is refused.
    @Test func aLANURLExpiresAfterItsTimeAndARevokedOneStopsAlone() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("lan-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        func code(_ url: String) async throws -> (status: String, body: String) {
            let body = FileManager.default.temporaryDirectory.appendingPathComponent("body-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: body) }
            let run = try await ChildProcess.run(["curl", "-s", "-o", body.path, "-w", "%{http_code}", url])
            return (String(decoding: run.output, as: UTF8.self), (try? String(contentsOf: body, encoding: .utf8)) ?? "")
        }
        try await RunningServer.with(["--lan", "127.0.0.3"], errorFile: log) { server in
            let songURL = server.origin.url("/a/song.mp3").absoluteString
            func mint(_ arguments: [String]) async throws -> String {
                let printed = try await CacheCommandTests.mediacache(
                    ["url", "--lan", "--running", "--cache-dir", server.folder] + arguments + [songURL])
                #expect(printed.status == 0, "\(printed)")
                return printed.output.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            // The brief URL's expiry is at least `started + 2` (whole seconds): an answer given
            // before that second plays; a machine slow enough to answer later may refuse, only as
            // expired.
            let started = Int64(Date().timeIntervalSince1970)
            let brief = try await mint(["--for", "2s"])
            let minted = Int64(Date().timeIntervalSince1970)  // its expiry is at most `minted + 2`
            let first = try await code(brief)
            let answered = Int64(Date().timeIntervalSince1970)
            #expect(
                first.status == "200"
                    || (answered >= started + 2 && first.status == "403" && first.body.contains("expired")),
                "\(first) at \(answered - started) s")
            let (kept, revoked) = (try await mint(["--for", "1d"]), try await mint(["--for", "ever"]))
            #expect(Set([brief, kept, revoked]).count == 3)
            for url in [kept, revoked] { #expect(try await code(url).status == "200", "\(url)") }
            let bad = try await CacheCommandTests.mediacache([
                "url", "--lan", "--running", "--cache-dir", server.folder, "--for", "soon", songURL,
            ])
            #expect(bad.status != 0 && bad.error.contains("soon"), "\(bad)")

            let revoking = try await CacheCommandTests.mediacache([
                "lan", "revoke", "--running", "--cache-dir", server.folder, revoked,
            ])
            #expect(revoking.status == 0 && revoking.output.contains("Revoked"), "\(revoking)")
            let refused = try await code(revoked)
            #expect(refused.status == "403" && refused.body.contains("revoked"), "\(refused)")
            #expect(try await code(kept).status == "200")

            try await waitUntil { Int64(Date().timeIntervalSince1970) >= minted + 2 }
            let expired = try await code(brief)
            #expect(expired.status == "403" && expired.body.contains("expired"), "\(expired)")
            #expect(try await code(kept).status == "200")
        }
    }
}
