import Foundation

/// The two on-disk encodings of a property list.
public enum PlistFormat: String, Sendable {
    /// Apple's XML plist (`<?xml ...?><plist version="1.0">`).
    case xml
    /// The `bplist00` binary format.
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

    /// Creates limits; the defaults (64 MiB, 64 levels, four million values) fit the Files list and integrity
    /// records of a package of about 250,000 files.
    public init(maxBytes: Int = 64 << 20, maxDepth: Int = 64, maxObjects: Int = 4_000_000) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
        self.maxObjects = maxObjects
    }
}

/// Why a property list could not be decoded.
public struct PlistError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broad reason, stable for callers to switch on.
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

    /// The broad reason.
    public var kind: Kind
    /// What went wrong, naming the element, key, object or offset involved.
    public var message: String
    /// 1-based line in an XML document, when known.
    public var line: Int?
    /// 1-based column in an XML document, when known.
    public var column: Int?

    /// Creates an error; `line` and `column` are 1-based positions in an XML document.
    public init(_ kind: Kind, _ message: String, line: Int? = nil, column: Int? = nil) {
        self.kind = kind
        self.message = message
        self.line = line
        self.column = column
    }

    /// The message, prefixed with "line L, column C: " when the position is known.
    public var description: String {
        if let line, let column { return "line \(line), column \(column): \(message)" }
        if let line { return "line \(line): \(message)" }
        return message
    }
}

/// Decoding and encoding of property lists.
public enum PropertyList {
    /// The magic bytes that open a binary property list.
    static let binaryMagic: [UInt8] = Array("bplist00".utf8)

    /// Decodes an XML or binary property list, detected by content.
    ///
    /// Binary plists start with `bplist00`; anything else whose first non-blank byte (after an optional UTF-8 BOM)
    /// is `<`, or that starts with a UTF-16 BOM, is parsed as XML with libxml2's SAX2 callbacks (`xmlCtxtReadMemory`,
    /// no tree), refusing DTD internal subsets, entities and network access.
    /// - Parameters:
    ///   - bytes: the whole document; it comes from the network, so every bound in `limits` is enforced.
    ///   - limits: size, nesting and value-count bounds.
    /// - Throws: `PlistError`; XML errors carry the 1-based line (and column when libxml2 knows it).
    public static func decode(_ bytes: [UInt8], limits: PlistLimits = PlistLimits()) throws(PlistError) -> (value: PlistValue, format: PlistFormat) {
        guard bytes.count <= limits.maxBytes else {
            throw PlistError(.limit, "property list is \(bytes.count) bytes, more than the limit of \(limits.maxBytes)")
        }
        if bytes.starts(with: binaryMagic) {
            var reader = BinaryPlistReader(bytes: bytes, limits: limits)
            return (try reader.decode(), .binary)
        }
        guard looksLikeXML(bytes) else {
            throw PlistError(.unknownFormat, "neither a binary property list (bplist00) nor an XML document")
        }
        let reader = XMLPlistReader(limits: limits)
        return (try reader.decode(bytes), .xml)
    }

    /// Checks that `encodeXML`'s output for some value decodes within `limits`, without building the value
    /// again: the same parse as `decode`, minus the tree (tens of MB for a big package's integrity records).
    /// A duplicate key would go unnoticed, but an encoded `PlistValue` has none.
    /// - Throws: the `PlistError` that `decode` would throw.
    public static func checkEncodedXML(_ bytes: [UInt8], limits: PlistLimits = PlistLimits()) throws(PlistError) {
        guard bytes.count <= limits.maxBytes else {
            throw PlistError(.limit, "property list is \(bytes.count) bytes, more than the limit of \(limits.maxBytes)")
        }
        try XMLPlistReader(limits: limits).check(bytes)
    }

    /// Encodes a value as an XML property list (UTF-8, Apple's DOCTYPE, tab indentation).
    ///
    /// The output is deterministic and `decode` gives the value back, except for NaN reals (NaN != NaN),
    /// strings holding characters XML 1.0 cannot carry (U+0000 to U+001F other than tab, LF and CR,
    /// U+FFFE, U+FFFF), dates outside the years 1 to 9999, which are clamped into that range, and the
    /// sub-second part of dates, dropped (rounding down) since Apple's writer writes whole seconds.
    /// - Parameter indented: false leaves out the tabs (a delta's plist, read only by hcpack: 3% smaller deflated).
    public static func encodeXML(_ value: PlistValue, indented: Bool = true) -> [UInt8] {
        var writer = XMLPlistWriter()
        writer.indented = indented
        writer.writeDocument(value)
        return writer.bytes
    }

    /// True when the first meaningful byte is `<` (after a UTF-8 BOM and blanks), or the input has a UTF-16 BOM.
    static func looksLikeXML(_ bytes: [UInt8]) -> Bool {
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) { return true }
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while index < bytes.count, isXMLBlank(bytes[index]) { index += 1 }
        return index < bytes.count && bytes[index] == UInt8(ascii: "<")
    }

    /// XML's four whitespace characters.
    static func isXMLBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
