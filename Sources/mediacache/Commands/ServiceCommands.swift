// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheProxy

/// `mediacache service install|uninstall|status|check`: `serve` run by the user's service
/// manager at login and restarted when it fails (a systemd user unit on Linux, a launchd
/// agent on macOS).
struct ServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service",
        abstract: "Run the proxy as a user service: started at login, restarted when it fails.",
        subcommands: [ServiceInstall.self, ServiceUninstall.self, ServiceStatus.self, ServiceCheck.self]
    )
}

/// Where a service definition goes and how its manager is told about it.
struct ServiceDefinition: Equatable {
    enum Manager: String, ExpressibleByArgument, CaseIterable { case systemd, launchd }

    static let systemdUnitName = "mediacache.service"
    static let launchdLabel = "org.mediacache.serve"

    var manager: Manager
    /// The `serve` command line: the executable's absolute path first.
    var arguments: [String]

    /// The manager of this platform.
    static var platformManager: Manager {
        #if os(macOS)
            return .launchd
        #else
            return .systemd
        #endif
    }

    /// The file the definition is written to, in the user's own configuration (systemd: under
    /// `$XDG_CONFIG_HOME`, else `~/.config`; launchd: `~/Library/LaunchAgents`).
    static func file(for manager: Manager, environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        let home = URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory())
        switch manager {
        case .systemd:
            let config =
                environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil }
                ?? home.appendingPathComponent(".config")
            return config.appendingPathComponent("systemd/user/\(systemdUnitName)")
        case .launchd:
            return home.appendingPathComponent("Library/LaunchAgents/\(launchdLabel).plist")
        }
    }

    /// The definition's text.
    func text(logFile: URL? = nil) throws -> String {
        switch manager {
        case .systemd: return try systemdUnit()
        case .launchd: return try launchdPlist(logFile: logFile)
        }
    }

    /// A systemd user unit: `Restart=on-failure`, and `service check` after the start, so a
    /// server that never comes up healthy counts as a failed start (and is restarted).
    func systemdUnit() throws -> String {
        let command = try arguments.map(Self.systemdQuoted).joined(separator: " ")
        let check = try ([arguments[0], "service", "check", "--wait", "30"] + cacheDirArguments).map(Self.systemdQuoted)
            .joined(separator: " ")
        return """
            [Unit]
            Description=MediaCache: a caching proxy for media players
            After=network-online.target

            [Service]
            Type=exec
            ExecStart=\(command)
            ExecStartPost=\(check)
            Restart=on-failure
            RestartSec=2
            TimeoutStopSec=30

            [Install]
            WantedBy=default.target

            """
    }

    /// A launchd agent: run at load, started again when it exits with a failure.
    func launchdPlist(logFile: URL?) throws -> String {
        var agent: [String: Any] = [
            "Label": Self.launchdLabel,
            "ProgramArguments": arguments,
            "RunAtLoad": true,
            "KeepAlive": ["SuccessfulExit": false],
            "ProcessType": "Background",
        ]
        if let logFile {
            agent["StandardOutPath"] = logFile.path
            agent["StandardErrorPath"] = logFile.path
        }
        let data = try PropertyListSerialization.data(fromPropertyList: agent, format: .xml, options: 0)
        return String(decoding: data, as: UTF8.self)
    }

    /// `--cache-dir D` as the serve command line names it, for the health check.
    private var cacheDirArguments: [String] {
        guard let index = arguments.firstIndex(of: "--cache-dir"), index + 1 < arguments.count else { return [] }
        return ["--cache-dir", arguments[index + 1]]
    }

    /// One argument as systemd's command-line syntax reads it: double-quoted, with `\`, `"`,
    /// `$` and `%` escaped (systemd expands `$NAME` and `%x` specifiers).
    static func systemdQuoted(_ argument: String) throws -> String {
        guard !argument.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw CommandFailure("A service command line cannot hold control characters: \(argument.debugDescription).")
        }
        var quoted = "\""
        for character in argument {
            switch character {
            case "\\": quoted += "\\\\"
            case "\"": quoted += "\\\""
            case "$": quoted += "$$"
            case "%": quoted += "%%"
            default: quoted.append(character)
            }
        }
        return quoted + "\""
    }
}

/// The running executable's absolute path, which the service definition starts.
func executablePath() throws -> String {
    let path = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
    guard path.hasPrefix("/"), FileManager.default.isExecutableFile(atPath: path) else {
        throw CommandFailure(
            "Cannot tell where this mediacache executable is (\(CommandLine.arguments[0])); run it by its path.")
    }
    return path
}

/// Runs `arguments` (a service manager's command), its output passed through; its exit status.
private func runManager(_ arguments: [String]) -> Int32 {
    (try? runPassingThrough(arguments)) ?? -1
}

/// Runs `arguments` (the first found on the `PATH`) with this process's terminal and waits
/// for it (blocking: call it off the cooperative pool); its exit status.
/// - Throws: when it cannot be started.
func runPassingThrough(_ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// The commands that load, start, stop and unload the definition.
private enum ManagerCommands {
    static func enable(_ manager: ServiceDefinition.Manager, file: URL) -> [[String]] {
        switch manager {
        case .systemd:
            return [
                ["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", "--now", ServiceDefinition.systemdUnitName],
            ]
        case .launchd: return [["launchctl", "bootstrap", "gui/\(getuid())", file.path]]
        }
    }

    static func disable(_ manager: ServiceDefinition.Manager) -> [[String]] {
        switch manager {
        case .systemd: return [["systemctl", "--user", "disable", "--now", ServiceDefinition.systemdUnitName]]
        case .launchd: return [["launchctl", "bootout", "gui/\(getuid())/\(ServiceDefinition.launchdLabel)"]]
        }
    }

    static func state(_ manager: ServiceDefinition.Manager) -> [String] {
        switch manager {
        case .systemd: return ["systemctl", "--user", "--no-pager", "status", ServiceDefinition.systemdUnitName]
        case .launchd: return ["launchctl", "print", "gui/\(getuid())/\(ServiceDefinition.launchdLabel)"]
        }
    }
}

struct ServiceInstall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Write the user service that runs `mediacache serve`, then enable and start it.",
        discussion: "Options after -- go to serve, checked now: mediacache service install -- --port 8090 --max-size 5G"
    )

    @Option(
        help:
            "The store's one folder (default: the user's data folder, mediacache/ inside it, with the streaming entries in the user's cache folder)."
    )
    var cacheDir: String?

    @Flag(help: "Write the definition only; do not enable or start it.")
    var noStart = false

    @Flag(help: "Print the definition instead of writing it.")
    var print = false

    @Option(
        help: "The service manager to write for: systemd or launchd (default: this platform's; another needs --print).")
    var manager: ServiceDefinition.Manager?

    @Argument(parsing: .postTerminator, help: "Options for serve.")
    var serveOptions: [String] = []

    func validate() throws {
        if let manager, manager != ServiceDefinition.platformManager, !print {
            throw ValidationError(
                "This platform's service manager is \(ServiceDefinition.platformManager); a \(manager) definition can only be printed (--print)."
            )
        }
        if serveOptions.contains(where: { $0 == "--cache-dir" || $0.hasPrefix("--cache-dir=") }) {
            throw ValidationError("Give the folder as service install --cache-dir, not after --.")
        }
        // The service must not fail at every start on an option a check now would have found.
        do {
            _ = try ServeCommand.parse(serveOptions)
        } catch {
            throw ValidationError("The options for serve: \(ServeCommand.message(for: error))")
        }
    }

    func run() async throws {
        try await failing {
            // Without --cache-dir the service uses the default folders (the data and cache classes).
            let folder = cacheDir.map { ["--cache-dir", URL(fileURLWithPath: $0).standardizedFileURL.path] } ?? []
            let manager = manager ?? ServiceDefinition.platformManager
            let definition = ServiceDefinition(
                manager: manager, arguments: [try executablePath(), "serve"] + folder + serveOptions)
            let logFile = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(
                "Library/Logs/mediacache.log")
            let text = try definition.text(logFile: logFile)
            if print { return Swift.print(text, terminator: "") }
            let file = ServiceDefinition.file(for: manager)
            do {
                try FileManager.default.createDirectory(
                    at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(text.utf8).write(to: file, options: .atomic)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            } catch {
                throw CommandFailure("Cannot write \(file.path): \(error.localizedDescription)")
            }
            Swift.print("Wrote \(file.path)")
            guard !noStart else { return }
            for command in ManagerCommands.enable(manager, file: file) where runManager(command) != 0 {
                throw CommandFailure(
                    "\(command.joined(separator: " ")) failed; the definition is written, start it when the service manager is running."
                )
            }
            Swift.print("Enabled and started; `mediacache service status` shows how it runs.")
        }
    }
}

struct ServiceUninstall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "uninstall",
        abstract: "Stop and disable the user service, and remove its definition. The cache folder stays.")

    @Flag(help: "Remove the definition only; do not ask the service manager to stop it.")
    var noStop = false

    func run() async throws {
        try await failing {
            let manager = ServiceDefinition.platformManager
            let file = ServiceDefinition.file(for: manager)
            guard FileManager.default.fileExists(atPath: file.path) else {
                throw CommandFailure("No service is installed (\(file.path) does not exist).")
            }
            if !noStop {
                for command in ManagerCommands.disable(manager) where runManager(command) != 0 {
                    FileHandle.standardError.write(
                        Data(
                            "mediacache: warning: \(command.joined(separator: " ")) failed; removing the definition anyway.\n"
                                .utf8))
                }
            }
            do {
                try FileManager.default.removeItem(at: file)
            } catch {
                throw CommandFailure("Cannot remove \(file.path): \(error.localizedDescription)")
            }
            if manager == .systemd, !noStop { _ = runManager(["systemctl", "--user", "daemon-reload"]) }
            Swift.print("Removed \(file.path); the cache folder is kept.")
        }
    }
}

struct ServiceStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the service's definition, its manager's view of it and whether the proxy answers.")

    @Option(help: "The store's folder the service serves (default: the user's data folder, mediacache/ inside it).")
    var cacheDir: String?

    func run() async throws {
        try await failing {
            let manager = ServiceDefinition.platformManager
            let file = ServiceDefinition.file(for: manager)
            let installed = FileManager.default.fileExists(atPath: file.path)
            Swift.print("Definition: \(file.path) (\(installed ? "installed" : "not installed"))")
            if installed { _ = runManager(ManagerCommands.state(manager)) }
            let directory = cacheDir.map { URL(fileURLWithPath: $0) } ?? StoreFolders.store()
            Swift.print(try await ServiceCheck.health(of: directory))
        }
    }
}

/// The health check: the server that holds the folder answers its stats.
struct ServiceCheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Exit 0 when a proxy serves the cache folder and answers; 1 with the reason otherwise.")

    @Option(
        help:
            "The store's one folder (default: the user's data folder, mediacache/ inside it, with the streaming entries in the user's cache folder)."
    )
    var cacheDir: String?

    @Option(help: "Seconds to wait for a server that is starting (default: 0, ask once).")
    var wait: Int = 0

    func validate() throws {
        guard (0...3600).contains(wait) else { throw ValidationError("--wait takes 0 to 3600 seconds.") }
    }

    func run() async throws {
        try await failing {
            let directory = cacheDir.map { URL(fileURLWithPath: $0) } ?? StoreFolders.store()
            let deadline = ContinuousClock.now + .seconds(wait)
            while true {
                do {
                    return Swift.print(try await Self.health(of: directory))
                } catch let failure as CommandFailure {
                    // A server that is starting writes its file once it listens: ask again.
                    guard ContinuousClock.now < deadline else { throw failure }
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
        }
    }

    /// One line on the server that holds `directory`; throws when none does or it does not answer.
    static func health(of directory: URL) async throws -> String {
        let file = CacheFolder.serverFile(in: directory)
        guard let data = try? Data(contentsOf: file), let info = try? JSONDecoder().decode(ServerInfo.self, from: data)
        else {
            throw CommandFailure("No proxy serves \(directory.path) (no \(file.lastPathComponent) in it).")
        }
        let stats = try await ServerCache(info).stats()
        return
            "Healthy: \(info.baseURL) (process \(info.pid)) serves \(directory.path): \(stats.store.entries) entries, \(Format.bytes(stats.store.bytes)) of \(Format.bytes(stats.store.limit))."
    }
}
