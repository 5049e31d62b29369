import Foundation

/// RFC 3339 timestamps in UTC with whole seconds (`2027-06-01T00:00:00Z`), the form plists write dates in,
/// for other modules (signed statements): the calendar arithmetic of `PlistDate`, without Foundation's formatters.
public enum UTCTimestamp {
    /// Parses exactly `YYYY-MM-DDTHH:MM:SSZ` (no fraction, no offset); nil for anything else or an impossible date.
    public static func parse(_ text: String) -> Date? {
        guard text.utf8.count == 20 else { return nil }
        return PlistDate.parse(text)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` for `date`, rounded down to the second.
    public static func format(_ date: Date) -> String {
        PlistDate.format(date)
    }
}
