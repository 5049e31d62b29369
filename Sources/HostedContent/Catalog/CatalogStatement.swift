import Foundation
import PropertyList

/// What hcpack signs about a catalog: the text of `catalog.json.hcsig` (docs/self-hosting.md), exactly these
/// lines in this order, each ending in "\n":
///
///     hcpack catalog v1
///     catalog-sha256 <64 lower-case hex: SHA-256 of the catalog file>
///     serial 7
///     expires 2027-01-01T00:00:00Z        (optional)
public struct CatalogStatement: Sendable, Equatable {
    /// The first line, naming the format.
    public static let header = "hcpack catalog v1"

    /// SHA-256 of the catalog file's bytes, lower-case hex.
    public var catalogSHA256: String
    /// The catalog's serial.
    public var serial: Int64
    /// The catalog's expiry (whole seconds, UTC); nil never.
    public var expires: Date?

    public init(catalogSHA256: String, serial: Int64, expires: Date?) {
        self.catalogSHA256 = catalogSHA256
        self.serial = serial
        self.expires = expires.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
    }

    /// The note text.
    public var text: String {
        var text = Self.header + "\n"
        text += "catalog-sha256 \(catalogSHA256)\n"
        text += "serial \(serial)\n"
        if let expires { text += "expires \(UTCTimestamp.format(expires))\n" }
        return text
    }

    /// Parses a note text; any other line, order or spelling is malformed.
    public init(text bytes: [UInt8]) throws(NoteFormatError) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasSuffix("\n") else { throw NoteFormatError(message: "the text does not end in a line feed") }
        let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.first == Self.header else {
            throw NoteFormatError(message: "the text does not start with '\(Self.header)'; it is not an hcpack catalog statement")
        }
        guard lines.count == 3 || lines.count == 4 else {
            throw NoteFormatError(message: "the text has \(lines.count) lines; an hcpack catalog statement has 3, or 4 with expires")
        }
        func value(_ index: Int, _ key: String) throws(NoteFormatError) -> String {
            guard lines[index].hasPrefix(key + " ") else {
                throw NoteFormatError(message: "line \(index + 1) of the text is not '\(key) ...'")
            }
            return String(lines[index].dropFirst(key.count + 1))
        }
        let digest = try value(1, "catalog-sha256")
        guard DeltaBase.isHexDigest(digest) else { throw NoteFormatError(message: "line 2: catalog-sha256 is not 64 lower-case hex digits") }
        let serialText = try value(2, "serial")
        guard let serial = Int64(serialText), serial >= 0 else { throw NoteFormatError(message: "line 3: serial is not a whole number") }
        var expires: Date?
        if lines.count == 4 {
            let stamp = try value(3, "expires")
            guard let date = UTCTimestamp.parse(stamp) else {
                throw NoteFormatError(message: "line 4: expires '\(stamp)' is not a UTC time such as 2027-01-01T00:00:00Z")
            }
            expires = date
        }
        self.init(catalogSHA256: digest, serial: serial, expires: expires)
        guard self.text.utf8.elementsEqual(bytes) else {
            throw NoteFormatError(message: "the text is not in canonical form (docs/self-hosting.md gives it exactly)")
        }
    }
}
