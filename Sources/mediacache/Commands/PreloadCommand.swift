// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheProxy

struct PreloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preload",
        abstract: "Have a running server store the first seconds of what plays next; each call replaces the queue.",
        discussion: """
            Give the URLs in the order they will play (the next items of a feed or a playlist): files (MP4, MP3, AAC, \
            WAV, …), HLS playlists or DASH manifests. The server stores the first --seconds of each, one at a time, \
            pausing whenever a player waits on an origin, and fetches nothing it has. Items of the previous queue that \
            had not started are dropped. Returns at once; `mediacache preload --port P` with no URL shows the queue, \
            --clear empties it.
            """
    )

    @Argument(help: "Origin URLs, in the order they will play.")
    var urls: [String] = []

    @Option(help: "Seconds of media to store from each item's start.")
    var seconds: Double = 5

    @Flag(help: "Empty the queue (a started item stops at its next boundary).")
    var clear = false

    @OptionGroup var server: ServerAddress

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        guard seconds.isFinite, seconds > 0, seconds <= 3600 else {
            throw ValidationError("--seconds takes a number of seconds above 0, at most 3600.")
        }
        guard !(clear && !urls.isEmpty) else { throw ValidationError("--clear empties the queue: give it no URL.") }
        guard urls.count <= CachingReader.maximumPreloadItems else {
            throw ValidationError(
                "At most \(CachingReader.maximumPreloadItems) URLs: the queue is what plays next, not a library.")
        }
        for url in urls { _ = try mediaCacheOriginURL(url) }
    }

    func run() async throws {
        try await failing {
            let info = try await server.resolved()
            let status: [PreloadItem.Status]
            if urls.isEmpty, !clear {
                status = try await ServerCache(info).preloadStatus()
            } else {
                status = try await ServerCache(info).preload(try urls.map(mediaCacheOriginURL), seconds: seconds)
            }
            if json { return try printJSON(status) }
            guard !status.isEmpty else { return print("The preload queue is empty.") }
            for item in status {
                let fetched = item.bytesFetched > 0 ? " \(Format.bytes(item.bytesFetched))" : ""
                print(
                    "\(item.state.rawValue)\(fetched) \(String(format: "%g", item.seconds)) s \(item.url.absoluteString)"
                        + (item.error.map { ": \($0)" } ?? ""))
            }
        }
    }
}
