// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// When, on which network and how fast pinned downloads may move bytes. The queue's rules
/// (``DownloadQueue/Configuration/rules``) hold for every job; a job's own rules
/// (``DownloadQueue/setRules(_:_:)``) replace those it sets ("this one anyway": a job with
/// ``DownloadRules/Network/any`` downloads on a hotspot while the others wait).
public struct DownloadRules: Sendable, Codable, Equatable {
    /// The hours of the day, local time, downloads run in; `nil`: the queue's, or any time.
    public var window: DownloadRules.Window?
    /// The networks downloads run on; `nil`: the queue's, or ``DownloadRules/Network/unmetered``.
    public var network: DownloadRules.Network?
    /// At most this many bytes per second; `nil`: the queue's cap alone. A job's cap holds
    /// within the queue's, which every job shares.
    public var maxBytesPerSecond: Int64?
    /// The power downloads run on; `nil`: the queue's, or ``DownloadRules/Power/notLow``.
    public var power: DownloadRules.Power?

    /// Rules that set what is given.
    public init(
        window: DownloadRules.Window? = nil, network: DownloadRules.Network? = nil, maxBytesPerSecond: Int64? = nil
    ) {
        self.window = window
        self.network = network
        self.maxBytesPerSecond = maxBytesPerSecond
    }

    /// These rules, with what they leave unset taken from `base`.
    public func over(_ base: DownloadRules) -> DownloadRules {
        var rules = DownloadRules(
            window: window ?? base.window, network: network ?? base.network,
            maxBytesPerSecond: maxBytesPerSecond ?? base.maxBytesPerSecond)
        rules.power = power ?? base.power
        return rules
    }

    /// These rules with what `change` sets replaced.
    func changed(by change: DownloadRules) -> DownloadRules { change.over(self) }

    /// Whether nothing is set.
    public var isEmpty: Bool { self == DownloadRules() }

    /// Rules from their words: `window` `HH:MM-HH:MM` or `any`, `network` a ``DownloadRules/Network``'s
    /// name, `rate` bytes per second (at least 1024), `power` a ``DownloadRules/Power``'s name;
    /// `option` prefixes the names in errors.
    /// - Throws: ``CacheError`` `.outOfBounds` saying which word is wrong.
    package static func parse(
        window: String?, network: String?, rate: Int64?, power: String? = nil, option: String
    ) throws -> DownloadRules {
        var rules = DownloadRules()
        if let power {
            guard let parsed = DownloadRules.Power(rawValue: power.lowercased()) else {
                throw CacheError(
                    .outOfBounds, "\(option)power \(power.prefix(40)) is not one of any, charging, not-low.")
            }
            rules.power = parsed
        }
        if let window {
            guard let parsed = DownloadRules.Window(window) else {
                throw CacheError(
                    .outOfBounds,
                    "\(option)window \(window.prefix(40)) is not a window: give HH:MM-HH:MM in local time (01:00-06:00) or any."
                )
            }
            rules.window = parsed
        }
        if let network {
            guard let parsed = DownloadRules.Network(rawValue: network.lowercased()) else {
                throw CacheError(
                    .outOfBounds,
                    "\(option)network \(network.prefix(40)) is not one of any, unmetered, not-constrained.")
            }
            rules.network = parsed
        }
        if let rate {
            guard rate >= 1024 else {
                throw CacheError(.outOfBounds, "\(option)rate must be at least 1K (1024 bytes per second).")
            }
            rules.maxBytesPerSecond = rate
        }
        return rules
    }
}

extension DownloadRules {
    /// Hours of every day, local time: from ``start`` up to ``end`` (minutes after midnight). A
    /// window whose end comes before its start spans midnight (`23:00-06:00`); one whose start
    /// and end are equal is the whole day.
    public struct Window: Sendable, Codable, Equatable, CustomStringConvertible {
        public var start: Int
        public var end: Int

        /// Any time of day.
        public static let anyTime = DownloadRules.Window(start: 0, end: 0)

        /// The window from `start` to `end`, in minutes after midnight (0..<1440).
        public init(start: Int, end: Int) {
            self.start = min(max(0, start), 1439)
            self.end = min(max(0, end), 1439)
        }

        /// Reads `HH:MM-HH:MM` (24-hour clock) or `any`; `nil` for anything else.
        public init?(_ text: String) {
            if text.lowercased() == "any" {
                self = .anyTime
                return
            }
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard text.count <= 11, parts.count == 2, let start = Self.minutes(parts[0]),
                let end = Self.minutes(parts[1])
            else { return nil }
            self.init(start: start, end: end)
        }

        /// `H:MM` or `HH:MM` as minutes after midnight (`24:00` is midnight).
        private static func minutes(_ text: Substring) -> Int? {
            let fields = text.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 2, (1...2).contains(fields[0].count), fields[1].count == 2,
                fields.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                let hours = Int(fields[0]), let minutes = Int(fields[1]), minutes < 60,
                hours < 24 || (hours == 24 && minutes == 0)
            else { return nil }
            return (hours * 60 + minutes) % 1440
        }

        public var description: String {
            self == .anyTime ? "any" : "\(Self.clock(start))-\(Self.clock(end))"
        }

        /// `HH:MM` for a minute of the day.
        static func clock(_ minutes: Int) -> String {
            let hours = String(minutes / 60)
            let rest = String(minutes % 60)
            return (hours.count < 2 ? "0" : "") + hours + ":" + (rest.count < 2 ? "0" : "") + rest
        }

        /// Whether the minute of the day `minute` is inside.
        func contains(minute: Int) -> Bool {
            if start == end { return true }
            return start < end ? (start..<end).contains(minute) : minute >= start || minute < end
        }

        /// Whether `date` is inside, in `timeZone`; when it is not, when the window next opens.
        func check(_ date: Date, in timeZone: TimeZone) -> (isOpen: Bool, opensAt: Date?) {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = timeZone
            let parts = calendar.dateComponents([.hour, .minute, .second], from: date)
            let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
            if contains(minute: minute) { return (true, nil) }
            // Minutes until the start, counted in whole minutes from the current one.
            let ahead = (start - minute + 1440) % 1440
            let opens = calendar.date(byAdding: .minute, value: ahead, to: date).map {
                $0.addingTimeInterval(-Double(parts.second ?? 0))
            }
            return (false, opens)
        }
    }
}

extension DownloadRules {
    /// The networks pinned downloads may use.
    public enum Network: String, Sendable, Codable, Equatable, CaseIterable {
        /// Any network, metered or not.
        case any
        /// Only a network that is neither metered (a phone's hotspot, cellular) nor in low-data mode.
        case unmetered
        /// Any network not in low-data mode (metered allowed).
        case notConstrained = "not-constrained"

        /// Whether a job under this rule may download on `network`.
        func allows(_ network: DownloadRules.NetworkConditions) -> Bool {
            switch self {
            case .any: true
            case .unmetered: !network.isMetered && !network.isConstrained
            case .notConstrained: !network.isConstrained
            }
        }

        /// Whether a system transfer under this rule may use a metered network.
        var allowsExpensive: Bool { allows(DownloadRules.NetworkConditions(isMetered: true)) }
        /// Whether a system transfer under this rule may use a network in low-data mode.
        var allowsConstrained: Bool { allows(DownloadRules.NetworkConditions(isConstrained: true)) }
    }
}

extension DownloadRules {
    /// What the system (or the user) says of the network in use.
    public struct NetworkConditions: Sendable, Codable, Equatable {
        /// Metered: cellular, a hotspot, a plan that counts bytes (NetworkManager's `Metered`, an
        /// Apple path's `isExpensive`).
        public var isMetered: Bool
        /// In low-data mode (an Apple path's `isConstrained`).
        public var isConstrained: Bool

        public init(isMetered: Bool = false, isConstrained: Bool = false) {
            self.isMetered = isMetered
            self.isConstrained = isConstrained
        }

        /// A network nobody said anything of: neither metered nor constrained.
        public static let unknown = DownloadRules.NetworkConditions()
    }
}

extension DownloadRules {
    /// What the user says of the network, over what the system says (`mediacache network`).
    public enum NetworkOverride: String, Sendable, Codable, Equatable, CaseIterable {
        /// The system's word.
        case auto
        /// "I am on a hotspot": metered, whatever the system says.
        case metered
        /// Unmetered and not constrained, whatever the system says.
        case unmetered

        /// The conditions downloads go by, given the system's.
        func applied(to system: DownloadRules.NetworkConditions) -> DownloadRules.NetworkConditions {
            switch self {
            case .auto: system
            case .metered: DownloadRules.NetworkConditions(isMetered: true, isConstrained: system.isConstrained)
            case .unmetered: DownloadRules.NetworkConditions()
            }
        }
    }
}

extension DownloadRules {
    /// The power pinned downloads may run on.
    public enum Power: String, Sendable, Codable, Equatable, CaseIterable {
        /// On any power, the battery low or not.
        case any
        /// Only while the device charges (or runs on external power, its battery full).
        case charging
        /// Unless the battery is low and not charging, or the system's low-power mode is on.
        case notLow = "not-low"

        /// Whether a job under this rule may download on `power`, a battery below
        /// `lowLevel` (0...1) counting as low. Where the power is unknown (no battery), nothing waits.
        func allows(_ power: DownloadRules.PowerConditions, lowLevel: Double) -> Bool {
            guard power.isKnown else { return true }
            switch self {
            case .any: return true
            case .charging: return power.isCharging
            case .notLow: return !power.isLow(below: lowLevel)
            }
        }
    }

    /// What the system says of the device's power.
    public struct PowerConditions: Sendable, Codable, Equatable {
        /// Whether the system said anything: a device without a battery (a desktop, a
        /// container) has no power to mind, and no rule holds a download back.
        public var isKnown: Bool
        /// The battery's charge, 0...1, when told.
        public var batteryLevel: Double?
        /// On external power: charging, or full and plugged in.
        public var isCharging: Bool
        /// The system's low-power mode (Low Power Mode on Apple platforms) is on.
        public var isLowPowerMode: Bool

        public init(batteryLevel: Double?, isCharging: Bool, isLowPowerMode: Bool = false) {
            self.isKnown = true
            self.batteryLevel = batteryLevel.map { min(1, max(0, $0)) }
            self.isCharging = isCharging
            self.isLowPowerMode = isLowPowerMode
        }

        /// No battery, or nothing said of one.
        public static let unknown: DownloadRules.PowerConditions = {
            var unknown = DownloadRules.PowerConditions(batteryLevel: nil, isCharging: false)
            unknown.isKnown = false
            return unknown
        }()

        /// Low: the low-power mode, or a battery below `level` that is not charging.
        func isLow(below level: Double) -> Bool {
            guard isKnown else { return false }
            return isLowPowerMode || (!isCharging && (batteryLevel ?? 1) < level)
        }

        /// The power in words: "the battery is at 15 % and not charging".
        package var words: String {
            guard isKnown else { return "the power is unknown" }
            var words =
                batteryLevel.map { "the battery is at \(Int(($0 * 100).rounded())) %" }
                ?? "the battery's level is unknown"
            words += isCharging ? " and charging" : " and not charging"
            if isLowPowerMode { words += ", low-power mode on" }
            return words
        }
    }
}

extension DownloadJob {
    /// Why a queued job does not download now.
    public enum Wait: String, Sendable, Codable, Equatable, CaseIterable {
        /// Outside its daily window.
        case window
        /// The network is metered or in low-data mode and its rule forbids that.
        case network
        /// The disk has less free space than the floor (``CacheStore/Configuration/minFreeDiskBytes``) leaves.
        case space
        /// The battery is low (or not charging) and its power rule forbids that: "waiting for power".
        case power
    }
}

extension DownloadRules.PowerConditions {
    /// A battery's state, as UIKit says it (`UIDevice.BatteryState`, less `unknown`).
    @_spi(Adapter) public enum SystemBattery: Sendable {
        case unplugged, charging, full
    }

    /// The conditions the system's words mean: `level` as UIKit gives it (0...1, or -1 when
    /// unknown), `battery` `nil` when the system knows of none, and Low Power Mode. Without a
    /// battery the power is unknown (nothing waits for it) unless Low Power Mode is on.
    @_spi(Adapter) public init(systemLevel level: Float, battery: SystemBattery?, lowPowerMode: Bool) {
        guard let battery else {
            self = lowPowerMode ? Self(batteryLevel: nil, isCharging: false, isLowPowerMode: true) : .unknown
            return
        }
        self.init(
            batteryLevel: level < 0 ? nil : Double(level), isCharging: battery != .unplugged,
            isLowPowerMode: lowPowerMode)
    }
}

extension DownloadRules.NetworkConditions {
    /// Reads NetworkManager's `Metered` property as `busctl get-property` prints it (`u 1`):
    /// 1 (yes) and 3 (guessed yes) are metered; 0, 2 and 4 are not; anything else is `nil`.
    package init?(networkManagerMetered text: String) {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard text.utf8.count <= 64, fields.count == 2, fields[0] == "u", fields[1].count == 1,
            let value = Int(fields[1]), (0...4).contains(value)
        else { return nil }
        self.init(isMetered: value == 1 || value == 3)
    }
}
