import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// DASH through the proxy, with presentations ffmpeg makes at test time and ffmpeg as the
/// player: each decodes through the proxy to the direct play's md5, the manifest the player
/// gets names no origin address, and a second play makes no origin request. One at a time,
/// for the reason HLSProxyTests gives.
@Suite(.serialized) struct DASHProxyTests {
    static let hasFFmpeg = toolExists("ffmpeg")

    /// The kinds of DASH the test origin serves, each under `/dash/`.
    enum Form: String, CaseIterable, CustomTestStringConvertible {
        /// `SegmentTemplate` with `$Number$` and a segment duration.
        case templateNumber
        /// `SegmentTemplate` with a `SegmentTimeline` and `$Number$`.
        case templateTimeline
        /// `SegmentTemplate` with a `SegmentTimeline` and `$Time$`.
        case templateTime
        /// `SegmentList` with a `SegmentURL` per segment.
        case segmentList
        /// Relative `BaseURL`s nested at the Period and AdaptationSet levels, the manifest asked
        /// for with a query that relative references do not inherit.
        case nestedBaseURLs

        var testDescription: String { rawValue }
        /// What the manifest the origin serves must hold, so the case is what it says.
        var marker: String {
            switch self {
            case .templateNumber: "duration=\"1000000\" initialization"
            case .templateTimeline: "<SegmentTimeline>"
            case .templateTime: "$Time$"
            case .segmentList: "<SegmentURL"
            case .nestedBaseURLs: "<BaseURL>v/</BaseURL>"
            }
        }
        var entry: String { self == .nestedBaseURLs ? "/dash/m.mpd?token=abc" : "/dash/m.mpd" }
        /// What the direct play is asked for.
        var direct: String { self == .nestedBaseURLs ? "/dash/flat.mpd" : "/dash/m.mpd" }
    }

    /// Makes `form` in `directory`.
    static func make(_ form: Form, in directory: URL) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var options: [String] = []
        switch form {
        case .templateNumber, .nestedBaseURLs: options = ["-use_timeline", "0"]
        case .templateTimeline: break
        case .templateTime: options = ["-media_seg_name", "chunk-$RepresentationID$-$Time$.$ext$"]
        case .segmentList: options = ["-use_template", "0"]
        }
        let result = try await runTool(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10",
                                        "-f", "lavfi", "-i", "sine=frequency=330:duration=3", "-shortest", "-threads", "1",
                                        "-c:v", "mpeg4", "-q:v", "8", "-c:a", "aac", "-f", "dash", "-seg_duration", "1"]
                                       + options + [directory.appendingPathComponent("m.mpd").path])
        #expect(result.status == 0, "ffmpeg \(form): \(result.error)")
        guard form == .nestedBaseURLs else { return }
        // The segments move to media/v/, named by a Period base and an AdaptationSet base.
        let nested = directory.appendingPathComponent("media/v")
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".m4s") {
            try FileManager.default.moveItem(at: directory.appendingPathComponent(name), to: nested.appendingPathComponent(name))
        }
        let manifest = directory.appendingPathComponent("m.mpd")
        var text = try String(contentsOf: manifest, encoding: .utf8)
        // ffmpeg itself fails on nested relative bases ("Error when loading first fragment"):
        // the direct play it is compared with names the folder in the templates instead.
        try text.replacingOccurrences(of: "initialization=\"", with: "initialization=\"media/v/").replacingOccurrences(of: "media=\"", with: "media=\"media/v/")
            .write(to: directory.appendingPathComponent("flat.mpd"), atomically: true, encoding: .utf8)
        text = text.replacingOccurrences(of: "<Period id=\"0\" start=\"PT0.0S\">", with: "<Period id=\"0\" start=\"PT0.0S\">\n\t\t<BaseURL>media/</BaseURL>")
        let sets = text.components(separatedBy: "<AdaptationSet ")
        text = sets[0] + sets.dropFirst().map { set in
            guard let close = set.firstIndex(of: ">") else { return "<AdaptationSet " + set }
            return "<AdaptationSet " + set[...close] + "\n\t\t\t<BaseURL>v/</BaseURL>" + set[set.index(after: close)...]
        }.joined()
        try text.write(to: manifest, atomically: true, encoding: .utf8)
    }

    /// Serves every file of `directory` under `/dash/`; returns their paths.
    static func serve(_ directory: URL, on origin: TestOrigin) throws -> [String] {
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        var paths: [String] = []
        for file in files where ["mpd", "m4s", "mp4"].contains(file.pathExtension) {
            let path = "/dash" + file.path.dropFirst(directory.path.count)
            let type = file.pathExtension == "mpd" ? "application/dash+xml" : "video/iso.segment"
            origin.serve(TestOrigin.Resource(body: .bytes(Array(try Data(contentsOf: file))), mimeType: type), at: path)
            paths.append(path)
        }
        return paths
    }

    static func decodeHash(_ input: String) async throws -> String {
        let result = try await runTool(["ffmpeg", "-v", "error", "-i", input, "-map", "0", "-threads", "1", "-f", "md5", "-"])
        #expect(result.status == 0, "ffmpeg \(input): \(result.error)")
        return String(decoding: result.output, as: UTF8.self)
    }

    @Test(.enabled(if: hasFFmpeg, "ffmpeg is installed by .ci/run"), arguments: Form.allCases)
    func playsThroughTheProxyThenFromTheCache(_ form: Form) async throws {
        try await withTemporaryDirectory { directory in
            try await ProxyHarness.with { h in
                try await Self.make(form, in: directory)
                let paths = try Self.serve(directory, on: h.origin)
                let origin = String(h.origin.url("/").absoluteString.dropLast())
                let served = String(decoding: try Data(contentsOf: directory.appendingPathComponent("m.mpd")), as: UTF8.self)
                #expect(served.contains(form.marker), "\(form): \(served)")
                let entry = h.origin.url("/").absoluteString.dropLast() + form.entry
                let manifest = try await h.get(h.proxyURL(for: String(entry)))
                let text = String(buffer: manifest.body)
                #expect(manifest.status == 200 && text.contains("<MPD"), "\(manifest.status)")
                #expect(!text.contains(origin), "the manifest names the origin: \(text)")
                #expect(text.contains("<BaseURL>http://127.0.0.1:\(h.port)/o/"), "\(text)")
                let direct = try await Self.decodeHash(h.origin.url(form.direct).absoluteString)
                let proxied = try await Self.decodeHash(h.proxyURL(for: String(entry)))
                #expect(direct.hasPrefix("MD5=") && proxied == direct, "direct \(direct), proxied \(proxied)")
                // A second play costs the origin nothing.
                h.origin.resetCounters()
                #expect(try await Self.decodeHash(h.proxyURL(for: String(entry))) == direct)
                let asked = paths.flatMap { h.origin.requests($0) }
                #expect(asked.isEmpty, "second play reached the origin: \(asked)")
            }
        }
    }
}
