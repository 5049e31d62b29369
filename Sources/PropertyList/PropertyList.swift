import Foundation

/// The two on-disk encodings of a property list.
public enum PlistFormat: String, Sendable {
    case xml
    case binary
}

/// Bounds applied while decoding untrusted property lists.
public struct PlistLimits: Sendable, Equatable {
    /// Largest input accepted, in bytes.
    public var maxBytes: Int
    /// Deepest nesting of arrays and dictionaries.
    public var maxDepth: Int
    /// Most values (of any type) in one document, counting every reference in a binary plist.
    public var maxObjects: Int

    public init(maxBytes: Int = 8 << 20, maxDepth: Int = 64, maxObjects: Int = 1_000_000) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
        self.maxObjects = maxObjects
    }
}

/// Why a property list could not be decoded.
public struct PlistError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Not well-formed XML, or not a plist document.
        case syntax
        /// A DTD subset, entity reference or other construct we refuse.
        case forbidden
        /// A limit in `PlistLimits` was exceeded.
        case limit
        /// A binary plist whose trailer, offsets or references are out of bounds or cyclic.
        case malformed
        /// A dictionary with the same key twice.
        case duplicateKey
        /// Neither XML nor binary plist.
        case unknownFormat
    }

    public var kind: Kind
    public var message: String
    /// 1-based line in an XML document, when known.
    public var line: Int?
    /// 1-based column in an XML document, when known.
    public var column: Int?

    public init(_ kind: Kind, _ message: String, line: Int? = nil, column: Int? = nil) {
        self.kind = kind
        self.message = message
        self.line = line
        self.column = column
    }

    public var description: String {
        if let line, let column { return "line \(line), column \(column): \(message)" }
        if let line { return "line \(line): \(message)" }
        return message
    }
}

/// Decoding and encoding of property lists.
public enum PropertyList {
    /// Decodes an XML or binary property list, detected by content.
    public static func decode(_ bytes: [UInt8], limits: PlistLimits = PlistLimits()) throws(PlistError) -> (value: PlistValue, format: PlistFormat) {
        throw PlistError(.unknownFormat, "not implemented yet")
    }

    /// Encodes a value as an XML property list (UTF-8, Apple's DOCTYPE, tab indentation).
    public static func encodeXML(_ value: PlistValue) -> [UInt8] {
        []
    }
}
