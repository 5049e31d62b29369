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

    /// Creates a dictionary; later duplicates of a key replace earlier ones.
    public init(_ entries: [Entry] = []) {
        // A hash index, not the linear subscript: the readers build dictionaries with up to
        // `PlistLimits.maxObjects` keys, and a linear search per key made that quadratic (a 70 KB binary
        // plist with 5,000 keys took seconds to decode).
        var unique: [Entry] = []
        unique.reserveCapacity(entries.count)
        var indexByKey: [String: Int] = [:]
        indexByKey.reserveCapacity(entries.count)
        for entry in entries {
            if let index = indexByKey[entry.key] {
                unique[index].value = entry.value
            } else {
                indexByKey[entry.key] = unique.count
                unique.append(entry)
            }
        }
        self.entries = unique
    }

    /// The keys in document order.
    public var keys: [String] { entries.map(\.key) }

    /// Reads a value; setting replaces in place, appends a new key, or removes the key when nil.
    public subscript(key: String) -> PlistValue? {
        get { entries.first(where: { $0.key == key })?.value }
        set {
            let index = entries.firstIndex(where: { $0.key == key })
            switch (index, newValue) {
            case (let index?, let value?): entries[index].value = value
            case (let index?, nil): entries.remove(at: index)
            case (nil, let value?): entries.append(Entry(key: key, value: value))
            case (nil, nil): break
            }
        }
    }
}
