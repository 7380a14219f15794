// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation

/// `serve --refresh-command`: a command that prints a fresh URL for an expired one. It runs as
/// `/bin/sh -c 'COMMAND "$1"' mediacache-refresh URL` (the URL an argument, never text of the
/// command), on a thread of its own (a child process is waited for), for at most
/// ``timeout``; its first line of output that is an `http` or `https` URL is the answer.
struct RefreshCommand: Sendable {
    let command: String
    static let timeout: DispatchTimeInterval = .seconds(30)
    /// The most bytes of output read (standard output and error each).
    static let outputLimit = 64 << 10

    /// Why the command gave no URL, in words for the warning.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    func freshURL(for url: URL) async throws -> URL {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try run(url) }) }
        }
    }

    private func run(_ url: URL) throws -> URL {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command + " \"$1\"", "mediacache-refresh", url.absoluteString]
        let (output, errors) = (Pipe(), Pipe())
        (process.standardOutput, process.standardError, process.standardInput) = (output, errors, FileHandle.nullDevice)
        do {
            try process.run()
        } catch {
            throw Failure(description: "the refresh command could not start: \(error)")
        }
        let timer = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.timeout, execute: timer)
        // Both pipes drained at once, so a command that writes much to one cannot stall.
        let group = DispatchGroup()
        nonisolated(unsafe) var said = Data()
        DispatchQueue.global().async(group: group) { said = Self.read(errors.fileHandleForReading) }
        let printed = Self.read(output.fileHandleForReading)
        group.wait()
        process.waitUntilExit()
        timer.cancel()
        let message = String(decoding: said, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let told = message.isEmpty ? "" : ": " + message.split(separator: "\n").suffix(3).joined(separator: " / ")
        guard process.terminationReason == .exit else {
            throw Failure(description: "the refresh command was stopped (signal \(process.terminationStatus))\(told)")
        }
        guard process.terminationStatus == 0 else {
            throw Failure(description: "the refresh command exited with status \(process.terminationStatus)\(told)")
        }
        let lines = String(decoding: printed, as: UTF8.self).split(whereSeparator: \.isNewline)
        for line in lines {
            let text = line.trimmingCharacters(in: .whitespaces)
            if let fresh = URL(string: text), fresh.scheme == "http" || fresh.scheme == "https", fresh.host != nil {
                return fresh
            }
        }
        throw Failure(description: "the refresh command printed no http(s) URL\(told)")
    }

    /// Up to ``outputLimit`` bytes of `handle`, then the rest read and dropped until it ends.
    private static func read(_ handle: FileHandle) -> Data {
        var kept = Data()
        while let chunk = try? handle.read(upToCount: 16 << 10), !chunk.isEmpty {
            if kept.count < outputLimit { kept += chunk.prefix(outputLimit - kept.count) }
        }
        return kept
    }
}
