import Foundation

/// A property list value, as found in ContentInfo.plist.
public enum PlistValue: Sendable, Equatable {
    /// `<string>`, or an ASCII, UTF-16 or UTF-8 string object.
    case string(String)
    /// `<integer>`, a signed 64-bit value.
    case integer(Int64)
    /// `<real>`, including NaN and the infinities.
    case real(Double)
    /// `<true/>` or `<false/>`.
    case boolean(Bool)
    /// `<date>`, always UTC.
    case date(Date)
    /// `<data>`, base64 in XML.
    case data([UInt8])
    /// `<array>`.
    case array([PlistValue])
    /// `<dict>`, keys in document order.
    case dictionary(PlistDictionary)

    /// The string payload, or nil for any other type.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// A short name of the value's type, for messages ("string", "array", ...).
    public var typeName: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .real: "real"
        case .boolean: "boolean"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }
}

/// A dictionary that keeps its keys in document order, so unknown keys survive a round trip untouched.
public struct PlistDictionary: Sendable, Equatable {
    /// One key and its value.
    public struct Entry: Sendable, Equatable {
        /// The key.
        public var key: String
        /// Its value.
        public var value: PlistValue
        /// Creates an entry.
        public init(key: String, value: PlistValue) {
            self.key = key
            self.value = value
        }
    }

    /// The entries in document order; keys are unique.
    public private(set) var entries: [Entry]
    /// Position of each key in `entries` by its String hash, built once a dictionary is big enough for linear
    /// search to hurt (thousands of integrity records); small dictionaries, by far the most common, stay
    /// without one. Growing it hashes no key again, where a `[String: Int]` rehashed every key at each doubling.
    private var positions: PositionIndex?
    private static let indexThreshold = 16

    /// Creates a dictionary; later duplicates of a key replace earlier ones.
    public init(_ entries: [Entry] = []) {
        self.entries = []
        self.entries.reserveCapacity(entries.count)
        for entry in entries { self[entry.key] = entry.value }
    }

    /// The keys in document order.
    public var keys: [String] { entries.map(\.key) }

    /// Whether lookups hash their key (past `indexThreshold` entries): a caller that looks a key up and then
    /// appends it can pass the same hash to both.
    var hashesKeys: Bool { positions != nil }

    /// The position of `key`; `hash`, when given, is its `PositionIndex.stringHash`.
    func position(of key: String, hash: UInt32? = nil) -> Int? {
        guard let positions else { return entries.firstIndex { $0.key == key } }
        return positions.find(hash ?? PositionIndex.stringHash(key)) { entries[$0].key == key }
    }

    /// Reads a value; setting replaces in place, appends a new key, or removes the key when nil.
    public subscript(key: String) -> PlistValue? {
        get { position(of: key).map { entries[$0].value } }
        set {
            switch (position(of: key), newValue) {
            case (let index?, let value?):
                entries[index].value = value
            case (let index?, nil):
                entries.remove(at: index)
                positions = nil
                if entries.count > Self.indexThreshold { rebuildPositions() }
            case (nil, let value?):
                append(absentKey: key, value)
            case (nil, nil):
                break
            }
        }
    }

    /// Appends `key`, which the caller has just found absent: `self[key] = value` without looking it up again
    /// (the XML reader checks every key for duplicates when its value starts). `hash` as in `position(of:hash:)`.
    mutating func append(absentKey key: String, _ value: PlistValue, hash: UInt32? = nil) {
        positions?.insert(entries.count, hash: hash ?? PositionIndex.stringHash(key)) { _ in false }
        entries.append(Entry(key: key, value: value))
        if positions == nil && entries.count > Self.indexThreshold { rebuildPositions() }
    }

    private mutating func rebuildPositions() {
        var index = PositionIndex(expectedCount: entries.count)
        for (offset, entry) in entries.enumerated() {
            index.insert(offset, hash: PositionIndex.stringHash(entry.key)) { _ in false }
        }
        positions = index
    }

    public static func == (lhs: PlistDictionary, rhs: PlistDictionary) -> Bool { lhs.entries == rhs.entries }
}
