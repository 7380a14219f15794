// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Alternates the streams' own manifests name, with no configuration: two origins serve the
/// same HLS and DASH assets (files ffmpeg made); the master lists each variant on both (as
/// redundant streams, or as content steering's pathways), the MPD has a `BaseURL` for each. The
/// first origin answers `503` for every segment after the first ones: ffmpeg plays to the end
/// through the proxy, every stored segment is the file, the second origin served the rest, and
/// a replay asks neither.
@Suite(.stallLimit, .endToEnd, .enabled(if: toolExists("ffmpeg")))
struct ManifestAlternatesTests {
    enum Form: String, CaseIterable {
        case redundantVariants, steeringPathways, dashBaseURLs
    }

    /// Serves `folder`'s files on `origin` under `/<name>/`, failing (`503`) every segment
    /// after the first two of each stream when `failing`.
    static func serve(_ folder: URL, as name: String, on origin: TestOrigin, failing: Bool) throws -> [String: [UInt8]]
    {
        var files: [String: [UInt8]] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let bytes = Array(try Data(contentsOf: folder.appendingPathComponent(file)))
            var resource = TestOrigin.Resource(
                body: .bytes(bytes), mimeType: "application/octet-stream", etag: "\"\(file)\"")
            let number = Int(file.filter(\.isNumber).suffix(5)) ?? 0
            let isSegment = file.hasSuffix(".ts") || file.hasPrefix("chunk")
            if failing, isSegment, number >= (file.hasSuffix(".ts") ? 2 : 3) { resource.faults.status = 503 }
            origin.serve(resource, at: "/\(name)/\(file)")
            files["/\(name)/\(file)"] = bytes
        }
        return files
    }

    @Test(arguments: Form.allCases) func aPlayGoesOnFromTheAlternateTheManifestNames(form: Form) async throws {
        let (first, second) = (try await TestOrigin.start(), try await TestOrigin.start())
        defer {
            Task {
                try? await first.shutdown()
                try? await second.shutdown()
            }
        }
        try await withTemporaryDirectory { directory in
            try await NginxOriginTests.makeStreams(in: directory)
            let kind = form == .dashBaseURLs ? "dash" : "hls"
            let folder = directory.appendingPathComponent(kind)
            let files = try Self.serve(folder, as: kind, on: first, failing: true)
            _ = try Self.serve(folder, as: kind, on: second, failing: false)
            let (a, b) = (first.url("/\(kind)/").absoluteString, second.url("/\(kind)/").absoluteString)
            let entry: String
            switch form {
            case .redundantVariants:
                let inf = "#EXT-X-STREAM-INF:BANDWIDTH=500000,RESOLUTION=320x180"
                entry = "#EXTM3U\n\(inf)\n\(a)index.m3u8\n\(inf)\n\(b)index.m3u8\n"
            case .steeringPathways:
                let inf = "#EXT-X-STREAM-INF:BANDWIDTH=500000,STABLE-VARIANT-ID=\"v1\",PATHWAY-ID="
                entry = "#EXTM3U\n\(inf)\"A\"\n\(a)index.m3u8\n\(inf)\"B\"\n\(b)index.m3u8\n"
            case .dashBaseURLs:
                let mpd = String(decoding: files["/dash/manifest.mpd"] ?? [], as: UTF8.self)
                let open = try #require(
                    mpd.range(of: ">", range: try #require(mpd.range(of: "<MPD"))!.upperBound..<mpd.endIndex))
                entry =
                    String(mpd[..<open.upperBound]) + "<BaseURL>\(a)</BaseURL><BaseURL>\(b)</BaseURL>"
                    + String(mpd[open.upperBound...])
            }
            let entryPath = form == .dashBaseURLs ? "/entry.mpd" : "/entry.m3u8"
            let type = form == .dashBaseURLs ? "application/dash+xml" : "application/vnd.apple.mpegurl"
            first.serve(TestOrigin.Resource(body: .bytes(Array(entry.utf8)), mimeType: type), at: entryPath)
            let recorder = LogRecorder()
            var reader = CachingReader.Configuration()
            reader.logger = recorder.logger()
            try await ProxyHarness.with(reader: reader) { proxy in
                let url = proxy.proxyURL(for: first.url(entryPath).absoluteString)
                let play = try await runTool(["ffmpeg", "-v", "error", "-i", url, "-f", "null", "-"])
                #expect(play.status == 0, "\(form): \(play.error)")
                let failed = files.keys.filter { first.requests($0).contains { $0.status == 503 } }
                #expect(!failed.isEmpty, "the first origin failed some segments")
                for path in failed {
                    #expect(second.requests(path).contains { $0.status == 200 || $0.status == 206 }, "\(path)")
                    let stored = try await collect(try await proxy.base.reader.read(first.url(path)))
                    #expect(Array(stored.readableBytesView) == files[path], "\(path) is the file")
                }
                #expect(recorder.all.contains { $0.level == .warning && $0.message.contains("asking an alternate") })
                first.resetCounters()
                second.resetCounters()
                let replay = try await runTool(["ffmpeg", "-v", "error", "-i", url, "-f", "null", "-"])
                #expect(replay.status == 0)
                let asked = files.keys.filter { !first.requests($0).isEmpty || !second.requests($0).isEmpty }
                #expect(asked.filter { !$0.hasSuffix(".m3u8") && !$0.hasSuffix(".mpd") }.isEmpty, "\(asked.sorted())")
            }
        }
    }
}
