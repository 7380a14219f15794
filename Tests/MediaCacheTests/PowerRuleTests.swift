// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@_spi(Adapter) @testable import MediaCache

/// The power rule, pure: which jobs wait for power under which conditions (every rule against
/// random conditions, the planner's answer against the rule's words), what Linux's
/// power-supply files mean (examples, and random file contents that never trap), and a preload
/// queue held while the power is low.
@Suite(.stallLimit) struct PowerRuleTests {
    typealias Power = DownloadRules.PowerConditions
    typealias Supply = DownloadRules.PowerConditions.PowerSupply

    static func conditions(_ power: Power, low: Double = 0.2) -> DownloadPlanner.Conditions {
        var conditions = DownloadPlannerTests.conditions(DownloadPlannerTests.at(12))
        conditions.power = power
        conditions.lowBatteryLevel = low
        return conditions
    }

    @Test func aBatteryAt15PercentNotChargingHoldsTheDefaultRuleAndSaysWhy() {
        let low = Power(batteryLevel: 0.15, isCharging: false)
        let plan = DownloadPlanner(maxConcurrent: 2).plan(
            [
                DownloadPlannerTests.job("a"),
                DownloadPlannerTests.job(
                    "b",
                    {
                        var r = DownloadRules()
                        r.power = .any
                        return r
                    }()),
            ],
            Self.conditions(low))
        #expect(plan.starts == ["b"])
        #expect(plan.waits["a"]?.reason == .power)
        #expect(
            plan.waits["a"]?.detail
                == "waiting for power: the battery is at 15 % and not charging, and its rule is not-low")
        #expect(plan.waits["a"]?.remedy == CacheError.Remedy(.allowAnyPower, job: "a"))
        // A running job is stopped, and queued with the reason.
        let running = DownloadPlanner(maxConcurrent: 2).plan(
            [DownloadPlannerTests.job("a", running: true)], Self.conditions(low))
        #expect(running.stops == ["a": .power])
    }

    /// Every rule against 1,000 random conditions: the job waits for power exactly when the rule's
    /// words say it must.
    @Test func everyRuleAgainstRandomConditions() {
        var random = SystemRandomNumberGenerator()
        for round in 0..<1_000 {
            let known = Int.random(in: 0..<8, using: &random) != 0
            let level: Double? =
                Bool.random(using: &random) ? Double(Int.random(in: 0...100, using: &random)) / 100 : nil
            let charging = Bool.random(using: &random)
            let lowPowerMode = Bool.random(using: &random)
            let threshold = Double(Int.random(in: 1...99, using: &random)) / 100
            let power =
                known ? Power(batteryLevel: level, isCharging: charging, isLowPowerMode: lowPowerMode) : .unknown
            let rule = [DownloadRules.Power.any, .charging, .notLow, nil].randomElement(using: &random)!
            var rules = DownloadRules()
            rules.power = rule
            let plan = DownloadPlanner(maxConcurrent: 1).plan(
                [DownloadPlannerTests.job("j", rules)], Self.conditions(power, low: threshold))
            let isLow = lowPowerMode || (!charging && (level ?? 1) < threshold)
            let waits: Bool =
                switch rule ?? .notLow {
                case .any: false
                case .charging: known && !charging
                case .notLow: known && isLow
                }
            #expect(
                (plan.waits["j"]?.reason == .power) == waits,
                "round \(round): \(power), \(String(describing: rule)), \(threshold)")
            #expect(plan.starts == (waits ? [] : ["j"]), "round \(round)")
        }
    }

    @Test func theSuppliesFilesMeanWhatTheKernelSays() {
        // A laptop on battery, at 15 %.
        #expect(
            Power(powerSupplies: [
                Supply(type: "Battery\n", status: "Discharging\n", capacity: "15\n", present: "1\n"),
                Supply(type: "Mains\n", online: "0\n"),
            ]) == Power(batteryLevel: 0.15, isCharging: false))
        // Plugged in: the mains supply is online, whatever the battery says.
        #expect(
            Power(powerSupplies: [
                Supply(type: "Battery", status: "Not charging", capacity: "80"), Supply(type: "Mains", online: "1"),
            ]) == Power(batteryLevel: 0.8, isCharging: true))
        #expect(Power(powerSupplies: [Supply(type: "Battery", status: "Full", capacity: "100")]).isCharging)
        // Two batteries: their mean. A capacity that is not a number 0-100 is left out.
        #expect(
            Power(powerSupplies: [
                Supply(type: "Battery", status: "Discharging", capacity: "40"),
                Supply(type: "Battery", status: "Discharging", capacity: "60"),
                Supply(type: "Battery", status: "Discharging", capacity: "250"),
            ]).batteryLevel == 0.5)
        // No battery (a desktop, a container), or one not present: unknown, and nothing waits.
        #expect(Power(powerSupplies: []) == .unknown)
        #expect(Power(powerSupplies: [Supply(type: "Mains", online: "1")]) == .unknown)
        #expect(Power(powerSupplies: [Supply(type: "Battery", capacity: "5", present: "0")]) == .unknown)
        #expect(Power(powerSupplies: [Supply(type: "Battery", capacity: "abc")]).batteryLevel == nil)
    }

    /// Random bytes in every file (2,000 folders): never a trap, a level within 0...1, unknown exactly when no
    /// present battery is named.
    @Test func randomSupplyFilesNeverTrap() {
        var random = SystemRandomNumberGenerator()
        let words = [
            "Battery", "battery ", "Mains", "USB", "Charging", "Full", "Discharging", "1", "0", "15", "-3", "100",
        ]
        func text() -> String? {
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return nil
            case 1: return words.randomElement(using: &random)!
            default:
                let bytes = (0..<Int.random(in: 0...80, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
                return String(decoding: bytes, as: UTF8.self)
            }
        }
        for round in 0..<2_000 {
            let supplies = (0..<Int.random(in: 0...6, using: &random)).map { _ in
                Supply(type: text(), status: text(), capacity: text(), online: text(), present: text())
            }
            let power = Power(powerSupplies: supplies)
            if let level = power.batteryLevel { #expect((0...1).contains(level), "round \(round)") }
            let battery = supplies.prefix(Supply.maximumCount).contains {
                $0.type.map { $0.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() == "battery" } == true
                    && $0.present.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "0" } != true
            }
            #expect(power.isKnown == battery, "round \(round)")
        }
    }

    @Test func aHeldPreloadQueueStartsNothingAndGoesOnWhenReleased() {
        var machine = PreloadQueueStateMachine(maxBytes: 100 << 20, maxConcurrent: 1)
        let items = [
            PreloadItem(URL(string: "https://o.example/a.mp3")!), PreloadItem(URL(string: "https://o.example/b.mp3")!),
        ]
        let first = machine.replace(with: items)
        #expect(first.count == 1)
        #expect(machine.setHold("power").isEmpty)
        // The running item stops at its next boundary and waits, queued.
        #expect(machine.boundary(first[0].id, missing: 1000) == .held)
        #expect(machine.finished(first[0].id, error: nil, held: true).isEmpty)
        #expect(machine.status.map(\.state) == [.queued, .queued])
        #expect(machine.status.map(\.waiting) == ["power", "power"])
        // Released: the first goes on, its place in the queue kept.
        let again = machine.setHold(nil)
        #expect(again.map(\.item.url) == [items[0].url])
        #expect(machine.status.map(\.waiting) == [nil, nil])
        #expect(machine.boundary(again[0].id, missing: 1000) == .fetch)
    }

    /// What holds a play's fill, over every network and power: low power first, then a metered
    /// or low-data network, and nothing else.
    @Test func aFillIsHeldByLowPowerThenByAnExpensiveNetwork() {
        for metered in [false, true] {
            for constrained in [false, true] {
                let network = DownloadRules.NetworkConditions(isMetered: metered, isConstrained: constrained)
                #expect(FillOnPlay.hold(on: network, lowPower: true) == .lowPower)
                #expect(FillOnPlay.hold(on: network, lowPower: false) == (metered || constrained ? .metered : nil))
            }
        }
    }

    /// The system's words on the power as the Apple adapter hands them over: no battery known
    /// is unknown (nothing waits), Low Power Mode alone (a Mac) is low, a full or charging
    /// battery is on external power, and UIKit's -1 is an unknown level.
    @Test func theSystemsWordsOnThePowerMeanTheirConditions() {
        typealias Conditions = DownloadRules.PowerConditions
        #expect(Conditions(systemLevel: -1, battery: nil, lowPowerMode: false) == .unknown)
        #expect(Conditions(systemLevel: -1, battery: nil, lowPowerMode: true).isLow(below: 0.2))
        #expect(Conditions(systemLevel: 1, battery: .full, lowPowerMode: false).isCharging)
        #expect(Conditions(systemLevel: -1, battery: .charging, lowPowerMode: false).batteryLevel == nil)
        let unplugged = Conditions(systemLevel: 0.15, battery: .unplugged, lowPowerMode: false)
        #expect(unplugged.isLow(below: 0.2) && !unplugged.isCharging && unplugged.batteryLevel == Double(Float(0.15)))
        #expect(!Conditions(systemLevel: 0.15, battery: .charging, lowPowerMode: false).isLow(below: 0.2))
        #expect(Conditions(systemLevel: 0.9, battery: .charging, lowPowerMode: true).isLow(below: 0.2))
    }
}
