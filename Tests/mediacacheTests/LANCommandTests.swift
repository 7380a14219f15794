// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// `serve --lan ADDRESS` without a token makes one (kept in the server file, never printed);
/// `mediacache url --lan --running` prints a capability URL on the LAN address that a device
/// plays with the origin's bytes, and answers the Cast receiver's page in CORS mode; the LAN
/// address refuses the same file without the token.
@Suite(.stallLimit, .endToEnd, .enabled(if: ChildProcess.toolExists("curl")))
struct LANCommandTests {
    @Test func serveMakesATokenAndURLPrintsACapabilityURLOnTheLANAddress() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("lan-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        try await RunningServer.with(["--lan", "127.0.0.3"], errorFile: log) { server in
            let token = try #require(server.info.token, "a token made for the LAN")
            #expect(server.info.lanHost == "127.0.0.3" && token.count == 32)
            #expect(!server.line.contains(token))
            let song = server.origin.url("/a/song.mp3").absoluteString
            let printed = try await CacheCommandTests.mediacache([
                "url", "--lan", "--running", "--cache-dir", server.folder, song,
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
            let bare = try await ChildProcess.run([
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                "http://127.0.0.3:\(server.info.port)" + ProxyURL.pathForm(for: URL(string: song)!, token: nil),
            ])
            #expect(String(decoding: bare.output, as: UTF8.self) == "403")
            // Without --running, --host names the LAN address and --token its token.
            let given = try await CacheCommandTests.mediacache([
                "url", "--lan", "--host", "127.0.0.3", "--port", "\(server.info.port)", "--token", token, song,
            ])
            #expect(given.output.trimmingCharacters(in: .whitespacesAndNewlines) == url)
            let loopbackOnly = try await CacheCommandTests.mediacache(["url", "--lan", "--token", token, song])
            #expect(loopbackOnly.status != 0 && loopbackOnly.error.contains("serve --lan ADDRESS"), "\(loopbackOnly)")
        }
    }
}
