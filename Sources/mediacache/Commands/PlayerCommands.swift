// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheProxy

/// `mediacache integrate mpv`: the mpv script that routes mpv through the running server.
struct IntegrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "integrate",
        abstract: "Route a desktop player through MediaCache by itself (mpv: a script in its scripts folder).",
        discussion: """
            `mediacache integrate mpv` installs mediacache.lua in mpv's scripts folder ($MPV_HOME/scripts, else \
            ~/.config/mpv/scripts): every http(s) URL mpv opens, and each stream URL its yt-dlp hook resolves, then \
            plays through the running `mediacache serve` (found through its cache folder, with its port and token), \
            and mpv preloads the next playlist entry through it; with no server running, mpv plays directly and says \
            so. --print writes the script to standard output instead. For VLC and yt-dlp, see `mediacache play`.
            """
    )

    @Argument(help: "The player: mpv.")
    var player: String

    @Flag(help: "Write the script to standard output instead of installing it.")
    var print = false

    @Option(help: "The folder to install it in (default: mpv's scripts folder).")
    var scriptsDir: String?

    @Option(help: "The cache folder whose server the player uses (default: the default one).")
    var cacheDir: String?

    func validate() throws {
        guard player == "mpv" else {
            throw ValidationError(
                "Only mpv can be integrated; for another player, `mediacache play URL --player NAME`.")
        }
    }

    func run() throws {
        let text = MPVScript.text(
            executable: try executablePath(), cacheDirectory: cacheDir.map { URL(fileURLWithPath: $0).path })
        if print { return Swift.print(text, terminator: "") }
        let environment = ProcessInfo.processInfo.environment
        let folder =
            scriptsDir.map { URL(fileURLWithPath: $0) }
            ?? environment["MPV_HOME"].flatMap {
                $0.isEmpty ? nil : URL(fileURLWithPath: $0).appendingPathComponent("scripts")
            }
            ?? (environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config"))
            .appendingPathComponent("mpv/scripts")
        let file = folder.appendingPathComponent("mediacache.lua")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: file, options: .atomic)
        } catch {
            throw CommandFailure("Cannot write \(file.path): \(error.localizedDescription)")
        }
        Swift.print("Installed \(file.path): mpv plays http(s) URLs through MediaCache while `mediacache serve` runs.")
    }
}

/// `mediacache play URL`: the user's player on the proxy URL, with a server for the session
/// when none runs.
struct PlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play a URL through MediaCache in your player (mpv, else ffplay, else vlc, or $MEDIACACHE_PLAYER).",
        discussion: """
            Uses the server that holds the cache folder; when none runs, starts one for the session and stops it when \
            the player ends. Arguments after -- go to the player: `mediacache play URL -- --no-video`.
            """
    )

    @Argument(help: "The origin URL (http or https).")
    var url: String

    @Option(
        help: "The player to run (a name on the PATH or a path); default $MEDIACACHE_PLAYER, else mpv, ffplay or vlc.")
    var player: String?

    @Option(
        help:
            "The store's one folder (default: the user's data folder, mediacache/ inside it, with the streaming entries in the user's cache folder)."
    )
    var cacheDir: String?

    @Argument(parsing: .postTerminator, help: "Arguments for the player.")
    var playerArguments: [String] = []

    func validate() throws {
        _ = try mediaCacheOriginURL(url)
    }

    func run() async throws {
        let origin = try mediaCacheOriginURL(url)
        let command = try Self.player(player, environment: ProcessInfo.processInfo.environment)
        let folder = cacheDir.map { URL(fileURLWithPath: $0) } ?? StoreFolders.store()
        var address = try ServerAddress.parse(["--running"] + (cacheDir.map { ["--cache-dir", $0] } ?? []))
        address.running = true
        var session: Process?
        let info: ServerInfo
        if let running = try? await address.resolved() {
            info = running
        } else {
            (session, info) = try await Self.startServer(folder)
        }
        let status = await Self.run(
            command + playerArguments + [info.baseURL + ProxyURL.path(for: origin, token: info.token)])
        if let session {
            // Stopped as `serve` stops on SIGTERM (it commits), waited for on a thread of its own.
            session.terminate()
            await withCheckedContinuation { continuation in
                Thread {
                    session.waitUntilExit()
                    continuation.resume()
                }.start()
            }
        }
        if status != 0 { throw ExitCode(status) }
    }

    /// The player's command: `name` (or `$MEDIACACHE_PLAYER`, which may carry arguments),
    /// else the first of mpv, ffplay and vlc on the PATH.
    static func player(_ name: String?, environment: [String: String]) throws -> [String] {
        if let name { return [name] }
        if let chosen = environment["MEDIACACHE_PLAYER"], !chosen.trimmingCharacters(in: .whitespaces).isEmpty {
            return chosen.split(separator: " ").map(String.init)
        }
        let path = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for candidate in ["mpv", "ffplay", "vlc"]
        where path.contains(where: { FileManager.default.isExecutableFile(atPath: "\($0)/\(candidate)") }) {
            return [candidate]
        }
        throw CommandFailure(
            "No player found: install mpv (or ffplay, or vlc), or name one with --player or $MEDIACACHE_PLAYER.")
    }

    /// Starts `mediacache serve` on `folder` (any free port) for the session; returns it once
    /// it serves, and what it wrote in its server.json.
    static func startServer(_ folder: URL) async throws -> (Process, ServerInfo) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executablePath())
        process.arguments = ["serve", "--port", "0", "--cache-dir", folder.path]
        let output = Pipe()
        process.standardOutput = output
        do {
            try process.run()
        } catch {
            throw CommandFailure("Cannot start `mediacache serve`: \(error.localizedDescription)")
        }
        // Read on a thread of its own until the server says it serves (or ends).
        let ready = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Thread {
                var text = ""
                while !text.contains("mediacache: serving on") {
                    let data = output.fileHandleForReading.availableData
                    if data.isEmpty { return continuation.resume(returning: false) }
                    text += String(decoding: data, as: UTF8.self)
                }
                continuation.resume(returning: true)
            }.start()
        }
        guard ready, let data = try? Data(contentsOf: CacheFolder.serverFile(in: folder)),
            let info = try? JSONDecoder().decode(ServerInfo.self, from: data)
        else {
            process.terminate()
            throw CommandFailure(
                "`mediacache serve --cache-dir \(folder.path)` did not start; run it alone to see why.")
        }
        FileHandle.standardError.write(Data("MediaCache serves this session at \(info.baseURL).\n".utf8))
        return (process, info)
    }

    /// Runs `arguments` (the first found on the PATH) with this terminal; its exit status.
    static func run(_ arguments: [String]) async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread {
                do {
                    continuation.resume(returning: try runPassingThrough(arguments))
                } catch {
                    FileHandle.standardError.write(
                        Data("Cannot run \(arguments[0]): \(error.localizedDescription)\n".utf8))
                    continuation.resume(returning: 127)
                }
            }.start()
        }
    }
}
