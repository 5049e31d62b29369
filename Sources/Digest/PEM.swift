import Foundation

/// One PEM block (RFC 7468): `-----BEGIN LABEL-----`, base64 lines, `-----END LABEL-----`. Lines before the
/// block are kept as `preamble` (OpenSSL skips them when reading, so they can carry notes such as a key's name).
public struct PEMBlock {
    /// The label, such as "PRIVATE KEY".
    public var label: String
    /// The decoded bytes. For a private key the caller wipes them after use.
    public var der: [UInt8]
    /// Lines before the BEGIN line, without their line ends.
    public var preamble: [String]

    public init(label: String, der: [UInt8], preamble: [String] = []) {
        self.label = label
        self.der = der
        self.preamble = preamble
    }

    /// The first block in `text`; nil when there is none or its base64 does not decode. Errors never quote the
    /// text, which may be a secret.
    public static func decode(_ text: [UInt8]) -> PEMBlock? {
        let lines = String(decoding: text, as: UTF8.self).split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
            .map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(where: { $0.hasPrefix("-----BEGIN ") && $0.hasSuffix("-----") }) else { return nil }
        let label = String(lines[begin].dropFirst("-----BEGIN ".count).dropLast(5))
        guard let end = lines[begin...].firstIndex(of: "-----END \(label)-----") else { return nil }
        var body = lines[(begin + 1)..<end].joined()
        defer { body.removeAll() }
        guard let data = Data(base64Encoded: body) else { return nil }
        return PEMBlock(label: label, der: Array(data), preamble: Array(lines[..<begin]))
    }

    /// The preamble lines, then the block with 64-character base64 lines, each line ending in "\n".
    public func encoded() -> [UInt8] {
        var text = preamble.map { $0 + "\n" }.joined()
        text += "-----BEGIN \(label)-----\n"
        let base64 = Array(Data(der).base64EncodedString().utf8)
        var start = 0
        while start < base64.count {
            let end = min(start + 64, base64.count)
            text += String(decoding: base64[start..<end], as: UTF8.self) + "\n"
            start = end
        }
        text += "-----END \(label)-----\n"
        return Array(text.utf8)
    }
}
