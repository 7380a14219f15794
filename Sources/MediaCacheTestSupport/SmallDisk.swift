// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// A small tmpfs mounted for a test, so that a full disk or a free-space floor is met for real
/// (mounting needs root, as on CI).
public enum SmallDisk {
    /// Runs `arguments` (found on the `PATH`); whether it exited with 0.
    public static func run(_ arguments: [String]) -> Bool {
        guard let process = try? SpawnedProcess(arguments[0], Array(arguments.dropFirst()), searchingPath: true) else {
            return false
        }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// Whether this process may mount a tmpfs.
    public static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let probe = NSTemporaryDirectory() + "mediacache-mount-probe-\(getpid())"
        try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: probe) }
        guard run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe]) else { return false }
        return run(["umount", probe])
    }()

    /// Runs `body` with a tmpfs of `size` (`3m`, `48m`) mounted on `directory`; unmounts it after.
    public static func with<T>(_ size: String, at directory: URL, _ body: () async throws -> T) async throws -> T {
        guard run(["mount", "-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory.path]) else {
            throw ChildProcessError(message: "Cannot mount a tmpfs of \(size) on \(directory.path).")
        }
        defer { _ = run(["umount", "-l", directory.path]) }
        return try await body()
    }
}
