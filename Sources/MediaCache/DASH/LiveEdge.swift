// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import MediaCacheHTTPFields

/// Where a live (`dynamic`) DASH presentation is at a moment: the seconds since its
/// `availabilityStartTime`, and its time shift buffer (`timeShiftBufferDepth`), which bounds
/// how far back its segments are listed (ISO/IEC 23009-1 §5.3.9.5.3: a segment is available
/// from its end until it is older than the buffer).
package struct LiveEdge: Sendable, Equatable {
    /// The window a template lists when the manifest gives no `timeShiftBufferDepth` (an
    /// unbounded buffer, which could reach back to 1970).
    package static let defaultWindow = 60.0

    /// Seconds from `availabilityStartTime` to now.
    package var elapsed: Double
    /// `timeShiftBufferDepth` in seconds, when given.
    package var window: Double?

    package init(elapsed: Double, window: Double?) {
        self.elapsed = elapsed
        self.window = window
    }

    /// The edge of `manifest` at `now`; `nil` for a static manifest, or one whose
    /// `availabilityStartTime` is missing or not a date.
    package init?(manifest: DASHManifest, now: Date) {
        guard manifest.isDynamic, let root = manifest.elements.first,
            let text = DASHManifest.attribute("availabilityStartTime", of: root, in: manifest.bytes),
            let start = Self.date(text)
        else { return nil }
        elapsed = now.timeIntervalSince(start)
        window = DASHManifest.attribute("timeShiftBufferDepth", of: root, in: manifest.bytes).flatMap(
            DASHManifest.seconds(ofISO8601Duration:))
    }

    /// An `xs:dateTime` (`2026-11-26T08:00:00.5Z`, `…+01:00`, no zone read as UTC), with bounds:
    /// years 1-9999 (in UTC as well), fields in range; `nil` for anything else.
    package static func date(_ text: String) -> Date? {
        let bytes = Array(text.trimmingCharacters(in: .whitespaces).utf8)
        guard bytes.count >= 19, bytes.count <= 40 else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= bytes.count, bytes[range].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return nil
            }
            return bytes[range].reduce(0) { $0 * 10 + Int64($1 - 0x30) }
        }
        func byte(_ index: Int, _ character: Character) -> Bool {
            index < bytes.count && bytes[index] == character.asciiValue
        }
        guard let year = number(0..<4), byte(4, "-"), let month = number(5..<7), byte(7, "-"), let day = number(8..<10),
            byte(10, "T"),
            let hour = number(11..<13), byte(13, ":"), let minute = number(14..<16), byte(16, ":"),
            let second = number(17..<19),
            year >= 1, (1...12).contains(month), (1...CivilDate.daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if byte(index, ".") {
            let digits = bytes[(index + 1)...].prefix { $0 >= 0x30 && $0 <= 0x39 }
            guard !digits.isEmpty, digits.count <= 12 else { return nil }
            fraction = Double(String(decoding: digits, as: UTF8.self)).map { $0 / pow(10, Double(digits.count)) } ?? 0
            index += 1 + digits.count
        }
        var zone: Int64 = 0
        if byte(index, "Z") {
            index += 1
        } else if byte(index, "+") || byte(index, "-") {
            guard let hours = number((index + 1)..<(index + 3)), byte(index + 3, ":"),
                let minutes = number((index + 4)..<(index + 6)), hours <= 14, minutes < 60
            else { return nil }
            zone = (hours * 60 + minutes) * 60 * (byte(index, "-") ? -1 : 1)
            index += 6
        }
        guard index == bytes.count else { return nil }
        let seconds =
            CivilDate.days(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - zone
        // Within years 1-9999 in UTC too (a zone may move a date past either end).
        guard seconds >= CivilDate.days(year: 1, month: 1, day: 1) * 86_400,
            seconds < CivilDate.days(year: 10_000, month: 1, day: 1) * 86_400
        else { return nil }
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}
