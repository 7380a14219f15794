// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// A daily window's text (`serve --download-window`, `pin --window`, `window=`) and
    /// NetworkManager's `Metered` answer, each against a model over the bytes: a window is
    /// `H:MM` or `HH:MM` twice, hours under 24 (or `24:00`), minutes under 60, or `any` in any
    /// case; what is read writes back to the same window. An answer is `u` and one digit 0-4.
    @Test func downloadRuleTextsAreReadAsTheModelSays() throws {
        let outcomes = try Mutator.run("download-rules") { input in
            let window = DownloadRules.Window(input)
            let model = Self.modelWindow(Array(input.utf8))
            guard window.map({ [$0.start, $0.end] }) == model else {
                return ("window mismatch", "read \(String(describing: window)), model \(String(describing: model))")
            }
            if let window, DownloadRules.Window(window.description) != window {
                return (
                    "round trip",
                    "\(window) reads back as \(String(describing: DownloadRules.Window(window.description)))"
                )
            }
            let answer = DownloadRules.NetworkConditions(networkManagerMetered: input)
            let fields = Array(input.utf8).split(whereSeparator: { [9, 10, 11, 12, 13, 32].contains($0) })
            let digit =
                fields.count == 2 && fields[0].elementsEqual("u".utf8) && fields[1].count == 1
                    && (48...52).contains(fields[1].first!)
                ? Int(fields[1].first! - 48) : nil
            let expected =
                input.utf8.count <= 64
                ? digit.map { DownloadRules.NetworkConditions(isMetered: $0 == 1 || $0 == 3) } : nil
            guard answer == expected || !input.unicodeScalars.allSatisfy(\.isASCII) else {
                return ("answer mismatch", "read \(String(describing: answer)), model \(String(describing: expected))")
            }
            return (window != nil ? "window" : answer != nil ? "answer" : "refused", nil)
        }
        try Mutator.expectVaried(outcomes, ["window", "answer", "refused"])
    }

    /// The start and end minutes the model reads from `bytes`, or `nil`.
    static func modelWindow(_ bytes: [UInt8]) -> [Int]? {
        if bytes.count == 3, String(decoding: bytes, as: UTF8.self).lowercased() == "any" { return [0, 0] }
        guard bytes.count <= 11 else { return nil }
        let halves = bytes.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        var minutes: [Int] = []
        for half in halves {
            let parts = half.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
                parts.allSatisfy({ $0.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } })
            else { return nil }
            let hours = parts[0].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            let minute = parts[1].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard minute < 60, hours < 24 || (hours == 24 && minute == 0) else { return nil }
            minutes.append((hours * 60 + minute) % 1440)
        }
        return minutes
    }
}
