import Foundation

/// ISO 8601 dates as property lists write them (`2026-01-02T03:04:05Z`, always UTC), without Foundation's
/// formatters: pure integer calendar arithmetic, so results do not depend on locale or time zone data.
enum PlistDate {
    /// Seconds from 1970-01-01 to 2001-01-01, the reference date of `Date` and of binary plists.
    static let unixToReference: Int64 = 978_307_200
    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, as seconds since the reference date.
    static let earliest: Double = Double(secondsSinceEpoch(year: 1, month: 1, day: 1) - unixToReference)
    static let latest: Double = Double(secondsSinceEpoch(year: 9999, month: 12, day: 31) + 86_399 - unixToReference)

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; nil for anything else or an impossible date.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        let separators: [(Int, UInt8)] = [(4, 0x2D), (7, 0x2D), (10, 0x54), (13, 0x3A), (16, 0x3A)]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1 }),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              year >= 1, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 60
        else { return nil }

        var fraction: Substring = ""
        if bytes.count > 20 {
            // ".digits" between the seconds and the Z: other writers' sub-second parts, read exactly.
            let fractionText = bytes[19..<(bytes.count - 1)]
            guard fractionText.count >= 2, fractionText.first == 0x2E,
                  fractionText.dropFirst().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else { return nil }
            fraction = Substring(String(decoding: fractionText.dropFirst(), as: UTF8.self))
            while fraction.last == "0" { fraction = fraction.dropLast() }
        }
        let unix = secondsSinceEpoch(year: Int64(year), month: Int64(month), day: Int64(day))
            + Int64(hour * 3600 + minute * 60 + second)
        let whole = unix - unixToReference
        guard !fraction.isEmpty else { return Date(timeIntervalSinceReferenceDate: Double(whole)) }
        // Rebuild the decimal the text holds and let Double round it once, so the value is read exactly:
        // -2 + 0.7 is written as "-1.3", not added in binary floating point.
        let decimal = whole >= 0 ? "\(whole).\(fraction)" : "-\(-whole - 1).\(complement(fraction))"
        guard let interval = Double(decimal) else { return nil }
        return Date(timeIntervalSinceReferenceDate: interval)
    }

    /// Formats a date in UTC as Apple's writer does: whole seconds (a fraction is dropped, rounding down, as
    /// CFPropertyList does) and `Z`. Python's plistlib reads no other form, and Apple never writes one.
    ///
    /// Dates outside the years 1 to 9999 are clamped into that range.
    static func format(_ date: Date) -> String {
        var interval = date.timeIntervalSinceReferenceDate
        if interval.isNaN { interval = 0 }
        interval = min(max(interval, earliest), latest)
        return civil(Int64(interval.rounded(.down))) + "Z"
    }

    /// The digits of 1 - 0.`digits` (which must not end in 0): 9 - d for each digit, 10 - d for the last.
    static func complement(_ digits: Substring) -> String {
        var result = ""
        for (index, digit) in digits.enumerated() {
            let value = digit.wholeNumberValue ?? 0
            result += String(index == digits.count - 1 ? 10 - value : 9 - value)
        }
        return result
    }

    /// `YYYY-MM-DDTHH:MM:SS` for whole seconds since the reference date.
    private static func civil(_ referenceSeconds: Int64) -> String {
        let unix = referenceSeconds + unixToReference
        let days = unix >= 0 ? unix / 86_400 : (unix - 86_399) / 86_400
        let secondsOfDay = unix - days * 86_400
        let (year, month, day) = civilFromDays(days)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(repeating: "0", count: max(0, 4 - "\(year)".count)) + "\(year)"
        return "\(yearText)-\(two(month))-\(two(day))T\(two(secondsOfDay / 3600)):\(two(secondsOfDay / 60 % 60)):\(two(secondsOfDay % 60))"
    }

    private static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Seconds from 1970-01-01 to the start of a proleptic Gregorian day (Howard Hinnant's days_from_civil).
    static func secondsSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return (era * 146_097 + dayOfEra - 719_468) * 86_400
    }

    /// The inverse of `secondsSinceEpoch`, on days (Howard Hinnant's civil_from_days).
    private static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
