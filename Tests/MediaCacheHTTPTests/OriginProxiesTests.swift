// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTP

/// The proxy environment read as curl documents it (curl(1) "ENVIRONMENT", CURLOPT_NOPROXY):
/// which variable applies to which scheme, which form wins, what a proxy URL may say, and
/// which hosts `no_proxy` sends direct. Pure: tables, no I/O.
@Suite(.stallLimit) struct OriginProxiesTests {
    static let http = URL(string: "http://media.example/a.mp4")!
    static let https = URL(string: "https://media.example/a.mp4")!

    @Test(
        arguments: [
            // (environment, the proxy for http, for https)
            ([:], nil, nil),
            (["http_proxy": "proxy:3128"], "http://proxy:3128", nil),
            // curl never reads HTTP_PROXY in capitals: in a CGI program it is a request header.
            (["HTTP_PROXY": "proxy:3128"], nil, nil),
            (["https_proxy": "http://p:8080"], nil, "http://p:8080"),
            (["HTTPS_PROXY": "http://P:8080"], nil, "http://p:8080"),
            (["https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"], nil, "http://lower:1"),
            (["all_proxy": "socks5://s:1080"], "socks5://s:1080", "socks5://s:1080"),
            (["ALL_PROXY": "socks5h://s"], "socks5://s:1080", "socks5://s:1080"),
            (["all_proxy": "a:1", "http_proxy": "h:2"], "http://h:2", "http://a:1"),
            // No port: curl's 1080, for every kind.
            (["http_proxy": "http://proxy"], "http://proxy:1080", nil),
            (["http_proxy": "http://[::1]:3128/"], "http://[::1]:3128", nil),
            // An empty variable is as if unset.
            (["https_proxy": "", "HTTPS_PROXY": "http://u:9"], nil, "http://u:9"),
        ] as [([String: String], String?, String?)])
    func variablesApplyAsCurlReadsThem(environment: [String: String], http: String?, https: String?) throws {
        let proxies = try OriginProxies(environment: environment)
        #expect(proxies.server(for: Self.http)?.description == http)
        #expect(proxies.server(for: Self.https)?.description == https)
    }

    @Test func credentialsAreKeptButNeverShown() throws {
        let proxies = try OriginProxies(environment: ["https_proxy": "http://al%40ice:s%3Acret@proxy.example:3128"])
        let server = try #require(proxies.server(for: Self.https))
        #expect(server.username == "al@ice" && server.password == "s:cret")
        #expect(server.description == "http://proxy.example:3128" && !"\(server)".contains("cret"))
    }

    @Test(arguments: [
        "https://proxy:443", "socks4://proxy:1080", "ftp://proxy", "http://", "http://proxy:0", "http://proxy:70000",
        "http://proxy:3128/path", "http://proxy:3128?q", "socks5://user:pw@proxy", "http://pro xy", "http://proxy:12a",
        "socks5h://[]:",  // found by the fuzz target: brackets around nothing were a host
    ])
    func aProxyThisFetcherCannotUseIsRefusedWithoutRepeatingIt(_ text: String) {
        #expect(throws: OriginProxyError.self) { try OriginProxies(environment: ["http_proxy": text]) }
        do {
            _ = try OriginProxies(environment: ["http_proxy": "http://user:topsecret@x:1/path"])
            Issue.record("a path is refused")
        } catch {
            #expect(error.message.contains("http_proxy") && !error.message.contains("topsecret"), "\(error.message)")
        }
    }

    @Test(arguments: [
        // (no_proxy, host, direct)
        ("", "media.example", false),
        ("*", "anything.example", true),
        ("media.example", "media.example", true),
        ("media.example", "MEDIA.example.", true),
        ("media.example", "cdn.media.example", true),
        ("media.example", "notmedia.example", false),
        ("media.example", "media.example.org", false),
        (".media.example", "media.example", true),
        (".media.example", "cdn.media.example", true),
        ("ample.com", "www.example.com", false),
        ("a.example, b.example", "b.example", true),
        ("a.example b.example", "b.example", true),
        ("*.media.example", "cdn.media.example", false),  // curl: `*` is a wildcard only alone
        ("127.0.0.1", "127.0.0.1", true),
        ("127.0.0.1", "127.0.0.2", false),
        ("192.168.0.0/16", "192.168.44.3", true),
        ("192.168.0.0/16", "192.169.0.1", false),
        ("10.0.0.0/8", "10.255.255.255", true),
        ("10.1.2.3/0", "8.8.8.8", true),
        ("10.0.0.0/33", "10.0.0.0", false),
        ("10.0.0.0/x", "10.0.0.0", false),
        ("::1", "[::1]", true),
        ("::1", "::2", false),
        ("fd00::/8", "fd12:3456::1", true),
        ("fd00::/8", "fe80::1", false),
        ("192.168.0.0/16", "fd00::1", false),
        ("localhost", "127.0.0.1", false),  // names are not resolved
        (".::1", "::1", true),  // found by the fuzz target: dots around an address left a name
        ("10.0.0.0/8.", "10.1.2.3", true),
    ])
    func noProxyMatchesAsCurlDocumentsIt(list: String, host: String, direct: Bool) {
        #expect(NoProxyList(list).matches(host) == direct)
    }

    @Test func aParentTakesEveryOriginButTheHostsNoProxyNames() throws {
        let proxies = try OriginProxies(parent: "http://squid.lan:3128", noProxy: "127.0.0.1,.internal")
        #expect(proxies.server(for: Self.http)?.description == "http://squid.lan:3128")
        #expect(proxies.server(for: Self.https)?.description == "http://squid.lan:3128")
        #expect(proxies.server(for: URL(string: "http://127.0.0.1:8080/x")!) == nil)
        #expect(proxies.server(for: URL(string: "https://tv.internal/x")!) == nil)
        #expect(OriginProxies.none.server(for: Self.https) == nil)
        #expect(throws: OriginProxyError.self) { try OriginProxies(parent: "https://squid.lan") }
    }
}
