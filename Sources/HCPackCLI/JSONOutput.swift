import Foundation
import HostedContent

/// A JSON value whose object keys keep the order they were written in, so output reads top-down.
public indirect enum JSONValue: Sendable, Equatable {
    case string(String)
    case number(Int64)
    case double(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.rendered() == rhs.rendered() }

    /// Compact or pretty (two-space indented) JSON text.
    public func rendered(pretty: Bool = true, indent: String = "") -> String {
        let inner = indent + "  "
        switch self {
        case .string(let text): return Self.quote(text)
        case .number(let number): return String(number)
        case .double(let number): return number.isFinite ? String(number) : "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        case .array(let items):
            if items.isEmpty { return "[]" }
            if !pretty { return "[" + items.map { $0.rendered(pretty: false) }.joined(separator: ",") + "]" }
            return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let members):
            if members.isEmpty { return "{}" }
            if !pretty {
                return "{" + members.map { Self.quote($0.0) + ":" + $0.1.rendered(pretty: false) }.joined(separator: ",") + "}"
            }
            return "{\n" + members.map { inner + Self.quote($0.0) + ": " + $0.1.rendered(indent: inner) }.joined(separator: ",\n")
                + "\n\(indent)}"
        }
    }

    static func quote(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7f:
                result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

extension JSONValue {
    /// `[{name, keyHash}]`: the signers of a note, as every report writes them (common.schema.json#/$defs/signers).
    static func signers(_ signers: [NoteSigner]) -> JSONValue {
        .array(signers.map { .object([("name", .string($0.name)), ("keyHash", .string($0.keyHash))]) })
    }
}
