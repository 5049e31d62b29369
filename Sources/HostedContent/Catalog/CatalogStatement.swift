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
        let text = try StatementText(bytes, header: Self.header, kind: "catalog", counts: [3, 4])
        let digest = try text.hex(1, "catalog-sha256")
        let serialText = try text.value(2, "serial")
        guard serialText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let serial = Int64(serialText) else {
            throw NoteFormatError(message: "line 3: serial is not a whole number")
        }
        let expires = try text.expires(3)
        self.init(catalogSHA256: digest, serial: serial, expires: expires)
        guard self.text.utf8.elementsEqual(bytes) else {
            throw NoteFormatError(message: "the text is not in canonical form (docs/self-hosting.md gives it exactly)")
        }
    }
}
