import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// HLS through the proxy, with streams ffmpeg makes at test time and ffmpeg as the player.
@Suite struct HLSProxyTests {
    static let hasFFmpeg = toolExists("ffmpeg")

    /// Two TS variants of a 3 s clip (`v0`, `v1`: 1 s segments) and a master playlist naming
    /// one relatively and one root-relatively; every file is served by the origin under `/hls/`.
    static func serveTwoVariants(_ h: ProxyHarness, in directory: URL) async throws -> [String] {
        var paths: [String] = []
        for (index, size) in ["160x120", "320x240"].enumerated() {
            let folder = directory.appendingPathComponent("v\(index)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let made = try await runTool(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=\(size):rate=10",
                                          "-f", "lavfi", "-i", "sine=frequency=330:duration=3", "-c:v", "mpeg2video", "-q:v", "8", "-c:a", "mp2",
                                          "-shortest", "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
                                          "-hls_segment_filename", folder.appendingPathComponent("seg%03d.ts").path,
                                          folder.appendingPathComponent("index.m3u8").path])
            #expect(made.status == 0, "ffmpeg: \(made.error)")
        }
        let master = """
        #EXTM3U
        #EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120
        v0/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=320x240
        /hls/v1/index.m3u8

        """
        try master.write(to: directory.appendingPathComponent("master.m3u8"), atomically: true, encoding: .utf8)
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where ["m3u8", "ts"].contains(file.pathExtension) {
            let path = "/hls" + file.path.dropFirst(directory.path.count)
            let type = file.pathExtension == "ts" ? "video/mp2t" : "application/vnd.apple.mpegurl"
            h.origin.serve(TestOrigin.Resource(body: .bytes(Array(try Data(contentsOf: file))), mimeType: type), at: path)
            paths.append(path)
        }
        return paths
    }

    static func decodeHash(_ input: String) async throws -> String {
        let result = try await runTool(["ffmpeg", "-v", "error", "-i", input, "-map", "0", "-f", "md5", "-"])
        #expect(result.status == 0, "ffmpeg \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self)
    }

    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"))
    func aMasterPlaylistWithTwoVariantsPlaysThroughTheProxyThenFromTheCache() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("hls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await ProxyHarness.with { h in
            let paths = try await Self.serveTwoVariants(h, in: directory)
            #expect(paths.count >= 8, "\(paths)")
            let master = h.url("/hls/master.m3u8")
            // The rewritten playlists send every URI back through the proxy and name no origin address.
            let origin = h.origin.url("/").absoluteString.dropLast()  // http://127.0.0.1:PORT
            for path in ["/hls/master.m3u8", "/hls/v0/index.m3u8", "/hls/v1/index.m3u8"] {
                let reply = try await h.get(h.url(path))
                let text = String(buffer: reply.body)
                #expect(reply.status == 200 && text.hasPrefix("#EXTM3U"), "\(path): \(reply.status)")
                #expect(!text.contains(origin), "\(path) names the origin: \(text)")
                let uris = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                #expect(!uris.isEmpty && uris.allSatisfy { $0.hasPrefix("http://127.0.0.1:\(h.port)/") }, "\(path): \(uris)")
                #expect(uris.allSatisfy { $0.contains(".ts?url=") || $0.contains(".m3u8?url=") }, "\(path): \(uris)")
            }
            let direct = try await Self.decodeHash(h.origin.url("/hls/master.m3u8").absoluteString)
            let proxied = try await Self.decodeHash(master)
            #expect(direct.hasPrefix("MD5=") && proxied == direct, "direct \(direct), proxied \(proxied)")
            // A second play costs the origin nothing.
            h.origin.resetCounters()
            #expect(try await Self.decodeHash(master) == direct)
            let asked = paths.flatMap { h.origin.requests($0) }
            #expect(asked.isEmpty, "second pass reached the origin: \(asked)")
        }
    }
}
