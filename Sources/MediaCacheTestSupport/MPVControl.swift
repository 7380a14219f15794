// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An mpv a test drives as a user does, over mpv's JSON IPC socket: it opens a URL paused,
/// then seeks, plays and quits when the test says, in one process (one play, as an app's
/// player: a seek is a ranged request from where it lands, not a new open from byte 0).
package final class MPVControl: Sendable {
    package let process: SpawnedProcess
    private let socket: String
    /// mpv's standard error.
    package let errors: URL

    /// Starts mpv on `url`, paused, without mpv's own cache (its seeks ask the server), its
    /// socket and error log in `directory`.
    package init(_ url: String, in directory: URL, arguments: [String] = []) throws {
        socket = directory.appendingPathComponent("mpv.sock").path
        errors = directory.appendingPathComponent("mpv.err")
        guard FileManager.default.createFile(atPath: errors.path, contents: nil) else {
            throw ChildProcessError(message: "Cannot create \(errors.path).")
        }
        let log = try FileHandle(forWritingTo: errors)
        defer { try? log.close() }
        process = try SpawnedProcess(
            "mpv",
            [
                "--no-config", "--ytdl=no", "--vo=null", "--ao=null", "--pause", "--keep-open=yes", "--cache=no",
                "--idle=no", "--msg-level=all=error", "--input-ipc-server=\(socket)",
            ] + arguments + [url], searchingPath: true, standardError: log.fileDescriptor)
    }

    /// Sends `command` (mpv's JSON command array) and returns mpv's answer's `data`; throws
    /// when mpv answers with an error or not within 30 s. Off the cooperative pool.
    @discardableResult
    package func send(_ command: [any Sendable]) async throws -> (any Sendable)? {
        let line = try JSONSerialization.data(withJSONObject: ["command": command, "request_id": 7]) + Data("\n".utf8)
        let path = socket
        let answer = try await ChildProcess.onOwnThread { try Self.exchange(line, at: path) }
        guard let object = try JSONSerialization.jsonObject(with: answer) as? [String: Any],
            object["error"] as? String == "success"
        else {
            throw ChildProcessError(message: "mpv refused \(command): \(String(decoding: answer, as: UTF8.self))")
        }
        return object["data"].map { "\($0)" }
    }

    /// A property's value as a number (`time-pos`, `duration`), `nil` while mpv has none.
    package func number(_ property: String) async throws -> Double? {
        guard let value = try? await send(["get_property", property]) else { return nil }
        return Double("\(value)")
    }

    /// Whether the socket is there to be talked to.
    package var isListening: Bool {
        FileManager.default.fileExists(atPath: socket)
    }

    /// Writes `line` to the socket at `path` and reads lines until the answer to it (events
    /// come on the same socket).
    private static func exchange(_ line: Data, at path: String) throws -> Data {
        #if canImport(Glibc)
            let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = Darwin.socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw ChildProcessError(message: "socket: \(errno)") }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ChildProcessError(message: "The socket path is too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw ChildProcessError(message: "connect to mpv: \(errno)") }
        let sent = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard sent == line.count else { throw ChildProcessError(message: "write to mpv: \(errno)") }
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { throw ChildProcessError(message: "mpv did not answer (\(errno))") }
            pending.append(contentsOf: buffer[0..<count])
            while let newline = pending.firstIndex(of: 0x0A) {
                let answer = pending[pending.startIndex..<newline]
                pending = Data(pending[(newline + 1)...])
                if let object = try? JSONSerialization.jsonObject(with: answer) as? [String: Any],
                    object["request_id"] as? Int == 7
                {
                    return Data(answer)
                }
            }
        }
    }
}
