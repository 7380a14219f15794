// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import MediaCacheProxy

/// The proxy's counts: by result, bytes by source, and the last 50 requests oldest first.
@Suite(.stallLimit) struct ProxyStatisticsTests {
    @Test func countsAndTheLastFiftyRequestsInOrder() {
        let statistics = ProxyStatistics()
        let results: [CacheResult] = [.hit, .miss, .partial, .error]
        for index in 0..<123 {
            let result = results[index % results.count]
            statistics.record(
                .init(
                    at: Date(), method: "GET", url: "u\(index)", range: nil, status: 200, result: result.rawValue,
                    bytesFromCache: result == .hit ? 10 : 0, bytesFromOrigin: result == .miss ? 7 : 0), result: result)
        }
        let snapshot = statistics.snapshot
        #expect(snapshot.recent.map(\.url) == (73..<123).map { "u\($0)" })
        #expect(snapshot.requests == ["hit": 31, "miss": 31, "partial": 31, "error": 30, "pass-through": 0, "-": 0])
        #expect(snapshot.bytesFromCache == 310 && snapshot.bytesFromOrigin == 217)
        #expect(CacheResult.allCases.enumerated().allSatisfy { $0.offset == $0.element.index })
    }
}

/// The prefetch options from the command line and the admin endpoint (outside input): any
/// text is parsed or refused with a reason, never trapped on, and what is accepted is in bounds.
@Suite(.stallLimit) struct PrefetchRequestPropertyTests {
    @Test func anyTextIsParsedWithinBoundsOrRefused() {
        var random = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789-.e+abfirstlowhgpdeaultnon ,".utf8) + [0xFF, 0x00]
        func text() -> String? {
            guard Int.random(in: 0..<4, using: &random) > 0 else { return nil }
            return String(
                decoding: (0..<Int.random(in: 0...24, using: &random)).map { _ in
                    alphabet.randomElement(using: &random)!
                }, as: UTF8.self)
        }
        var accepted = 0
        for _ in 0..<20_000 {
            let (range, seconds, variant) = (text(), text(), text())
            let (audio, subtitles) = Int.random(in: 0..<4, using: &random) == 0 ? (text(), text()) : (nil, nil)
            do {
                let request = try PrefetchRequest.parse(
                    range: range, seconds: seconds, variant: variant, audio: audio, subtitles: subtitles)
                accepted += 1
                for languages in [request.renditions.audio, request.renditions.subtitles].compactMap({ $0 }) {
                    #expect(
                        languages.languages.count <= 32
                            && languages.languages.allSatisfy { !$0.isEmpty && $0.count <= 64 })
                    // What is accepted is written back as text that reads as the same choice.
                    #expect(
                        (try? RenditionChoice.Languages.parse(languages.text, option: "--audio")) == languages,
                        "\(languages)")
                }
                if case .atMostHeight(let lines) = request.variant { #expect(lines > 0 && lines <= 1 << 20) }
                if let bytes = request.range {
                    #expect(bytes.lowerBound < bytes.upperBound && bytes.upperBound <= ByteRange.maximumOffset)
                }
                if let value = request.seconds { #expect(value > 0 && value <= 1e7 && value.isFinite) }
                if case .atMost(let bps) = request.variant { #expect(bps > 0) }
            } catch {
                #expect(!error.message.isEmpty)
            }
        }
        #expect(accepted > 100, "only \\(accepted) of 20,000 were accepted")
        let known = try? PrefetchRequest.parse(range: "0-1048575", seconds: "90.5", variant: "2000000")
        #expect(
            known
                == PrefetchRequest(
                    range: ByteRange(0, 1_048_576), seconds: 90.5, variant: .atMost(bitsPerSecond: 2_000_000)))
        let chosen = try? PrefetchRequest.parse(
            range: nil, seconds: nil, variant: "720p", audio: "default,fr", subtitles: "none", trickPlay: "yes")
        #expect(
            chosen?.renditions
                == RenditionChoice(
                    variants: [.atMostHeight(720)],
                    audio: RenditionChoice.Languages(includesDefault: true, languages: ["fr"]),
                    subtitles: RenditionChoice.Languages.none, trickPlay: true)
        )
        #expect(throws: PrefetchRequestError.self) {
            try PrefetchRequest.parse(range: nil, seconds: nil, variant: nil, audio: "en;fr")
        }
        #expect(throws: PrefetchRequestError.self) {
            try PrefetchRequest.parse(range: nil, seconds: nil, variant: nil, subtitles: "none,en")
        }
    }
}
