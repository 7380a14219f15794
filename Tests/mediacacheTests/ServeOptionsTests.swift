// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

/// `mediacache serve` refuses options it cannot honour before it starts, saying why.
@Suite(.stallLimit, .endToEnd) struct ServeOptionsTests {
    @Test func aCAFileThatCannotBeUsedStopsServeWithTheReason() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let notPEM = directory.appendingPathComponent("notes.txt")
            try "just some text\n".write(to: notPEM, atomically: true, encoding: .utf8)
            let cases = [
                (directory.appendingPathComponent("missing.pem").path, "Cannot read the CA file"),
                (notPEM.path, "holds no certificate"),
            ]
            for (path, reason) in cases {
                let result = try await ChildProcess.run([
                    executable.path, "serve", "--port", "0", "--cache-dir",
                    directory.appendingPathComponent("cache").path, "--ca-file", path,
                ])
                #expect(result.status != 0, "serve must not start with --ca-file \(path)")
                #expect(
                    result.error.contains("--ca-file: ") && result.error.contains(reason)
                        && result.error.contains(path), "\(result.error)")
            }
        }
    }

    /// A second `serve` on a port already in use stops at once and says which port and what
    /// to do, not NIO's `bind(descriptor:ptr:bytes:)` text; the first goes on serving. With two
    /// event loops each listening at the port (`SO_REUSEPORT`), a second server that asks the
    /// same is refused all the same: it never joins the first's sockets.
    @Test(arguments: [1, 2]) func aPortInUseIsNamedWithWhatToDo(threads: Int) async throws {
        try await RunningServer.with(["--threads", String(threads)]) { first in
            let executable = try ChildProcess.executable(named: "mediacache")
            try await withTemporaryDirectory { directory in
                let result = try await ChildProcess.run([
                    executable.path, "serve", "--port", String(first.info.port), "--threads", String(threads),
                    "--cache-dir", directory.appendingPathComponent("cache").path,
                ])
                #expect(result.status == 1)
                #expect(
                    result.error
                        == "mediacache: Port \(first.info.port) on 127.0.0.1 is already in use (another server?). "
                        + "Stop what listens there, or choose another port with --port (0 picks a free one).\n",
                    "\(result.error)")
            }
            let stats = try await CacheCommandTests.mediacache(["stats", "--cache-dir", first.folder])
            #expect(stats.status == 0, "the first server still answers: \(stats.error)")
        }
    }

    /// `--insecure-skip-verify` warns as the server starts (and on every request's log line:
    /// `HTTPSOriginTests`).
    @Test func skippingVerificationWarnsAtStart() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            // Stopped with SIGINT after 4 s, as a user would with Ctrl-C.
            let result = try await ChildProcess.run([
                "timeout", "-s", "INT", "4", executable.path, "serve", "--port", "0",
                "--cache-dir", directory.appendingPathComponent("cache").path, "--insecure-skip-verify",
            ])
            #expect(
                result.error.contains("warning")
                    && result.error.contains("Origin certificates are NOT verified (--insecure-skip-verify)"),
                "\(result.error)")
            #expect(String(decoding: result.output, as: UTF8.self).contains("mediacache: serving on"))
        }
    }

    /// `--encryption-key-file`: a file that is not a 256-bit key stops serve with the reason;
    /// a key others may read starts it, with a warning that says what to do.
    @Test func anEncryptionKeyFileIsCheckedBeforeServeStarts() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let cache = directory.appendingPathComponent("cache").path
            let short = directory.appendingPathComponent("short").path
            try Data(repeating: 7, count: 16).write(to: URL(fileURLWithPath: short))
            let notHex = directory.appendingPathComponent("not-hex").path
            try String(repeating: "zz", count: 32).write(toFile: notHex, atomically: true, encoding: .utf8)
            let cases = [
                (directory.appendingPathComponent("missing").path, "Cannot read the key file"),
                (short, "The key file holds 16 bytes: it must hold 32 raw bytes or 64 hexadecimal characters"),
                (notHex, "must all be hexadecimal"),
            ]
            for (path, reason) in cases {
                let result = try await ChildProcess.run([
                    executable.path, "serve", "--port", "0", "--cache-dir", cache, "--encryption-key-file", path,
                ])
                #expect(result.status != 0, "serve must not start with --encryption-key-file \(path)")
                #expect(
                    result.error.contains("--encryption-key-file: ") && result.error.contains(reason), "\(result.error)"
                )
            }
            let readable = directory.appendingPathComponent("key").path
            try Data(repeating: 9, count: 32).write(to: URL(fileURLWithPath: readable))
            chmod(readable, 0o644)
            let result = try await ChildProcess.run([
                "timeout", "-s", "INT", "4", executable.path, "serve", "--port", "0", "--cache-dir", cache,
                "--encryption-key-file", readable,
            ])
            #expect(
                result.error.contains("warning")
                    && result.error.contains("may be read by other users (mode 644): chmod 600 it"), "\(result.error)")
            #expect(String(decoding: result.output, as: UTF8.self).contains(", encrypted)"))
        }
    }

    /// `--same-content-hosts` takes two or more host names; anything else stops serve with the
    /// reason, before the cache folder is touched.
    @Test(arguments: ["one.example", "a.example,", "a.example,b.example:8080", "a.example,b/c"])
    func aHostGroupThatIsNotOneIsRefused(_ value: String) async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let cache = directory.appendingPathComponent("cache").path
            let result = try await ChildProcess.run([
                executable.path, "serve", "--port", "0", "--cache-dir", cache, "--same-content-hosts", value,
            ])
            #expect(
                result.status != 0 && result.error.contains("--same-content-hosts takes two or more host names"),
                "\(result.error)")
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    /// A read-ahead depth out of bounds, or not a number, stops `serve` before it touches the
    /// cache folder, naming the option.
    @Test(arguments: [
        ("9", "--read-ahead-segments must be 0...8."), ("-1", "--read-ahead-segments must be 0...8."),
        ("two", "is invalid for '--read-ahead-segments"),
    ])
    func aReadAheadDepthOutOfBoundsIsRefused(_ value: String, _ message: String) async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let cache = directory.appendingPathComponent("cache").path
            let result = try await ChildProcess.run([
                executable.path, "serve", "--port", "0", "--cache-dir", cache, "--read-ahead-segments=\(value)",
            ])
            #expect(result.status != 0 && result.error.contains(message), "\(result.error)")
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    /// A preload budget or concurrency out of bounds stops `serve` before it touches the cache
    /// folder, naming the option.
    @Test(arguments: [
        ("--preload-budget=0", "is not a size"), ("--preload-budget=lots", "--preload-budget"),
        ("--preload-concurrency=0", "--preload-concurrency must be 1...8."),
        ("--preload-concurrency=9", "--preload-concurrency must be 1...8."),
    ])
    func aPreloadLimitOutOfBoundsIsRefused(_ argument: String, _ message: String) async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let cache = directory.appendingPathComponent("cache").path
            let result = try await ChildProcess.run([
                executable.path, "serve", "--port", "0", "--cache-dir", cache, argument,
            ])
            #expect(result.status != 0 && result.error.contains(message), "\(result.error)")
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }
}
