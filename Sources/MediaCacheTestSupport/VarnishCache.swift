// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// A Varnish (Debian's `varnishd`) a test starts on loopback in front of one backend, with the
/// configuration docs/operating.md gives: an absolute-form request's URL made a path, so
/// MediaCache can have it as its parent (`--parent-proxy`).
public struct VarnishCache: Sendable {
    public let process: SpawnedProcess
    public let port: Int
    public let directory: URL

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Whether `varnishd` is installed.
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/varnishd") }

    /// Starts Varnish with its files in `directory`, in front of `127.0.0.1:backendPort`, and
    /// waits until it accepts connections.
    public static func start(in directory: URL, backendPort: Int) async throws -> VarnishCache {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        let port = try unusedLoopbackPort()
        let vcl = directory.appendingPathComponent("default.vcl")
        try """
        vcl 4.1;
        backend origin { .host = "127.0.0.1"; .port = "\(backendPort)"; }
        sub vcl_recv {
            if (req.url ~ "^https?://") { set req.url = regsub(req.url, "^https?://[^/]+", ""); }
        }

        """.write(to: vcl, atomically: true, encoding: .utf8)
        let (process, _) = try ChildProcess.start(
            URL(fileURLWithPath: "/usr/sbin/varnishd"),
            [
                "-F", "-a", "127.0.0.1:\(port)", "-f", vcl.path, "-n", directory.appendingPathComponent("work").path,
                "-s", "malloc,128m",
            ],
            errorFile: directory.appendingPathComponent("stderr.log"))
        try await SquidProxy.waitUntilAccepting(
            process, port: port, server: "Varnish", logs: [directory.appendingPathComponent("stderr.log")])
        return VarnishCache(process: process, port: port, directory: directory)
    }

    /// Stops Varnish and waits for it to end.
    public func stop() async {
        process.terminate()
        await process.exited()
    }
}
