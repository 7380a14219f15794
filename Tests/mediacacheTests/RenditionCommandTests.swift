// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// `pin`, `downloads`, `info`, `unpin` and `export` with rendition options, through a running server.
@Suite(.stallLimit, .endToEnd) struct RenditionCommandTests {
    static func mediacache(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        try await CacheCommandTests.mediacache(arguments)
    }

    @Test func renditionsArePinnedAddedListedReleasedAndExported() async throws {
        let origin = try await TestOrigin.start()
        origin.serveRenditionAsset()
        try await RunningServer.with(origin: origin) { server in
            let folder = server.folder
            let master = origin.url("/hls/master.m3u8").absoluteString
            let pinned = try await Self.mediacache([
                "pin", "--cache-dir", folder, "--variant", "120p", "--audio", "fr", master,
            ])
            #expect(pinned.status == 0 && pinned.output.contains("completed"), "\(pinned.output) \(pinned.error)")
            #expect(origin.requests("/hls/a_en.m3u8").isEmpty && origin.requests("/hls/v1.m3u8").isEmpty)

            let added = try await Self.mediacache(["pin", "--cache-dir", folder, "--audio", "en", master])
            #expect(added.status == 0 && added.output.contains("completed"), "\(added.output) \(added.error)")
            #expect(origin.bodyBytesSent("/hls/a_en-0.ts") == 40_000 && origin.requests("/hls/v1.m3u8").isEmpty)
            let listed = try await Self.mediacache(["downloads", "--cache-dir", folder])
            for line in [
                "variant   120p  0.3 Mbit/s  held (2/2)", "audio     fr  \"Français\"  held (2/2)",
                "audio     en  \"English\"  held (2/2)",
            ] {
                #expect(listed.output.contains(line), "\(line) not in \(listed.output)")
            }
            let info = try await Self.mediacache(["info", "--cache-dir", folder, master])
            #expect(info.output.contains("Pinned by:") && info.output.contains("audio     en"), "\(info.output)")

            let unknown = try await Self.mediacache(["pin", "--cache-dir", folder, "--audio", "de", master])
            #expect(
                unknown.status == 1 && unknown.error.contains("has no audio in de; it has en, fr"), "\(unknown.error)")
            let badOption = try await Self.mediacache(["unpin", "--cache-dir", folder, "--seconds", "3", master])
            #expect(badOption.status != 0 && badOption.error.contains("no --seconds"), "\(badOption.error)")

            let released = try await Self.mediacache(["unpin", "--cache-dir", folder, "--audio", "en", master])
            #expect(
                released.status == 0 && released.output.contains("unpinned (renditions)"),
                "\(released.output) \(released.error)")
            let jobs = try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder])
            #expect(
                jobs.count == 1 && jobs[0].renditions?.map { $0.rendition.language ?? "" } == ["", "fr"], "\(jobs)")
            let lastAudio = try await Self.mediacache(["unpin", "--cache-dir", folder, "--audio", "fr", master])
            #expect(lastAudio.status == 1 && lastAudio.error.contains("leave no audio"), "\(lastAudio.error)")

            // Exported with no options: what is held, the English audio included (released, still stored).
            let output = URL(fileURLWithPath: folder).deletingLastPathComponent().appendingPathComponent("exported")
            let exported = try await Self.mediacache(["export", "--cache-dir", folder, master, "--output", output.path])
            #expect(exported.status == 0, "\(exported.error)")
            let index = try String(contentsOf: output.appendingPathComponent("index.m3u8"), encoding: .utf8)
            #expect(
                index.contains("160x120") && !index.contains("320x240") && index.contains("LANGUAGE=\"fr\"")
                    && index.contains("LANGUAGE=\"en\""), "\(index)")
        }
        try await origin.shutdown()
    }

    /// `pin --replace-url JOB URL` through a server: the job takes the new signed URL, and under
    /// the server's key rule keeps every byte it holds (the origin sends nothing more).
    @Test func aJobTakesANewSignedURL() async throws {
        let origin = try await TestOrigin.start()
        var film = TestOrigin.Resource.generated(length: 1_500_000, seed: 95)
        film.faults.requiredQuery = "sig=1"
        origin.serve(film, at: "/s/film.mp4")
        try await RunningServer.with(["--ignore-query-param", "sig"], origin: origin) { server in
            let folder = server.folder
            let pinned = try await Self.mediacache([
                "pin", "--cache-dir", folder, origin.url("/s/film.mp4?sig=1").absoluteString,
            ])
            #expect(pinned.status == 0 && pinned.output.contains("completed"), "\(pinned.output) \(pinned.error)")
            let id = try #require(
                try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder]).first?.id)
            origin.update("/s/film.mp4") { $0.faults.requiredQuery = "sig=2" }
            let sent = origin.bodyBytesSent("/s/film.mp4")
            let fresh = origin.url("/s/film.mp4?sig=2").absoluteString
            let replaced = try await Self.mediacache(["pin", "--cache-dir", folder, "--replace-url", id, fresh])
            #expect(
                replaced.status == 0 && replaced.output.contains("completed"), "\(replaced.output) \(replaced.error)")
            let jobs = try await CacheCommandTests.json([DownloadJob].self, ["downloads", "--cache-dir", folder])
            #expect(jobs.map(\.url.absoluteString) == [fresh] && jobs.first?.state == .completed)
            #expect(origin.bodyBytesSent("/s/film.mp4") == sent, "bytes held were fetched again")
            let twoURLs = try await Self.mediacache(["pin", "--cache-dir", folder, "--replace-url", id, fresh, fresh])
            #expect(twoURLs.status != 0 && twoURLs.error.contains("one job and one new URL"), "\(twoURLs.error)")
        }
        try await origin.shutdown()
    }
}
