// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport

/// Runs `body` with a `mediacache serve` process (the binary beside this one) on a free port
/// of 127.0.0.1, its cache in `cacheDirectory`, with `arguments` added to its command line;
/// the process is stopped when `body` returns or throws.
func withServe<T>(cacheDirectory: URL, arguments: [String] = [], _ body: (_ port: Int) async throws -> T) async throws
    -> T
{
    let executable = try ChildProcess.executable(named: "mediacache")
    let (server, line) = try await ChildProcess.startServer(
        executable, ["serve", "--port", "0", "--cache-dir", cacheDirectory.path, "--log-level", "warning"] + arguments,
        readyLinePrefix: "mediacache: serving on")
    defer {
        server.terminate()
        server.waitUntilExit()
    }
    guard let match = line.firstMatch(of: /127\.0\.0\.1:(\d+)/), let port = Int(match.1) else {
        throw ValidationError("No port in: \(line)")
    }
    return try await body(port)
}

extension HTTPClient {
    /// A client for `players` concurrent players on one host (and two spare connections),
    /// bodies as they come (no decompression).
    static func forPlayers(_ players: Int) -> HTTPClient {
        var configuration = HTTPClient.Configuration(decompression: .disabled)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: players + 2)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }
}
