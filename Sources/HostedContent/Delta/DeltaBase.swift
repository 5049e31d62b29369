import Digest
import PropertyList

/// What makes a package a delta: ContentInfo.plist's `HCPackDeltaBase` dictionary (docs/format.md).
///
/// A delta is NEW's plist with this one key added, and a Contents/ holding only the files that are new or
/// changed since the base version; the files it lists but does not carry must already be installed.
public struct DeltaBase: Sendable, Equatable {
    /// The plist key.
    public static let key = "HCPackDeltaBase"
    static let versionKey = "ContentVersion"
    static let plistKey = "PlistSHA256"
    static let targetKey = "TargetPlistSHA256"
    static let unchangedKey = "UnchangedSHA256"
    static let knownKeys = [versionKey, plistKey, targetKey, unchangedKey]

    /// ContentVersion of the base (OLD), as written.
    public var baseVersion: String
    /// SHA-256 of the base package's ContentInfo.plist bytes, lower-case hex.
    public var basePlistSHA256: String
    /// SHA-256 of the full NEW package's ContentInfo.plist bytes (without this key): what an install through
    /// the delta records in its receipt, exactly as a full install of NEW would.
    public var targetPlistSHA256: String
    /// SHA-256 of the records (`unchangedDigest`) of the listed files the delta neither carries nor patches,
    /// when it has no integrity records for them: install takes those from DEST's receipt and checks them
    /// against this. nil: the delta records every listed file (as deltas made before this key existed do).
    public var unchangedSHA256: String?

    /// A delta base record.
    public init(baseVersion: String, basePlistSHA256: String, targetPlistSHA256: String, unchangedSHA256: String? = nil) {
        self.baseVersion = baseVersion
        self.basePlistSHA256 = basePlistSHA256
        self.targetPlistSHA256 = targetPlistSHA256
        self.unchangedSHA256 = unchangedSHA256
    }

    /// The digest `unchangedSHA256` holds: SHA-256 over "PATH\0SIZE\0SHA256\n" for each record, sorted by
    /// the paths' UTF-8 bytes (SIZE in decimal, SHA256 as recorded: lower-case hex).
    public static func unchangedDigest(_ records: [(path: String, record: FileRecord)]) -> String {
        let hasher = Digest.Hasher(.sha256)
        for (path, record) in records.sorted(by: { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }) {
            hasher.update(Array("\(path)\u{0}\(record.size)\u{0}\(record.sha256)\n".utf8))
        }
        return hasher.finalize().hexString
    }

    /// Why `HCPackDeltaBase` is malformed.
    public struct FormatError: Error, Sendable {
        public var message: String
    }

    /// The plist's delta record; nil when the package is not a delta.
    /// - Throws: `FormatError` when the key is there but is not a well-formed record.
    public static func of(_ info: ContentInfo) throws(FormatError) -> DeltaBase? {
        guard let value = info.dictionary[key] else { return nil }
        guard case .dictionary(let fields) = value else {
            throw FormatError(message: "\(key) must be a dictionary, found \(value.typeName)")
        }
        // A key this version does not know may change what the delta means: refused, never ignored.
        if let unknown = fields.keys.first(where: { !knownKeys.contains($0) }) {
            throw FormatError(
                message: "\(key) has the key '\(unknown)', which this hcpack does not know (it knows \(knownKeys.joined(separator: ", ")))")
        }
        guard let version = fields[versionKey]?.stringValue, ContentVersion(version) != nil else {
            throw FormatError(message: "\(key) needs \(versionKey), the base version as a string (1.0)")
        }
        func digest(_ name: String) throws(FormatError) -> String {
            guard let text = fields[name]?.stringValue, isHexDigest(text) else {
                throw FormatError(message: "\(key) needs \(name), 64 lower-case hex digits")
            }
            return text
        }
        return DeltaBase(
            baseVersion: version, basePlistSHA256: try digest(plistKey), targetPlistSHA256: try digest(targetKey),
            unchangedSHA256: fields[unchangedKey] == nil ? nil : try digest(unchangedKey))
    }

    /// The plist value of the key.
    public var plistValue: PlistValue {
        var fields = PlistDictionary([
            .init(key: Self.versionKey, value: .string(baseVersion)),
            .init(key: Self.plistKey, value: .string(basePlistSHA256)),
            .init(key: Self.targetKey, value: .string(targetPlistSHA256)),
        ])
        if let unchangedSHA256 { fields[Self.unchangedKey] = .string(unchangedSHA256) }
        return .dictionary(fields)
    }

    /// True for 64 lower-case hex digits.
    static func isHexDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

extension VerificationReport {
    /// The package's delta record when it is a well-formed delta; nil for a full package (or a malformed
    /// record, which the rules report as `delta.malformed`).
    public var deltaBase: DeltaBase? {
        contentInfo.flatMap { try? DeltaBase.of($0) }
    }
}
