// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheProxy

@Suite(.stallLimit) struct LANCapabilitiesTests {
    static func admits(_ capabilities: LANCapabilities, _ uri: String) -> Bool {
        let request = RequestTarget(uri)
        guard let target = try? ProxyTarget(reading: request), let minted = request.mintedURL() else { return false }
        return capabilities.admits(target, minted: minted)
    }

    @Test func aMintedURLIsAdmittedAndNothingElse() {
        let capabilities = LANCapabilities.made()
        let url = URL(string: "http://127.0.0.1:8080/hls/v1/index.m3u8")!
        var target = ProxyTarget(url)
        target.token = capabilities.credential(for: target)
        #expect(Self.admits(capabilities, target.uri), "\(target.uri)")
        let path = capabilities.pathForm(for: url)
        #expect(Self.admits(capabilities, path), "\(path)")
        var configuration = ProxyConfiguration()
        configuration.isLANListener = true
        configuration.lanCapabilities = capabilities
        let base = configuration.pathForm(for: URL(string: "http://127.0.0.1:8080/dash/")!)
        #expect(Self.admits(capabilities, base + "init-stream0.m4s"), "\(base)")
    }
}
