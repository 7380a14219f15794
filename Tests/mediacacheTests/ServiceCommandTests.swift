// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// `mediacache service`: the definition a user's service manager runs, written where that
/// manager looks (here under a test's own `XDG_CONFIG_HOME`), valid by the manager's own
/// checker, and starting a server that the health check finds.
@Suite(.stallLimit, .endToEnd) struct ServiceCommandTests {
    /// Runs `mediacache` with `HOME` and `XDG_CONFIG_HOME` inside `home`.
    static func mediacache(_ arguments: [String], home: URL) async throws -> (
        status: Int32, output: String, error: String
    ) {
        let executable = try ChildProcess.executable(named: "mediacache")
        let environment = ["HOME=\(home.path)", "XDG_CONFIG_HOME=\(home.appendingPathComponent("config").path)"]
        let result = try await ChildProcess.run(["env"] + environment + [executable.path] + arguments)
        return (result.status, String(decoding: result.output, as: UTF8.self), result.error)
    }

    /// The arguments of a systemd command line as `ServiceDefinition.systemdQuoted` writes
    /// them: each double-quoted, `\\`, `\"`, `$$` and `%%` escaped.
    static func systemdArguments(_ line: Substring) -> [String] {
        var arguments: [String] = []
        var current: String?
        var characters = line.makeIterator()
        while let character = characters.next() {
            switch (character, current) {
            case ("\"", nil): current = ""
            case ("\"", let text?):
                arguments.append(text)
                current = nil
            case ("\\", _?): current!.append(characters.next() ?? "\\")
            case ("$", _?), ("%", _?):
                current!.append(character)
                _ = characters.next()
            case (_, _?): current!.append(character)
            case (_, nil): continue  // the spaces between arguments
            }
        }
        return arguments
    }

    /// `install --no-start` writes a unit that `systemd-analyze verify` accepts (the folder's
    /// name holds a space, `$` and `%`, which systemd would otherwise expand); its `ExecStart`
    /// starts a server that `service check` and `service status` find healthy; `uninstall`
    /// removes it and keeps the cache folder.
    @Test(.enabled(if: ChildProcess.toolExists("systemd-analyze"), "systemd is installed by .ci/run"))
    func anInstalledUnitIsValidStartsAHealthyServerAndUninstalls() async throws {
        try await withTemporaryDirectory { home in
            let folder = home.appendingPathComponent("my cache $HOME 100%").path
            let installed = try await Self.mediacache(
                ["service", "install", "--no-start", "--cache-dir", folder, "--", "--port", "0", "--max-size", "64M"],
                home: home)
            #expect(installed.status == 0, "\(installed.error)")
            let unit = home.appendingPathComponent("config/systemd/user/mediacache.service")
            #expect(installed.output.contains("Wrote \(unit.path)"), "\(installed.output)")
            let text = try String(contentsOf: unit, encoding: .utf8)
            let permissions = try FileManager.default.attributesOfItem(atPath: unit.path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)
            let verified = try await ChildProcess.run(["systemd-analyze", "verify", unit.path])
            #expect(verified.status == 0, "systemd-analyze: \(verified.error)\n\(text)")
            #expect(text.contains("Restart=on-failure"))

            let lines = text.split(separator: "\n")
            let start = try #require(lines.first { $0.hasPrefix("ExecStart=") })
            let arguments = Self.systemdArguments(start.dropFirst("ExecStart=".count))
            let executable = try ChildProcess.executable(named: "mediacache")
            #expect(
                arguments == [
                    executable.resolvingSymlinksInPath().path, "serve", "--cache-dir", folder, "--port", "0",
                    "--max-size", "64M",
                ])
            let post = try #require(lines.first { $0.hasPrefix("ExecStartPost=") })
            #expect(
                Array(Self.systemdArguments(post.dropFirst("ExecStartPost=".count)).dropFirst())
                    == ["service", "check", "--wait", "30", "--cache-dir", folder])

            // Before the server runs, the check fails with the reason.
            let down = try await Self.mediacache(["service", "check", "--cache-dir", folder], home: home)
            #expect(down.status == 1 && down.error.contains("No proxy serves \(folder)"), "\(down.error)")

            let (server, _) = try await ChildProcess.startServer(
                URL(fileURLWithPath: arguments[0]), Array(arguments.dropFirst()),
                readyLinePrefix: "mediacache: serving on")
            try await runThenTearDown(
                server,
                { _ in
                    let check = try await Self.mediacache(
                        ["service", "check", "--wait", "30", "--cache-dir", folder], home: home)
                    #expect(check.status == 0, "\(check.error)")
                    #expect(
                        check.output.hasPrefix("Healthy: http://127.0.0.1:")
                            && check.output.contains("serves \(folder): 0 entries"), "\(check.output)")
                    let status = try await Self.mediacache(["service", "status", "--cache-dir", folder], home: home)
                    #expect(status.output.contains("Definition: \(unit.path) (installed)"), "\(status.output)")
                    #expect(status.output.contains("Healthy: "), "\(status.output) \(status.error)")
                }, tearDown: { await $0.stop() })

            let removed = try await Self.mediacache(["service", "uninstall", "--no-stop"], home: home)
            #expect(removed.status == 0, "\(removed.error)")
            #expect(!FileManager.default.fileExists(atPath: unit.path))
            #expect(FileManager.default.fileExists(atPath: folder), "the cache folder is kept")
            let again = try await Self.mediacache(["service", "uninstall", "--no-stop"], home: home)
            #expect(again.status != 0 && again.error.contains("No service is installed"), "\(again.error)")
        }
    }

    /// Options for `serve` are checked when the service is installed, not at its first start;
    /// nothing is written for a refused one.
    @Test func serveOptionsAreCheckedBeforeAnythingIsWritten() async throws {
        try await withTemporaryDirectory { home in
            let cases: [([String], String)] = [
                (["--", "--port", "eighty"], "The options for serve"),
                (["--", "--max-size", "lots"], "The options for serve"),
                (["--", "--cache-dir", "/tmp/x"], "service install --cache-dir"),
                (["--manager", "launchd"], "can only be printed"),
                (["--manager", "upstart"], "upstart"),
            ]
            for (arguments, reason) in cases {
                let result = try await Self.mediacache(["service", "install", "--no-start"] + arguments, home: home)
                #expect(result.status != 0, "\(arguments)")
                #expect(result.error.contains(reason), "\(arguments): \(result.error)")
            }
            #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("config/systemd").path))
        }
    }

    /// The launchd agent for macOS, printed here: a property list that runs `serve` at load and
    /// again when it exits with a failure.
    @Test func theLaunchdAgentIsAPropertyListThatRestartsOnFailure() async throws {
        try await withTemporaryDirectory { home in
            let result = try await Self.mediacache(
                [
                    "service", "install", "--print", "--manager", "launchd", "--cache-dir", "/srv/media cache", "--",
                    "--port", "8090",
                ], home: home)
            #expect(result.status == 0, "\(result.error)")
            let plist = try PropertyListSerialization.propertyList(from: Data(result.output.utf8), format: nil)
            let agent = try #require(plist as? [String: Any])
            #expect(agent["Label"] as? String == "org.mediacache.serve")
            let arguments = try #require(agent["ProgramArguments"] as? [String])
            #expect(Array(arguments.dropFirst()) == ["serve", "--cache-dir", "/srv/media cache", "--port", "8090"])
            #expect(arguments.first?.hasPrefix("/") == true)
            #expect(agent["RunAtLoad"] as? Bool == true)
            #expect((agent["KeepAlive"] as? [String: Any])?["SuccessfulExit"] as? Bool == false)
            #expect(
                !FileManager.default.fileExists(atPath: home.appendingPathComponent("Library").path),
                "--print writes nothing")
        }
    }
}
