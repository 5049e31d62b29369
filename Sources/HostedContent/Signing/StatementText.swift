import Foundation
import PropertyList

/// The lines of a signed statement's text (a package's or a catalog's): a header line, then `key value`
/// lines in a fixed order, each ending in "\n". Parsing helpers shared by both statements.
struct StatementText {
    let lines: [String]

    /// Splits `bytes` into lines, requiring the final "\n", the `header` first and one of `counts` lines.
    init(_ bytes: [UInt8], header: String, kind: String, counts: [Int]) throws(NoteFormatError) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasSuffix("\n") else { throw NoteFormatError(message: "the text does not end in a line feed") }
        lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.first == header else {
            throw NoteFormatError(message: "the text does not start with '\(header)'; it is not an hcpack \(kind) statement")
        }
        guard counts.contains(lines.count) else {
            let allowed = counts.map(String.init).joined(separator: ", or ")
            throw NoteFormatError(message: "the text has \(lines.count) lines; an hcpack \(kind) statement has \(allowed) (with expires)")
        }
    }

    /// The value of line `index`, which must read `key value`.
    func value(_ index: Int, _ key: String) throws(NoteFormatError) -> String {
        let line = lines[index]
        guard line.hasPrefix(key + " "), line.count > key.count + 1 else {
            throw NoteFormatError(message: "line \(index + 1) of the text is not '\(key) ...'")
        }
        return String(line.dropFirst(key.count + 1))
    }

    /// A value of 64 lower-case hex digits.
    func hex(_ index: Int, _ key: String) throws(NoteFormatError) -> String {
        let digits = try value(index, key)
        guard DeltaBase.isHexDigest(digits) else {
            throw NoteFormatError(message: "line \(index + 1): \(key) is not 64 lower-case hex digits")
        }
        return digits
    }

    /// The optional `expires` line at `index`: nil when the text has no line there.
    func expires(_ index: Int) throws(NoteFormatError) -> Date? {
        guard index < lines.count else { return nil }
        let stamp = try value(index, "expires")
        guard let date = UTCTimestamp.parse(stamp) else {
            throw NoteFormatError(message: "line \(index + 1): expires '\(stamp)' is not a UTC time such as 2027-06-01T00:00:00Z")
        }
        return date
    }
}
