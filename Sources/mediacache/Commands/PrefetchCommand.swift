// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Dispatch
import Foundation
import MediaCache
import MediaCacheProxy
import Synchronization

struct PrefetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch",
        abstract: "Cache files or HLS assets ahead of playing them (before a flight).",
        discussion:
            "A playlist URL caches the chosen variant's segments (and its default audio); a DASH manifest, the chosen representation of each adaptation set; any other URL caches the file. Ctrl-C stops and keeps what arrived."
    )

    @Argument(help: "Origin URLs (files or HLS playlists).")
    var urls: [String]

    @Option(help: "Only these bytes of a file: first-last, e.g. 0-1048575.")
    var range: String?

    @OptionGroup var asset: AssetOptions

    @OptionGroup var options: CacheOptions

    func validate() throws {
        _ = try AssetOptions.targets(urls)
        _ = try asset.request(range: range)
    }

    func run() async throws {
        let targets = try AssetOptions.targets(urls)
        let request = try asset.request(range: range)
        let json = options.json
        try await failing {
            let interrupted = Interruption()
            let results = try await options.withCache { access in
                var results: [PrefetchProgress] = []
                for url in targets {
                    let printer = ProgressPrinter(url: url, onTerminal: !json && isatty(STDOUT_FILENO) != 0)
                    // Ctrl-C: stop this prefetch; what arrived stays cached.
                    let work = Task { try await access.prefetch(url, request) { printer.update($0) } }
                    do {
                        let result = try await cancellingOnInterrupt(work, interrupted: interrupted)
                        results.append(result)
                        if !json { printer.finish(result) }
                    } catch  where interrupted.happened {
                        printer.stopped()
                        return results
                    }
                }
                return results
            }
            if json { try printJSON(results) }
            if interrupted.happened { throw ExitCode(130) }
        }
    }
}

/// Whether Ctrl-C was pressed (see ``cancellingOnInterrupt(_:interrupted:)``).
final class Interruption: Sendable {
    private let flag = Atomic(false)
    var happened: Bool { flag.load(ordering: .relaxed) }
    func note() { flag.store(true, ordering: .relaxed) }
}

/// The value of `task`, cancelling it at Ctrl-C (SIGINT) and noting that in `interrupted`.
func cancellingOnInterrupt<T: Sendable>(_ task: Task<T, any Error>, interrupted: Interruption) async throws -> T {
    signal(SIGINT, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler {
        interrupted.note()
        task.cancel()
    }
    source.resume()
    defer { source.cancel() }
    return try await task.value
}

/// `--seconds`, `--variant`, `--audio`, `--subtitles`, `--trick-play`: what of an HLS asset
/// or a DASH presentation a command takes.
/// Which renditions of a multivariant playlist or manifest: for pins, prefetches, exports and
/// recordings alike.
struct RenditionOptions: ParsableArguments {
    @Option(
        help:
            "Which variant (HLS) or video representation (DASH): first, lowest, highest, the tallest at most this high (720p), or the best at most this many bits per second."
    )
    var variant: String?

    @Option(
        help: "Audio languages: default, all, or RFC 5646 tags or names separated by commas (en,fr). Default: default.")
    var audio: String?

    @Option(
        help:
            "Subtitle languages: none, default, all, or tags separated by commas (en,fr). Default: none (forced subtitles in a chosen audio language are kept)."
    )
    var subtitles: String?
}

struct AssetOptions: ParsableArguments {
    @Option(help: "Only the first this many seconds of an HLS asset.")
    var seconds: String?

    @OptionGroup var renditions: RenditionOptions

    @Flag(help: "Also I-frame and thumbnail playlists (DASH trick-mode and image adaptation sets), for scrubbing.")
    var trickPlay = false

    @Option(
        name: .customLong("subtitle-file"),
        help: ArgumentHelp(
            "A subtitle file (SRT or WebVTT) added to an HLS asset, stored with it: LANG=URL[,NAME] (repeatable; give the same to `mediacache url --subtitles`).",
            valueName: "lang=url[,name]"))
    var subtitleFiles: [String] = []

    /// The request these options and `range` make.
    func request(range: String? = nil) throws -> PrefetchRequest {
        do {
            return try PrefetchRequest.parse(
                range: range, seconds: seconds, variant: renditions.variant, audio: renditions.audio,
                subtitles: renditions.subtitles,
                trickPlay: trickPlay ? "yes" : nil, subtitleFiles: subtitleFiles)
        } catch {
            throw ValidationError(error.message { "--" + $0 })
        }
    }

    /// The origin URLs of `texts`, at least one.
    static func targets(_ texts: [String]) throws -> [URL] {
        guard !texts.isEmpty else { throw ValidationError("Give at least one URL.") }
        return try texts.map(originURL)
    }
}

/// Shows a prefetch's progress: a bar redrawn in place on a terminal, one line at the end otherwise.
final class ProgressPrinter: Sendable {
    private struct State {
        var last = PrefetchProgress()
        var drawnAt: ContinuousClock.Instant?
    }

    private let url: URL
    private let onTerminal: Bool
    private let started = ContinuousClock.now
    private let state = Mutex(State())

    init(url: URL, onTerminal: Bool) {
        self.url = url
        self.onTerminal = onTerminal
    }

    func update(_ progress: PrefetchProgress) {
        let now = ContinuousClock.now
        let draw = state.withLock { state -> Bool in
            state.last = progress
            guard onTerminal, state.drawnAt.map({ now - $0 >= .milliseconds(100) }) ?? true else { return false }
            state.drawnAt = now
            return true
        }
        if draw { write("\r" + line(progress, elapsed: now - started) + "\u{1B}[K") }
    }

    func finish(_ result: PrefetchProgress) {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let cached = result.bytesAlreadyCached > 0 ? " (\(Format.bytes(result.bytesAlreadyCached)) already cached)" : ""
        let summary =
            "\(url.absoluteString): \(result.resourcesDone)/\(result.resourcesTotal) \(result.playlists.isEmpty ? "file" : "segments"), "
            + "\(Format.bytes(result.bytesDone))\(cached) in \(String(format: "%.1f", seconds)) s"
        write((onTerminal ? "\r\u{1B}[K" : "") + summary + "\n")
    }

    func stopped() {
        let last = state.withLock { $0.last }
        write(
            (onTerminal ? "\r\u{1B}[K" : "")
                + "\(url.absoluteString): stopped after \(Format.bytes(last.bytesDone)); what arrived stays cached.\n")
    }

    /// `[██████░░░░] 60% 12.0 MiB of 20.0 MiB  4.0 MiB/s  ETA 2s  3/5`
    func line(_ progress: PrefetchProgress, elapsed: Duration) -> String {
        let seconds = max(0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        let rate = Double(progress.bytesDone - progress.bytesAlreadyCached) / seconds
        var fraction =
            progress.resourcesTotal > 0 ? Double(progress.resourcesDone) / Double(progress.resourcesTotal) : 0
        var amount = Format.bytes(progress.bytesDone)
        var eta = ""
        if let total = progress.bytesTotal, total > 0 {
            fraction = Double(progress.bytesDone) / Double(total)
            amount += " of " + Format.bytes(total)
            if rate > 0 { eta = "  ETA \(Int((Double(total - progress.bytesDone) / rate).rounded(.up)))s" }
        }
        let cells = 20
        let filled = min(cells, Int(fraction * Double(cells)))
        return "[" + String(repeating: "█", count: filled) + String(repeating: "░", count: cells - filled) + "] "
            + Format.percent(min(1, fraction)) + " " + amount + "  " + Format.bytes(Int64(rate)) + "/s" + eta
            + "  \(progress.resourcesDone)/\(progress.resourcesTotal)"
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
