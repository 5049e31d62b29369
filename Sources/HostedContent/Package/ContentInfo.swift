import PropertyList

/// The size and SHA-256 that a built package records for one listed file.
public struct FileRecord: Sendable, Equatable {
    public var size: Int64
    /// Lowercase hexadecimal SHA-256.
    public var sha256: String

    public init(size: Int64, sha256: String) {
        self.size = size
        self.sha256 = sha256
    }
}

/// ContentInfo.plist: what a package is, and which files an installer copies.
///
/// Keys hcpack does not know are kept in `dictionary` and written back untouched.
public struct ContentInfo: Sendable, Equatable {
    public static let fileName = "ContentInfo.plist"
    public static let productIdentifierKey = "IAPProductIdentifier"
    public static let contentVersionKey = "ContentVersion"
    public static let filesKey = "Files"
    /// hcpack's own key: a dictionary from each listed path to `{Size, SHA256}` (docs/format.md).
    public static let integrityKey = "HCPackIntegrity"

    /// The whole plist dictionary, in document order.
    public var dictionary: PlistDictionary

    public init(dictionary: PlistDictionary = PlistDictionary()) {
        self.dictionary = dictionary
    }

    public init(productIdentifier: String, contentVersion: String, files: [String]? = nil) {
        self.dictionary = PlistDictionary()
        self.productIdentifier = productIdentifier
        self.contentVersion = contentVersion
        self.files = files
    }

    public var productIdentifier: String? {
        get { dictionary[Self.productIdentifierKey]?.stringValue }
        set { dictionary[Self.productIdentifierKey] = newValue.map(PlistValue.string) }
    }

    public var contentVersion: String? {
        get { dictionary[Self.contentVersionKey]?.stringValue }
        set { dictionary[Self.contentVersionKey] = newValue.map(PlistValue.string) }
    }

    /// The parsed version, when ContentVersion is present and well formed.
    public var version: ContentVersion? { contentVersion.flatMap(ContentVersion.init) }

    /// The Files list when it is an array of strings; nil when absent or mistyped.
    public var files: [String]? {
        get {
            guard case .array(let values)? = dictionary[Self.filesKey] else { return nil }
            var paths: [String] = []
            paths.reserveCapacity(values.count)
            for value in values {
                guard let path = value.stringValue else { return nil }
                paths.append(path)
            }
            return paths
        }
        set { dictionary[Self.filesKey] = newValue.map { .array($0.map(PlistValue.string)) } }
    }

    /// Recorded sizes and digests by path; nil when the key is absent or malformed.
    public var integrity: [String: FileRecord]? {
        get { try? parseIntegrity() }
        set {
            guard let newValue else {
                dictionary[Self.integrityKey] = nil
                return
            }
            // Written in Files order when possible, so the plist reads naturally; unknown paths last, sorted.
            let order = (files ?? []).filter { newValue[$0] != nil }
            let ordered = Set(order)
            let rest = newValue.keys.filter { !ordered.contains($0) }.sorted()
            var records = PlistDictionary()
            for path in order + rest {
                guard let record = newValue[path] else { continue }
                records[path] = .dictionary(
                    PlistDictionary([.init(key: "Size", value: .integer(record.size)), .init(key: "SHA256", value: .string(record.sha256))]))
            }
            dictionary[Self.integrityKey] = .dictionary(records)
        }
    }

    /// Why HCPackIntegrity is malformed.
    public struct IntegrityFormatError: Error, Sendable {
        public var path: String
        public var message: String
    }

    /// Parses HCPackIntegrity, saying exactly what is wrong with it; nil when the key is absent.
    public func parseIntegrity() throws(IntegrityFormatError) -> [String: FileRecord]? {
        guard let records = try integrityRecords() else { return nil }
        var result: [String: FileRecord] = [:]
        for path in records.paths { result[path] = records[path] }
        return result
    }

    /// HCPackIntegrity with every record checked as `parseIntegrity` does, read in place: a record is made
    /// when looked up, where a dictionary of all of them was 4 MB at 26,000 files.
    public func integrityRecords() throws(IntegrityFormatError) -> IntegrityRecords? {
        guard let value = dictionary[Self.integrityKey] else { return nil }
        guard case .dictionary(let records) = value else {
            throw IntegrityFormatError(path: "", message: "\(Self.integrityKey) must be a dictionary, found \(value.typeName)")
        }
        for entry in records.entries where IntegrityRecords.record(entry.value) == nil {
            throw IntegrityFormatError(
                path: entry.key,
                message: "the record must be a dictionary with Size (a non-negative integer) and SHA256 (64 lowercase hex digits)")
        }
        return IntegrityRecords(records: records)
    }

    /// Well-formed HCPackIntegrity records, by path (Files' spelling, without "Contents/").
    public struct IntegrityRecords: Sendable {
        fileprivate let records: PlistDictionary

        /// The record of `path`; paths match as Strings do, so an NFD key finds an NFC path.
        public subscript(path: String) -> FileRecord? {
            records[path].flatMap(Self.record)
        }

        /// Every recorded path, in the plist's order.
        public var paths: [String] { records.entries.map(\.key) }

        /// How many records there are.
        var count: Int { records.entries.count }

        /// The path of the record at `index` in the plist's order, as `paths[index]`.
        func path(at index: Int) -> String { records.entries[index].key }

        /// The record at `index` in the plist's order: `self[path(at: index)]`, without the lookup.
        func record(at index: Int) -> FileRecord? { Self.record(records.entries[index].value) }

        fileprivate static func record(_ value: PlistValue) -> FileRecord? {
            guard case .dictionary(let fields) = value,
                case .integer(let size)? = fields["Size"], size >= 0,
                let digest = fields["SHA256"]?.stringValue, isDigest(digest)
            else { return nil }
            return FileRecord(size: size, sha256: digest)
        }

        /// 64 lowercase hex digits; over the contiguous bytes, as every record is checked.
        private static func isDigest(_ text: String) -> Bool {
            var text = text
            return text.withUTF8 { digits in
                digits.count == 64 && digits.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            }
        }
    }

    /// Reads ContentInfo.plist bytes (XML or binary).
    public static func decode(_ bytes: [UInt8], limits: PlistLimits = PlistLimits()) throws(PlistError) -> ContentInfo {
        let (value, _) = try PropertyList.decode(bytes, limits: limits)
        guard case .dictionary(let dictionary) = value else {
            throw PlistError(.syntax, "the top-level value must be a dictionary, found \(value.typeName)")
        }
        return ContentInfo(dictionary: dictionary)
    }

    /// The plist as XML bytes.
    public func encodeXML(indented: Bool = true) -> [UInt8] { PropertyList.encodeXML(.dictionary(dictionary), indented: indented) }
}

extension ContentInfo {
    /// True for 1 to 100 letters, digits, '.', '-' or '_' (the rule `plist.product-id-syntax` applies).
    public static func isValidProductIdentifier(_ identifier: String) -> Bool {
        let bytes = identifier.utf8
        guard (1...100).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5a).contains(byte) || (0x61...0x7a).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }
}
