// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCacheProxy

extension ProxyContractTests {
    /// Without `--cors-origin` no page can read through the proxy; with it, only the listed
    /// origins can, preflights (Private Network Access included) answered for them alone.
    @Test func corsIsOptInAndOnlyForTheListedOrigins() async throws {
        try await ProxyHarness.with { h in
            serve(h)
            let plain = try await h.get(
                h.url("/v.mp4"), headers: [("Origin", "https://app.example"), ("Range", "bytes=0-9")])
            #expect(plain.status == 206 && plain.headers.first(name: "access-control-allow-origin") == nil)
            let preflight = try await h.get(
                h.url("/v.mp4"), method: .OPTIONS, headers: [("Origin", "https://app.example")])
            #expect(preflight.status == 405)
        }
        try await ProxyHarness.with(configure: {
            var c = $0
            c.corsOrigins = ["https://app.example"]
            return c
        }) { h in
            let resource = serve(h)
            let read = try await h.get(
                h.url("/v.mp4"), headers: [("Origin", "https://app.example"), ("Range", "bytes=100-199")])
            #expect(read.status == 206 && resource.firstMismatch(in: read.body, at: 100) == nil)
            #expect(read.headers.first(name: "access-control-allow-origin") == "https://app.example")
            #expect(read.headers.first(name: "access-control-expose-headers")?.contains("Content-Range") == true)
            #expect(read.headers[canonicalForm: "vary"].contains("Origin"))
            let failed = try await h.get(h.url("/missing.mp4"), headers: [("Origin", "https://app.example")])
            #expect(
                failed.status == 404
                    && failed.headers.first(name: "access-control-allow-origin") == "https://app.example",
                "a page can read why it failed")
            let other = try await h.get(
                h.url("/v.mp4"), headers: [("Origin", "https://evil.example"), ("Range", "bytes=0-9")])
            #expect(other.headers.first(name: "access-control-allow-origin") == nil)
            let requestsBefore = h.origin.requests("/v.mp4").count
            let preflight = try await h.get(
                h.url("/v.mp4"), method: .OPTIONS,
                headers: [
                    ("Origin", "https://app.example"), ("Access-Control-Request-Method", "GET"),
                    ("Access-Control-Request-Headers", "range, x-player"),
                    ("Access-Control-Request-Private-Network", "true"),
                ])
            #expect(preflight.status == 204)
            #expect(preflight.headers.first(name: "access-control-allow-origin") == "https://app.example")
            #expect(preflight.headers.first(name: "access-control-allow-methods") == "GET, HEAD")
            #expect(preflight.headers.first(name: "access-control-allow-headers") == "range, x-player")
            #expect(preflight.headers.first(name: "access-control-allow-private-network") == "true")
            let refused = try await h.get(
                h.url("/v.mp4"), method: .OPTIONS,
                headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Private-Network", "true")])
            #expect(refused.status == 403 && refused.headers.first(name: "access-control-allow-private-network") == nil)
            #expect(h.origin.requests("/v.mp4").count == requestsBefore, "preflights never reach the origin")
        }
    }
}
