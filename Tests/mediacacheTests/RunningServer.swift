// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheProxy
import MediaCacheTestSupport

/// A `mediacache serve` process on a fresh cache folder, in front of a test origin.
struct RunningServer {
    let origin: TestOrigin
    /// The cache folder.
    let folder: String
    /// What the server wrote in its `server.json`.
    let info: ServerInfo
    /// The line it printed that `readyLinePrefix` waited for.
    let line: String

    /// Runs `body` with `mediacache serve --port 0 --cache-dir FOLDER` plus `arguments`, with
    /// `environment` (`NAME=value`) set, its standard error written to `errorFile` if given, in
    /// front of `origin` (by default a new one serving ``CacheCommandTests/serveFiles(on:)``);
    /// stops it afterwards (SIGTERM, then waits for it to end).
    /// With a `launcher` (a command that runs the rest, such as `setpriv` to another user),
    /// anyone may write in the temporary folder the cache folder is made in.
    static func with(
        _ arguments: [String] = [], environment: [String] = [], readyLinePrefix: String = "mediacache: serving on",
        errorFile: URL? = nil, origin given: TestOrigin? = nil, launcher: [String] = [],
        _ body: (RunningServer) async throws -> Void
    ) async throws {
        let origin: TestOrigin
        if let given { origin = given } else { origin = try await TestOrigin.start() }
        defer { if given == nil { Task { try? await origin.shutdown() } } }
        if given == nil { CacheCommandTests.serveFiles(on: origin) }
        try await withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            let executable = try ChildProcess.executable(named: "mediacache")
            if !launcher.isEmpty {
                try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
            }
            let command = launcher + [executable.path, "serve", "--port", "0", "--cache-dir", folder] + arguments
            let (process, line) = try await ChildProcess.startServer(
                URL(fileURLWithPath: "/usr/bin/env"), environment + command,
                readyLinePrefix: readyLinePrefix, errorFile: errorFile)
            try await runThenTearDown(
                process,
                { _ in
                    let info = try CacheCommandTests.decoder.decode(
                        ServerInfo.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/server.json")))
                    try await body(RunningServer(origin: origin, folder: folder, info: info, line: line))
                }, tearDown: { await $0.stop() })
        }
    }
}
