// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// `mediacache serve` in front of nginx whose answers carry the files' digests (`add_header`,
/// as an origin that knows its files does), played whole with curl: the entries whose bytes
/// match show as verified in `info` and `verify`; the one whose digest is wrong is dropped
/// after the play, named in the log with both digests, and the next play asks the origin again.
@Suite(
    .stallLimit, .endToEnd, .enabled(if: ChildProcess.toolExists("curl")),
    .enabled(if: NginxOrigin.isInstalled, "nginx is not installed (.ci/run installs nginx-light)"))
struct OriginDigestServeTests {
    static func entry(_ folder: String, _ url: URL) async throws -> CacheEntrySummary {
        try await CacheCommandTests.json(CacheEntrySummary.self, ["info", "--cache-dir", folder, url.absoluteString])
    }

    @Test func digestsFromNginxAreCheckedOnceEachFileIsWhole() async throws {
        try await withTemporaryDirectory { directory in
            let song = Array(DeterministicContent(seed: 71).buffer(offset: 0, length: 2_500_000).readableBytesView)
            let other = Array(DeterministicContent(seed: 72).buffer(offset: 0, length: 900_000).readableBytesView)
            let wrong = Array(DeterministicContent(seed: 73).buffer(offset: 0, length: 900_000).readableBytesView)
            func sha256(_ bytes: [UInt8]) -> String { Data(SHA256.hash(data: bytes)).base64EncodedString() }
            func md5(_ bytes: [UInt8]) -> String { Data(Insecure.MD5.hash(data: bytes)).base64EncodedString() }
            try await NginxOrigin.with(
                in: directory.appendingPathComponent("nginx"),
                fields: [
                    "/song.mp3": [("Repr-Digest", "sha-256=:\(sha256(song)):")],
                    "/gcs.mp3": [("x-goog-hash", "md5=\(md5(other))")],
                    // The digest of other bytes: a mismatch.
                    "/wrong.mp3": [("Repr-Digest", "sha-256=:\(sha256(wrong)):, unixsum=12")],
                ]
            ) { nginx in
                let urls = (
                    song: try nginx.serve(Data(song), at: "/song.mp3"),
                    gcs: try nginx.serve(Data(other), at: "/gcs.mp3"),
                    wrong: try nginx.serve(Data(other), at: "/wrong.mp3")
                )
                let folder = directory.appendingPathComponent("cache").path
                let log = directory.appendingPathComponent("serve.log")
                let (server, info) = try await DamagedStoreTests.startServer(folder, log: log)
                #expect(try await DamagedStoreTests.curl(info, urls.song) == song)
                #expect(try await DamagedStoreTests.curl(info, urls.gcs) == other)
                #expect(try await DamagedStoreTests.curl(info, urls.wrong) == other)

                // The checks run in the background once each file is whole: looked at until they end.
                var entries: [CacheEntrySummary] = []
                var mismatchLogged = false
                while true {
                    entries = [try await Self.entry(folder, urls.song), try await Self.entry(folder, urls.gcs)]
                    mismatchLogged = (try? String(contentsOf: log, encoding: .utf8))?.contains("/wrong.mp3") == true
                    if entries.allSatisfy({ $0.digestsMatched != nil }), mismatchLogged { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(
                    entries[0].digestsMatched == ["sha-256"] && entries[0].originDigests == ["sha-256 (Repr-Digest)"])
                #expect(entries[1].digestsMatched == ["md5"] && entries[1].originDigests == ["md5 (x-goog-hash)"])
                let text = try String(contentsOf: log, encoding: .utf8)
                let line = try #require(
                    text.split(separator: "\n").first { $0.contains("do not match the origin's digest") })
                #expect(line.contains(urls.wrong.absoluteString), "\(line)")
                #expect(
                    line.contains("sha-256=:\(sha256(wrong)):") && line.contains("sha-256=:\(sha256(other)):"),
                    "\(line)")
                #expect(try await Self.entry(folder, urls.wrong).storedBytes == 0)

                // Nothing of the dropped one is served again: its next play asks nginx for all of it.
                let before = nginx.requests("/wrong.mp3").count
                #expect(try await DamagedStoreTests.curl(info, urls.wrong) == other)
                let asked = nginx.requests("/wrong.mp3").dropFirst(before)
                #expect(asked.first?.range == nil || asked.first?.range?.hasPrefix("bytes=0-") == true, "\(asked)")
                #expect(asked.reduce(0) { $0 + $1.bytes } >= Int64(other.count), "\(asked)")

                // `verify` hashes the whole files again and says so.
                let verified = try await CacheCommandTests.mediacache(
                    ["verify", "--cache-dir", folder, "--json", urls.song.absoluteString, urls.gcs.absoluteString])
                #expect(verified.status == 0, "\(verified.error)")
                let reports = try JSONDecoder().decode([VerifyReport].self, from: Data(verified.output.utf8))
                #expect(reports.map(\.originDigest) == [.matched(["sha-256"]), .matched(["md5"])], "\(reports)")
                await server.stop()
            }
        }
    }
}
