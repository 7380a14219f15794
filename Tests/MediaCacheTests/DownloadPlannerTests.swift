// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Which pinned downloads run, as the pure planner decides it from given conditions: daily
/// windows (across midnight too), network rules against what the system and the user say,
/// the disk's room, the queue's order and its slots.
@Suite(.stallLimit) struct DownloadPlannerTests {
    static let utc = TimeZone(identifier: "UTC")!

    /// 2026-11-26 at `hour`:`minute` UTC.
    static func at(_ hour: Int, _ minute: Int = 0) -> Date {
        Date(timeIntervalSince1970: 1_795_651_200 + Double(hour * 3600 + minute * 60))
    }

    static func conditions(_ date: Date, network: DownloadRules.NetworkConditions = .unknown, room: Int64? = nil)
        -> DownloadPlanner.Conditions
    {
        DownloadPlanner.Conditions(now: date, timeZone: utc, network: network, diskRoom: room, diskFloor: 1 << 30)
    }

    static func job(
        _ id: String, _ rules: DownloadRules = DownloadRules(), running: Bool = false, left: Int64? = 10 << 20
    ) -> DownloadPlanner.Job {
        DownloadPlanner.Job(
            id: id, state: running ? .downloading : .queued, rules: rules, isRunning: running, bytesLeft: left)
    }

    @Test func theFixedDateIsMidnightUTC() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.utc
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: Self.at(0))
        #expect(parts == DateComponents(year: 2026, month: 11, day: 26, hour: 0, minute: 0))
    }

    @Test func aWindowIsReadAndWrittenBack() {
        #expect(DownloadRules.Window("01:00-06:00") == DownloadRules.Window(start: 60, end: 360))
        #expect(DownloadRules.Window("23:30-6:15") == DownloadRules.Window(start: 1410, end: 375))
        #expect(DownloadRules.Window("00:00-24:00") == .anyTime)
        #expect(DownloadRules.Window("any") == .anyTime)
        #expect(DownloadRules.Window("01:00-06:00")?.description == "01:00-06:00")
        for bad in [
            "", "1-6", "01:00", "01:00-", "25:00-06:00", "01:60-02:00", "01:00-06:00-07:00", "1:5-2:00", "０1:00-06:00",
            "+1:00-06:00", "01:00 - 06:00",
        ] {
            #expect(DownloadRules.Window(bad) == nil, "\(bad)")
        }
    }

    @Test func aWindowLetsAJobRunOnlyInsideAndSaysWhenItOpens() {
        let planner = DownloadPlanner(maxConcurrent: 2)
        let night = DownloadRules(window: DownloadRules.Window("01:00-06:00"))
        let outside = planner.plan([Self.job("a", night)], Self.conditions(Self.at(12)))
        #expect(outside.starts.isEmpty && outside.waits["a"]?.reason == .window)
        #expect(outside.waits["a"]?.detail.contains("01:00") == true, "\(outside.waits)")
        #expect(outside.nextCheck == Self.at(25), "opens at 01:00 the next day")
        let inside = planner.plan([Self.job("a", night)], Self.conditions(Self.at(3, 30)))
        #expect(inside.starts == ["a"] && inside.waits.isEmpty)
        #expect(inside.nextCheck == Self.at(6), "closes at 06:00")
        // Running when it closes: stopped, with the reason.
        let closed = planner.plan([Self.job("a", night, running: true)], Self.conditions(Self.at(6)))
        #expect(closed.stops == ["a": .window])
    }

    @Test func aWindowAcrossMidnight() {
        let planner = DownloadPlanner(maxConcurrent: 1)
        let late = DownloadRules(window: DownloadRules.Window("23:00-02:00"))
        for (hour, runs) in [(22, false), (23, true), (0, true), (1, true), (2, false), (12, false)] {
            let plan = planner.plan([Self.job("a", late)], Self.conditions(Self.at(hour, 0)))
            #expect(plan.starts == (runs ? ["a"] : []), "at \(hour):00")
        }
        #expect(planner.plan([Self.job("a", late)], Self.conditions(Self.at(12))).nextCheck == Self.at(23))
    }

    @Test func networkRulesAgainstTheConditions() {
        let metered = DownloadRules.NetworkConditions(isMetered: true)
        let lowData = DownloadRules.NetworkConditions(isMetered: false, isConstrained: true)
        let cases: [(DownloadRules.Network?, DownloadRules.NetworkConditions, Bool)] = [
            (nil, .unknown, true), (nil, metered, false), (nil, lowData, false),
            (.any, metered, true), (.any, lowData, true),
            (.unmetered, .unknown, true), (.unmetered, metered, false),
            (.notConstrained, metered, true), (.notConstrained, lowData, false),
        ]
        let planner = DownloadPlanner(maxConcurrent: 1)
        for (rule, network, runs) in cases {
            let plan = planner.plan(
                [Self.job("a", DownloadRules(network: rule))], Self.conditions(Self.at(12), network: network))
            #expect(plan.starts == (runs ? ["a"] : []), "\(String(describing: rule)) on \(network)")
            if !runs {
                #expect(
                    plan.waits["a"]?.reason == .network
                        && plan.waits["a"]?.remedy == CacheError.Remedy(.allowAnyNetwork, job: "a")
                )
            }
        }
    }

    @Test func theUserSaysOverTheSystem() {
        #expect(
            DownloadRules.NetworkOverride.metered.applied(to: .unknown)
                == DownloadRules.NetworkConditions(isMetered: true))
        #expect(
            DownloadRules.NetworkOverride.unmetered.applied(
                to: DownloadRules.NetworkConditions(isMetered: true, isConstrained: true)) == .unknown)
        #expect(
            DownloadRules.NetworkOverride.auto.applied(to: DownloadRules.NetworkConditions(isMetered: true))
                == DownloadRules.NetworkConditions(isMetered: true))
    }

    /// "This one anyway": on a metered network only the job whose own rule allows it runs, and
    /// a running job the network now forbids stops.
    @Test func oneJobAnywayWhileTheOthersWait() {
        let planner = DownloadPlanner(maxConcurrent: 2)
        let jobs = [Self.job("a", running: true), Self.job("b", DownloadRules(network: .any)), Self.job("c")]
        let plan = planner.plan(
            jobs, Self.conditions(Self.at(12), network: DownloadRules.NetworkConditions(isMetered: true)))
        #expect(plan.starts == ["b"])
        #expect(plan.stops == ["a": .network])
        #expect(Set(plan.waits.keys) == ["a", "c"])
    }

    @Test func aJobWaitsForRoomOnTheDisk() {
        let planner = DownloadPlanner(maxConcurrent: 1)
        let short = planner.plan([Self.job("a")], Self.conditions(Self.at(12), room: 100_000))
        #expect(short.starts.isEmpty && short.waits["a"]?.reason == .space)
        // A job with less left than a piece needs only that.
        #expect(
            planner.plan([Self.job("a", left: 50_000)], Self.conditions(Self.at(12), room: 100_000)).starts == ["a"])
        #expect(planner.plan([Self.job("a")], Self.conditions(Self.at(12), room: 1 << 20)).starts == ["a"])
        #expect(
            planner.plan([Self.job("a")], Self.conditions(Self.at(12), room: nil)).starts == ["a"],
            "unknown room does not hold a job")
    }

    /// The first jobs in the queue's order take the slots; one moved to the front takes the
    /// place of the last running one, which waits (for a slot: no reason).
    @Test func theOrderTakesTheSlots() {
        let planner = DownloadPlanner(maxConcurrent: 2)
        let first = planner.plan([Self.job("a"), Self.job("b"), Self.job("c")], Self.conditions(Self.at(12)))
        #expect(first.starts == ["a", "b"] && first.waits.isEmpty && first.stops.isEmpty)
        let moved = planner.plan(
            [Self.job("c"), Self.job("a", running: true), Self.job("b", running: true)], Self.conditions(Self.at(12)))
        #expect(moved.starts == ["c"])
        #expect(
            moved.stops.count == 1 && moved.stops.keys.first == "b" && moved.stops["b"] == .some(DownloadJob.Wait?.none)
        )
        // A waiting job does not take a slot.
        let night = DownloadRules(window: DownloadRules.Window("01:00-06:00"))
        let skipped = planner.plan([Self.job("a", night), Self.job("b"), Self.job("c")], Self.conditions(Self.at(12)))
        #expect(skipped.starts == ["b", "c"])
    }

    /// A job marked downloading that no task runs (being cancelled, or cut by a shutdown) is
    /// not started again: the bench once found a cancelled pin downloading on, unowned.
    @Test func aDownloadingJobNoTaskRunsIsNotStarted() {
        let planner = DownloadPlanner(maxConcurrent: 2)
        let orphan = DownloadPlanner.Job(
            id: "a", state: .downloading, rules: DownloadRules(), isRunning: false, bytesLeft: 1 << 20)
        let plan = planner.plan([orphan, Self.job("b")], Self.conditions(Self.at(12)))
        #expect(plan.starts == ["b"] && plan.stops.isEmpty && plan.waits.isEmpty)
    }

    @Test func aJobsRulesGoOverTheQueues() {
        let queue = DownloadRules(
            window: DownloadRules.Window("01:00-06:00"), network: .unmetered, maxBytesPerSecond: 2 << 20)
        let own = DownloadRules(window: .anyTime)
        #expect(own.over(queue) == DownloadRules(window: .anyTime, network: .unmetered, maxBytesPerSecond: 2 << 20))
        #expect(
            DownloadRules(network: .any).changed(by: DownloadRules(maxBytesPerSecond: 4096))
                == DownloadRules(network: .any, maxBytesPerSecond: 4096))
    }

    @Test func networkManagersAnswerIsRead() {
        #expect(
            DownloadRules.NetworkConditions(networkManagerMetered: "u 1\n")
                == DownloadRules.NetworkConditions(isMetered: true))
        #expect(
            DownloadRules.NetworkConditions(networkManagerMetered: "u 3")
                == DownloadRules.NetworkConditions(isMetered: true))
        for value in ["u 0", "u 2", "u 4\n"] {
            #expect(
                DownloadRules.NetworkConditions(networkManagerMetered: value) == DownloadRules.NetworkConditions(),
                "\(value)")
        }
        for bad in ["", "u", "u 5", "s 1", "u 1 2", "u -1", "u 01", "i 1"] {
            #expect(DownloadRules.NetworkConditions(networkManagerMetered: bad) == nil, "\(bad)")
        }
    }
}
