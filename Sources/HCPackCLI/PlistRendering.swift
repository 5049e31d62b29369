import Foundation
import HostedContent
import PropertyList

/// Plist values as JSON and as readable, indented text (for `inspect`).
enum PlistRendering {
    /// JSON for a plist value: dates as ISO 8601 UTC strings, data as base64 strings, dictionaries in document order.
    static func json(_ value: PlistValue) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .integer(let number): .number(number)
        case .real(let number): .double(number)
        case .boolean(let flag): .bool(flag)
        case .date(let date): .string(isoDate(date))
        case .data(let bytes): .string(Data(bytes).base64EncodedString())
        case .array(let items): .array(items.map(json))
        case .dictionary(let dictionary): json(dictionary)
        }
    }

    static func json(_ dictionary: PlistDictionary) -> JSONValue {
        .object(dictionary.entries.map { ($0.key, json($0.value)) })
    }

    /// "key: value" lines, nested values indented two more spaces; arrays as "- item" lines.
    static func text(_ dictionary: PlistDictionary, indent: String) -> String {
        var text = ""
        for entry in dictionary.entries {
            let key = PackagePath.printable(entry.key)
            if let scalar = scalar(entry.value) {
                text += "\(indent)\(key): \(scalar)\n"
            } else {
                text += "\(indent)\(key):\(emptyMarker(entry.value))\n" + nested(entry.value, indent: indent + "  ")
            }
        }
        return text
    }

    private static func nested(_ value: PlistValue, indent: String) -> String {
        switch value {
        case .dictionary(let dictionary): return text(dictionary, indent: indent)
        case .array(let items):
            var text = ""
            for item in items {
                if let scalar = scalar(item) {
                    text += "\(indent)- \(scalar)\n"
                } else {
                    text += "\(indent)-\(emptyMarker(item))\n" + nested(item, indent: indent + "  ")
                }
            }
            return text
        default: return ""
        }
    }

    private static func emptyMarker(_ value: PlistValue) -> String {
        switch value {
        case .array(let items) where items.isEmpty: " (empty array)"
        case .dictionary(let dictionary) where dictionary.entries.isEmpty: " (empty dictionary)"
        default: ""
        }
    }

    /// One-line text for scalars; nil for arrays and dictionaries.
    private static func scalar(_ value: PlistValue) -> String? {
        switch value {
        case .string(let text): PackagePath.printable(text)
        case .integer(let number): String(number)
        case .real(let number): String(number)
        case .boolean(let flag): flag ? "true" : "false"
        case .date(let date): isoDate(date)
        case .data(let bytes):
            bytes.count <= 32
                ? "<\(bytes.count) bytes: \(bytes.map { String(format: "%02x", $0) }.joined())>" : "<\(bytes.count) bytes>"
        case .array, .dictionary: nil
        }
    }

    static func isoDate(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
