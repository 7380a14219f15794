// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport
import NIOCore
import NIOPosix

/// A server process the comparison started, and how to address a resource through it.
struct BenchServer {
    let name: String
    let process: SpawnedProcess
    /// The origin path prefix this server's resources live under, so each server fetches
    /// and caches its own copy and the origin counts their traffic apart.
    let prefix: String
    private let originPort: Int
    private let makeURL: @Sendable (_ originURL: String) -> String

    /// `makeURL` turns an origin URL (of the test origin or of nginx's static server) into
    /// the URL a client asks this server for.
    init(
        name: String, process: SpawnedProcess, prefix: String, originPort: Int,
        makeURL: @escaping @Sendable (String) -> String
    ) {
        self.name = name
        self.process = process
        self.prefix = prefix
        self.originPort = originPort
        self.makeURL = makeURL
    }

    /// The URL a client uses for the test origin's `path` (already prefixed).
    func url(_ path: String) -> String { makeURL("http://127.0.0.1:\(originPort)\(path)") }

    /// The URL a client uses for `originURL`.
    func url(forOrigin originURL: String) -> String { makeURL(originURL) }

    /// The peak resident memory of the server and every process it forked.
    var peakMemory: Int64 {
        let pid = process.processIdentifier
        return ([pid] + ProcessMemory.children(of: pid)).compactMap { ProcessMemory.peakResidentBytes(pid: $0) }.reduce(
            0, +)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// Talks to the standalone test origin (`mediacache-bench origin`) over its control paths.
struct OriginControl {
    let port: Int
    let client: BenchClient

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func serve(_ path: String, length: Int64, seed: UInt64, bytesPerSecond: Int64? = nil) async throws {
        var query = "path=\(path)&length=\(length)&seed=\(seed)"
        if let bytesPerSecond { query += "&bps=\(bytesPerSecond)" }
        _ = try await client.text(url("/_origin/serve?\(query)"))
    }

    /// The requests received for `path`, one line each.
    func requests(_ path: String) async throws -> [String] {
        try await client.text(url("/_origin/requests?path=\(path)")).split(separator: "\n").map(String.init)
    }

    /// The requests received and body bytes sent for `path` so far.
    func stats(_ path: String) async throws -> (requests: Int, bytes: Int64) {
        let fields = try await client.text(url("/_origin/stats?path=\(path)")).split(separator: " ")
        guard fields.count == 2, let requests = Int(fields[0]),
            let bytes = Int64(fields[1].trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw ValidationError("The origin's stats answer is malformed: \(fields)")
        }
        return (requests, bytes)
    }
}

/// nginx serving files from a folder: an origin as fast as the machine allows.
struct StaticOrigin {
    let port: Int
    /// Files under `folder/static/NAME` are served at `/static/NAME`.
    let folder: URL

    func url(_ name: String) -> String { "http://127.0.0.1:\(port)/static/\(name)" }
    func file(_ name: String) -> URL { folder.appendingPathComponent("static").appendingPathComponent(name) }
}

enum BenchServers {
    /// Starts `mediacache-bench origin` (`executable`) on a free port.
    static func startOrigin(_ executable: URL) async throws -> (SpawnedProcess, Int) {
        let (process, line) = try await ChildProcess.startServer(
            executable, ["origin", "--port", "0"], readyLinePrefix: "origin: listening on")
        return (process, try port(in: line))
    }

    /// Starts `mediacache serve` on a free port, caching in `directory`, with `arguments` more.
    static func startOurs(
        _ executable: URL, directory: URL, originPort: Int, name: String = "mediacache", prefix: String = "/mc",
        arguments: [String] = []
    ) async throws -> BenchServer {
        let (process, line) = try await ChildProcess.startServer(
            executable,
            ["serve", "--port", "0", "--cache-dir", directory.path, "--max-size", "8G", "--log-level", "warning"]
                + arguments,
            readyLinePrefix: "mediacache: serving on")
        let port = try port(in: line)
        return BenchServer(name: name, process: process, prefix: prefix, originPort: originPort) { origin in
            "http://127.0.0.1:\(port)/?url=\(origin.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        }
    }

    /// Starts `mediacache-bench floor-proxy` (this executable) in front of 127.0.0.1:`originPort`;
    /// it forwards a URL's path as it is, as nginx does.
    static func startFloorProxy(originPort: Int, writesOnPool: Bool = false) async throws -> BenchServer {
        let (process, line) = try await ChildProcess.startServer(
            try ChildProcess.executable(named: "mediacache-bench"),
            ["floor-proxy", "--origin-port", "\(originPort)", "--port", "0"]
                + (writesOnPool ? ["--writes-on-pool"] : []),
            readyLinePrefix: "floor-proxy: listening on")
        let port = try port(in: line)
        let name = writesOnPool ? "floor, pool" : "floor"
        return BenchServer(
            name: name, process: process, prefix: writesOnPool ? "/floorpool" : "/floor", originPort: originPort
        ) { origin in
            "http://127.0.0.1:\(port)" + (URLComponents(string: origin)?.percentEncodedPath ?? "/")
        }
    }

    /// Starts nginx as a slice cache in front of the origin, its configuration and cache in
    /// `directory`; installs Debian's nginx first if it is missing.
    /// `maxSize`: its cache's `max_size`, in bytes (the soak bounds it as it bounds ours).
    /// `staticUpstream`: where its cache under `/static/` fetches from (another nginx's static
    /// server), else its own static server.
    static func startNginx(
        directory: URL, originPort: Int, client: BenchClient, maxSize: Int64 = 8 << 30, staticUpstream: Int? = nil
    ) async throws -> (server: BenchServer, staticOrigin: StaticOrigin) {
        let nginx = try await nginxExecutable()
        let port = try freePort()
        let staticPort = try freePort()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // The workers may run as an unprivileged user: let them write their cache here.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        let staticFolder = directory.appendingPathComponent("static")
        try FileManager.default.createDirectory(
            at: staticFolder.appendingPathComponent("static"), withIntermediateDirectories: true)
        let configuration = nginxConfiguration(
            directory: directory.path, port: port, originPort: originPort, staticPort: staticPort, maxSize: maxSize,
            staticUpstream: staticUpstream)
        let file = directory.appendingPathComponent("nginx.conf")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let process = try SpawnedProcess(
            nginx.path,
            ["-p", directory.path, "-c", file.path, "-e", directory.appendingPathComponent("error.log").path])
        // nginx routes by path: the test origin's paths, and /static/ to its static server.
        let server = BenchServer(name: "nginx", process: process, prefix: "/nginx", originPort: originPort) { origin in
            "http://127.0.0.1:\(port)" + (URLComponents(string: origin)?.percentEncodedPath ?? "/")
        }
        let staticOrigin = StaticOrigin(port: staticPort, folder: staticFolder)
        for _ in 0..<100 {
            if (try? await client.text(server.url("/_ready"))) != nil { return (server, staticOrigin) }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        server.stop()
        let log = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        throw ValidationError("nginx did not start; its error log says:\n\(log)")
    }

    /// nginx as a Linux user would set it up for caching ranges of media: the slice module,
    /// one cache entry per 1 MiB slice, a cache lock so concurrent misses fetch once.
    /// `tcp_nopush` is off (nginx's default): on, with `sendfile`, each 64 KiB range on a
    /// keep-alive connection waited about 40 ms (workload 8: p50 43.8 ms against 0.23 ms
    /// off), and we compare against nginx at its best.
    ///
    /// The same nginx also serves files from `static/` on `staticPort` (`sendfile`, from the
    /// page cache): the fast origin of workload 9, which its slice cache reaches under `/static/`.
    static func nginxConfiguration(
        directory: String, port: Int, originPort: Int, staticPort: Int, maxSize: Int64 = 8 << 30,
        staticUpstream: Int? = nil
    ) -> String {
        """
        daemon off;
        worker_processes auto;
        pid \(directory)/nginx.pid;
        events { worker_connections 1024; }
        http {
            access_log off;
            sendfile on;
            tcp_nopush off;
            client_body_temp_path \(directory)/client_body;
            proxy_temp_path \(directory)/proxy_temp;
            fastcgi_temp_path \(directory)/fastcgi_temp;
            uwsgi_temp_path \(directory)/uwsgi_temp;
            scgi_temp_path \(directory)/scgi_temp;
            proxy_cache_path \(directory)/cache levels=1:2 keys_zone=media:16m max_size=\(maxSize) inactive=1d use_temp_path=off;
            upstream origin {
                server 127.0.0.1:\(originPort);
                keepalive 32;
            }
            upstream static_origin {
                server 127.0.0.1:\(staticUpstream ?? staticPort);
                keepalive 32;
            }
            server {
                listen 127.0.0.1:\(staticPort);
                root \(directory)/static;
                types { application/vnd.apple.mpegurl m3u8; video/mp2t ts; }
            }
            server {
                listen 127.0.0.1:\(port);
                location = /_ready { return 204; }
                slice 1m;
                proxy_cache media;
                proxy_cache_key $uri$slice_range;
                proxy_set_header Range $slice_range;
                proxy_cache_valid 200 206 1d;
                proxy_cache_lock on;
                proxy_http_version 1.1;
                proxy_set_header Connection "";
                location / { proxy_pass http://origin; }
                location /static/ { proxy_pass http://static_origin; }
            }
        }

        """
    }

    private static func nginxExecutable() async throws -> URL {
        let candidates = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx"]
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            return URL(fileURLWithPath: found)
        }
        guard getuid() == 0, ChildProcess.toolExists("apt-get") else {
            throw ValidationError(
                "nginx is not installed; install it (Debian: apt-get install nginx-light) and run again.")
        }
        print("nginx is missing: installing Debian's nginx-light …")
        if try await ChildProcess.run(["apt-get", "install", "-y", "nginx-light"]).status != 0 {
            _ = try await ChildProcess.run(["apt-get", "update"])
            let result = try await ChildProcess.run(["apt-get", "install", "-y", "nginx-light"])
            guard result.status == 0 else {
                throw ValidationError("apt-get install nginx-light failed:\n\(result.error)")
            }
        }
        return try await nginxExecutable()
    }

    /// A port nothing listens on now (nginx needs a number in its configuration).
    private static func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0)
            .wait()
        defer { try? channel.close().wait() }
        return channel.localAddress!.port!
    }

    static func port(in line: String) throws -> Int {
        guard let match = line.firstMatch(of: /127\.0\.0\.1:(\d+)/), let port = Int(match.1) else {
            throw ValidationError("No port in the server's start-up line: \(line)")
        }
        return port
    }
}
