// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension ParserFuzzTests {
    /// Playlists from outside with their variables resolved: never a trap; what is resolved
    /// parses or is refused as any playlist, has no `EXT-X-DEFINE` left, and is within the limit.
    @Test func playlistsWithVariablesResolveOrAreRefused() throws {
        let url = URL(string: "https://cdn.example/a/index.m3u8?token=t&cdn=https%3A%2F%2Fb.example")!
        let outcomes = try Mutator.run("hls", share: 5) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            // Half the inputs get definitions and references, so that there is something to resolve.
            let defined =
                text.utf8.count % 2 == 0
                ? text.replacingOccurrences(
                    of: "#EXTM3U",
                    with: "#EXTM3U\n#EXT-X-DEFINE:QUERYPARAM=\"cdn\"\n#EXT-X-DEFINE:NAME=\"s\",VALUE=\"seg\""
                ).replacingOccurrences(
                    of: "seg", with: "{$s}") : text
            let resolved: (text: String, definitions: [String: String])?
            do {
                resolved = try HLSVariables.resolved(defined, url: url, imports: ["cdn": "https://c.example"])
            } catch {
                return ("refused", nil)
            }
            guard let resolved else { return ("no variables", nil) }
            guard resolved.text.utf8.count <= HLSPlaylist.maximumSize, !resolved.text.contains("#EXT-X-DEFINE") else {
                return ("resolved", "a define left, or too large: \(resolved.text.prefix(200).debugDescription)")
            }
            return ("resolved", nil)
        }
        try Mutator.expectVaried(outcomes, ["resolved", "no variables"])
    }

    /// Interstitial asset lists from outside: refused with a reason, or written again as JSON
    /// whose every asset URI that resolves leads through the mapping.
    @Test func assetListsAreRefusedOrLeadOnlyThroughTheProxy() throws {
        let base = URL(string: "https://ads.example/list/ads.json?_HLS_primary_id=p")!
        let outcomes = try Mutator.run("asset-list", share: 4) { input in
            let written: [UInt8]
            do {
                written = try InterstitialAssetList.rewritten(Array(input.utf8), base: base) {
                    "http://p/A/" + $0.absoluteString
                }
            } catch {
                return ("refused", nil)
            }
            guard case .object(let list)? = try? JSONDecoder().decode(JSONValue.self, from: Data(written)),
                case .array(let assets)? = list["ASSETS"]
            else {
                return ("list", "not an object with ASSETS")
            }
            for case .object(let asset) in assets {
                guard case .string(let uri)? = asset["URI"], HLSPlaylist.resolve(uri, base: base) != nil else {
                    continue
                }
                guard uri.hasPrefix("http://p/A/") else { return ("list", "an asset past the proxy: \(uri)") }
            }
            return ("list", nil)
        }
        try Mutator.expectVaried(outcomes, ["list", "refused"])
    }
}
