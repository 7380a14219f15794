// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization
import Testing

@testable import MediaCacheProxy

/// The parsed targets the proxy remembers: a target asked again is not parsed or checked
/// again; a long one is parsed each time (what clients send cannot grow the memory past
/// ``RecentTargets/limit`` targets of ``RecentTargets/longest`` bytes); either way the
/// target read is the one asked for.
@Suite(.stallLimit) struct RecentTargetsTests {
    static func uri(_ path: String) -> String {
        "/?url=" + "http://127.0.0.1:8080/\(path)".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    @Test func aTargetAskedAgainIsCheckedOnceAndALongOneEachTime() throws {
        let recent = RecentTargets()
        let checks = Mutex(0)
        func parse(_ uri: String) throws -> URL {
            try recent.parse(uri) { _ in checks.withLock { $0 += 1 } }.proxy.get().origin
        }
        for round in 0..<3 {
            #expect(try parse(Self.uri("a.mp3")).absoluteString == "http://127.0.0.1:8080/a.mp3", "\(round)")
        }
        #expect(checks.withLock { $0 } == 1)
        let long = String(repeating: "x", count: RecentTargets.longest)
        for round in 0..<3 {
            #expect(try parse(Self.uri(long)).path == "/" + long, "\(round)")
        }
        #expect(checks.withLock { $0 } == 4, "a long target is checked each time it comes")
        // Past the limit, all are forgotten at once: the first is checked again.
        for index in 0..<RecentTargets.limit { _ = try parse(Self.uri("f\(index).bin")) }
        #expect(checks.withLock { $0 } == 4 + RecentTargets.limit)
        #expect(try parse(Self.uri("a.mp3")).lastPathComponent == "a.mp3")
        #expect(checks.withLock { $0 } == 5 + RecentTargets.limit)
    }
}
