// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

extension DownloadRules.PowerConditions {
    /// One power supply as Linux's power-supply class shows it (`/sys/class/power_supply/NAME/`):
    /// the text of its `type`, `status`, `capacity`, `online` and `present` files, each `nil`
    /// when missing.
    package struct PowerSupply: Sendable, Equatable {
        package var type: String?
        package var status: String?
        package var capacity: String?
        package var online: String?
        package var present: String?

        package init(
            type: String? = nil, status: String? = nil, capacity: String? = nil, online: String? = nil,
            present: String? = nil
        ) {
            (self.type, self.status, self.capacity, self.online, self.present) = (
                type, status, capacity, online, present
            )
        }

        /// The most bytes read of each file.
        package static let maximumFileSize = 64
        /// The most supplies looked at.
        package static let maximumCount = 32
    }

    /// The power the supplies tell (the kernel's ABI, Documentation/ABI/testing/sysfs-class-power):
    /// unknown without a battery present; else the batteries' mean `capacity` (0-100, a value
    /// out of range or not a number left out), charging when a battery says `Charging` or
    /// `Full`, or another supply (`Mains`, `USB`, …) says `online` 1. Linux has no system-wide
    /// low-power mode to read here.
    package init(powerSupplies supplies: [PowerSupply]) {
        func word(_ text: String?) -> String? {
            text.map { String($0.prefix(PowerSupply.maximumFileSize)).trimmingSpaces().lowercased() }
        }
        let considered = supplies.prefix(PowerSupply.maximumCount)
        let batteries = considered.filter { word($0.type) == "battery" && word($0.present) != "0" }
        guard !batteries.isEmpty else {
            self = .unknown
            return
        }
        let levels = batteries.compactMap { battery -> Double? in
            guard let text = word(battery.capacity), text.count <= 3, text.allSatisfy(\.isASCII),
                let value = Int(text), (0...100).contains(value)
            else { return nil }
            return Double(value) / 100
        }
        let batteryCharges = batteries.contains { ["charging", "full"].contains(word($0.status) ?? "") }
        let plugged = considered.contains { word($0.type) != "battery" && word($0.online) == "1" }
        self.init(
            batteryLevel: levels.isEmpty ? nil : levels.reduce(0, +) / Double(levels.count),
            isCharging: batteryCharges || plugged)
    }
}

extension String {
    /// The text without ASCII spaces and line ends at either end.
    fileprivate func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
