// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Which pinned downloads run: the first ``maxConcurrent`` jobs in the queue's order whose
/// rules let them run now. Pure: the conditions (time, network, disk) are given, and it says
/// which jobs start, which stop (and why) and why each of the others waits.
struct DownloadPlanner: Sendable {
    /// What the rules are judged against.
    struct Conditions: Sendable {
        var now: Date
        var timeZone: TimeZone
        var network: DownloadRules.NetworkConditions
        /// Whether ``network`` is the user's word (`mediacache network`) rather than the system's.
        var networkIsOverridden = false
        /// Bytes the store may still take before the disk's free space would fall below the
        /// floor (evictable streaming entries counted as room); `nil` when unknown.
        var diskRoom: Int64?
        /// The floor, for the words.
        var diskFloor: Int64 = 0
        /// What the system says of the power.
        var power = DownloadRules.PowerConditions.unknown
        /// The battery level below which the power is low when not charging.
        var lowBatteryLevel = 0.2
    }

    /// One job as the planner sees it.
    struct Job: Sendable {
        var id: String
        var state: DownloadJob.State
        var rules: DownloadRules
        var isRunning: Bool
        /// Bytes it still needs, when known.
        var bytesLeft: Int64?
    }

    /// What to do.
    struct Plan: Sendable, Equatable {
        var starts: [String] = []
        /// Running jobs to stop and queue again, with why (`nil`: others come first).
        var stops: [String: DownloadJob.Wait?] = [:]
        /// Why each queued job that does not run waits (absent: for a slot).
        var waits: [String: Wait] = [:]
        /// When the rules should be judged again at the latest (a window opens or closes).
        var nextCheck: Date?
    }

    /// A reason and its words.
    struct Wait: Sendable, Equatable {
        var reason: DownloadJob.Wait
        var detail: String
        var remedy: CacheError.Remedy?
    }

    /// The least room a job needs to start: a piece, or what it has left if less.
    static let startingRoom: Int64 = 1 << 20

    var maxConcurrent: Int

    /// The plan for `jobs`, in the queue's order.
    func plan(_ jobs: [Job], _ conditions: Conditions) -> Plan {
        var plan = Plan()
        var slots = max(1, maxConcurrent)
        // A job is started only from the queue: one marked downloading that no task runs is
        // being cancelled or shut down (starting it again would run a download nobody owns).
        for job in jobs where job.state == .queued || job.isRunning {
            if let wait = Self.wait(of: job, conditions, nextCheck: &plan.nextCheck) {
                plan.waits[job.id] = wait
                if job.isRunning { plan.stops[job.id] = wait.reason }
            } else if slots > 0 {
                slots -= 1
                if !job.isRunning { plan.starts.append(job.id) }
            } else if job.isRunning {
                plan.stops[job.id] = .some(nil)
            }
        }
        return plan
    }

    /// Why `job` may not run now, or `nil`; moves `nextCheck` to when a window edge comes.
    static func wait(of job: Job, _ conditions: Conditions, nextCheck: inout Date?) -> Wait? {
        if let window = job.rules.window {
            let (isOpen, opensAt) = window.check(conditions.now, in: conditions.timeZone)
            if isOpen {
                // It closes at its end: judged again then.
                let rest = DownloadRules.Window(start: window.end, end: window.start)
                if window != .anyTime, let closes = rest.check(conditions.now, in: conditions.timeZone).opensAt {
                    nextCheck = min(nextCheck ?? .distantFuture, closes)
                }
            } else {
                if let opensAt { nextCheck = min(nextCheck ?? .distantFuture, opensAt) }
                return Wait(
                    reason: .window,
                    detail:
                        "outside its window \(window) (local time); it resumes at \(clock(opensAt, conditions.timeZone))"
                )
            }
        }
        let rule = job.rules.network ?? .unmetered
        if !rule.allows(conditions.network) {
            let what = conditions.network.isConstrained ? "in low-data mode" : "metered"
            let who = conditions.networkIsOverridden ? "as set by hand" : "as the system says"
            return Wait(
                reason: .network, detail: "the network is \(what) (\(who)) and its rule is \(rule.rawValue)",
                remedy: CacheError.Remedy(.allowAnyNetwork, job: job.id))
        }
        let power = job.rules.power ?? .notLow
        if !power.allows(conditions.power, lowLevel: conditions.lowBatteryLevel) {
            return Wait(
                reason: .power,
                detail: "waiting for power: \(conditions.power.words), and its rule is \(power.rawValue)",
                remedy: CacheError.Remedy(.allowAnyPower, job: job.id))
        }
        if let room = conditions.diskRoom, room < min(startingRoom, max(1, job.bytesLeft ?? startingRoom)) {
            return Wait(
                reason: .space,
                detail:
                    "the disk has \(ByteCountText.format(max(0, room))) above the \(ByteCountText.format(conditions.diskFloor)) it keeps free; it resumes when space returns"
            )
        }
        return nil
    }

    /// `date` as `HH:MM` in `timeZone`.
    private static func clock(_ date: Date?, _ timeZone: TimeZone) -> String {
        guard let date else { return "its start" }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return DownloadRules.Window.clock((parts.hour ?? 0) * 60 + (parts.minute ?? 0))
    }
}
