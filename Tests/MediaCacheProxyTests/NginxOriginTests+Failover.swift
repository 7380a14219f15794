// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension NginxOriginTests {
    /// Two nginx origins serve the same HLS and DASH assets (copied with their times, so their
    /// `ETag`s agree); `--origin-fallback` names the second for the first. The proxy has the
    /// playlist or manifest from the first, the first nginx is stopped, and ffmpeg, mpv and
    /// GStreamer play each in real time through the proxy: the
    /// play ends without an error, the rest comes from the second, the failover is logged, every
    /// stored segment is the files' bytes, and a replay asks neither origin for what it served.
    @Test(
        .enabled(if: toolExists("ffmpeg") && toolExists("mpv") && toolExists("gst-launch-1.0")),
        arguments: ["ffmpeg", "mpv", "gstreamer"])
    func aPlayGoesOnFromASecondNginxWhenTheFirstStops(_ player: String) async throws {
        for (folder, entry) in [("/hls/", "/hls/index.m3u8"), ("/dash/", "/dash/manifest.mpd")] {
            try await withTemporaryDirectory { directory in
                let expires = ["/hls/": 86_400, "/dash/": 86_400]
                try await NginxOrigin.with(in: directory.appendingPathComponent("a"), expires: expires) { first in
                    try await NginxOrigin.with(in: directory.appendingPathComponent("b"), expires: expires) { second in
                        try await Self.failOver(player, folder, entry, from: first, to: second)
                    }
                }
            }
        }
    }

    private static func failOver(
        _ player: String, _ folder: String, _ entry: String, from first: NginxOrigin, to second: NginxOrigin
    ) async throws {
        try await Self.makeStreams(in: first.root)
        let copied = try await runTool(["cp", "-p", "-r", first.root.path + folder, second.root.path + "/"])
        #expect(copied.status == 0, "\(copied.error)")
        let recorder = LogRecorder()
        var reader = CachingReader.Configuration()
        reader.originFallbacks = ["127.0.0.1:\(first.port)": ["127.0.0.1:\(second.port)"]]
        reader.logger = recorder.logger()
        try await ProxyHarness.with(reader: reader) { h in
            let url = h.proxyURL(for: first.url + entry)
            // The playlist or manifest through the proxy first, then the first origin stopped,
            // then the play: stopped while the player ran, the first had at times served every
            // segment before it stopped (mpv's cache reads a short stream at once; sooner still
            // as misses got cheaper), and nothing was left to fail over. The read-ahead the
            // playlist starts ends before the stop.
            let listed = try await h.get(url)
            #expect(listed.status == 200, "\(entry)")
            try await waitUntil { h.base.reader.activeDownloads == 0 }
            await first.stop()
            let played = try await runTool(Self.realTimePlay(player, url))
            #expect(played.status == 0, "\(player) \(entry): \(played.error)")
            #expect(
                recorder.all.contains { $0.level == .warning && $0.message.contains("asking an alternate") },
                "\(entry): the failover is logged")
            #expect(!second.requests().filter { $0.target.hasPrefix(folder) }.isEmpty, "\(entry)")
            try await waitUntil { h.base.reader.activeDownloads == 0 }
            // Every stored resource of the asset is the files' bytes.
            let files = try FileManager.default.contentsOfDirectory(atPath: second.root.path + folder)
            var compared = 0
            for name in files {
                let fileURL = URL(string: first.url + folder + name)!
                let bytes = try second.bytes(at: folder + name)
                let key = h.base.store.key(for: fileURL)
                guard h.base.store.spans(for: key).contains(ByteRange(0, Int64(bytes.count))),
                    let stream = h.base.reader.cachedRead(fileURL, range: ByteRange(0, Int64(bytes.count)))
                else { continue }
                var held = Data()
                for try await chunk in stream { held.append(contentsOf: chunk.readableBytesView) }
                #expect(held == bytes, "\(entry): \(name)")
                compared += 1
            }
            #expect(compared >= 7, "\(entry): \(compared) resources stored whole of \(files.count)")
            // What either origin served in the play is never asked again: a replay (ffmpeg's,
            // which may read what the first player did not) asks the second for none of it.
            let served = Set(
                (first.requests() + second.requests()).filter { [200, 206].contains($0.status) }.map(\.target))
            let before = second.requests().count
            let again = try await runTool(["ffmpeg", "-v", "error", "-i", url, "-f", "null", "-"])
            #expect(again.status == 0, "\(entry) replay: \(again.error)")
            let asked = second.requests().dropFirst(before).filter { served.contains($0.target) }
            #expect(asked.isEmpty, "\(entry): the replay asked the second origin again for \(asked)")
        }
    }

    /// The command that plays `url` in real time with `player`, showing errors only.
    static func realTimePlay(_ player: String, _ url: String) -> [String] {
        switch player {
        case "mpv":
            [
                "timeout", "120", "mpv", "--no-config", "--ytdl=no", "--vo=null", "--ao=null", "--msg-level=all=error",
                url,
            ]
        case "gstreamer":
            [
                "timeout", "120", "gst-launch-1.0", "-q", "playbin", "uri=\(url)", "audio-sink=fakesink sync=true",
                "video-sink=fakesink sync=true",
            ]
        default: ["ffmpeg", "-v", "error", "-re", "-i", url, "-f", "null", "-"]
        }
    }
}
