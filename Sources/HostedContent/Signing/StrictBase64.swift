/// Base64 as Go's `encoding/base64.StdEncoding` decodes it in signed notes and verifier keys: the standard
/// alphabet, a length that is a multiple of 4, and exactly the padding needed (`AAAA====` and `AA=A` are
/// malformed). Foundation's `Data(base64Encoded:)` accepts extra padding, which Go refuses: a note that one
/// verifier reads and another refuses would be two notes.
enum StrictBase64 {
    /// The bytes of `text`, or nil when it is not strict base64.
    static func decode(_ text: Substring) -> [UInt8]? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 == 0 else { return nil }
        var padding = 0
        if bytes.last == UInt8(ascii: "=") { padding += 1 }
        if bytes.count >= 2 && bytes[bytes.count - 2] == UInt8(ascii: "=") { padding += 1 }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count / 4 * 3)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes.dropLast(padding) {
            guard let value = sextet(byte) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return out
    }

    static func decode(_ text: String) -> [UInt8]? { decode(text[...]) }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
