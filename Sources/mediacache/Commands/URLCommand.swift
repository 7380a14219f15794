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

    @OptionGroup var server: ServerAddress

    func validate() throws {
        _ = try mediaCacheOriginURL(originURL)
    }

    func run() async throws {
        let url = try mediaCacheOriginURL(originURL)
        let info = try await server.resolved()
        // A URL that leads to this server already is given back as it is (never a loop).
        if url.absoluteString.hasPrefix(info.baseURL + "/") { return print(url.absoluteString) }
        print(info.baseURL + ProxyURL.path(for: url, token: info.token, subtitles: subtitles))
    }
}
