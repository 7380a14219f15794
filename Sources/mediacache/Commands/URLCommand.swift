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
            "A URL for a device of the network (a Chromecast, an AirPlay receiver, a TV): on the server's --lan address, the token in the URL (with --running, both from the server file; else --host is the LAN address and --token its token)."
    )
    var lan = false

    @OptionGroup var server: ServerAddress

    func validate() throws {
        _ = try mediaCacheOriginURL(originURL)
    }

    func run() async throws {
        let url = try mediaCacheOriginURL(originURL)
        let info = try await server.resolved()
        if lan { return print(try Self.lanURL(for: url, subtitles: subtitles, server: info)) }
        // A URL that leads to this server already is given back as it is (never a loop).
        if url.absoluteString.hasPrefix(info.baseURL + "/") { return print(url.absoluteString) }
        print(info.baseURL + ProxyURL.path(for: url, token: info.token, subtitles: subtitles))
    }

    /// A capability URL of `url` on the server's LAN address: the path form (the token in its
    /// first segment), or the query form with the token when subtitles are added.
    static func lanURL(for url: URL, subtitles: [SideLoadedSubtitle], server info: ServerInfo) throws -> String {
        let loopback = ["127.0.0.1", "localhost", "::1"].contains(info.host)
        guard let host = info.lanHost ?? (loopback ? nil : info.host) else {
            throw CommandFailure(
                "The server listens on no LAN address: start it with `mediacache serve --lan ADDRESS`, and give --running here (or --host ADDRESS)."
            )
        }
        guard let token = info.token else {
            throw CommandFailure("A LAN URL carries the server's token: give --running, or --token.")
        }
        let base = "http://" + (host.contains(":") ? "[\(host)]" : host) + ":\(info.port)"
        return base
            + (subtitles.isEmpty
                ? ProxyURL.pathForm(for: url, token: token)
                : ProxyURL.path(for: url, token: token, subtitles: subtitles))
    }
}
