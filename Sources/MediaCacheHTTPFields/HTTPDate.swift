// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache

/// HTTP dates (RFC 9110 §5.6.7) as seconds since 1970: the preferred IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms recipients must accept,
/// RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
/// Parsed by hand, without a locale or time zone, and bounded: years 1900...9999.
package enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

    /// Seconds since 1970-01-01 00:00:00 UTC, or `nil` when `text` is not an HTTP date.
    ///
    /// Parts are separated by exactly one space, as the grammar has them (a doubled space or a
    /// tab makes an invalid date, so an `Expires` with one is already expired, RFC 9111 §5.3);
    /// the only two spaces in a row are asctime's before a one-digit day. Names of days,
    /// months and the zone are taken in any letter case (`gmt`), as RFC 9110 §5.6.7 lets a
    /// recipient be lenient about.
    package static func parse(_ text: String) -> Int64? {
        var fields = text.split(separator: " ", omittingEmptySubsequences: false).map { String($0) }
        // asctime's `Nov  6`: an empty field before a one-digit day is the day's padding.
        if fields.count == 6, !fields[0].hasSuffix(","), fields[2].isEmpty, fields[3].utf8.count == 1 { fields.remove(at: 2) }
        switch fields.count {
        case 6 where fields[0].hasSuffix(","):
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard isGMT(fields[5]), let day = number(fields[1], digits: 2...2), let month = month(fields[2]),
                let year = number(fields[3], digits: 4...4)
            else { return nil }
            return seconds(year: year, month: month, day: day, time: fields[4])
        case 4 where fields[0].hasSuffix(","):
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT (a two-digit year: 1970...2069, §5.6.7)
            let date = fields[1].split(separator: "-", omittingEmptySubsequences: false)
            guard isGMT(fields[3]), date.count == 3, let day = number(String(date[0]), digits: 2...2), let month = month(String(date[1])),
                let short = number(String(date[2]), digits: 2...2)
            else { return nil }
            return seconds(year: short < 70 ? 2000 + short : 1900 + short, month: month, day: day, time: fields[2])
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994 (the padding space removed above)
            guard weekdays.contains(fields[0].lowercased()), let month = month(fields[1]), let day = number(fields[2], digits: 1...2),
                let year = number(fields[4], digits: 4...4)
            else { return nil }
            return seconds(year: year, month: month, day: day, time: fields[3])
        default:
            return nil
        }
    }

    private static func isGMT(_ text: String) -> Bool {
        text.utf8.count == 3 && text.lowercased() == "gmt"
    }

    /// The IMF-fixdate for `seconds` since 1970 (within years 1900...9999).
    package static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        let (year, month, day) = civil(fromDays: days)
        let weekday = weekdays[Int(((days % 7) + 7 + 3) % 7)]  // 1970-01-01 was a Thursday
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let name = months[Int(month - 1)]
        return "\(weekday.prefix(1).uppercased() + weekday.dropFirst()), \(two(day)) \(name.prefix(1).uppercased() + name.dropFirst()) \(year) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static func month(_ text: String) -> Int64? {
        months.firstIndex(of: text.lowercased()).map { Int64($0 + 1) }
    }

    private static func number(_ text: String, digits: ClosedRange<Int>) -> Int64? {
        guard digits.contains(text.utf8.count) else { return nil }
        return HTTPNumber.strict(text)
    }

    private static func seconds(year: Int64, month: Int64, day: Int64, time: String) -> Int64? {
        let parts = time.split(separator: ":", omittingEmptySubsequences: false)
        guard (1900...9999).contains(year), parts.count == 3,
            let hour = number(String(parts[0]), digits: 2...2), let minute = number(String(parts[1]), digits: 2...2),
            let second = number(String(parts[2]), digits: 2...2),
            hour < 24, minute < 60, second < 61,  // 60: a leap second
            day >= 1, day <= CivilDate.daysIn(month: month, year: year)
        else { return nil }
        return CivilDate.days(year: year, month: month, day: day) * 86400 + hour * 3600 + minute * 60 + second
    }

    /// The inverse of `CivilDate.days(year:month:day:)` (H. Hinnant's `civil_from_days`).
    private static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
