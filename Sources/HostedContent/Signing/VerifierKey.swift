import Digest
import Foundation

/// A public key that checks signed notes: one line `NAME+HEX8+BASE64(0x01 ‖ 32-byte Ed25519 public key)`, the
/// format of Go's `golang.org/x/mod/sumdb/note` (docs/signing.md).
public struct VerifierKey: Sendable, Hashable, CustomStringConvertible {
    /// The algorithm byte of Ed25519 keys.
    public static let ed25519Algorithm: UInt8 = 0x01

    /// The key's name, such as `example.com/levels`.
    public var name: String
    /// The 32-byte Ed25519 public key.
    public var publicKey: [UInt8]
    /// The first 4 bytes of SHA-256(NAME ‖ "\n" ‖ 0x01 ‖ public key), big-endian.
    public var keyHash: UInt32

    /// The key named `name`; throws when the name is not a valid key name or the key is not 32 bytes.
    public init(name: String, publicKey: [UInt8]) throws(HCPackError) {
        guard Self.isValidName(name) else { throw Self.badName(name) }
        guard publicKey.count == Ed25519.publicKeyByteCount else {
            throw HCPackError(.invalidRequest, "an Ed25519 public key is 32 bytes, not \(publicKey.count)")
        }
        self.name = name
        self.publicKey = publicKey
        self.keyHash = Self.keyHash(name: name, publicKey: publicKey)
    }

    /// Parses a verifier key line as Go's `note.NewVerifier` does (the key in strict base64, `StrictBase64`); the
    /// error names `source` (a file, or "--trusted-key") and what is wrong.
    public init(line: String, source: String = "the key") throws(HCPackError) {
        // The key's base64 may hold '+' itself: split at the first two only, as Go does.
        let parts = line.split(separator: "+", maxSplits: 2, omittingEmptySubsequences: false)
        func malformed(_ why: String) -> HCPackError {
            HCPackError(
                .invalidRequest,
                "\(source): not a verifier key (\(why)); expected NAME+HASH+KEY as in the .pub file 'hcpack keygen' writes")
        }
        guard parts.count == 3 else { throw malformed("it needs NAME+HASH+KEY") }
        let name = String(parts[0])
        let hashText = String(parts[1])
        guard Self.isValidName(name) else { throw malformed("'\(name)' is not a key name") }
        guard hashText.utf8.count == 8, hashText.utf8.allSatisfy({ $0 < 0x80 && Character(Unicode.Scalar($0)).isHexDigit }),
            let hash = UInt32(hashText, radix: 16)
        else {
            throw malformed("the hash is not 8 hex digits")
        }
        guard let data = StrictBase64.decode(parts[2]), data.count == 33, data.first == Self.ed25519Algorithm else {
            throw malformed("the key is not base64 of 0x01 and a 32-byte Ed25519 key")
        }
        try self.init(name: name, publicKey: Array(data.dropFirst()))
        guard keyHash == hash else { throw malformed("the hash does not match the name and key") }
    }

    /// `NAME+HEX8+BASE64`.
    public var line: String {
        name + "+" + hashText + "+" + Data([Self.ed25519Algorithm] + publicKey).base64EncodedString()
    }

    /// The key hash as 8 lower-case hex digits.
    public var hashText: String { Self.hashText(keyHash) }

    public var description: String { line }

    /// 8 lower-case hex digits.
    public static func hashText(_ hash: UInt32) -> String {
        let text = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - text.count) + text
    }

    /// The first 4 bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ key), big-endian.
    public static func keyHash(name: String, publicKey: [UInt8]) -> UInt32 {
        let digest = Hasher.digest(.sha256, of: Array(name.utf8) + [0x0a, ed25519Algorithm] + publicKey)
        return digest.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// A key name: not empty, no white space, no '+' (so `example.com/levels` is one).
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && !name.unicodeScalars.contains { $0.properties.isWhitespace || $0 == "+" }
            && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }
    }

    static func badName(_ name: String) -> HCPackError {
        HCPackError(
            .invalidRequest,
            "'\(name)' is not a key name: use a host-like name without spaces or '+', such as example.com/levels")
    }

    /// The verifier keys of `text`: one key line per line; blank lines and lines starting with '#' are skipped.
    public static func list(_ text: String, source: String) throws(HCPackError) -> [VerifierKey] {
        var keys: [VerifierKey] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            keys.append(try VerifierKey(line: line, source: "\(source), line \(number + 1)"))
        }
        guard !keys.isEmpty else {
            throw HCPackError(
                .invalidRequest, "\(source): holds no verifier key; pass a .pub file written by hcpack keygen", path: source)
        }
        return keys
    }

    /// The keys of a `--trusted-key` value. A value that parses as a key line is that key, never a path: a file
    /// named like a key line (which anyone who can write to the working directory may create) cannot replace
    /// it. Anything else is a file (relative to `directory`): a `.pub` file, or one key per line.
    public static func load(_ argument: String, relativeTo directory: String) throws(HCPackError) -> [VerifierKey] {
        // Trailing white space too (a key passed from a secret or a CRLF file; Go's NewVerifier takes "KEY\n"):
        // a value that is a key line once trimmed is never read as a path a planted file could answer to.
        var line = Substring(argument)
        while let last = line.unicodeScalars.last, last.properties.isWhitespace { line = line.dropLast() }
        if let key = try? VerifierKey(line: String(line)) { return [key] }
        let path = argument.hasPrefix("/") ? argument : directory + "/" + argument
        if try FileSystem.status(path) != nil {
            let bytes = try FileSystem.readFile(path, limit: 1 << 20)
            return try list(String(decoding: bytes, as: UTF8.self), source: path)
        }
        guard argument.contains("+") else {
            throw HCPackError(.notFound, "\(path): no such key file; pass a .pub file or a key line NAME+HASH+KEY", path: path)
        }
        return [try VerifierKey(line: argument, source: "--trusted-key '\(argument)'")]
    }
}
