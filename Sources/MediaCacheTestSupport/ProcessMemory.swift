// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Memory figures of processes, read from `/proc` (Linux).
public enum ProcessMemory {
    /// The peak resident set size (`VmHWM`) in bytes of the current process, or of `pid`;
    /// `nil` where `/proc` is missing or the process is gone.
    public static func peakResidentBytes(pid: Int32? = nil) -> Int64? {
        field("VmHWM", pid: pid)
    }

    /// The processes whose parent is `pid` (for servers that fork workers, such as nginx).
    public static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { child in
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            // After "pid (name) ": state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid
        }
    }

    private static func field(_ name: String, pid: Int32?) -> Int64? {
        let path = "/proc/\(pid.map(String.init) ?? "self")/status"
        guard let status = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.dropFirst(name.count + 1).filter(\.isNumber)
            return Int64(digits).map { $0 * 1024 }
        }
        return nil
    }
}
