internal import CCrypto

/// The hash algorithms hcpack uses: SHA-256 for integrity, MD5 where Apple's upload format asks for it.
public enum DigestAlgorithm: Sendable {
    case sha256
    case md5

    /// Length of the digest in bytes.
    public var byteCount: Int {
        switch self {
        case .sha256: 32
        case .md5: 16
        }
    }
}

/// An incremental hash over libcrypto's EVP interface (`EVP_DigestInit_ex`, `EVP_DigestUpdate`, `EVP_DigestFinal_ex`).
///
/// Not `Sendable`: one hasher belongs to one task at a time.
public final class Hasher {
    private let context: OpaquePointer
    private let algorithm: DigestAlgorithm
    private var finished = false

    /// Creates a hasher; libcrypto uses the CPU's SHA instructions when present.
    public init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        // EVP_MD_CTX_new only fails when memory is exhausted; there is no sensible recovery from that here.
        guard let context = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new: out of memory") }
        self.context = context
        let method = algorithm == .sha256 ? EVP_sha256() : EVP_md5()
        EVP_DigestInit_ex(context, method, nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds bytes to the hash.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        precondition(!finished, "Hasher.update after finalize")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// Adds bytes to the hash.
    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the digest; the hasher cannot be used afterwards.
    public func finalize() -> [UInt8] {
        precondition(!finished, "Hasher.finalize called twice")
        finished = true
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        output.withUnsafeMutableBufferPointer { buffer in
            _ = EVP_DigestFinal_ex(context, buffer.baseAddress, &length)
        }
        return Array(output.prefix(Int(length)))
    }

    /// The digest of `bytes` in one call.
    public static func digest(_ algorithm: DigestAlgorithm, of bytes: [UInt8]) -> [UInt8] {
        let hasher = Hasher(algorithm)
        hasher.update(bytes)
        return hasher.finalize()
    }
}

/// The digits of `hexString` and `matchesHex`, made once rather than per digest.
private let lowercaseHexDigits = Array("0123456789abcdef".utf8)

extension Sequence where Element == UInt8 {
    /// Lowercase hexadecimal, two characters a byte.
    public var hexString: String {
        // Written straight into the String's storage: one digest per file, and a generic byte-by-byte
        // iteration showed up in install's profile (filesToInstall, 3,300 digests).
        if let text = withContiguousStorageIfAvailable({ bytes in
            String(unsafeUninitializedCapacity: bytes.count * 2) { digits in
                for (index, byte) in bytes.enumerated() {
                    digits[2 * index] = lowercaseHexDigits[Int(byte >> 4)]
                    digits[2 * index + 1] = lowercaseHexDigits[Int(byte & 0x0f)]
                }
                return bytes.count * 2
            }
        }) {
            return text
        }
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            text.append(lowercaseHexDigits[Int(byte >> 4)])
            text.append(lowercaseHexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension Collection where Element == UInt8 {
    /// Whether `text` is these bytes in lowercase hexadecimal (what `hexString` gives), without building
    /// a String: verify compares one digest per file.
    public func matchesHex(_ text: String) -> Bool {
        // Over both sides' contiguous bytes: iterating this generic collection and `utf8` index by index was
        // 2 µs a digest, a tenth of verify's rule time at 20,000 files.
        var text = text
        if let matches = withContiguousStorageIfAvailable({ bytes in text.withUTF8 { Self.matchesHex(bytes, $0) } }) {
            return matches
        }
        let bytes = Array(self)
        return bytes.withUnsafeBufferPointer { bytes in text.withUTF8 { Self.matchesHex(bytes, $0) } }
    }

    private static func matchesHex(_ bytes: UnsafeBufferPointer<UInt8>, _ digits: UnsafeBufferPointer<UInt8>) -> Bool {
        guard digits.count == bytes.count * 2 else { return false }
        for (index, byte) in bytes.enumerated()
        where digits[2 * index] != lowercaseHexDigits[Int(byte >> 4)] || digits[2 * index + 1] != lowercaseHexDigits[Int(byte & 0x0f)] {
            return false
        }
        return true
    }
}

/// Parses lowercase or uppercase hexadecimal into bytes; nil when malformed.
public func bytes(fromHex text: String) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        case 0x41...0x46: c - 0x41 + 10
        default: nil
        }
    }
    var result: [UInt8] = []
    result.reserveCapacity(utf8.count / 2)
    var index = 0
    while index < utf8.count {
        guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
        result.append(high << 4 | low)
        index += 2
    }
    return result
}
