import Foundation

/// A parsed JSON value that keeps booleans, integers and other numbers apart (schemas tell them apart).
public indirect enum JSONDocument: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONDocument])
    case object([String: JSONDocument])

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int64.self) {
            self = .integer(number)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let items = try? container.decode([JSONDocument].self) {
            self = .array(items)
        } else {
            self = .object(try container.decode([String: JSONDocument].self))
        }
    }

    /// Parses `text`, which must hold exactly one JSON value (trailing text is an error).
    public static func parse(_ text: String) throws -> JSONDocument {
        try JSONDecoder().decode(JSONDocument.self, from: Data(text.utf8))
    }

    /// A member of an object, nil otherwise.
    public subscript(key: String) -> JSONDocument? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer: "integer"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// Checks JSON against the JSON Schema (draft 2020-12) files of a folder, for the keywords hcpack's schemas use:
/// `type` (a name or a list, "null" included), `enum`, `properties`, `required`, `additionalProperties`, `items`,
/// `oneOf`, `anyOf` and `$ref` (to `#/$defs/NAME` or `FILE#/$defs/NAME` in the same folder). A schema using any
/// other validation keyword is reported as an error rather than half-checked.
public final class JSONSchemaValidator {
    let folder: String
    private var files: [String: JSONDocument] = [:]
    static let annotations: Set<String> = ["$schema", "$id", "title", "description", "$defs"]
    static let keywords: Set<String> = [
        "$ref", "type", "enum", "properties", "required", "additionalProperties", "items", "oneOf", "anyOf",
    ]

    public init(folder: String) { self.folder = folder }

    /// Every way `instance` breaks the schema in `file`, each with the JSON path; empty when it conforms.
    public func validate(_ instance: JSONDocument, against file: String) throws -> [String] {
        var errors: [String] = []
        try check(instance, try load(file), file: file, at: "$", errors: &errors)
        return errors
    }

    func load(_ file: String) throws -> JSONDocument {
        if let cached = files[file] { return cached }
        let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
        let document = try JSONDocument.parse(text)
        files[file] = document
        return document
    }

    /// The schema `reference` names, and the file it lives in.
    func resolve(_ reference: String, from file: String) throws -> (JSONDocument, String) {
        let parts = reference.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let target = parts[0].isEmpty ? file : parts[0]
        var node = try load(target)
        let pointer = parts.count > 1 ? parts[1] : ""
        for token in pointer.split(separator: "/") {
            guard let next = node[String(token)] else { throw SchemaError("\(file): \(reference) does not resolve") }
            node = next
        }
        return (node, target)
    }

    func check(_ value: JSONDocument, _ schema: JSONDocument, file: String, at path: String, errors: inout [String]) throws {
        guard case .object(let keywords) = schema else {
            if schema == .bool(false) { errors.append("\(path): no value is allowed here") }
            return
        }
        for key in keywords.keys where !Self.keywords.contains(key) && !Self.annotations.contains(key) {
            throw SchemaError("\(file): keyword \(key) is not supported by this validator")
        }
        if case .string(let reference)? = keywords["$ref"] {
            let (target, targetFile) = try resolve(reference, from: file)
            try check(value, target, file: targetFile, at: path, errors: &errors)
        }
        if let type = keywords["type"] {
            let allowed: [String]
            switch type {
            case .string(let name): allowed = [name]
            case .array(let names): allowed = names.compactMap { if case .string(let name) = $0 { name } else { nil } }
            default: throw SchemaError("\(file): type must be a name or a list of names")
            }
            let actual = value.typeName
            if !allowed.contains(actual) && !(actual == "integer" && allowed.contains("number")) {
                errors.append("\(path): \(actual), expected \(allowed.joined(separator: " or "))")
                return
            }
        }
        if case .array(let choices)? = keywords["enum"], !choices.contains(value) {
            errors.append("\(path): \(value) is not one of \(choices)")
        }
        if case .object(let members) = value {
            let properties: [String: JSONDocument]
            if case .object(let declared)? = keywords["properties"] { properties = declared } else { properties = [:] }
            if case .array(let required)? = keywords["required"] {
                for case .string(let name) in required where members[name] == nil {
                    errors.append("\(path): missing \(name)")
                }
            }
            for (name, member) in members.sorted(by: { $0.key < $1.key }) {
                if let property = properties[name] {
                    try check(member, property, file: file, at: path + "." + name, errors: &errors)
                } else if let additional = keywords["additionalProperties"] {
                    if additional == .bool(false) {
                        errors.append("\(path): \(name) is not allowed")
                    } else {
                        try check(member, additional, file: file, at: path + "." + name, errors: &errors)
                    }
                }
            }
        }
        if case .array(let items) = value, let itemSchema = keywords["items"] {
            for (index, item) in items.enumerated() {
                try check(item, itemSchema, file: file, at: "\(path)[\(index)]", errors: &errors)
            }
        }
        for keyword in ["oneOf", "anyOf"] {
            guard case .array(let branches)? = keywords[keyword] else { continue }
            var matched = 0
            var reasons: [String] = []
            for branch in branches {
                var branchErrors: [String] = []
                try check(value, branch, file: file, at: path, errors: &branchErrors)
                if branchErrors.isEmpty { matched += 1 } else { reasons.append(branchErrors.joined(separator: "; ")) }
            }
            if matched == 0 {
                errors.append("\(path): matches none of \(keyword): " + reasons.map { "(\($0))" }.joined(separator: " "))
            } else if keyword == "oneOf" && matched > 1 {
                errors.append("\(path): matches \(matched) branches of oneOf, expected exactly one")
            }
        }
    }
}

/// A schema the validator cannot apply (a bad reference, an unsupported keyword).
public struct SchemaError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
