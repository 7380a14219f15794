// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// The admin API's one table: the server routes exactly its endpoints, a method it does not
/// list is 405 with the methods it does, and each query the CLI writes the server reads back
/// as written.
@Suite(.stallLimit) struct AdminTableTests {
    static let url = URL(string: "https://cdn.example/a/master.m3u8?sig=a%2Bb&x=1")!

    static func router(_ h: ScriptedHarness) -> AdminRouter {
        AdminEndpoints(handler: ProxyConnectionTests.handler(h))
            .routes(head: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), localPort: 8080)
    }

    @Test func theServerRoutesEveryEndpointOfTheTableAndNoOther() async throws {
        try await ScriptedHarness.with { h in
            let routed = Set(Self.router(h).handlers.keys)
            #expect(Set(AdminAPI.routes).count == AdminAPI.routes.count, "each method and name once")
            #expect(routed == Set(AdminAPI.routes), "\(routed.symmetricDifference(AdminAPI.routes))")
        }
    }

    @Test func aMethodTheTableDoesNotListIsRefusedWithTheOnesItDoes() async throws {
        try await ScriptedHarness.with { h in
            let router = Self.router(h)
            for (name, method, status, allow) in [
                ("entries", HTTPMethod.POST, 405, "GET, HEAD"), ("preload", .PUT, 405, "GET, HEAD, POST, DELETE"),
                ("network", .DELETE, 405, "GET, HEAD, POST"), ("pin", .GET, 405, "POST"), ("nothing", .GET, 404, nil),
            ] as [(String, HTTPMethod, Int, String?)] {
                do {
                    _ = try await router.respond(name, method: method, query: AdminQueryItems([]))
                    Issue.record("\(method) \(name) was answered")
                } catch let error as ProxyRequestError {
                    #expect(Int(error.status.code) == status, "\(method) \(name): \(error.message)")
                    #expect(error.headers.first { $0.0 == "Allow" }?.1 == allow, "\(method) \(name)")
                }
            }
            // A query its endpoint cannot read is 400, before anything runs.
            do {
                _ = try await router.respond("pin", method: .POST, query: AdminQueryItems([]))
                Issue.record("a pin without a target was answered")
            } catch let error as ProxyRequestError {
                #expect(error.status == .badRequest && error.message.contains("target="), "\(error.message)")
            }
        }
    }

    /// Each query the CLI writes reads back on the server as the same items.
    @Test func everyQueryReadsBackAsWritten() throws {
        let request = PrefetchRequest(
            range: ByteRange(10, 20), seconds: 90.5,
            renditions: RenditionChoice(
                variants: [.atMostHeight(720)], audio: .languages(["en", "fr"]), subtitles: .default, trickPlay: true))
        let rules = RulesText(window: "01:00-06:00", network: "unmetered", rate: 500_000)
        let queries: [any AdminQuery] = [
            NoQuery(), URLQuery(Self.url), JobQuery("job 1&2"), AssetQuery(Self.url, request),
            PinQuery(AssetQuery(Self.url), rules: rules, first: true), RulesQuery("j", rules),
            MoveQuery("j", toFront: false), NetworkQuery(.metered), ReplaceURLQuery("j", Self.url),
            ExportQuery(AssetQuery(Self.url, request), output: "/tmp/out dir"),
            PreloadQuery([Self.url, URL(string: "http://b.example/2.mp3")!], seconds: 12),
        ]
        for query in queries {
            let items = query.queryItems
            let again = try type(of: query).init(reading: AdminQueryItems(items))
            #expect(again.queryItems == items, "\(type(of: query))")
        }
    }

    /// What a query cannot be read from is refused with 400 naming the item, as the query
    /// item it is (`seconds=`), never a command's flag.
    @Test func aWrongItemIsNamedAsTheQueryWritesIt() {
        for (items, says) in [
            ([("target", "https://a.example/x"), ("seconds", "-1")], "seconds= takes"),
            ([("target", "https://a.example/x"), ("variant", "best")], "variant= takes"),
            ([("target", "https://a.example/x"), ("audio", "<>")], "audio= takes"),
            ([("target", "https://a.example/x"), ("rate", "fast")], "rate= takes"),
            ([("target", "ftp://a.example/x")], "target="),
        ] {
            let query = AdminQueryItems(items.map { URLQueryItem(name: $0.0, value: $0.1) })
            #expect {
                try PinQuery(reading: query)
            } throws: { error in
                let message = (error as? ProxyRequestError)?.message ?? ""
                return (error as? ProxyRequestError)?.status == .badRequest && message.contains(says)
                    && !message.contains("--")
            }
        }
    }
}
