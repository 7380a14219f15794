// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheHTTPFields

/// RFC 6265's storage model and `Cookie` field, without I/O: each case a `Set-Cookie` from
/// one URL and what the jar then sends to others.
@Suite(.stallLimit) struct CookieJarTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func url(_ text: String) -> URL { URL(string: text)! }

    struct Case: CustomTestStringConvertible, Sendable {
        var setCookie: String
        var from: String
        var sentTo: [String]
        var notSentTo: [String]
        var testDescription: String { "\(setCookie) from \(from)" }
    }

    static let cases: [Case] = [
        // Host-only: the host itself, any path under the default path.
        Case(
            setCookie: "CloudFront-Policy=abc", from: "https://cdn.example.com/v/master.m3u8",
            sentTo: ["https://cdn.example.com/v/seg1.ts", "http://cdn.example.com/v/a/b.ts"],
            notSentTo: [
                "https://a.cdn.example.com/v/seg1.ts", "https://example.com/v/x", "https://cdn.example.com/w/seg1.ts",
                "https://cdn.example.com/vv",
            ]),
        // Domain: the domain and every name under it, never another site.
        Case(
            setCookie: "k=v; Domain=.example.com; Path=/", from: "https://cdn.example.com/v/master.m3u8",
            sentTo: ["https://example.com/", "https://seg.example.com/a.ts", "http://x.y.example.com/z"],
            notSentTo: ["https://example.org/a.ts", "https://badexample.com/a.ts", "https://example.com.evil.net/a.ts"]),
        // Secure: HTTPS only.
        Case(
            setCookie: "s=1; Secure; HttpOnly; SameSite=None", from: "https://cdn.example.com/",
            sentTo: ["https://cdn.example.com/a"], notSentTo: ["http://cdn.example.com/a"]),
        // A path of its own; /pathology is not under /path.
        Case(
            setCookie: "p=1; path=/path", from: "https://h.example/x",
            sentTo: ["https://h.example/path", "https://h.example/path/seg.ts"],
            notSentTo: ["https://h.example/pathology", "https://h.example/"]),
        // Max-Age wins over Expires; in a day it is in force now.
        Case(
            setCookie: "m=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=86400", from: "https://h.example/",
            sentTo: ["https://h.example/a"], notSentTo: []),
        // An expiry in the past is no cookie.
        Case(
            setCookie: "e=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT", from: "https://h.example/", sentTo: [],
            notSentTo: ["https://h.example/a"]),
        Case(setCookie: "z=1; Max-Age=0", from: "https://h.example/", sentTo: [], notSentTo: ["https://h.example/a"]),
        // An IP address is its own host only; ports are not told apart (RFC 6265 §8.5).
        Case(
            setCookie: "ip=1", from: "http://127.0.0.1:8080/a/m.mpd",
            sentTo: ["http://127.0.0.1:9090/a/seg.m4s"], notSentTo: ["http://127.0.0.2:8080/a/seg.m4s"]),
    ]

    @Test(arguments: cases) func aCookieGoesWhereRFC6265SendsIt(_ example: Case) throws {
        let jar = CookieJar()
        let refused = jar.receive(setCookie: [example.setCookie], from: Self.url(example.from), now: Self.now)
        #expect(refused.isEmpty)
        let name = String(example.setCookie.prefix { $0 != "=" })
        for target in example.sentTo {
            #expect(jar.field(for: Self.url(target), now: Self.now)?.contains("\(name)=") == true, "\(target)")
        }
        for target in example.notSentTo {
            #expect(jar.field(for: Self.url(target), now: Self.now) == nil, "\(target)")
        }
    }

    @Test func refusedCookiesSayWhy() {
        let jar = CookieJar()
        let from = Self.url("http://cdn.example.com/v/m.m3u8")
        let refusals = jar.receive(
            setCookie: [
                "a=1; Domain=example.org", "b=1; Domain=com", "c=1; Secure", "noequals", "=novalue",
                "d=" + String(repeating: "x", count: 5000), "e=1; Domain=.cdn.example.com.evil",
            ], from: from, now: Self.now
        ).map(\.refusal)
        #expect(
            refusals == [
                .otherDomain("example.org"), .otherDomain("com"), .secureOverHTTP, .malformed("no name=value"),
                .malformed("an empty name"), .tooLong,
                .otherDomain("cdn.example.com.evil"),
            ])
        #expect(jar.count == 0)
    }

    @Test func aCookieSetAgainReplacesTheOldAndExpiryRemovesIt() {
        let jar = CookieJar()
        let from = Self.url("https://h.example/v/m.m3u8")
        _ = jar.receive(setCookie: ["t=old", "u=1; Path=/"], from: from, now: Self.now)
        _ = jar.receive(setCookie: ["t=new"], from: from, now: Self.now.addingTimeInterval(1))
        // The longer path first.
        #expect(jar.field(for: Self.url("https://h.example/v/s.ts"), now: Self.now) == "t=new; u=1")
        _ = jar.receive(setCookie: ["t=gone; Max-Age=-1"], from: from, now: Self.now)
        #expect(jar.field(for: Self.url("https://h.example/v/s.ts"), now: Self.now) == "u=1")
        _ = jar.receive(setCookie: ["w=1; Max-Age=10"], from: from, now: Self.now)
        #expect(jar.field(for: Self.url("https://h.example/v/s.ts"), now: Self.now.addingTimeInterval(11)) == "u=1")
    }

    @Test func aDomainHoldsAtMostItsLimitTheOldestGoingFirst() {
        let jar = CookieJar()
        let from = Self.url("https://h.example/")
        for index in 0..<(Cookies.maximumPerDomain + 5) {
            _ = jar.receive(
                setCookie: ["c\(index)=\(index)"], from: from, now: Self.now.addingTimeInterval(Double(index)))
        }
        #expect(jar.count == Cookies.maximumPerDomain)
        let field = jar.field(for: from, now: Self.now) ?? ""
        #expect(!field.contains("c0=") && !field.contains("c4=") && field.contains("c5=") && field.contains("c54="))
    }

    @Test func aPlayersCookiesAreKeptForItsHostOnly() {
        let jar = CookieJar()
        jar.receive(cookieField: "a=1; b=2", for: Self.url("https://h.example/x/m.m3u8"), now: Self.now)
        #expect(jar.field(for: Self.url("https://h.example/other/seg.ts"), now: Self.now) == "a=1; b=2")
        #expect(jar.field(for: Self.url("https://sub.h.example/seg.ts"), now: Self.now) == nil)
    }

    @Test func cookiesKeptWithAJobComeBackAndNewerOnesWin() {
        let first = CookieJar()
        _ = first.receive(
            setCookie: ["k=1; Domain=example.com", "s=2"], from: Self.url("https://cdn.example.com/m.m3u8"),
            now: Self.now)
        _ = first.receive(setCookie: ["other=3"], from: Self.url("https://elsewhere.example/"), now: Self.now)
        let kept = first.cookies(for: "cdn.example.com", now: Self.now)
        #expect(Set(kept.map(\.name)) == ["k", "s"])
        let decoded = try? JSONDecoder().decode([OriginCookie].self, from: JSONEncoder().encode(kept))
        #expect(decoded == kept)
        let second = CookieJar()
        _ = second.receive(setCookie: ["s=fresh"], from: Self.url("https://cdn.example.com/m.m3u8"), now: Self.now)
        second.restore(decoded ?? [], now: Self.now)
        let field = second.field(for: Self.url("https://cdn.example.com/seg.ts"), now: Self.now) ?? ""
        #expect(
            Set(field.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }) == ["k=1", "s=fresh"],
            "\(field)")
    }
}
