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
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasSuffix("\n") else { throw NoteFormatError(message: "the text does not end in a line feed") }
        let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.first == Self.header else {
            throw NoteFormatError(message: "the text does not start with '\(Self.header)'; it is not an hcpack package statement")
        }
        guard lines.count == 6 || lines.count == 7 else {
            throw NoteFormatError(
                message: "the text has \(lines.count) lines; an hcpack package statement has 6, or 7 with expires")
        }
        func value(_ index: Int, _ key: String) throws(NoteFormatError) -> String {
            let line = lines[index]
            guard line.hasPrefix(key + " "), line.count > key.count + 1 else {
                throw NoteFormatError(message: "line \(index + 1) of the text is not '\(key) ...'")
            }
            return String(line.dropFirst(key.count + 1))
        }
        func hex(_ index: Int, _ key: String) throws(NoteFormatError) -> String {
            let digits = try value(index, key)
            guard digits.utf8.count == 64, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            else {
                throw NoteFormatError(message: "line \(index + 1): \(key) is not 64 lower-case hex digits")
            }
            return digits
        }
        let product = try value(1, "product")
        guard ContentInfo.isValidProductIdentifier(product) else {
            throw NoteFormatError(message: "line 2: '\(product)' is not a product identifier")
        }
        let version = try value(2, "version")
        guard ContentVersion(version) != nil else { throw NoteFormatError(message: "line 3: '\(version)' is not a version") }
        let archiveSHA256 = try hex(3, "archive-sha256")
        let sizeText = try value(4, "archive-size")
        guard sizeText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), sizeText == "0" || !sizeText.hasPrefix("0"),
            let size = Int64(sizeText)
        else { throw NoteFormatError(message: "line 5: archive-size is not a decimal number of bytes") }
        let plistSHA256 = try hex(5, "plist-sha256")
        var expires: Date?
        if lines.count == 7 {
            let stamp = try value(6, "expires")
            guard let date = UTCTimestamp.parse(stamp) else {
                throw NoteFormatError(message: "line 7: expires '\(stamp)' is not a UTC time such as 2027-06-01T00:00:00Z")
            }
            expires = date
        }
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
