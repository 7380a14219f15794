// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport
import Testing

/// ``CachingReader/exportFile(_:to:renditions:)`` in the app's process (the engine's API, run
/// under CI's blocking-call check): ffmpeg-made HLS pinned by a ``DownloadQueue`` over a real
/// loopback origin, written as one file with the origin stopped, decoding into the frames the
/// asset decodes into. fMP4 whose init section holds both tracks; TS under AES-128 in an
/// encrypted store (which keeps keys); the same asset in a store that keeps no keys, and an asset
/// never pinned, refused with nothing left behind.
@Suite(.stallLimit) struct OneFileExportTests {
    @Test(.enabled(if: HLSProxyTests.hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func pinnedAssetsBecomeOneFileInTheAppsProcess() async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            var direct: [String: [String]] = [:]
            for (name, stream) in [("fmp4", HLSProxyTests.Stream.fragmentedMP4), ("aes", .aes128)] {
                let made = directory.appendingPathComponent(name)
                try await HLSProxyTests.make(stream, in: made, originURL: "")
                for path in try HLSProxyTests.serve(made, on: origin) {
                    // Each asset under its own folder: /fmp4/hls/…, /aes/hls/….
                    if let resource = origin.resource(at: path) { origin.serve(resource, at: "/\(name)\(path)") }
                }
                let playlist = origin.url("/\(name)/hls/v0/index.m3u8").absoluteString
                direct[name] = try await Self.md5(playlist)
            }
            var configuration = CacheStore.Configuration()
            configuration.encryptionKey = SymmetricKey(size: .bits256)
            let keeping = directory.appendingPathComponent("keeps-keys")
            try await Self.withEngine(keeping, configuration) { reader in
                let queue = try DownloadQueue(reader: reader)
                queue.start()
                for name in ["fmp4", "aes"] {
                    let job = try await queue.pin(origin.url("/\(name)/hls/v0/index.m3u8"))
                    #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
                }
                await queue.shutDown()
            }
            let plain = directory.appendingPathComponent("keeps-no-keys")
            try await Self.withEngine(plain, CacheStore.Configuration()) { reader in
                let queue = try DownloadQueue(reader: reader)
                queue.start()
                let job = try await queue.pin(origin.url("/aes/hls/v0/index.m3u8"))
                #expect(try await PinnedDownloadsTests.settled(job.id, in: queue).state == .completed)
                await queue.shutDown()
            }
            try await origin.shutdown()
            try await Self.withEngine(keeping, configuration) { reader in
                for (name, file) in [("fmp4", "film.mp4"), ("aes", "film.ts")] {
                    let path = directory.appendingPathComponent(file)
                    let summary = try await reader.exportFile(origin.url("/\(name)/hls/v0/index.m3u8"), to: path)
                    #expect(summary.files == 1 && summary.path == path.path)
                    let size = try FileManager.default.attributesOfItem(atPath: path.path)[.size] as? Int
                    #expect(Int64(size ?? 0) == summary.bytes)
                    #expect(try await Self.md5(path.path) == direct[name])
                }
                let never = directory.appendingPathComponent("never.mp4")
                await #expect(throws: CacheError.self) {
                    try await reader.exportFile(origin.url("/fmp4/hls/master.m3u8"), to: never)
                }
                #expect(!FileManager.default.fileExists(atPath: never.path))
            }
            try await Self.withEngine(plain, CacheStore.Configuration()) { reader in
                let path = directory.appendingPathComponent("keyless.ts")
                do {
                    try await reader.exportFile(origin.url("/aes/hls/v0/index.m3u8"), to: path)
                    Issue.record("a store without keys wrote an AES-128 asset")
                } catch let error as CacheError {
                    #expect(error.code == .offline && error.message.contains("AES-128 key"), "\(error)")
                }
                #expect(!FileManager.default.fileExists(atPath: path.path))
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                $0.hasSuffix(".partial")
            }
            #expect(left.isEmpty, "\(left)")
        }
    }

    static func withEngine(
        _ folder: URL, _ configuration: CacheStore.Configuration, _ body: (CachingReader) async throws -> Void
    )
        async throws
    {
        let store = try await CacheStore.open(directory: folder, configuration: configuration)
        let fetcher = HTTPOriginFetcher()
        let reader = CachingReader(store: store, fetcher: fetcher)
        try await runThenTearDown(
            reader, { try await body($0) },
            tearDown: { reader in
                await reader.shutDown()
                try await store.close()
                try await fetcher.shutdown()
            })
    }

    /// The md5 of the frames of `input`'s first video and first audio stream, as ffmpeg decodes them.
    static func md5(_ input: String) async throws -> [String] {
        let playlist = input.hasSuffix(".m3u8") ? ["-allowed_extensions", "ALL"] : []
        let result = try await runTool(
            ["ffmpeg", "-v", "error"] + playlist + [
                "-i", input, "-map", "0:v:0", "-map", "0:a:0", "-threads", "1", "-fps_mode", "passthrough", "-f",
                "streamhash", "-hash", "md5", "-",
            ])
        #expect(result.status == 0 && result.error.isEmpty, "ffmpeg \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}
