// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import MediaCacheProxy

extension ParserFuzzTests {
    /// The proxy's URL grammar against itself: whatever a request target reads as, written
    /// again reads back the same; and a target made of any text (as an origin path, a token,
    /// a CMCD, a variable), written in either form, reads back as it was made.
    @Test func proxyTargetsReadBackAsWritten() throws {
        // An eighth of the inputs (12,500 by default): each builds and reads eight targets.
        let outcomes = try Mutator.run("target", share: 8) { input in
            func again(_ target: ProxyTarget) -> ProxyTarget? { try? ProxyTarget(reading: RequestTarget(target.uri)) }
            var label = "refused"
            if let read = try? ProxyTarget(reading: RequestTarget(input)) {
                guard let back = again(read) else { return ("unreadable", "\(read) wrote \(read.uri)") }
                guard back == read else { return ("changed", "\(read) wrote \(read.uri), read as \(back)") }
                label = read.form == .path ? "path form" : "query form"
            }
            guard let origin = URL(string: "https://cdn.example:8443/a/" + input), origin.fragment == nil else {
                return (label, nil)
            }
            var made = ProxyTarget(origin, token: input)
            made.memoryOnly = input.count % 2 == 0
            made.assetList = input.count % 3 == 0
            made.cmcd = input
            made.imports = [input: input, "n": String(input.reversed())]
            if let track = SideLoadedSubtitle(language: "pt-BR", url: origin, name: input) {
                made.subtitles = [track, track]
            }
            made.subtitleRole =
                input.count % 2 == 0 ? .playlist(timeline: origin) : .file(mpegts: Int64(input.utf8.count))
            guard again(made) == made else {
                return ("made", "\(made) wrote \(made.uri), read as \(String(describing: again(made)))")
            }
            let path = ProxyTarget(origin, form: .path, token: input)
            guard again(path) == path else {
                return ("made path", "\(path) wrote \(path.uri), read as \(String(describing: again(path)))")
            }
            return (label, nil)
        }
        try Mutator.expectVaried(outcomes, ["query form", "path form", "refused"])
    }
}
