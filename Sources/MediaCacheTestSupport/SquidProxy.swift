// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// A Squid (Debian's `squid`) a test starts on loopback: a forward proxy (plain HTTP in the
/// absolute form, HTTPS through `CONNECT`), caching what it may when `caches`, resolving the
/// names `hosts` gives (so a URL's host can be one only the proxy knows). Its access log
/// tells what it served from its store (`TCP_HIT`, `TCP_MEM_HIT`) and what it fetched.
public struct SquidProxy: Sendable {
    public let process: SpawnedProcess
    public let port: Int
    public let directory: URL

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Starts Squid with its files in `directory` and waits until it accepts connections.
    public static func start(in directory: URL, caches: Bool, hosts: [String: String] = [:]) async throws -> SquidProxy
    {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Squid started by root runs as its own user, which must write its logs here.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        let port = try unusedLoopbackPort()
        let hostsFile = directory.appendingPathComponent("hosts")
        try hosts.map { "\($0.value) \($0.key)\n" }.joined().write(to: hostsFile, atomically: true, encoding: .utf8)
        var configuration = """
            http_port 127.0.0.1:\(port)
            pid_filename none
            cache_log \(directory.path)/cache.log
            access_log stdio:\(directory.path)/access.log
            hosts_file \(hostsFile.path)
            dns_nameservers 127.0.0.1
            coredump_dir \(directory.path)
            shutdown_lifetime 0 seconds
            http_access allow all

            """
        configuration +=
            caches
            ? """
            cache_mem 128 MB
            maximum_object_size 64 MB
            maximum_object_size_in_memory 64 MB
            range_offset_limit none
            cache allow all

            """
            : "cache deny all\n"
        let file = directory.appendingPathComponent("squid.conf")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let executable =
            ["/usr/sbin/squid", "/usr/bin/squid"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "squid"
        let (process, _) = try ChildProcess.start(
            URL(fileURLWithPath: executable), ["-N", "-f", file.path],
            errorFile: directory.appendingPathComponent("stderr.log"))
        let squid = SquidProxy(process: process, port: port, directory: directory)
        try await waitUntilAccepting(
            process, port: port, server: "Squid", logs: [directory.appendingPathComponent("cache.log")])
        return squid
    }

    /// Stops Squid and waits for it to end.
    public func stop() async {
        process.terminate()
        await process.exited()
    }

    /// Squid's access log so far: one line per request, with its result (`TCP_MISS/200`,
    /// `TCP_HIT/206`, `TCP_TUNNEL/200` …) and URL.
    public var accessLog: String {
        (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
    }

    /// Waits until `process` accepts connections on `127.0.0.1:port` (at most 60 s); else
    /// stops it and throws, naming `server` and the end of what `logs` hold.
    package static func waitUntilAccepting(_ process: SpawnedProcess, port: Int, server: String, logs: [URL])
        async throws
    {
        let deadline = ContinuousClock.now + .seconds(60)
        while !canConnect(port) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                let said = logs.map { (try? String(contentsOf: $0, encoding: .utf8))?.suffix(2000) ?? "" }.joined(
                    separator: "\n")
                throw ChildProcessError(message: "\(server) did not start: \(said)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Whether something accepts a TCP connection on `127.0.0.1:port`.
    package static func canConnect(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// A loopback TCP port nothing listens on now (the kernel's pick for a socket bound to port
/// 0, which is then closed), for a server that cannot be told to pick its own.
public func unusedLoopbackPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw ChildProcessError(message: "Cannot make a socket.") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
        }
    }
    guard bound else {
        throw ChildProcessError(message: "Cannot bind a loopback port: \(String(cString: strerror(errno))).")
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
