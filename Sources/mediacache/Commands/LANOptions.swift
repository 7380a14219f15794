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
            "Also listen on this LAN address (same port) for the network's devices (Cast, AirPlay, a TV): there only URLs carrying the token are answered (`mediacache url --lan` prints one), never the admin paths. Needs --token, or one is made (in the server file).",
            valueName: "address"))
    var lanAddress: String?

    /// The page of Google's default Cast receiver, whose player fetches playlists, manifests and
    /// segments in CORS mode.
    static let castReceiverOrigin = "https://www.gstatic.com"

    /// A token made for this process when `--lan` is given without one (the same for each use).
    static let madeToken: String = {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }()

    /// Sets the LAN address, a token when there is none, and the Cast receiver's origin when no
    /// `--cors-origin` is given.
    func apply(to configuration: inout ProxyConfiguration) {
        guard let lanAddress else { return }
        configuration.lanAddress = lanAddress
        if configuration.token == nil { configuration.token = Self.madeToken }
        if configuration.corsOrigins.isEmpty { configuration.corsOrigins = [Self.castReceiverOrigin] }
    }
}
