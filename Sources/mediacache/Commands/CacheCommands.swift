// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Crypto
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheProxy

/// Options every cache command takes.
struct CacheOptions: ParsableArguments {
    @Option(
        help:
            "The store's one folder (default: the user's data folder, mediacache/ inside it, with the streaming entries in the user's cache folder)."
    )
    var cacheDir: String?

    @Option(
        name: .customLong("encryption-key-file"),
        help:
            "The key of an encrypted cache folder (32 raw bytes or 64 hex characters); not needed while a server holds the folder."
    )
    var encryptionKeyFile: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    var directory: URL {
        cacheDir.map { URL(fileURLWithPath: $0) } ?? StoreFolders.store()
    }

    func validate() throws {
        _ = try KeyFile.load(encryptionKeyFile)
    }

    /// The host groups of `--same-content-hosts` (each `a.example,b.example`).
    static func hostGroups(_ values: [String]) throws -> [[String]] {
        try values.map { value in
            let hosts = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard hosts.count >= 2, hosts.count <= 50,
                hosts.allSatisfy({
                    !$0.isEmpty && $0.utf8.count <= 253 && HostAndPort(parsing: $0).map { $0.port == nil } == true
                })
            else {
                throw ValidationError(
                    "--same-content-hosts takes two or more host names, comma-separated (a.example.com,b.example.com), not \(value.prefix(100))."
                )
            }
            return hosts
        }
    }

    /// The key rule of `--ignore-query-param` and `--ignore-query-preset`.
    static func keyRule(parameters: [String], presets: [String]) throws -> CacheKeyRule {
        var rule = CacheKeyRule(ignoredQueryParameters: Set(parameters))
        for name in parameters where name.isEmpty || name.utf8.count > 200 {
            throw ValidationError(
                "--ignore-query-param takes a parameter name (1 to 200 bytes), not \(name.prefix(60)).")
        }
        for name in presets {
            guard let preset = CacheKeyRule.preset(named: name) else {
                throw ValidationError(
                    "--ignore-query-preset takes one of \(CacheKeyRule.presets.keys.sorted().joined(separator: ", ")), not \(name.prefix(60))."
                )
            }
            rule = rule.adding(preset)
        }
        return rule
    }

    /// Runs `body` with the cache folder opened here or reached through its server, then closes it.
    func withCache<T>(_ body: (any CacheAccess) async throws -> T) async throws -> T {
        let (key, warning) = try KeyFile.load(encryptionKeyFile)
        if let warning { FileHandle.standardError.write(Data("mediacache: warning: \(warning)\n".utf8)) }
        let access = try await CacheFolder.open(
            directory, streamingDirectory: cacheDir == nil ? StoreFolders.streaming() : nil,
            encryptionKey: key)
        do {
            let result = try await body(access)
            await access.close()
            return result
        } catch {
            await access.close()
            throw error
        }
    }
}

/// `--encryption-key-file`: the key in the file, and a warning when others may read it.
enum KeyFile {
    static func load(_ path: String?) throws -> (key: SymmetricKey?, warning: String?) {
        guard let path else { return (nil, nil) }
        do {
            let (key, warning) = try EncryptionKey.load(path: path)
            return (key, warning)
        } catch {
            throw ValidationError("--encryption-key-file: \(error.message)")
        }
    }
}

/// Prints `value` as JSON (sorted keys, ISO 8601 dates).
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// An origin URL from the command line: http or https with a host.
func originURL(_ text: String) throws -> URL {
    guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
        url.host?.isEmpty == false
    else {
        throw ValidationError("\(text.prefix(200)) is not an http or https URL.")
    }
    return url
}

/// Does `change` to each of `targets` and says for each whether it was done: a line
/// `done URL` or `notDone URL`, or with `--json` an object of URL → `true`/`false`.
func forEachURL(
    _ targets: [URL], options: CacheOptions, done: String, notDone: String,
    _ change: @escaping (any CacheAccess, URL) async throws -> Bool
) async throws {
    try await failing {
        let results = try await options.withCache { access in
            var results: [String: Bool] = [:]
            for url in targets { results[url.absoluteString] = try await change(access, url) }
            return results
        }
        if options.json { return try printJSON(results) }
        for url in targets { print((results[url.absoluteString] == true ? done : notDone) + " " + url.absoluteString) }
    }
}

/// Runs a command's body, turning a ``CommandFailure`` into its one-line reason and exit status 1.
func failing(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let failure as CommandFailure {
        FileHandle.standardError.write(Data("mediacache: \(failure.message)\n".utf8))
        throw ExitCode(1)
    }
}

enum Format {
    static func bytes(_ count: Int64) -> String {
        ByteCountText.format(count)
    }

    static func date(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate, .withTime, .withColonSeparatorInTime, .withSpaceBetweenDateAndTime]
        return formatter.string(from: date)
    }

    static func percent(_ fraction: Double) -> String {
        String(format: "%.0f%%", (fraction * 100).rounded(.down))
    }

    /// A job's rules: `window 01:00-06:00, network any, rate 2 MiB/s`.
    static func rules(_ rules: DownloadRules) -> String {
        let parts = [
            rules.window.map { "window \($0)" }, rules.network.map { "network \($0.rawValue)" },
            rules.maxBytesPerSecond.map { "rate \(bytes($0))/s" }, rules.power.map { "power \($0.rawValue)" },
        ]
        let said = parts.compactMap { $0 }
        return said.isEmpty ? "the server's" : said.joined(separator: ", ")
    }

    /// One line per rendition: `audio    fr  "Français"  held (212/212)`.
    static func renditions(_ states: [RenditionState]) -> [String] {
        states.map { state in
            let rendition = state.rendition
            var what: [String] = []
            if let height = rendition.height { what.append("\(height)p") }
            if rendition.bandwidth > 0, rendition.role == .variant {
                what.append(String(format: "%.1f Mbit/s", Double(rendition.bandwidth) / 1e6))
            }
            if let language = rendition.language { what.append(language) }
            if let name = rendition.name { what.append("\"\(name)\"") }
            if let id = rendition.representation { what.append("id \(id)") }
            if rendition.isForced { what.append("forced") }
            return rendition.role.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)
                + what.joined(separator: "  ")
                + "  \(state.state.rawValue) (\(state.resourcesHeld)/\(state.resources))"
        }
    }
}

/// Where a running proxy listens, for the commands that name it rather than its cache folder.
struct ServerAddress: ParsableArguments {
    @Option(help: "The proxy's address.")
    var host = "127.0.0.1"

    @Option(help: "The proxy's port.")
    var port = ProxyServer.defaultPort

    @Option(help: "The proxy's access token, if it has one.")
    var token: String?

    @Flag(
        help: """
            The server that holds the cache folder (--cache-dir, else the default one), its address and token from the \
            folder's server.json; fails, saying so, when none answers.
            """)
    var running = false

    @Option(help: "With --running: the store's folder (default: the user's data folder, mediacache/ inside it).")
    var cacheDir: String?

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("--port must be 1...65535.") }
        guard running || cacheDir == nil else { throw ValidationError("--cache-dir goes with --running.") }
    }

    /// The server as the admin requests reach it.
    var info: ServerInfo { ServerInfo(host: host, port: port, token: token, pid: 0) }

    /// The server named, or with `--running` the one that holds the cache folder and answers.
    /// - Throws: ``CommandFailure`` when none runs.
    func resolved() async throws -> ServerInfo {
        guard running else { return info }
        let folder = cacheDir.map { URL(fileURLWithPath: $0) } ?? StoreFolders.store()
        if let data = try? Data(contentsOf: CacheFolder.serverFile(in: folder)),
            let found = try? JSONDecoder().decode(ServerInfo.self, from: data),
            await ServerCache(found).answers()
        {
            return found
        }
        throw CommandFailure("No MediaCache server runs for \(folder.path); start one with `mediacache serve`.")
    }
}

/// `originURL(_:)` under a name no command's property shadows.
func mediaCacheOriginURL(_ text: String) throws -> URL { try originURL(text) }

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List what is cached: each entry's size, how much of it is cached, type, last access and URL.")

    enum Sort: String, ExpressibleByArgument, CaseIterable {
        case size, access, url
    }

    @OptionGroup var options: CacheOptions

    @Option(help: "Order by size (largest first), access (most recent first) or url.")
    var sort: Sort = .access

    func run() async throws {
        try await failing {
            var (entries, store, fills) = try await options.withCache {
                (try await $0.entries(), try await $0.stats().store, Set(try await $0.fills().map(\.url)))
            }
            switch sort {
            case .size: entries.sort { ($0.length ?? $0.storedBytes, $0.key) > ($1.length ?? $1.storedBytes, $1.key) }
            case .access: entries.sort { ($0.lastAccess, $0.key) > ($1.lastAccess, $1.key) }
            case .url: entries.sort { ($0.url ?? "", $0.key) < ($1.url ?? "", $1.key) }
            }
            if options.json { return try printJSON(entries) }
            defer {
                if store.entriesSealedWithAnotherKey > 0 {
                    print(
                        "(\(store.entriesSealedWithAnotherKey) more entr\(store.entriesSealedWithAnotherKey == 1 ? "y is" : "ies are") sealed with another key: only that key shows them.)"
                    )
                }
            }
            guard !entries.isEmpty else { return print("Nothing is cached in \(options.directory.path).") }
            let header = ["SIZE", "CACHED", "", "PIN", "TYPE", "LAST ACCESS", "URL"]
            let rows = entries.map { entry in
                [
                    entry.length.map(Format.bytes) ?? "?",
                    Format.percent(entry.fraction) + (entry.url.map(fills.contains) == true ? " filling" : ""),
                    Format.bytes(entry.storedBytes), entry.isPinned ? "yes" : "-",
                    entry.mimeType ?? "-",
                    Format.date(entry.lastAccess), entry.url ?? "(key \(entry.key.prefix(16)))",
                ]
            }
            let widths = (0..<header.count).map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
            for row in [header] + rows {
                print(
                    row.enumerated().map { column, text in
                        column == row.count - 1
                            ? text : text.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    }.joined(separator: "  "))
            }
        }
    }
}

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show what is cached of one URL: metadata, validators, freshness and which parts are stored.")

    @Argument(help: "The origin URL.")
    var url: String

    @OptionGroup var options: CacheOptions

    func run() async throws {
        let url = try originURL(url)
        try await failing {
            guard let entry = try await options.withCache({ try await $0.entry(url) }) else {
                throw CommandFailure("Nothing is cached for \(url.absoluteString.prefix(200)).")
            }
            if options.json { return try printJSON(entry) }
            print("URL:           \(entry.url ?? url.absoluteString)")
            print("Key:           \(entry.key)")
            print("Type:          \(entry.mimeType ?? "-")")
            print("Length:        \(entry.length.map { "\($0) bytes (\(Format.bytes($0)))" } ?? "unknown")")
            print(
                "Cached:        \(entry.storedBytes) bytes, \(Format.percent(entry.fraction)) in \(entry.spans.count) span\(entry.spans.count == 1 ? "" : "s")"
            )
            if let length = entry.length {
                print("               [\(entry.spanSet.coverageBar(length: length, width: 40))]")
            }
            print("ETag:          \(entry.etag ?? "-")")
            print("Last-Modified: \(entry.lastModified ?? "-")")
            print("Fresh until:   \(entry.freshUntil.map(Format.date) ?? "- (revalidated before use)")")
            print("Created:       \(Format.date(entry.createdAt))")
            print("Last access:   \(Format.date(entry.lastAccess))")
            if let digests = entry.originDigests {
                let checked = entry.digestsMatched.map { "matched: " + $0.joined(separator: ", ") } ?? "not checked yet"
                print("Origin digest: \(digests.joined(separator: ", ")), \(checked)")
            }
            if let damaged = entry.damaged {
                print("Damaged:       \(damaged.map { "\($0[0])-\($0[1] - 1)" }.joined(separator: ", "))")
            }
            if let job = try await options.withCache({ try await $0.downloads() }).first(where: { $0.url == url }),
                let renditions = job.renditions
            {
                print("Pinned by:     job \(job.id), \(job.state.rawValue)")
                for line in Format.renditions(renditions) { print("               " + line) }
            }
        }
    }
}

/// A command that changes each URL it is given and says whether it did (`rm`, `unpin`).
protocol URLChange {
    static var name: String { get }
    static var abstract: String { get }
    /// What a line starts with for a URL changed, and for one that was not.
    static var done: String { get }
    static var notDone: String { get }
    /// Changes `url`; whether there was something to change.
    static func change(_ access: any CacheAccess, _ url: URL) async throws -> Bool
}

struct URLChangeCommand<Change: URLChange>: AsyncParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: Change.name, abstract: Change.abstract)
    }

    @Argument(help: "Origin URLs.")
    var urls: [String]

    @OptionGroup var options: CacheOptions

    func validate() throws {
        _ = try AssetOptions.targets(urls)
    }

    func run() async throws {
        try await forEachURL(
            try AssetOptions.targets(urls), options: options, done: Change.done, notDone: Change.notDone, Change.change)
    }
}

/// `rm`.
enum Remove: URLChange {
    static let name = "rm"
    static let abstract = "Remove what is cached of these URLs."
    static let done = "removed"
    static let notDone = "not cached:"
    static func change(_ access: any CacheAccess, _ url: URL) async throws -> Bool { try await access.remove(url) }
}

struct ClearCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove everything cached.")

    @OptionGroup var options: CacheOptions

    func run() async throws {
        try await failing {
            let count = try await options.withCache { try await $0.clear() }
            if options.json { return try printJSON(["removed": count]) }
            print("Removed \(count) entr\(count == 1 ? "y" : "ies") from \(options.directory.path).")
        }
    }
}

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the cache's size against its limit and, from a running server, what it served.")

    @OptionGroup var options: CacheOptions

    func run() async throws {
        try await failing {
            let (stats, fromServer) = try await options.withCache { (try await $0.stats(), $0.isServer) }
            if options.json { return try printJSON(stats) }
            print("Folder:      \(stats.store.directory)")
            print("Entries:     \(stats.store.entries)")
            print(
                "Size:        \(Format.bytes(stats.store.bytes)) of \(Format.bytes(stats.store.limit)) (\(Format.percent(stats.store.limit > 0 ? Double(stats.store.bytes) / Double(stats.store.limit) : 0)))"
            )
            print(
                "Pinned:      \(Format.bytes(stats.store.pinnedBytes)) of \(Format.bytes(stats.store.pinnedLimit)) (the pinned quota)"
            )
            if stats.store.encrypted {
                print(
                    "Encrypted:   yes; \(stats.store.rejectedBlocks) block\(stats.store.rejectedBlocks == 1 ? "" : "s") failed the check and were fetched again, \(stats.store.entriesSealedWithAnotherKey) entr\(stats.store.entriesSealedWithAnotherKey == 1 ? "y" : "ies") sealed with another key"
                )
            }
            if let usage = stats.usage {
                let total = usage.fromCache + usage.fromOrigin
                print(
                    "Lifetime:    \(Format.bytes(usage.fromCache)) served from the cache (saved), \(Format.bytes(usage.fromOrigin)) from origins (\(Format.percent(total == 0 ? 0 : Double(usage.fromCache) / Double(total))) of bytes), over \(usage.days.count) day\(usage.days.count == 1 ? "" : "s") kept"
                )
                let evicted = usage.evicted.sorted { $0.value > $1.value }.map { "\($0.key) \(Format.bytes($0.value))" }
                print("Evicted:     \(evicted.isEmpty ? "nothing yet" : evicted.joined(separator: ", "))")
            }
            guard fromServer else {
                return print(
                    "(No server holds the folder: request counts since its start are kept by a running server.)")
            }
            let proxy = stats.proxy
            let counts = CacheResult.allCases.map { "\($0.rawValue) \(proxy.requests[$0.rawValue] ?? 0)" }.joined(
                separator: ", ")
            print("Requests:    \(counts) (since the server started)")
            print(
                "Served:      \(Format.bytes(proxy.bytesFromCache)) from the cache (saved), \(Format.bytes(proxy.bytesFromOrigin)) from origins, since the server started"
            )
            print("Hit ratio:   \(Format.percent(proxy.byteHitRatio)) of bytes, since the server started")
            print("Downloads:   \(stats.downloadsInFlight) in flight")
        }
    }
}
