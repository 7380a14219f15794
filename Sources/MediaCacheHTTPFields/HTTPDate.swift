// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// HTTP dates (RFC 9110 §5.6.7) as seconds since 1970: the preferred IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms recipients must accept,
/// RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
/// Parsed by hand, without a locale or time zone, and bounded: years 1900...9999.
package enum HTTPDate {

    /// Seconds since 1970-01-01 00:00:00 UTC, or `nil` when `text` is not an HTTP date.
    ///
    /// Parts are separated by exactly one space, as the grammar has them (a doubled space or a
    /// tab makes an invalid date, so an `Expires` with one is already expired, RFC 9111 §5.3);
    /// the only two spaces in a row are asctime's before a one-digit day. Names of days,
    /// months and the zone are taken in any letter case (`gmt`), as RFC 9110 §5.6.7 lets a
    /// recipient be lenient about. A date is ASCII: text with any other byte is none. Read on
    /// the UTF-8 bytes, without splitting the text into strings (a fifth of the cost of
    /// checking an origin's answer when it did).
    package static func parse(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parse(Bytes(bytes: $0)) }
    }

    /// The text's bytes and the fields between its spaces.
    private struct Bytes {
        let bytes: UnsafeBufferPointer<UInt8>

        func endsWithComma(_ field: Range<Int>) -> Bool {
            !field.isEmpty && bytes[field.upperBound - 1] == UInt8(ascii: ",")
        }

        /// The field's value when it is `digits` ASCII digits.
        func number(_ field: Range<Int>, digits: ClosedRange<Int>) -> Int64? {
            guard digits.contains(field.count) else { return nil }
            var value: Int64 = 0
            for index in field {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int64(digit)
            }
            return value
        }

        /// The position of the field in `names` (three lower-case letters each), in any ASCII case.
        func name(_ field: Range<Int>, in names: [StaticString]) -> Int? {
            guard field.count == 3 else { return nil }
            func lower(_ byte: UInt8) -> UInt8 {
                byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 0x20 : byte
            }
            let (a, b, c) = (
                lower(bytes[field.lowerBound]), lower(bytes[field.lowerBound + 1]), lower(bytes[field.lowerBound + 2])
            )
            return names.firstIndex { $0.utf8Start[0] == a && $0.utf8Start[1] == b && $0.utf8Start[2] == c }
        }

        func month(_ field: Range<Int>) -> Int64? {
            name(field, in: HTTPDate.monthNames).map { Int64($0 + 1) }
        }

        /// `HH:MM:SS`, as seconds since midnight (a leap second allowed).
        func time(_ field: Range<Int>) -> Int64? {
            let start = field.lowerBound
            guard field.count == 8, bytes[start + 2] == UInt8(ascii: ":"), bytes[start + 5] == UInt8(ascii: ":"),
                let hour = number(start..<start + 2, digits: 2...2),
                let minute = number(start + 3..<start + 5, digits: 2...2),
                let second = number(start + 6..<start + 8, digits: 2...2),
                hour < 24, minute < 60, second < 61
            else { return nil }
            return hour * 3600 + minute * 60 + second
        }
    }

    private static let monthNames: [StaticString] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    private static let weekdayNames: [StaticString] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let zoneNames: [StaticString] = ["gmt"]

    private static func parse(_ text: Bytes) -> Int64? {
        let bytes = text.bytes
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
        // The fields between single spaces, empty ones kept; no form has more than six.
        var fields: [Range<Int>] = []
        fields.reserveCapacity(7)
        var start = 0
        for index in bytes.indices where bytes[index] == UInt8(ascii: " ") {
            fields.append(start..<index)
            start = index + 1
            guard fields.count <= 6 else { return nil }
        }
        fields.append(start..<bytes.count)
        // asctime's `Nov  6`: an empty field before a one-digit day is the day's padding.
        if fields.count == 6, !text.endsWithComma(fields[0]), fields[2].isEmpty, fields[3].count == 1 {
            fields.remove(at: 2)
        }
        let isGMT = { (field: Range<Int>) in text.name(field, in: zoneNames) != nil }
        switch fields.count {
        case 6 where text.endsWithComma(fields[0]):
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard isGMT(fields[5]), let day = text.number(fields[1], digits: 2...2), let month = text.month(fields[2]),
                let year = text.number(fields[3], digits: 4...4)
            else { return nil }
            return seconds(year: year, month: month, day: day, time: text.time(fields[4]))
        case 4 where text.endsWithComma(fields[0]):
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT (a two-digit year: 1970...2069, §5.6.7)
            let date = fields[1]
            guard isGMT(fields[3]), date.count == 9, bytes[date.lowerBound + 2] == UInt8(ascii: "-"),
                bytes[date.lowerBound + 6] == UInt8(ascii: "-"),
                let day = text.number(date.lowerBound..<date.lowerBound + 2, digits: 2...2),
                let month = text.month(date.lowerBound + 3..<date.lowerBound + 6),
                let short = text.number(date.lowerBound + 7..<date.upperBound, digits: 2...2)
            else { return nil }
            return seconds(
                year: short < 70 ? 2000 + short : 1900 + short, month: month, day: day, time: text.time(fields[2]))
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994 (the padding space removed above)
            guard text.name(fields[0], in: weekdayNames) != nil, let month = text.month(fields[1]),
                let day = text.number(fields[2], digits: 1...2),
                let year = text.number(fields[4], digits: 4...4)
            else { return nil }
            return seconds(year: year, month: month, day: day, time: text.time(fields[3]))
        default:
            return nil
        }
    }

    /// The IMF-fixdate for `seconds` since 1970 (within years 1900...9999).
    package static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        let (year, month, day) = CivilDate.civil(days: days)
        let weekday = weekdayNames[Int(((days % 7) + 7 + 3) % 7)].description  // 1970-01-01 was a Thursday
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let name = monthNames[Int(month - 1)].description
        return
            "\(weekday.prefix(1).uppercased() + weekday.dropFirst()), \(two(day)) \(name.prefix(1).uppercased() + name.dropFirst()) \(year) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static func seconds(year: Int64, month: Int64, day: Int64, time: Int64?) -> Int64? {
        guard let time, (1900...9999).contains(year), day >= 1, day <= CivilDate.daysIn(month: month, year: year) else {
            return nil
        }
        return CivilDate.days(year: year, month: month, day: day) * 86400 + time
    }
}
