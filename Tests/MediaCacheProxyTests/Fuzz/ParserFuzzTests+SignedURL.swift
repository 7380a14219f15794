// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// ``SignedURL/expiry(of:)`` on any URL: never past the bounds its parameters may state, and
    /// never later than an `exp` the URL carries; ``URLRenewals`` taught a fresh signature
    /// renews the URL and any other signed alike in their signature values only.
    @Test func signedURLsReadWithinBoundsAndRenewInTheirSignatureOnly() throws {
        let latest = Date(timeIntervalSince1970: TimeInterval(SignedURL.latestExpiry + SignedURL.longestLifetime))
        var values = try Mutator(corpus: "number")
        let outcomes = try Mutator.run("signed-url", share: 2) { input in
            guard let url = URL(string: input), url.host != nil else { return ("not a URL", nil) }
            let expiry = SignedURL.expiry(of: url)
            if let expiry, expiry < Date(timeIntervalSince1970: 0) || expiry > latest {
                return ("expiry", "out of bounds: \(expiry)")
            }
            let bound = SignedURL.unixSeconds(values.input())
            if let bound, let stated = URL(string: input + (url.query == nil ? "?" : "&") + "exp=\(bound)"),
                stated.fragment == nil, let read = SignedURL.expiry(of: stated),
                read > Date(timeIntervalSince1970: TimeInterval(bound))
            {
                return ("expiry", "\(read) is later than the stated exp=\(bound)")
            }
            let credentials = SignedURL.credentials(of: url)
            guard !credentials.isEmpty, url.fragment == nil,
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
                components.percentEncodedQuery != nil
            else { return (expiry == nil ? "unsigned" : "dated", nil) }
            // A fresh signature: each credential value replaced by another.
            let fresh = SignedURL.parameters(of: url).map { parameter in
                credentials.contains(parameter)
                    ? "\(parameter.name)=F\(parameter.value.utf8.count)z" : "\(parameter.name)=\(parameter.value)"
            }
            components.percentEncodedQuery = fresh.joined(separator: "&")
            guard let freshURL = components.url else { return ("unbuildable", nil) }
            var renewals = URLRenewals()
            renewals.learn(original: url, expired: url, fresh: freshURL)
            guard renewals.current(url) == freshURL else { return ("renewal", "\(url) is not replaced by \(freshURL)") }
            // Another resource signed alike: only its signature changes.
            guard var other = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return ("renewed", nil) }
            other.percentEncodedPath = "/other/segment.ts"
            guard let otherURL = other.url else { return ("renewed", nil) }
            let renewedOther = renewals.current(otherURL)
            guard renewedOther.path == "/other/segment.ts", renewedOther.host == otherURL.host,
                SignedURL.parameters(of: renewedOther).map(\.name) == SignedURL.parameters(of: otherURL).map(\.name),
                SignedURL.credentials(of: otherURL).allSatisfy({ !SignedURL.credentials(of: renewedOther).contains($0) }
                )
            else {
                return ("renewal", "\(otherURL) renewed as \(renewedOther)")
            }
            return ("renewed", nil)
        }
        try Mutator.expectVaried(outcomes, ["renewed", "unsigned"])
    }

    /// ``SignedURL/compactDate(_:)`` against Foundation's reading of the same form, for any
    /// second from 1970 to 9999.
    @Test func compactDatesReadAsFoundationReadsThem() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let seconds = Int64.random(in: 0...253_402_300_799, using: &generator)
            let text = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            #expect(SignedURL.compactDate(text) == seconds, "\(text)")
        }
    }
}
