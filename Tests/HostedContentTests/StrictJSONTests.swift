import Foundation
import HostedContent
import TestSupport
import Testing

/// Python's json made as strict as `StrictJSON` documents: strict UTF-8 (no BOM), repeated keys refused
/// (`object_pairs_hook`), integers only, within Int64, `-0` refused, no lone surrogates. For each input (hex, one
/// per line) it prints "ok <canonical JSON>" or "refused".
private let strictPython = #"""
    import json, sys

    def pairs(items):
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate key")
        return dict(items)

    def integer(text):
        if text == "-0":
            raise ValueError("-0")
        value = int(text)
        if not -2**63 <= value < 2**63:
            raise ValueError("range")
        return value

    def refuse(text):
        raise ValueError("not an integer")

    def check_strings(value):
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, list):
            for item in value:
                check_strings(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                check_strings(key)
                check_strings(item)

    for line in sys.stdin:
        data = bytes.fromhex(line.strip())
        try:
            text = data.decode("utf-8")
            value = json.loads(text, object_pairs_hook=pairs, parse_int=integer, parse_float=refuse, parse_constant=refuse)
            check_strings(value)
            print("ok " + json.dumps(value, ensure_ascii=True, separators=(",", ":")))
        except (ValueError, UnicodeError, RecursionError):
            print("refused")
    """#

/// `json.dumps(value, ensure_ascii=True, separators=(",", ":"))`, as Python writes it.
private func pythonDump(_ value: StrictJSON) -> String {
    func string(_ text: String) -> String {
        var out = "\""
        for unit in text.utf16 {
            switch unit {
            case 0x22: out += "\\\""
            case 0x5c: out += "\\\\"
            case 0x0a: out += "\\n"
            case 0x0d: out += "\\r"
            case 0x09: out += "\\t"
            case 0x08: out += "\\b"
            case 0x0c: out += "\\f"
            case 0x20..<0x7f: out += String(UnicodeScalar(UInt8(unit)))
            default:
                let hex = String(unit, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        return out + "\""
    }
    switch value {
    case .null: return "null"
    case .bool(let flag): return flag ? "true" : "false"
    case .integer(let number): return String(number)
    case .string(let text): return string(text)
    case .array(let items): return "[" + items.map(pythonDump).joined(separator: ",") + "]"
    case .object(let members):
        return "{" + members.map { string($0.key) + ":" + pythonDump($0.value) }.joined(separator: ",") + "}"
    }
}

@Suite("StrictJSON: the catalog's one JSON reader")
struct StrictJSONTests {
    /// Inputs where the rules matter; each is judged by Python's json (made strict) and by StrictJSON.
    static let corpus: [[UInt8]] = {
        var texts: [String] = [
            #"{"a":1}"#, #"{"serial":3,"serial":99}"#, #"{"url":"x","url":"y"}"#, #"{"a":{"b":1,"b":2}}"#,
            #"{"a":1,"A":2}"#, "[-0]", "[0]", "[-1]", "[9223372036854775807]", "[9223372036854775808]",
            "[-9223372036854775808]", "[-9223372036854775809]", "[1.0]", "[1e2]", "[1E2]", "[01]", "[-]", "[+1]",
            "[NaN]", "[Infinity]", "[-Infinity]", "[true,false,null]", "[tru]", "[]", "{}", " \t\r\n{ } \n", "{,}",
            "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{a:1}", "['a']", #"["\u00e9\ud83d\ude00"]"#, #"["\ud800"]"#,
            #"["\udc00x"]"#, #"["\ud800\u0041"]"#, #"["\u0000"]"#, "[\"a\tb\"]", #"["\x"]"#, #"["\/\b\f\n\r\t\"\\"]"#,
            "[\"caf\u{e9} \u{1F600}\"]", "{\"caf\u{e9}\":1}", "[1] x", "", " ", "[", "\"abc", "nul", "[\"\u{7f}\"]",
            #"{"format":"hcpack-catalog-1","serial":1,"packages":[]}"#,
        ]
        texts.append(String(repeating: "[", count: 40) + String(repeating: "]", count: 40))
        var inputs = texts.map { Array($0.utf8) }
        inputs.append([0xef, 0xbb, 0xbf] + Array(#"{"a":1}"#.utf8))  // BOM
        inputs.append(Array(#"{"a":1}"#.utf16).flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] })  // UTF-16LE
        inputs.append([0xff, 0xfe] + Array(#"{"a":1}"#.utf16).flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] })
        inputs.append(Array(#"["a"#.utf8) + [0xc3] + Array(#""]"#.utf8))  // invalid UTF-8
        inputs.append(Array(#"["a"#.utf8) + [0xed, 0xa0, 0x80] + Array(#""]"#.utf8))  // an encoded surrogate
        return inputs
    }()

    @Test("StrictJSON accepts and refuses what Python's json (object_pairs_hook, integers only) does, with the same values")
    func agreesWithPython() throws {
        let hex = Self.corpus.map { $0.map { String(format: "%02x", $0) }.joined() }
        let python = run("python3", ["-c", strictPython], input: hex.joined(separator: "\n") + "\n")
        try #require(python.status == 0, "python3: \(python.output)")
        let verdicts = python.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        try #require(verdicts.count == Self.corpus.count, "\(python.output)")
        for (input, verdict) in zip(Self.corpus, verdicts) {
            let ours: String
            do {
                ours = "ok " + pythonDump(try StrictJSON.parse(input))
            } catch {
                ours = "refused"
            }
            #expect(ours == verdict, "input \(String(decoding: input, as: UTF8.self).debugDescription)")
        }
        #expect(verdicts.contains("refused") && verdicts.contains { $0.hasPrefix("ok ") })
    }

    @Test("Repeated keys, a BOM, UTF-16, -0, fractions and numbers past Int64 are refused; Int64's extremes are exact")
    func rules() throws {
        for text in [#"{"serial":3,"serial":99}"#, "[-0]", "[1.5]", "[9223372036854775808]", "\u{feff}{}"] {
            #expect(throws: StrictJSONError.self) { try StrictJSON.parse(Array(text.utf8)) }
        }
        #expect(throws: StrictJSONError.self) {
            try StrictJSON.parse(Array("{}".utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] })
        }
        #expect(
            try StrictJSON.parse(Array("[9223372036854775807,-9223372036854775808]".utf8))
                == .array([.integer(.max), .integer(.min)]))
        let deep = String(repeating: "[", count: StrictJSON.maxDepth + 1) + String(repeating: "]", count: StrictJSON.maxDepth + 1)
        #expect(throws: StrictJSONError.self) { try StrictJSON.parse(Array(deep.utf8)) }
    }

    @Test("Catalog.decode refuses repeated keys (serial, url), a BOM, UTF-16 and -0, which the old reader accepted")
    func catalogRefusals() throws {
        let valid = Catalog(
            serial: 3, expires: nil,
            packages: [
                CatalogPackage(
                    productIdentifier: "com.example.levels", version: "1.0", url: "https://x/l.zip", size: 10,
                    sha256: String(repeating: "a", count: 64), plistSHA256: String(repeating: "b", count: 64), signatureURL: nil,
                    deltas: [])
            ]
        ).encoded()
        let text = String(decoding: valid, as: UTF8.self)
        #expect(try Catalog.decode(valid).serial == 3)
        let broken: [[UInt8]] = [
            Array(text.replacingOccurrences(of: "\"serial\" : 3,", with: "\"serial\" : 3, \"serial\" : 99,").utf8),
            Array(
                text.replacingOccurrences(
                    of: "\"url\" : \"https://x/l.zip\",", with: "\"url\" : \"https://x/l.zip\", \"url\" : \"https://evil/l.zip\","
                ).utf8),
            [0xef, 0xbb, 0xbf] + valid,
            Array(text.utf16).flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] },
            Array(text.replacingOccurrences(of: "\"size\" : 10", with: "\"size\" : -0").utf8),
        ]
        for bytes in broken {
            #expect(bytes != valid)
            #expect(throws: CatalogFormatError.self) { try Catalog.decode(bytes) }
        }
        let maximal = Catalog(serial: .max, expires: nil, packages: []).encoded()
        #expect(try Catalog.decode(maximal).serial == .max)
    }
}
