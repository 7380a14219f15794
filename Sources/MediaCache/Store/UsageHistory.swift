// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields

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

    /// The seconds since 1970 the last day spans (not kept: found again on the first count).
    private var lastDaySpan: Range<Double>?

    private enum CodingKeys: String, CodingKey { case days, earlier, evicted }

    package static func == (a: UsageHistory, b: UsageHistory) -> Bool {
        a.days == b.days && a.earlier == b.earlier && a.evicted == b.evicted
    }

    /// Counts bytes served at `date`.
    mutating func served(fromCache cache: Int64, fromOrigin origin: Int64, at date: Date) {
        guard cache > 0 || origin > 0 else { return }
        // Most counts fall on the day of the last one: no day's name worked out again.
        if let span = lastDaySpan, span.contains(date.timeIntervalSince1970), !days.isEmpty {
            days[days.count - 1].fromCache += max(0, cache)
            days[days.count - 1].fromOrigin += max(0, origin)
            return
        }
        let dayStart = floor(date.timeIntervalSince1970 / 86_400) * 86_400
        let day = Self.day(of: date)
        if days.last?.day == day { lastDaySpan = dayStart..<(dayStart + 86_400) }
        if days.last?.day != day {
            // A clock set back starts no day before the last one.
            if let last = days.last?.day, day < last {
                days[days.count - 1].fromCache += max(0, cache)
                days[days.count - 1].fromOrigin += max(0, origin)
                return
            }
            days.append(Day(day: day))
            lastDaySpan = dayStart..<(dayStart + 86_400)
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
        let (year, month, day) = CivilDate.civil(days: Int64(floor(date.timeIntervalSince1970 / 86_400)))
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(two(month))-\(two(day))"
    }

    /// The history as the index keeps it: a line per day (`day yyyy-MM-dd CACHE ORIGIN`), the
    /// earlier days' sum (`earlier CACHE ORIGIN`), a line per reason (`evicted REASON BYTES`).
    /// Written at each commit that follows a change: a few thousand instructions, where
    /// JSONEncoder took about 300,000 (a miss's commit paid it).
    package var encoded: String {
        var lines = ["earlier \(earlier.fromCache) \(earlier.fromOrigin)"]
        lines += days.map { "day \($0.day) \($0.fromCache) \($0.fromOrigin)" }
        lines += evicted.sorted { $0.key < $1.key }.map { "evicted \($0.key) \($0.value)" }
        return lines.joined(separator: "\n")
    }

    /// Reads ``encoded``; `nil` for anything else (the history is then begun anew): a count
    /// that is not a non-negative number, a day not of the form, days out of order or too many,
    /// an unknown reason.
    package init?(encoded text: String) {
        var history = UsageHistory()
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            func count(_ index: Int) -> Int64? {
                guard index < fields.count, fields[index].count <= 19, let value = Int64(fields[index]), value >= 0
                else { return nil }
                return value
            }
            switch fields.first {
            case "earlier" where fields.count == 3:
                guard let cache = count(1), let origin = count(2) else { return nil }
                history.earlier = Day(day: "", fromCache: cache, fromOrigin: origin)
            case "day" where fields.count == 4:
                let day = String(fields[1])
                guard Self.isDay(day), history.days.last.map({ $0.day < day }) ?? true,
                    history.days.count < Self.daysKept, let cache = count(2), let origin = count(3)
                else { return nil }
                history.days.append(Day(day: day, fromCache: cache, fromOrigin: origin))
            case "evicted" where fields.count == 3:
                guard EvictionPolicy.Reason(rawValue: String(fields[1])) != nil, let bytes = count(2) else {
                    return nil
                }
                history.evicted[String(fields[1])] = bytes
            default:
                return nil
            }
        }
        self = history
    }

    /// Whether `text` is `yyyy-MM-dd` in ASCII digits.
    private static func isDay(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 10 && bytes[4] == UInt8(ascii: "-") && bytes[7] == UInt8(ascii: "-")
            && bytes.enumerated().allSatisfy { $0.offset == 4 || $0.offset == 7 || (48...57).contains($0.element) }
    }
}
