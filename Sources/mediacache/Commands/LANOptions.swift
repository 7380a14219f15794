// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheProxy

/// `serve --lan ADDRESS`: the devices of the network (a Chromecast, an AirPlay receiver, a TV's
/// browser) play capability URLs of this server.
struct ServeLANOptions: ParsableArguments {
    @Option(
        name: .customLong("lan"),
        help: ArgumentHelp(
            "Also listen on this LAN address (same port) for the network's devices (Cast, AirPlay, a TV): there only URLs carrying a credential minted for what they name are answered (`mediacache url --lan --running` prints one; the key is lan.key in the store folder), never the admin paths. Loopback answers as without it.",
            valueName: "address"))
    var lanAddress: String?

    /// The page of Google's default Cast receiver, whose player fetches playlists, manifests and
    /// segments in CORS mode.
    static let castReceiverOrigin = "https://www.gstatic.com"

    /// Sets the LAN address and the Cast receiver's origin when no `--cors-origin` is given. (The
    /// key its URLs are minted with is the store folder's: ``CacheFolder/lanCapabilities(in:)``.)
    func apply(to configuration: inout ProxyConfiguration) {
        guard let lanAddress else { return }
        configuration.lanAddress = lanAddress
        if configuration.corsOrigins.isEmpty { configuration.corsOrigins = [Self.castReceiverOrigin] }
    }
}
