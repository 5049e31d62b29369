/// Why bytes are not strict JSON: the message and the byte offset where reading stopped.
public struct StrictJSONError: Error, Sendable, Equatable {
    /// What is wrong, as a sentence without a trailing period.
    public var message: String
    /// Offset of the offending byte in the input.
    public var offset: Int
}

/// A JSON value read by `StrictJSON`: numbers are integers only, objects keep their members in order.
public indirect enum StrictJSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// An integer from -2^63 to 2^63-1, read exactly (never through a double).
    case integer(Int64)
    case string(String)
    case array([StrictJSON])
    /// Members in document order; no two keys are equal.
    case object([Member])

    /// One member of an object.
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: StrictJSON

        public init(key: String, value: StrictJSON) {
            self.key = key
            self.value = value
        }
    }

    /// Deepest nesting of arrays and objects read.
    public static let maxDepth = 64

    /// Parses `bytes` as one JSON document (RFC 8259), more strictly than most readers, so signed bytes have
    /// exactly one meaning whichever parser an app uses: UTF-8 only, no byte order mark; a key repeated in one
    /// object (compared as Swift compares strings, so also two spellings of one canonical string) is refused;
    /// numbers must be integers within Int64, without fraction or exponent, and `-0` is refused; `\u`
    /// escapes must not leave a lone surrogate; at most `maxDepth` levels of nesting.
    /// - Throws: `StrictJSONError` naming the offset and what is wrong.
    public static func parse(_ bytes: [UInt8]) throws(StrictJSONError) -> StrictJSON {
        if bytes.starts(with: [0xef, 0xbb, 0xbf]) {
            throw StrictJSONError(message: "it starts with a byte order mark; write UTF-8 without one", offset: 0)
        }
        if bytes.starts(with: [0xfe, 0xff]) || bytes.starts(with: [0xff, 0xfe]) || bytes.prefix(4).contains(0) {
            throw StrictJSONError(message: "it is UTF-16 or UTF-32, not UTF-8", offset: 0)
        }
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw StrictJSONError(message: "it is not valid UTF-8", offset: 0)
        }
        var reader = Reader(bytes: bytes)
        reader.skipSpace()
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.index == bytes.count else { throw reader.error("extra data after the JSON value") }
        return value
    }

    /// The members of an object; nil for any other value.
    public var members: [Member]? {
        if case .object(let members) = self { return members }
        return nil
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        func error(_ message: String) -> StrictJSONError { StrictJSONError(message: message, offset: index) }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { index += 1 }
        }

        mutating func literal(_ word: String, _ value: StrictJSON) throws(StrictJSONError) -> StrictJSON {
            let expected = Array(word.utf8)
            guard bytes[index...].starts(with: expected) else { throw error("not a JSON value") }
            index += expected.count
            return value
        }

        mutating func value(depth: Int) throws(StrictJSONError) -> StrictJSON {
            guard index < bytes.count else { throw error("the document ends where a value is expected") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .integer(try integer())
            default: throw error("not a JSON value")
            }
        }

        mutating func object(depth: Int) throws(StrictJSONError) -> StrictJSON {
            guard depth <= StrictJSON.maxDepth else { throw error("nested deeper than \(StrictJSON.maxDepth) levels") }
            index += 1
            var members: [Member] = []
            var keys: Set<String> = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw error("an object key must be a string")
                }
                let keyOffset = index
                let key = try string()
                guard keys.insert(key).inserted else {
                    throw StrictJSONError(message: "the key \"\(key)\" appears twice in one object", offset: keyOffset)
                }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after a key") }
                index += 1
                skipSpace()
                members.append(Member(key: key, value: try value(depth: depth)))
                skipSpace()
                guard index < bytes.count else { throw error("the document ends inside an object") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { throw error("expected ',' or '}' in an object") }
                index += 1
                return .object(members)
            }
        }

        mutating func array(depth: Int) throws(StrictJSONError) -> StrictJSON {
            guard depth <= StrictJSON.maxDepth else { throw error("nested deeper than \(StrictJSON.maxDepth) levels") }
            index += 1
            var values: [StrictJSON] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(values)
            }
            while true {
                skipSpace()
                values.append(try value(depth: depth))
                skipSpace()
                guard index < bytes.count else { throw error("the document ends inside an array") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { throw error("expected ',' or ']' in an array") }
                index += 1
                return .array(values)
            }
        }

        /// `-?(0|[1-9][0-9]*)`, exactly within Int64; a fraction, an exponent and `-0` are refused.
        mutating func integer() throws(StrictJSONError) -> Int64 {
            let start = index
            let negative = bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            let digitsStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            let digits = bytes[digitsStart..<index]
            guard !digits.isEmpty else { throw StrictJSONError(message: "a '-' without digits", offset: start) }
            if digits.count > 1 && digits.first == UInt8(ascii: "0") {
                throw StrictJSONError(message: "a number with a leading zero", offset: start)
            }
            if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) {
                throw StrictJSONError(
                    message: "a number with a fraction or exponent; only whole numbers are allowed", offset: start)
            }
            if negative && digits.elementsEqual([UInt8(ascii: "0")]) {
                throw StrictJSONError(message: "-0 is not allowed; write 0", offset: start)
            }
            guard let value = Int64(String(decoding: bytes[start..<index], as: UTF8.self)) else {
                throw StrictJSONError(message: "a number outside -2^63...2^63-1", offset: start)
            }
            return value
        }

        mutating func string() throws(StrictJSONError) -> String {
            index += 1
            var out: [UInt8] = []
            while true {
                guard index < bytes.count else { throw error("the document ends inside a string") }
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return String(decoding: out, as: UTF8.self)  // UTF-8 checked for the whole input already
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw error("the document ends inside a string") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0c)
                    case UInt8(ascii: "n"): out.append(0x0a)
                    case UInt8(ascii: "r"): out.append(0x0d)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xd800..<0xdc00).contains(scalar) {
                            guard bytes[index...].starts(with: [UInt8(ascii: "\\"), UInt8(ascii: "u")]) else {
                                throw error("a lone UTF-16 surrogate escape")
                            }
                            index += 2
                            let low = try hex4()
                            guard (0xdc00..<0xe000).contains(low) else { throw error("a lone UTF-16 surrogate escape") }
                            scalar = 0x10000 + ((scalar - 0xd800) << 10) + (low - 0xdc00)
                        } else if (0xdc00..<0xe000).contains(scalar) {
                            throw error("a lone UTF-16 surrogate escape")
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw error("an invalid \\u escape") }
                        out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default:
                        throw StrictJSONError(message: "an invalid escape in a string", offset: index - 2)
                    }
                case 0x00..<0x20:
                    throw error("a control character in a string; escape it")
                default:
                    out.append(byte)
                    index += 1
                }
            }
        }

        mutating func hex4() throws(StrictJSONError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("an incomplete \\u escape") }
            var value: UInt32 = 0
            for byte in bytes[index..<(index + 4)] {
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw error("an invalid \\u escape")
                }
                value = value << 4 | UInt32(digit)
            }
            index += 4
            return value
        }
    }
}
