// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// nginx (Debian's `nginx-light`) as an origin a test starts on loopback: a static folder with
/// the default settings a web host has (its media types, ranges, `ETag`, `Last-Modified`), and
/// its access log read back to count what the origin was asked for. The in-process test
/// origin is kinder than the web (it answered in ways that hid two origin requests per
/// player request); this one is what players meet.
public struct NginxOrigin: Sendable {
    public let process: SpawnedProcess
    public let port: Int
    public let directory: URL
    /// The folder it serves.
    public let root: URL

    /// One line of the access log.
    public struct Request: Sendable, CustomStringConvertible {
        public var method: String
        /// The path, with the query if any.
        public var target: String
        public var status: Int
        /// The body bytes nginx sent.
        public var bytes: Int64
        /// The `Range` field, `nil` when there was none.
        public var range: String?
        /// The connection's serial number.
        public var connection: Int
        /// Whether the request said it is the cache's own work (its `CMCD-Request` field carries
        /// MediaCache's own key: a reader whose `ownRequestFields` are CMCD's, as `serve --cmcd`).
        public var isCachesOwn = false
        public var description: String {
            "\(method) \(target) \(status) \(bytes) \(range ?? "-") #\(connection)\(isCachesOwn ? " own" : "")"
        }
    }

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Whether nginx is installed.
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") }

    /// Starts nginx serving `directory/www` (made if missing) on a free loopback port, in the
    /// foreground with no worker processes, and waits until it accepts connections.
    /// - Parameter expires: folders (of the form `/hls/`) whose answers say `max-age` this
    ///   many seconds, as a CDN's media segments do.
    /// - Parameter fields: fields added to every answer for a path (`add_header`), such as a
    ///   `Repr-Digest`; values in double quotes, so without `"` or `\`.
    public static func start(
        in directory: URL, expires: [String: Int] = [:], fields: [String: [(name: String, value: String)]] = [:]
    ) async throws -> NginxOrigin {
        let root = directory.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let port = try unusedLoopbackPort()
        var locations = expires.sorted { $0.key < $1.key }.map {
            "        location \($0.key) { expires \($0.value)s; }\n"
        }.joined()
        for (path, added) in fields.sorted(by: { $0.key < $1.key }) {
            let lines = added.map { "add_header \($0.name) \"\($0.value)\" always; " }.joined()
            locations += "        location = \(path) { \(lines)}\n"
        }
        let configuration = directory.appendingPathComponent("nginx.conf")
        try """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(directory.path)/nginx.pid;
        error_log \(directory.path)/error.log;
        events { worker_connections 1024; }
        http {
            include /etc/nginx/mime.types;
            log_format counted '$request_method "$request_uri" $status $body_bytes_sent "$http_range" $connection "$http_cmcd_request"';
            access_log \(directory.path)/access.log counted;
            client_body_temp_path \(directory.path)/body;
            proxy_temp_path \(directory.path)/proxy;
            fastcgi_temp_path \(directory.path)/fastcgi;
            uwsgi_temp_path \(directory.path)/uwsgi;
            scgi_temp_path \(directory.path)/scgi;
            server {
                listen 127.0.0.1:\(port);
                root \(root.path);
        \(locations)    }
        }

        """.write(to: configuration, atomically: true, encoding: .utf8)
        let (process, _) = try ChildProcess.start(
            URL(fileURLWithPath: "/usr/sbin/nginx"), ["-c", configuration.path, "-p", directory.path],
            errorFile: directory.appendingPathComponent("stderr.log"))
        try await SquidProxy.waitUntilAccepting(
            process, port: port, server: "nginx",
            logs: [directory.appendingPathComponent("stderr.log"), directory.appendingPathComponent("error.log")])
        return NginxOrigin(process: process, port: port, directory: directory, root: root)
    }

    /// Runs `body` with nginx started as `start` does, and stops nginx when `body` ends, however
    /// it ends: before the caller's folder goes, since nginx writes its logs there until it ends.
    public static func with<T>(
        in directory: URL, expires: [String: Int] = [:], fields: [String: [(name: String, value: String)]] = [:],
        _ body: (NginxOrigin) async throws -> T
    ) async throws -> T {
        let nginx = try await start(in: directory, expires: expires, fields: fields)
        do {
            let result = try await body(nginx)
            await nginx.stop()
            return result
        } catch {
            await nginx.stop()
            throw error
        }
    }

    /// Writes `bytes` to `path` (under the served folder, folders made) and returns its URL.
    @discardableResult
    public func serve(_ bytes: Data, at path: String) throws -> URL {
        let file = root.appendingPathComponent(String(path.drop { $0 == "/" }))
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try bytes.write(to: file)
        return URL(string: url + path)!
    }

    /// The bytes of the file at `path`.
    public func bytes(at path: String) throws -> Data {
        try Data(contentsOf: root.appendingPathComponent(String(path.drop { $0 == "/" })))
    }

    /// Every request nginx has logged so far (it writes each line as the request ends).
    public func requests() -> [Request] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap(Self.parse)
    }

    /// The requests for `path` (its target less any query).
    public func requests(_ path: String) -> [Request] {
        requests().filter { $0.target.prefix { $0 != "?" } == path }
    }

    static func parse(_ line: Substring) -> Request? {
        // GET "/a.bin" 206 1024 "bytes=0-1023" 3 "io.mediacache-own"
        let quoted = line.split(separator: "\"", omittingEmptySubsequences: false)
        guard quoted.count == 7 else { return nil }
        let middle = quoted[2].split(separator: " ")
        guard middle.count == 2, let status = Int(middle[0]), let bytes = Int64(middle[1]),
            let connection = Int(quoted[4].trimmingCharacters(in: .whitespaces))
        else { return nil }
        let range = quoted[3] == "-" ? nil : String(quoted[3])
        return Request(
            method: quoted[0].trimmingCharacters(in: .whitespaces), target: String(quoted[1]), status: status,
            bytes: bytes, range: range, connection: connection, isCachesOwn: quoted[5].contains("io.mediacache-own"))
    }

    /// Stops nginx and waits for it to end.
    public func stop() async {
        process.terminate()
        await process.exited()
    }
}
