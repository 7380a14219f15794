// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// What the cache saved over the store's life, not only since the last start: the bytes
/// players got from the cache and from the origin, day by day (UTC), and what eviction let go,
/// by reason. Kept in the index, so the status page's picture and `mediacache stats` survive
/// restarts. Pure.
package struct UsageHistory: Sendable, Codable, Equatable {
    /// One day's bytes served.
    package struct Day: Sendable, Codable, Equatable {
        /// `yyyy-MM-dd`, UTC.
        package var day: String
        package var fromCache: Int64 = 0
        package var fromOrigin: Int64 = 0

        /// The share of the day's bytes that came from the cache, 0...1.
        package var byteHitRatio: Double {
            let total = fromCache + fromOrigin
            return total == 0 ? 0 : Double(fromCache) / Double(total)
        }
    }

    /// How many days are kept one by one; older ones are summed in ``earlier``.
    static let daysKept = 90

    /// The days with bytes served, oldest first, the last ``daysKept``.
    package private(set) var days: [Day] = []
    /// The days before those, summed.
    package private(set) var earlier = Day(day: "")
    /// Bytes eviction let go over the store's life, by ``EvictionPolicy/Reason`` raw value.
    package private(set) var evicted: [String: Int64] = [:]

    package init() {}

    /// Every byte served from the cache over the store's life.
    package var fromCache: Int64 { days.reduce(earlier.fromCache) { $0 + $1.fromCache } }
    /// Every byte served from the origin over the store's life.
    package var fromOrigin: Int64 { days.reduce(earlier.fromOrigin) { $0 + $1.fromOrigin } }

    /// Counts bytes served at `date`.
    mutating func served(fromCache cache: Int64, fromOrigin origin: Int64, at date: Date) {
        guard cache > 0 || origin > 0 else { return }
        let day = Self.day(of: date)
        if days.last?.day != day {
            // A clock set back starts no day before the last one.
            if let last = days.last?.day, day < last {
                days[days.count - 1].fromCache += max(0, cache)
                days[days.count - 1].fromOrigin += max(0, origin)
                return
            }
            days.append(Day(day: day))
            while days.count > Self.daysKept {
                let old = days.removeFirst()
                earlier.fromCache += old.fromCache
                earlier.fromOrigin += old.fromOrigin
            }
        }
        days[days.count - 1].fromCache += max(0, cache)
        days[days.count - 1].fromOrigin += max(0, origin)
    }

    /// Counts bytes eviction let go for `reason`.
    mutating func evicted(_ bytes: Int64, for reason: EvictionPolicy.Reason) {
        guard bytes > 0 else { return }
        evicted[reason.rawValue, default: 0] += bytes
    }

    /// `yyyy-MM-dd` of `date`, UTC, computed without a formatter (no locale, no allocation of one).
    static func day(of date: Date) -> String {
        let days = Int(floor(date.timeIntervalSince1970 / 86_400))
        // Civil from days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(y)-\(two(m))-\(two(d))"
    }

    /// Reads a history the index kept; `nil` for anything that is not one (it is then begun anew).
    init?(json: Data) {
        guard let history = try? JSONDecoder().decode(UsageHistory.self, from: json),
            history.days.count <= Self.daysKept, history.days.allSatisfy({ $0.fromCache >= 0 && $0.fromOrigin >= 0 })
        else { return nil }
        self = history
    }
}
