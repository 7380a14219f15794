// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The default key's normalisation, on the inputs its property test found (see
/// `ParserFuzzTests.cacheKeysAreURLComponentsOnes`).
@Suite(.stallLimit) struct CacheKeyTests {
    /// Found by the property test of the key read on its bytes: `URLComponents` has no `host`
    /// for a label `xn--` that is no valid Punycode, and the key was made without one, so every
    /// such host's `/a` had the key of `https:/a`: one host's bytes answered for another's.
    @Test(arguments: ["https", "HTTPS"])
    func hostsOfInvalidPunycodeKeepTheirKeysApart(scheme: String) throws {
        let hosts = ["xn--bcher-kvh.example", "xn--bch-bcher-k.example", "XN--BCHER-KVH.example"]
        let urls = try hosts.map { try #require(URL(string: "\(scheme)://\($0)/a")) }
        let texts = urls.map(CacheKey.normalizedURLString)
        #expect(
            texts == [
                "https://xn--bcher-kvh.example/a", "https://xn--bch-bcher-k.example/a",
                "https://xn--bcher-kvh.example/a",
            ])
        #expect(Set(urls.map { CacheKey(url: $0) }).count == 2)
        // A valid Punycode host is still written as its Punycode, lower-cased.
        let valid = try #require(URL(string: "\(scheme)://XN--BCHER-KVA.example:443/a"))
        #expect(CacheKey.normalizedURLString(valid) == "https://xn--bcher-kva.example/a")
    }

    /// Found the same way: a path whose escapes are no UTF-8 has an empty `path` in
    /// `URLComponents`, and the key put `/` in its place, so every such path of a host had the
    /// key of the host's `/`.
    @Test func pathsOfEscapesThatAreNoUTF8KeepTheirKeysApart() throws {
        let texts = [
            "https://cdn.example/live/i%dex.m3u8?x=1", "https://cdn.example/other%ff.mp4?x=1",
            "HTTPS://cdn.example/live/i%dex.m3u8?x=1", "https://cdn.example/?x=1",
        ]
        let urls = try texts.map { try #require(URL(string: $0)) }
        #expect(
            urls.map(CacheKey.normalizedURLString) == [
                "https://cdn.example/live/i%dex.m3u8?x=1", "https://cdn.example/other%ff.mp4?x=1",
                "https://cdn.example/live/i%dex.m3u8?x=1", "https://cdn.example/?x=1",
            ])
        #expect(Set(urls.map { CacheKey(url: $0) }).count == 3)
    }
}
