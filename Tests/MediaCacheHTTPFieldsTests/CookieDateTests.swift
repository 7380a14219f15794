// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTPFields

/// Cookie dates (RFC 6265 §5.1.1), read as browsers read them.
@Suite(.stallLimit) struct CookieDateTests {
    /// RFC 6265 §5.1.1 reads the dates browsers meet, in any of their forms.
    @Test(arguments: [
        ("Wed, 21 Oct 2015 07:28:00 GMT", 1_445_412_480.0),
        ("Wednesday, 21-Oct-15 07:28:00 GMT", 1_445_412_480),
        ("Wed Oct 21 07:28:00 2015", 1_445_412_480),
        ("21 oct 2015 7:28:0", 1_445_412_480),
        ("Thu, 29 Feb 2024 00:00:00 GMT", 1_709_164_800),
    ])
    func cookieDatesInTheirFormsAreRead(_ text: String, _ seconds: Double) {
        #expect(CookieDate.parse(text)?.timeIntervalSince1970 == seconds)
    }

    @Test(arguments: [
        "Thu, 29 Feb 2023 00:00:00 GMT", "Wed, 32 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 1600 07:28:00 GMT",
        "21 Oct 2015", "soon", "Wed, 21 Oct 2015 24:00:00 GMT",
    ])
    func impossibleCookieDatesAreNone(_ text: String) {
        #expect(CookieDate.parse(text) == nil)
    }
}
