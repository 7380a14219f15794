// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheHTTPFields

extension FieldFuzzTests {
    /// `Set-Cookie` values from an origin: a cookie for the answering host or a domain it is
    /// in (never a wider one-label name), a path that is a path, sizes within bounds, `Secure`
    /// only from HTTPS; the jar sends what it took back to that URL and nothing to another site.
    @Test func setCookieFieldsGiveCookiesOnlyForTheirSiteAndWithinBounds() throws {
        let urls = [
            "https://cdn.example.com/v/master.m3u8", "http://127.0.0.1:8080/a/b.mpd", "https://example.com/",
            "http://com/x",
        ].map { URL(string: $0)! }
        let elsewhere = URL(string: "https://elsewhere.invalid/v/master.m3u8")!
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        var round = 0
        let outcomes = try Mutator.run("set-cookie", share: 2) { input in
            round += 1
            let url = urls[round % urls.count]
            let host = url.host!.lowercased()
            let cookie: OriginCookie
            do {
                cookie = try OriginCookie.parse(setCookie: input, from: url, now: now)
            } catch {
                return ("refused", nil)
            }
            guard !cookie.name.isEmpty,
                cookie.name.utf8.count + cookie.value.utf8.count <= OriginCookie.maximumNameAndValueBytes,
                !(cookie.name + cookie.value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return ("bounds", "\(cookie)") }
            guard cookie.path.hasPrefix("/") else { return ("path", cookie.path) }
            let domainIsRight =
                cookie.hostOnly
                ? cookie.domain == host
                : OriginCookie.domainMatches(host, domain: cookie.domain)
                    && (cookie.domain == host || cookie.domain.contains("."))
            guard domainIsRight else {
                return ("domain", "\(cookie.domain) (host-only \(cookie.hostOnly)) from \(host)")
            }
            guard !cookie.secure || url.scheme == "https" else { return ("secure", "over \(url)") }
            let jar = CookieJar()
            _ = jar.receive(setCookie: [input], from: url, now: now)
            if let field = jar.field(for: elsewhere, now: now) { return ("leak", "sent \(field) to another site") }
            let expired = cookie.expires.map { $0 <= now } ?? false
            var back = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            back.percentEncodedPath = cookie.path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "/"
            guard let target = back.url, target.path == cookie.path else {
                return (expired ? "expired" : "cookie", nil)
            }
            let sent = jar.field(for: target, now: now)?.contains("\(cookie.name)=\(cookie.value)") == true
            guard sent == !expired else { return ("jar", "sent \(sent) to \(target), expired \(expired)") }
            return (expired ? "expired" : "cookie", nil)
        }
        try Mutator.expectVaried(outcomes, ["cookie", "refused", "expired"])
    }

    /// HTTP dates: parsed within 1900 … 9999 or refused, and formatted back to themselves.
    @Test func httpDatesStayInBoundsAndRoundTrip() throws {
        let lowest = HTTPDate.parse("Mon, 01 Jan 1900 00:00:00 GMT")!
        let highest = HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT")!
        let outcomes = try Mutator.run("http-date") { input in
            guard let seconds = HTTPDate.parse(input) else { return ("refused", nil) }
            guard (lowest...highest + 1).contains(seconds) else { return ("bounds", "\(seconds)") }
            let formatted = HTTPDate.format(seconds)
            guard HTTPDate.parse(formatted) == seconds else { return ("round trip", "\(formatted) is not \(seconds)") }
            return ("date", nil)
        }
        try Mutator.expectVaried(outcomes, ["date", "refused"])
        // Every second of the range formats to a date that parses back to it.
        var random = Mutator.seed
        for _ in 0..<Mutator.iterations {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let seconds = lowest + Int64(random >> 1) % (highest - lowest)
            #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds, "\(seconds) → \(HTTPDate.format(seconds))")
        }
    }
}
