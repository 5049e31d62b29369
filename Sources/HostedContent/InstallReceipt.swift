import Foundation

/// One installed file: its path relative to DEST, size and SHA-256.
public struct InstalledFile: Sendable, Equatable, Codable {
    /// Path relative to DEST (the same as relative to the package's Contents/).
    public var path: String
    /// Size in bytes.
    public var size: Int64
    /// Lowercase hexadecimal SHA-256.
    public var sha256: String

    /// A record of one file.
    public init(path: String, size: Int64, sha256: String) {
        self.path = path
        self.size = size
        self.sha256 = sha256
    }

    /// The size and digest alone.
    public var record: FileRecord { FileRecord(size: size, sha256: sha256) }
}

/// What DEST holds for one product: `DEST/.hcpack/receipts/<product-id>.json` (docs/install.md).
///
/// Deterministic (no timestamps, sorted keys and files), so installing the same package twice gives the same bytes.
public struct InstallReceipt: Sendable, Equatable, Codable {
    /// The receipt format; bumped if fields ever change meaning.
    public static let currentFormat = 1

    /// `currentFormat` when written by this hcpack.
    public var format: Int
    /// The product the files belong to.
    public var productIdentifier: String
    /// The installed ContentVersion, as written in the package.
    public var version: String
    /// Installed files, sorted by path.
    public var files: [InstalledFile]

    /// A receipt in the current format; `files` are sorted by path.
    public init(productIdentifier: String, version: String, files: [InstalledFile]) {
        self.format = Self.currentFormat
        self.productIdentifier = productIdentifier
        self.version = version
        self.files = files.sorted { $0.path < $1.path }
    }

    /// Files by path.
    public var recordsByPath: [String: FileRecord] {
        Dictionary(files.map { ($0.path, $0.record) }, uniquingKeysWith: { first, _ in first })
    }

    /// Pretty, key-sorted JSON followed by a newline.
    public func encoded() -> [UInt8] { JSONCoding.encode(self) }

    /// Parses a receipt; nil when the bytes are not one (a damaged receipt is treated as absent).
    public static func decode(_ bytes: [UInt8]) -> InstallReceipt? {
        guard let receipt = try? JSONDecoder().decode(InstallReceipt.self, from: Data(bytes)),
            receipt.format == currentFormat
        else { return nil }
        return receipt
    }
}

/// The intent of an install in progress: `DEST/.hcpack/journal-<product-id>.json`, written and fsync'd before
/// the first rename into DEST and removed once the receipt is written.
///
/// After a crash, a file at a journal path whose size and digest match the journal was put there by hcpack,
/// so the next install may replace or remove it instead of refusing it as a user file.
public struct InstallJournal: Sendable, Equatable, Codable {
    /// The receipt format number.
    public var format: Int
    /// The product being installed.
    public var productIdentifier: String
    /// The version being installed.
    public var version: String
    /// Files that may be at their final paths after a crash (about to be placed, or placed by an earlier
    /// interrupted install), sorted by path.
    public var files: [InstalledFile]

    /// A journal in the current format; `files` are sorted by path.
    public init(productIdentifier: String, version: String, files: [InstalledFile]) {
        self.format = InstallReceipt.currentFormat
        self.productIdentifier = productIdentifier
        self.version = version
        self.files = files.sorted { $0.path < $1.path }
    }

    /// Pretty, key-sorted JSON followed by a newline.
    public func encoded() -> [UInt8] { JSONCoding.encode(self) }

    /// Parses a journal; nil when the bytes are not one.
    public static func decode(_ bytes: [UInt8]) -> InstallJournal? {
        guard let journal = try? JSONDecoder().decode(InstallJournal.self, from: Data(bytes)),
            journal.format == InstallReceipt.currentFormat
        else { return nil }
        return journal
    }
}

enum JSONCoding {
    static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding plain strings and integers cannot fail; an empty object is the harmless fallback.
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Array(data) + [0x0a]
    }
}
