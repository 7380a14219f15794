// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// A cache folder of the one-folder layout, written by the binary of commit 9c82513
/// (`Tests/Fixtures/store-9c82513.tar.gz`, made by `scripts/make-layout-fixture.sh`: a pinned
/// MP3 and a pinned HLS asset, two streaming files, from an origin on 127.0.0.1:47321 whose
/// answers are fresh for ten years). `mediacache serve` with the default folders
/// (`$XDG_DATA_HOME`, `$XDG_CACHE_HOME`) moves its index and pins to the data folder by itself:
/// every pin plays with the origin gone, every streaming entry is a hit; then the cache folder
/// is removed under the running server: the pins still play offline, the streaming files are
/// fetched again, nothing else breaks.
@Suite(.stallLimit, .endToEnd, .enabled(if: ChildProcess.toolExists("curl") && ChildProcess.toolExists("tar")))
struct LayoutMigrationTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/store-9c82513.tar.gz")
    static let originPort = 47321

    static func get(_ base: String, _ path: String) async throws -> (status: String, body: [UInt8], hit: Bool) {
        let url = "http://127.0.0.1:\(originPort)" + path
        let target = base + "/?url=" + (url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url)
        let head = FileManager.default.temporaryDirectory.appendingPathComponent("head-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: head) }
        let run = try await ChildProcess.run(["curl", "-s", "-D", head.path, "-w", "\n%{http_code}", target])
        var body = Array(run.output)
        let status = String(decoding: body.suffix(3), as: UTF8.self)
        body.removeLast(min(body.count, 4))
        let fields = (try? String(contentsOf: head, encoding: .utf8)) ?? ""
        // Split at any line end: "\r\n" is one Character, which a split at "\n" would not cut.
        let hit = fields.lowercased().components(separatedBy: .newlines).contains {
            $0.hasPrefix("cache-status:") && $0.contains(";hit")
        }
        return (status, body, hit)
    }

    @Test func aStoreOfTheOneFolderLayoutMovesInAndOutlivesItsCacheFolder() async throws {
        try await withTemporaryDirectory { directory in
            let unpacked = directory.appendingPathComponent("unpacked")
            try FileManager.default.createDirectory(at: unpacked, withIntermediateDirectories: true)
            let untar = try await ChildProcess.run(["tar", "xzf", Self.fixture.path, "-C", unpacked.path])
            try #require(untar.status == 0, "\(untar.error)")
            let (dataHome, cacheHome) = (
                directory.appendingPathComponent("data"), directory.appendingPathComponent("cache")
            )
            try FileManager.default.createDirectory(at: cacheHome, withIntermediateDirectories: true)
            let (store, old) = (
                dataHome.appendingPathComponent("mediacache"), cacheHome.appendingPathComponent("mediacache")
            )
            try FileManager.default.moveItem(at: unpacked.appendingPathComponent("store"), to: old)
            let files = unpacked.appendingPathComponent("files")
            func file(_ path: String) throws -> [UInt8] {
                Array(try Data(contentsOf: files.appendingPathComponent(path)))
            }

            let executable = try ChildProcess.executable(named: "mediacache")
            let (process, _) = try await ChildProcess.startServer(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    // With 256 descriptors at most (a Mac's default), the store keeps 32 files open.
                    "XDG_DATA_HOME=\(dataHome.path)", "XDG_CACHE_HOME=\(cacheHome.path)", "prlimit",
                    "--nofile=256:256", executable.path, "serve", "--port", "0",
                ],
                readyLinePrefix: "mediacache: serving on", errorFile: directory.appendingPathComponent("serve.log"))
            try await runThenTearDown(
                process,
                { _ in
                    let info = try JSONDecoder().decode(
                        ServerInfo.self, from: Data(contentsOf: store.appendingPathComponent("server.json")))
                    let base = info.baseURL
                    #expect(FileManager.default.fileExists(atPath: store.appendingPathComponent("index.sqlite").path))
                    #expect(!FileManager.default.fileExists(atPath: old.appendingPathComponent("index.sqlite").path))
                    // No origin runs: pins play, streaming entries are hits.
                    let hlsPaths = [
                        "/hls/master.m3u8", "/hls/media.m3u8", "/hls/seg0.ts", "/hls/seg1.ts", "/hls/seg2.ts",
                    ]
                    for path in ["/pinned.mp3", "/streamed.mp3", "/other.mp4"] + hlsPaths {
                        let answer = try await Self.get(base, path)
                        #expect(answer.status == "200", "\(path)")
                        if !path.hasSuffix(".m3u8") {
                            let expected = try file(path)
                            #expect(answer.body == expected && answer.hit, "\(path): a hit of the origin's bytes")
                        }
                    }
                    // The cache folder emptied under the running server.
                    try FileManager.default.removeItem(at: old)
                    for path in ["/pinned.mp3", "/hls/seg0.ts", "/hls/seg2.ts"] {
                        let (answer, expected) = (try await Self.get(base, path), try file(path))
                        #expect(answer.status == "200" && answer.body == expected, "\(path) plays offline")
                    }
                    let origin = try await TestOrigin.start(port: Self.originPort)
                    defer { Task { try? await origin.shutdown() } }
                    // The server keeps the last 32 files it read open (an open file outlives its
                    // folder): 40 other files read through it let those go.
                    for index in 0..<40 {
                        origin.serve(.generated(length: 1_000, seed: UInt64(index)), at: "/filler\(index).bin")
                        #expect(try await Self.get(base, "/filler\(index).bin").status == "200")
                    }
                    for path in ["/streamed.mp3", "/other.mp4"] {
                        // The same version the fixture's origin gave: no ETag, its Last-Modified (the
                        // file's time, which tar kept).
                        let modified =
                            try FileManager.default.attributesOfItem(
                                atPath: files.appendingPathComponent(path).path)[.modificationDate] as? Date
                        origin.serve(
                            TestOrigin.Resource(
                                body: .bytes(try file(path)), mimeType: "audio/mpeg", etag: nil,
                                lastModified: HTTPDate.format(Int64(modified?.timeIntervalSince1970 ?? 0))),
                            at: path)
                        let (answer, expected) = (try await Self.get(base, path), try file(path))
                        #expect(answer.status == "200" && answer.body == expected, "\(path) fetched again")
                        #expect(!origin.requests(path).isEmpty, "\(path) was asked of the origin")
                    }
                }, tearDown: { await $0.stop() })
        }
    }
}
