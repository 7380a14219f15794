// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import MediaCacheHTTPFields
import MediaCacheTestSupport
import Testing

/// `HTTPDate.parse` reads the bytes of the text; it is checked against a model that reads the
/// text the plain way, split into strings (the parser as it was written first), on dates of
/// the three forms and on their mutations. On ASCII text the two agree everywhere; text with
/// another byte is no date for the parser (a date is ASCII), where the model took a day name
/// it does not check.
@Suite(.stallLimit, .cpuBound) struct HTTPDateModelTests {
    /// The plain reading: fields split at spaces, names lower-cased and looked up.
    enum Model {
        static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        static let weekdays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

        static func parse(_ text: String) -> Int64? {
            var fields = text.split(separator: " ", omittingEmptySubsequences: false).map { String($0) }
            if fields.count == 6, !fields[0].hasSuffix(","), fields[2].isEmpty, fields[3].utf8.count == 1 {
                fields.remove(at: 2)
            }
            switch fields.count {
            case 6 where fields[0].hasSuffix(","):
                guard fields[5].lowercased() == "gmt", let day = number(fields[1], 2...2), let month = month(fields[2]),
                    let year = number(fields[3], 4...4)
                else { return nil }
                return seconds(year, month, day, fields[4])
            case 4 where fields[0].hasSuffix(","):
                let date = fields[1].split(separator: "-", omittingEmptySubsequences: false).map { String($0) }
                guard fields[3].lowercased() == "gmt", date.count == 3, let day = number(date[0], 2...2),
                    let month = month(date[1]),
                    let short = number(date[2], 2...2)
                else { return nil }
                return seconds(short < 70 ? 2000 + short : 1900 + short, month, day, fields[2])
            case 5:
                guard weekdays.contains(fields[0].lowercased()), let month = month(fields[1]),
                    let day = number(fields[2], 1...2),
                    let year = number(fields[4], 4...4)
                else { return nil }
                return seconds(year, month, day, fields[3])
            default:
                return nil
            }
        }

        static func month(_ text: String) -> Int64? { months.firstIndex(of: text.lowercased()).map { Int64($0 + 1) } }

        static func number(_ text: String, _ digits: ClosedRange<Int>) -> Int64? {
            guard digits.contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int64(text)
        }

        static func seconds(_ year: Int64, _ month: Int64, _ day: Int64, _ time: String) -> Int64? {
            let parts = time.split(separator: ":", omittingEmptySubsequences: false).map { String($0) }
            guard (1900...9999).contains(year), parts.count == 3, let hour = number(parts[0], 2...2),
                let minute = number(parts[1], 2...2),
                let second = number(parts[2], 2...2), hour < 24, minute < 60, second < 61, day >= 1,
                day <= CivilDate.daysIn(month: month, year: year)
            else { return nil }
            return CivilDate.days(year: year, month: month, day: day) * 86400 + hour * 3600 + minute * 60 + second
        }
    }

    /// `seconds` in the three forms (RFC 850's two-digit year only within 1970...2069).
    static func forms(_ seconds: Int64) -> [String] {
        let imf = HTTPDate.format(seconds)  // Sun, 06 Nov 1994 08:49:37 GMT
        let parts = imf.split(separator: " ").map(String.init)
        let names = [
            "Sun": "Sunday", "Mon": "Monday", "Tue": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday", "Fri": "Friday",
            "Sat": "Saturday",
        ]
        let day = parts[1]
        let weekday = String(parts[0].dropLast())
        let rfc850 = "\(names[weekday]!), \(day)-\(parts[2])-\(parts[3].suffix(2)) \(parts[4]) GMT"
        let asctime =
            "\(weekday) \(parts[2]) \(day.hasPrefix("0") ? " " + day.dropFirst() : day) \(parts[4]) \(parts[3])"
        return [imf, rfc850, asctime]
    }

    @Test func theParserAgreesWithThePlainReadingOnASCIIText() {
        var random = SplitMix(seed: 1994)
        let alphabet = Array(" ,:-0123456789JanNovDecGMTgmtSunWedday\tX".utf8)
        var checked = 0
        var dates = 0
        for _ in 0..<3_000 {
            let seconds = Int64(random.next() % UInt64(8_000 * 365 * 86400)) - 2_208_988_800  // 1900 onwards
            for form in Self.forms(seconds) {
                var candidates = [form, form.uppercased(), form.lowercased()]
                for _ in 0..<8 {
                    var bytes = Array(form.utf8)
                    for _ in 0...Int(random.next() % 3) {
                        let position = Int(random.next() % UInt64(bytes.count))
                        switch random.next() % 4 {
                        case 0: bytes[position] = alphabet[Int(random.next() % UInt64(alphabet.count))]
                        case 1: bytes.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: position)
                        case 2: if bytes.count > 1 { bytes.remove(at: position) }
                        default: bytes[position] ^= 0x20
                        }
                    }
                    candidates.append(String(decoding: bytes.map { $0 & 0x7F }, as: UTF8.self))
                }
                for candidate in candidates {
                    let parsed = HTTPDate.parse(candidate)
                    #expect(parsed == Model.parse(candidate), "\(candidate.debugDescription)")
                    checked += 1
                    if parsed != nil { dates += 1 }
                }
            }
        }
        // Both sides of the parser were reached.
        #expect(dates > checked / 10 && dates < checked * 9 / 10, "\(dates) dates of \(checked)")
    }

    @Test func textWithAByteOutsideASCIIIsNoDate() {
        for text in [
            "Sün, 06 Nov 1994 08:49:37 GMT", "Sunday\u{0600}, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{00A0}", "Sun Nov \u{2007}6 08:49:37 1994",
        ] {
            #expect(HTTPDate.parse(text) == nil, "\(text.debugDescription)")
        }
        // The model took the first two: it never looked at the day's name there.
        #expect(Model.parse("Sün, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
    }
}
