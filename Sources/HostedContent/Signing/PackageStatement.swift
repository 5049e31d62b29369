import Foundation
import PropertyList

/// What hcpack signs about one release: the text of its signed note (docs/signing.md), exactly these lines in
/// this order, each ending in "\n":
///
///     hcpack package v1
///     product com.example.levels
///     version 1.2
///     archive-sha256 <64 lower-case hex>
///     archive-size <bytes, decimal>
///     plist-sha256 <64 lower-case hex of ContentInfo.plist's bytes as stored in the archive>
///     expires 2027-06-01T00:00:00Z        (optional)
public struct PackageStatement: Sendable, Equatable {
    /// The first line, naming the format.
    public static let header = "hcpack package v1"

    /// IAPProductIdentifier.
    public var productIdentifier: String
    /// ContentVersion, as the plist writes it.
    public var version: String
    /// SHA-256 of the whole archive file, lower-case hex.
    public var archiveSHA256: String
    /// Size of the archive file in bytes.
    public var archiveSize: Int64
    /// SHA-256 of ContentInfo.plist's bytes as stored in the archive, lower-case hex.
    public var plistSHA256: String
    /// When the statement stops being accepted (whole seconds, UTC); nil never.
    public var expires: Date?

    public init(
        productIdentifier: String, version: String, archiveSHA256: String, archiveSize: Int64, plistSHA256: String, expires: Date?
    ) {
        self.productIdentifier = productIdentifier
        self.version = version
        self.archiveSHA256 = archiveSHA256
        self.archiveSize = archiveSize
        self.plistSHA256 = plistSHA256
        self.expires = expires.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
    }

    /// The note text.
    public var text: String {
        var text = Self.header + "\n"
        text += "product \(productIdentifier)\n"
        text += "version \(version)\n"
        text += "archive-sha256 \(archiveSHA256)\n"
        text += "archive-size \(archiveSize)\n"
        text += "plist-sha256 \(plistSHA256)\n"
        if let expires { text += "expires \(UTCTimestamp.format(expires))\n" }
        return text
    }

    /// Parses a note text; any other line, order or spelling is malformed (the message says which line).
    public init(text bytes: [UInt8]) throws(NoteFormatError) {
        let text = try StatementText(bytes, header: Self.header, kind: "package", counts: [6, 7])
        let product = try text.value(1, "product")
        guard ContentInfo.isValidProductIdentifier(product) else {
            throw NoteFormatError(message: "line 2: '\(product)' is not a product identifier")
        }
        let version = try text.value(2, "version")
        guard ContentVersion(version) != nil else { throw NoteFormatError(message: "line 3: '\(version)' is not a version") }
        let archiveSHA256 = try text.hex(3, "archive-sha256")
        let sizeText = try text.value(4, "archive-size")
        guard sizeText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), sizeText == "0" || !sizeText.hasPrefix("0"),
            let size = Int64(sizeText)
        else { throw NoteFormatError(message: "line 5: archive-size is not a decimal number of bytes") }
        let plistSHA256 = try text.hex(5, "plist-sha256")
        let expires = try text.expires(6)
        self.init(
            productIdentifier: product, version: version, archiveSHA256: archiveSHA256, archiveSize: size,
            plistSHA256: plistSHA256, expires: expires)
        guard self.text.utf8.elementsEqual(bytes) else {
            throw NoteFormatError(message: "the text is not in canonical form (docs/signing.md gives it exactly)")
        }
    }

    /// `--expires`: an RFC 3339 UTC time (`2027-06-01T00:00:00Z`, or a date `2027-06-01` for its midnight) or a
    /// duration from `now` (`90d`, `12h`, `30m`, `2w`); nil when `text` is neither.
    public static func expiry(_ text: String, now: Date) -> Date? {
        if let date = UTCTimestamp.parse(text) { return date }
        if text.utf8.count == 10, let date = UTCTimestamp.parse(text + "T00:00:00Z") { return date }
        guard let unit = text.last, let count = Int64(text.dropLast()), count > 0, !text.hasPrefix("+") else { return nil }
        let seconds: Int64
        switch unit {
        case "s": seconds = 1
        case "m": seconds = 60
        case "h": seconds = 3600
        case "d": seconds = 86_400
        case "w": seconds = 604_800
        default: return nil
        }
        let (total, overflow) = count.multipliedReportingOverflow(by: seconds)
        guard !overflow, total < 10_000 * 31_622_400 else { return nil }
        return Date(timeIntervalSince1970: (now.timeIntervalSince1970 + Double(total)).rounded(.down))
    }
}

extension PackageStatement {
    /// `YYYY-MM-DDTHH:MM:SSZ`, as the `expires` line writes it.
    public static func format(_ date: Date) -> String { UTCTimestamp.format(date) }
}
