// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheTestSupport

/// What a set of processes spent while some work ran: CPU time and context switches (voluntary
/// and not), the figures a shared machine blurs least.
struct ProcessCost {
    var cpuMilliseconds: Double
    var switches: Double

    /// Runs `work` while counting what `pids` spend: with `perf stat` (every thread, those that
    /// start and end meanwhile too) when it is installed, else from `/proc` (CPU time of the
    /// whole process in clock ticks; switches of the threads alive at both ends).
    static func measure(_ pids: [Int32], _ work: () async throws -> Void) async throws -> ProcessCost {
        if ChildProcess.toolExists("perf") { return try await withPerf(pids, work) }
        let before = fromProc(pids)
        try await work()
        let after = fromProc(pids)
        return ProcessCost(
            cpuMilliseconds: after.cpuMilliseconds - before.cpuMilliseconds, switches: after.switches - before.switches)
    }

    private static func withPerf(_ pids: [Int32], _ work: () async throws -> Void) async throws -> ProcessCost {
        let output = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("perf-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let perf = try SpawnedProcess(
            "perf",
            [
                "stat", "-x", ",", "-e", "task-clock,context-switches", "-o", output.path, "-p",
                pids.map(String.init).joined(separator: ","),
            ], searchingPath: true)
        // perf prints nothing once it counts: give it time to attach (what it counts meanwhile
        // is the servers at rest, nothing).
        try await Task.sleep(for: .milliseconds(300))
        do {
            try await work()
        } catch {
            kill(perf.processIdentifier, SIGINT)
            await perf.exited()
            throw error
        }
        kill(perf.processIdentifier, SIGINT)
        await perf.exited()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        func value(_ event: String) -> Double? {
            text.split(separator: "\n").first { $0.contains(",\(event),") }.flatMap {
                Double($0.split(separator: ",", omittingEmptySubsequences: false)[0])
            }
        }
        guard let cpu = value("task-clock"), let switches = value("context-switches") else {
            throw ValidationError("perf stat printed no counts:\n\(text)")
        }
        return ProcessCost(cpuMilliseconds: cpu, switches: switches)
    }

    /// The CPU time in milliseconds of this process (`RUSAGE_SELF`) or of its children that have
    /// ended and been waited for (`RUSAGE_CHILDREN`), so far.
    static func rusageMilliseconds(_ who: Int32) -> Double {
        var usage = rusage()
        guard getrusage(who, &usage) == 0 else { return .nan }
        func milliseconds(_ time: timeval) -> Double { Double(time.tv_sec) * 1000 + Double(time.tv_usec) / 1000 }
        return milliseconds(usage.ru_utime) + milliseconds(usage.ru_stime)
    }

    /// The CPU time of `pids` so far and the switches of their live threads, from `/proc`.
    static func fromProc(_ pids: [Int32]) -> ProcessCost {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var cost = ProcessCost(cpuMilliseconds: 0, switches: 0)
        for pid in pids {
            // The fields after the command's closing parenthesis: utime and stime are the 12th
            // and 13th of them.
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            {
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) {
                    cost.cpuMilliseconds += (user + system) / ticks * 1000
                }
            }
            let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            for thread in threads {
                let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8)) ?? ""
                for line in status.split(separator: "\n") {
                    if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:"),
                        let count = Double(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces))
                    {
                        cost.switches += count
                    }
                }
            }
        }
        return cost
    }
}
