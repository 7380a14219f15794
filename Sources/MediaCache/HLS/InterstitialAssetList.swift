// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// An HLS interstitial's asset list (RFC 8216bis Appendix D, `X-ASSET-LIST`): JSON naming the
/// assets (multivariant playlists) to play in a break, `{"ASSETS": [{"URI": …, "DURATION": …}]}`,
/// often made for one viewer. Through the proxy each asset's `URI` must lead back through it;
/// everything else is kept.
package enum InterstitialAssetList {
    /// The largest asset list read.
    package static let maximumSize = 1 << 20

    /// `bytes` with each `ASSETS[].URI` (resolved against `base`, the list's URL) mapped by `map`.
    /// - Throws: ``SteeringManifestError`` for what is not an asset list: too large, too deep,
    ///   not a JSON object, or without an `ASSETS` array.
    package static func rewritten(_ bytes: [UInt8], base: URL, map: (URL) -> String) throws(SteeringManifestError)
        -> [UInt8]
    {
        guard bytes.count <= maximumSize else {
            throw SteeringManifestError("The asset list is larger than \(maximumSize >> 20) MiB.")
        }
        guard SteeringManifest.nestingDepth(bytes) <= SteeringManifest.maximumDepth else {
            throw SteeringManifestError("The asset list nests deeper than \(SteeringManifest.maximumDepth) levels.")
        }
        guard case .object(var list)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)),
            case .array(let assets)? = list["ASSETS"]
        else {
            throw SteeringManifestError("The asset list is not a JSON object with an ASSETS array.")
        }
        list["ASSETS"] = .array(
            assets.map { asset in
                guard case .object(var fields) = asset, case .string(let text)? = fields["URI"],
                    let url = HLSPlaylist.resolve(text, base: base)
                else {
                    return asset
                }
                fields["URI"] = .string(map(url))
                return .object(fields)
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let output = try? encoder.encode(JSONValue.object(list)) else {
            throw SteeringManifestError("The asset list cannot be written again.")
        }
        return Array(output)
    }
}
