// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Dispatch
import Foundation
import MediaCache
import MediaCacheProxy
import Synchronization

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Download files or HLS assets and keep them whatever the cache's limits (for offline play).",
        discussion: """
            A playlist URL pins the chosen variant, audio and subtitle languages and their segments; a DASH manifest, \
            the chosen representations (video by --variant, audio and text adaptation sets by language); any other URL \
            pins the file. Pinning an asset again with more renditions (--audio fr) adds them, fetching only what is new. \
            A pin that cannot fit the pinned quota (serve --max-pinned-size) is refused before its bytes are fetched. \
            With a server running, the server downloads and Ctrl-C only stops watching; without one, the download runs \
            here and Ctrl-C stops it: it resumes with the next `mediacache serve` or `mediacache resume`.
            """
    )

    @Argument(help: "Origin URLs (files or HLS playlists).")
    var urls: [String]

    @OptionGroup var asset: AssetOptions

    @OptionGroup(title: "This job's own rules (over serve's)") var rules: JobRuleOptions

    @Flag(help: "Put the job first in the queue: it downloads now, before the others.")
    var first = false

    @Option(
        name: .customLong("replace-url"),
        help:
            "A job (id or URL) to give the one URL given instead of its own (a signed URL that expired): it resumes, keeping what it holds under a key rule."
    )
    var replaceURL: String?

    @OptionGroup var options: CacheOptions

    func validate() throws {
        _ = try AssetOptions.targets(urls)
        _ = try asset.request()
        if replaceURL != nil, urls.count != 1 { throw ValidationError("--replace-url takes one job and one new URL.") }
    }

    func run() async throws {
        let targets = try AssetOptions.targets(urls)
        if let job = replaceURL, let url = targets.first {
            let change:
                @Sendable (any CacheAccess, @escaping @Sendable (DownloadJob) -> Void) async throws -> DownloadJob? = {
                    access, progress in
                    try await access.replaceURL(job, url, progress: progress)
                }
            return try await followingDownloads(options: options, [(url.absoluteString, change)])
        }
        let request = try asset.request()
        try await followingDownloads(
            options: options,
            targets.map { url in
                (
                    url.absoluteString,
                    { access, progress in
                        try await access.pin(url, request, rules: rules, first: first, progress: progress)
                    }
                )
            })
    }
}

struct UnpinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin",
        abstract: "Stop keeping these URLs: their downloads stop and their bytes go back to the streaming cache.",
        discussion: """
            With --variant, --audio, --subtitles or --trick-play, only those renditions of a pinned asset are released \
            (unpin URL --audio fr); the rest stays pinned.
            """
    )

    @Argument(help: "Origin URLs.")
    var urls: [String]

    @OptionGroup var asset: AssetOptions

    @OptionGroup var options: CacheOptions

    func validate() throws {
        _ = try AssetOptions.targets(urls)
        guard asset.seconds == nil else {
            throw ValidationError("unpin takes no --seconds: it releases whole renditions.")
        }
        _ = try asset.request()
    }

    func run() async throws {
        let request = try asset.request()
        let what = request.renditions.isEmpty ? "" : " (renditions)"
        try await forEachURL(
            try AssetOptions.targets(urls), options: options, done: "unpinned" + what, notDone: "was not pinned:"
        ) { access, url in
            try await access.unpin(url, request)
        }
    }
}

struct DownloadsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downloads",
        abstract:
            "List the pinned downloads (state, why one waits, progress, rate, time left); change their rules and order.",
        subcommands: [DownloadsListCommand.self, DownloadsSetCommand.self, DownloadsMoveCommand.self],
        defaultSubcommand: DownloadsListCommand.self
    )
}

struct DownloadsListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the pinned downloads: state, why one waits, progress, rate and time left."
    )

    @OptionGroup var options: CacheOptions

    func run() async throws {
        try await failing {
            let jobs = try await options.withCache { try await $0.downloads() }
            if options.json { return try printJSON(jobs) }
            guard !jobs.isEmpty else { return print("No pinned downloads in \(options.directory.path).") }
            let header = ["ID", "STATE", "DONE", "SIZE", "RATE", "LEFT", "URL"]
            let rows = jobs.map { job -> [String] in
                let name = job.isRecording && job.state == .downloading ? "recording" : job.state.rawValue
                let state: String =
                    name
                    + (job.waiting.map { $0 == .power ? " (waiting for power)" : " (waits: \($0.rawValue))" } ?? "")
                    + (job.failure.map { ": " + $0.prefix(60) } ?? "")
                let done: String =
                    job.recordedSeconds.map { String(format: "%.0f s", $0) } ?? job.fraction.map(Format.percent)
                    ?? Format.bytes(job.bytesDone)
                return [
                    job.id, state, done,
                    job.bytesTotal.map { (job.totalIsEstimate ? "~" : "") + Format.bytes($0) } ?? "?",
                    job.bytesPerSecond.map { Format.bytes(Int64($0)) + "/s" } ?? "-",
                    job.secondsLeft.map { "\(Int($0.rounded(.up)))s" } ?? "-", job.url.absoluteString,
                ]
            }
            let widths = (0..<header.count).map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
            for (index, row) in ([header] + rows).enumerated() {
                print(
                    row.enumerated().map { column, text in
                        column == row.count - 1
                            ? text : text.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    }.joined(separator: "  "))
                guard index > 0 else { continue }
                let job = jobs[index - 1]
                if let detail = job.waitingDetail { print("    waits: " + detail) }
                if let advice = Advice.words(for: job.remedy) { print("    " + advice) }
                if let rules = job.rules { print("    rules: " + Format.rules(rules)) }
                for line in Format.renditions(job.renditions ?? []) { print("    " + line) }
            }
            let totals = DownloadTotals(jobs)
            print(
                "\(totals.jobs) job\(totals.jobs == 1 ? "" : "s"), \(totals.active) active: \(Format.bytes(totals.bytesDone)) of \(Format.bytes(totals.bytesTotal))"
                    + (totals.secondsLeft.map { ", about \(Int($0.rounded(.up)))s left" } ?? ""))
        }
    }
}

struct DownloadsSetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract:
            "Change a job's own rules, also while it runs: its window, its network (any: \"this one anyway\"), its rate."
    )

    @Argument(help: "A job id or the URL it pins.")
    var job: String

    @OptionGroup var rules: JobRuleOptions

    @OptionGroup var options: CacheOptions

    func validate() throws {
        guard !(try rules.rules()).isEmpty else { throw ValidationError("Give --window, --network or --rate.") }
    }

    func run() async throws {
        try await failing {
            let changed = try await options.withCache { try await $0.setRules(job, rules) }
            if options.json { return try printJSON(changed) }
            print(
                "\(changed.id) \(changed.state.rawValue), rules: \(Format.rules(changed.rules ?? DownloadRules()))"
                    + (changed.waitingDetail.map { "\n  waits: \($0)" } ?? "")
                    + (Advice.words(for: changed.remedy).map { "\n  \($0)" } ?? ""))
        }
    }
}

struct DownloadsMoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move",
        abstract:
            "Move a job to the front of the queue (it downloads now, a running job waiting behind it if need be) or to the back."
    )

    @Argument(help: "A job id or the URL it pins.")
    var job: String

    @Flag(exclusivity: .exclusive, help: "Where to: --first (the default) or --last.")
    var place: Place = .first

    enum Place: String, EnumerableFlag {
        case first, last
    }

    @OptionGroup var options: CacheOptions

    func run() async throws {
        try await failing {
            let moved = try await options.withCache { try await $0.move(job, toFront: place == .first) }
            if options.json { return try printJSON(moved) }
            print("\(moved.id) moved \(place == .first ? "to the front" : "to the back"): \(moved.state.rawValue)")
        }
    }
}

struct NetworkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "network",
        abstract:
            "Tell the running server what the network is (metered: \"I am on a hotspot\"), or let it ask the system again (auto).",
        discussion:
            "With no argument, prints what downloads take the network to be and who says so. Jobs whose network rule forbids it wait; the others go on."
    )

    @Argument(help: "metered, unmetered or auto.")
    var mode: String?

    func validate() throws {
        if let mode, DownloadRules.NetworkOverride(rawValue: mode.lowercased()) == nil {
            throw ValidationError("\(mode.prefix(40)) is not one of metered, unmetered, auto.")
        }
    }

    @OptionGroup var options: CacheOptions

    func run() async throws {
        try await failing {
            let report = try await options.withCache {
                try await $0.network(mode.flatMap { DownloadRules.NetworkOverride(rawValue: $0.lowercased()) })
            }
            if options.json { return try printJSON(report) }
            let effective = report.effective
            let words = effective.isConstrained ? "in low-data mode" : effective.isMetered ? "metered" : "not metered"
            print(
                "The network is \(words) (\(report.override == .auto ? "as the system says" : "as you said: \(report.override.rawValue)"))."
            )
        }
    }
}

/// `pause`, `resume` and `cancel`: one command each, the same shape.
struct JobCommand<Action: JobActionName>: AsyncParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: Action.action.rawValue, abstract: Action.abstract)
    }

    @Argument(help: "Job ids or the URLs they pin (`mediacache downloads` lists them).")
    var jobs: [String]

    @OptionGroup var options: CacheOptions

    func validate() throws {
        guard !jobs.isEmpty else { throw ValidationError("Give at least one job id or URL.") }
    }

    func run() async throws {
        let action = Action.action
        try await followingDownloads(
            options: options,
            jobs.map { text in
                (text, { access, progress in try await access.control(action, text, progress: progress) })
            })
    }
}

protocol JobActionName {
    static var action: JobAction { get }
    static var abstract: String { get }
}

enum PauseAction: JobActionName {
    static let action = JobAction.pause
    static let abstract = "Pause pinned downloads; what arrived stays pinned."
}

enum ResumeAction: JobActionName {
    static let action = JobAction.resume
    static let abstract = "Resume paused or failed downloads; only the missing bytes are fetched."
}

enum CancelAction: JobActionName {
    static let action = JobAction.cancel
    static let abstract = "Cancel pinned downloads and unpin them; their bytes go back to the streaming cache."
}

/// Runs each of `work` in turn (each may follow a download until it settles), printing a
/// progress bar on a terminal and a line per job at the end (JSON with `--json`). Ctrl-C
/// stops: a download running here stops and resumes later; one a server runs goes on.
func followingDownloads(
    options: CacheOptions,
    _ work: [(
        name: String,
        run: @Sendable (any CacheAccess, @escaping @Sendable (DownloadJob) -> Void) async throws -> DownloadJob?
    )]
) async throws {
    let json = options.json
    try await failing {
        let interrupted = Interruption()
        let (results, fromServer) = try await options.withCache { access in
            var results: [String: DownloadJob?] = [:]
            for (name, run) in work {
                let printer = JobPrinter(onTerminal: !json && isatty(STDOUT_FILENO) != 0)
                let running = Task { try await run(access) { printer.update($0) } }
                let job = try await cancellingOnInterrupt(running, interrupted: interrupted)
                results[name] = job
                if !json { printer.finish(job, name: name) }
                if interrupted.happened { break }
            }
            return (results, access.isServer)
        }
        if json { try printJSON(results) }
        if interrupted.happened {
            if !json {
                print(
                    fromServer
                        ? "Stopped watching; the server goes on downloading."
                        : "Stopped; the downloads resume with `mediacache serve` or `mediacache resume`.")
            }
            throw ExitCode(130)
        }
        if results.values.contains(where: { $0?.state == .failed }) { throw ExitCode(1) }
    }
}

/// A job's progress on a terminal: the prefetch bar, redrawn in place.
final class JobPrinter: Sendable {
    private let bar: Mutex<(printer: ProgressPrinter?, firstBytes: Int64?)> = Mutex((nil, nil))
    private let onTerminal: Bool

    init(onTerminal: Bool) {
        self.onTerminal = onTerminal
    }

    func update(_ job: DownloadJob) {
        let (printer, progress) = bar.withLock { bar -> (ProgressPrinter, PrefetchProgress) in
            let printer = bar.printer ?? ProgressPrinter(url: job.url, onTerminal: onTerminal)
            bar.printer = printer
            if bar.firstBytes == nil { bar.firstBytes = job.bytesDone }
            var progress = PrefetchProgress()
            progress.bytesDone = job.bytesDone
            progress.bytesTotal = job.bytesTotal
            progress.resourcesDone = job.resourcesDone
            progress.resourcesTotal = job.resourcesTotal
            // The rate counts what arrived while watching.
            progress.bytesAlreadyCached = bar.firstBytes ?? 0
            return (printer, progress)
        }
        printer.update(progress)
    }

    func finish(_ job: DownloadJob?, name: String) {
        if onTerminal { FileHandle.standardOutput.write(Data("\r\u{1B}[K".utf8)) }
        guard let job else { return print("cancelled \(name)") }
        let total = job.bytesTotal.map { " of \(job.totalIsEstimate ? "about " : "")\(Format.bytes($0))" } ?? ""
        print(
            "\(job.id) \(job.state.rawValue): \(Format.bytes(job.bytesDone))\(total), \(job.resourcesDone)/\(job.resourcesTotal) resources  \(job.url.absoluteString)"
                + (job.failure.map { "\n  \($0)" } ?? "") + (job.waitingDetail.map { "\n  waits: \($0)" } ?? "")
                + (Advice.words(for: job.remedy).map { "\n  \($0)" } ?? ""))
    }
}

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "Write what is cached of a URL outside the cache, with no network: a file, an HLS or DASH asset as a folder a player plays offline, or (--file) as one playable file.",
        discussion:
            "Every byte must be cached (pin it first). With --output, an HLS asset becomes a folder with index.m3u8, its media playlists and segments; a DASH presentation a folder with index.mpd (the chosen representations) and its segments. With --file, the held variant (the best one, or the one --variant names) and its chosen audio become one file: fragmented MP4 segments one .mp4 (.m4a: the audio alone), MPEG-TS segments one .ts, AES-128 segments deciphered; chosen subtitles are written beside it as NAME.LANG.vtt."
    )

    @Argument(help: "The origin URL (a file, an HLS playlist or a DASH manifest).")
    var url: String

    @Option(help: "Where to write: a new file, or for an HLS or DASH asset a new folder.")
    var output: String?

    @Option(help: "Write an HLS or DASH asset as one playable file here (.mp4, .m4a or .ts) instead of a folder.")
    var file: String?

    @OptionGroup(title: "What of an HLS or DASH asset (as it was pinned)") var asset: AssetOptions

    @OptionGroup var options: CacheOptions

    func validate() throws {
        _ = try originURL(url)
        _ = try asset.request()
        guard (output == nil) != (file == nil) else { throw ValidationError("Give either --output or --file.") }
        guard !(output ?? file ?? "").isEmpty else {
            throw ValidationError("--\(output == nil ? "file" : "output") needs a path.")
        }
        if file != nil, asset.seconds != nil {
            throw ValidationError("--file writes the whole asset: leave out --seconds.")
        }
    }

    func run() async throws {
        let url = try originURL(url)
        let request = try asset.request()
        // A server resolves a relative path against its own working folder: give it an absolute one.
        let destination = URL(fileURLWithPath: output ?? file ?? "").standardizedFileURL
        try await failing {
            let summary = try await options.withCache {
                try await $0.export(url, to: destination, request, oneFile: file != nil)
            }
            if options.json { return try printJSON(summary) }
            print(
                "Exported \(url.absoluteString): \(summary.files) file\(summary.files == 1 ? "" : "s"), \(Format.bytes(summary.bytes)); play \(summary.path)"
            )
        }
    }
}
