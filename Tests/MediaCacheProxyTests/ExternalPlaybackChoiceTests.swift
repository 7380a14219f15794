// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport
import Testing

@testable import MediaCacheProxy

/// Where an AirPlay receiver plays from, and which of the machine's addresses it reaches.
@Suite(.stallLimit) struct ExternalPlaybackChoiceTests {
    @Test func theReceiverGetsTheLANAddressUnlessThereIsNoneOrTheAppPrefersTheOrigin() {
        typealias Choice = EmbeddedProxy.ExternalChoice
        let cases: [(holds: Bool, lan: String?, prefers: Bool, expected: Choice)] = [
            (true, "192.168.1.20", false, .lan("192.168.1.20")), (true, "192.168.1.20", true, .lan("192.168.1.20")),
            (false, "192.168.1.20", false, .lan("192.168.1.20")), (false, "192.168.1.20", true, .origin),
            (true, nil, false, .origin), (false, nil, true, .origin),
        ]
        for (holds, lan, prefers, expected) in cases {
            #expect(
                EmbeddedProxy.externalChoice(holdsAny: holds, lanAddress: lan, prefersOriginWhenNothingHeld: prefers)
                    == expected, "\(holds) \(lan ?? "-") \(prefers)")
        }
    }

    @Test func theWiFiAddressGoesFirstAndLoopbackAndLinkLocalNever() {
        #expect(
            LANAddress.choose([("lo0", "127.0.0.1"), ("en1", "10.0.0.2"), ("en0", "192.168.1.20")]) == "192.168.1.20")
        #expect(
            LANAddress.choose([("pdp_ip0", "10.64.0.1"), ("en0", "169.254.3.4"), ("eth0", "10.1.1.1")]) == "10.1.1.1")
        #expect(LANAddress.choose([("lo", "127.0.0.1"), ("pdp_ip0", "10.64.0.1")]) == nil, "cellular only: none")
        #expect(LANAddress.choose([("wlan0", "192.168.0.5")]) == "192.168.0.5")
        // This machine's own: some interface is listed, and loopback is never chosen.
        #expect(!LANAddress.interfaces().isEmpty && LANAddress.current()?.hasPrefix("127.") != true)
    }
}
