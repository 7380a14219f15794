// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheProxy

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract:
            "Record a live HLS or DASH stream past the origin's window: every segment as it appears, kept pinned, playable from the first.",
        discussion: """
            With a server running, the server records and this prints the recording's id and the URL a player opens to \
            watch it (from the beginning, while it records and after: an EVENT playlist, then a VOD one; for DASH a \
            dynamic manifest, then a static one). The variant's audio rendition is recorded with it. Without one, \
            the recording runs here until it ends; Ctrl-C stops it (it resumes with the next `mediacache serve`, the \
            missed segments marked). It stops after --for, at the end of the presentation, or with `mediacache cancel`.
            """
    )

    @Argument(
        help:
            "The live playlist (a media playlist, or a multivariant one whose --variant is recorded) or DASH manifest.")
    var url: String

    @Option(
        name: .customLong("for"),
        help: "How long to record, e.g. 90m, 2h, 600s (default: until the presentation ends).", transform: Age.parse)
    var duration: Duration?

    @OptionGroup var choice: RenditionOptions

    @OptionGroup var options: CacheOptions

    func validate() throws {
        _ = try AssetOptions.targets([url])
        _ = try renditions()
    }

    /// What the options choose of a multivariant playlist or manifest.
    func renditions() throws -> RenditionChoice {
        do {
            return try PrefetchRequest.parse(
                range: nil, seconds: nil, variant: choice.variant, audio: choice.audio, subtitles: choice.subtitles
            ).renditions
        } catch {
            throw ValidationError(error.message { "--" + $0 })
        }
    }

    func run() async throws {
        let target = try AssetOptions.targets([url])[0]
        let choice = try renditions()
        try await failing {
            let answer = try await options.withCache { try await $0.record(target, for: duration, renditions: choice) }
            if options.json { return try printJSON(answer) }
            print("\(answer.job.id) \(answer.job.state.rawValue): recording \(answer.job.url.absoluteString)")
            if !answer.url.isEmpty { print("Watch it: \(answer.url)") }
            if let seconds = answer.job.recordedSeconds { print(String(format: "%.1f s recorded", seconds)) }
        }
    }
}
