// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheProxy

struct URLCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url", abstract: "Print the URL to give a player for an origin URL.")

    @Argument(help: "The origin URL (http or https).")
    var originURL: String

    @Option(
        name: .customLong("subtitles"),
        help: ArgumentHelp(
            "A subtitle file (SRT or WebVTT) to add to an HLS master playlist, LANG=URL[,NAME] (repeatable): players list it as a subtitle track.",
            valueName: "lang=url[,name]"),
        transform: { text in
            guard let track = SideLoadedSubtitle(parsing: text) else {
                throw ValidationError(
                    "--subtitles takes LANG=URL[,NAME]: a language tag (en, pt-BR), an http(s) URL and a name, not \(text.prefix(120))."
                )
            }
            return track
        })
    var subtitles: [SideLoadedSubtitle] = []

    @Flag(
        help:
            "A URL for a device of the network (a Chromecast, an AirPlay receiver, a TV): on the server's --lan address, with a credential for this URL alone (minted with the running server's key: give --running)."
    )
    var lan = false

    @Option(
        name: .customLong("for"),
        help: ArgumentHelp(
            "With --lan: how long the URL works (30m, 24h, 7d), or `ever` (until the server's LAN key changes).",
            valueName: "duration"))
    var lifetime = "24h"

    @OptionGroup var server: ServerAddress

    func validate() throws {
        _ = try mediaCacheOriginURL(originURL)
        _ = try until(now: 0)
    }

    func run() async throws {
        let url = try mediaCacheOriginURL(originURL)
        let info = try await server.resolved()
        if lan {
            let until = try until(now: Int64(Date().timeIntervalSince1970))
            return print(try Self.lanURL(for: url, subtitles: subtitles, server: info, until: until))
        }
        // A URL that leads to this server already is given back as it is (never a loop).
        if url.absoluteString.hasPrefix(info.baseURL + "/") { return print(url.absoluteString) }
        print(info.baseURL + ProxyURL.path(for: url, token: info.token, subtitles: subtitles))
    }

    /// A capability URL of `url` on the server's LAN address, with a credential minted for it
    /// alone (`LANCapabilities`): the path form, or the query form when subtitles are added.
    /// When a LAN URL minted at `now` stops working (`--for`), or `nil` for `ever`.
    func until(now: Int64) throws -> Int64? {
        if lifetime == "ever" { return nil }
        return now + Int64(try Age.parse(lifetime).components.seconds)
    }

    static func lanURL(for url: URL, subtitles: [SideLoadedSubtitle], server info: ServerInfo, until: Int64?) throws
        -> String
    {
        guard let host = info.lanHost else {
            throw CommandFailure(
                "The server listens on no LAN address: start it with `mediacache serve --lan ADDRESS`, and give --running here."
            )
        }
        guard let capabilities = info.lanKey.flatMap(LANCapabilities.init(keyText:)) else {
            throw CommandFailure("A LAN URL is minted with the running server's key: give --running.")
        }
        let base = "http://" + (host.contains(":") ? "[\(host)]" : host) + ":\(info.port)"
        return base
            + (subtitles.isEmpty
                ? capabilities.pathForm(for: url, until: until)
                : capabilities.queryForm(for: url, subtitles: subtitles, until: until))
    }
}
