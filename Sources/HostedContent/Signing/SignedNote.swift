import Foundation

/// One signature line of a signed note: `— NAME BASE64(4-byte key hash ‖ signature)`.
public struct NoteSignature: Sendable, Equatable {
    /// The signer's key name.
    public var name: String
    /// The signer's key hash.
    public var keyHash: UInt32
    /// The signature after the key hash (64 bytes for Ed25519).
    public var signature: [UInt8]

    public init(name: String, keyHash: UInt32, signature: [UInt8]) {
        self.name = name
        self.keyHash = keyHash
        self.signature = signature
    }

    /// Whether this signature names the key `name` with hash `keyHash`: the names compared byte for byte, as Go
    /// compares them (Swift's `==` would also match another Unicode normalization of the name).
    public func isBy(name: String, keyHash: UInt32) -> Bool {
        self.keyHash == keyHash && self.name.utf8.elementsEqual(name.utf8)
    }

    /// The line, with its "\n".
    public var line: String {
        let hash: [UInt8] = [
            UInt8(keyHash >> 24), UInt8(keyHash >> 16 & 0xff), UInt8(keyHash >> 8 & 0xff), UInt8(keyHash & 0xff),
        ]
        return SignedNote.signaturePrefix + name + " " + Data(hash + signature).base64EncodedString() + "\n"
    }
}

/// Why bytes are not a signed note.
public struct NoteFormatError: Error, Sendable, Equatable {
    public var message: String
}

/// A signed note in the C2SP signed-note format (Go's `golang.org/x/mod/sumdb/note`): the text, which ends in
/// "\n", a blank line, then one signature line per signer.
public struct SignedNote: Sendable, Equatable {
    /// The em dash (U+2014) and a space that start every signature line.
    public static let signaturePrefix = "\u{2014} "
    /// Most signatures read from one note (as Go's reader).
    public static let maxSignatures = 100
    /// Largest note file read.
    public static let maxBytes = 1 << 20

    /// The signed text, ending in "\n".
    public var text: [UInt8]
    public var signatures: [NoteSignature]

    public init(text: [UInt8], signatures: [NoteSignature] = []) {
        self.text = text
        self.signatures = signatures
    }

    /// Parses a note as Go's `note.Open` does: UTF-8 without control characters below 0x20 other than "\n", split at the
    /// last blank line, every line after it a well-formed signature line (strict base64, as `StrictBase64`), at
    /// most 100 of them. Names are kept as written: compare them byte for byte (`NoteSignature.isBy`), as Go does.
    public static func parse(_ bytes: [UInt8]) throws(NoteFormatError) -> SignedNote {
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw NoteFormatError(message: "the note is not valid UTF-8")
        }
        // Below 0x20 only, as Go: DEL (0x7f) is allowed, in the text and in a co-signer's name.
        if string.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\n" }) {
            throw NoteFormatError(message: "the note holds a control character (only line feeds are allowed)")
        }
        var split: Int?
        if bytes.count >= 2 {
            for index in stride(from: bytes.count - 2, through: 0, by: -1) where bytes[index] == 0x0a && bytes[index + 1] == 0x0a
            {
                split = index
                break
            }
        }
        guard let split else { throw NoteFormatError(message: "no blank line before the signatures") }
        let text = Array(bytes[...split])
        let block = bytes[(split + 2)...]
        guard let last = block.last, last == 0x0a else {
            throw NoteFormatError(message: "no signature lines after the blank line, or the last one does not end in a line feed")
        }
        var signatures: [NoteSignature] = []
        for rawLine in block.dropLast().split(separator: 0x0a, omittingEmptySubsequences: false) {
            let line = String(decoding: rawLine, as: UTF8.self)
            guard line.hasPrefix(signaturePrefix) else {
                throw NoteFormatError(message: "a signature line does not start with '\u{2014} ' (em dash, space)")
            }
            let rest = line.dropFirst(signaturePrefix.count)
            guard let space = rest.firstIndex(of: " ") else {
                throw NoteFormatError(message: "a signature line has no space after the key name")
            }
            let name = String(rest[..<space])
            let base64 = String(rest[rest.index(after: space)...])
            // Go's isValidName: not empty, no white space, no '+' (controls below 0x20 were refused above).
            guard !name.isEmpty, !name.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == "+" }) else {
                throw NoteFormatError(message: "a signature line has an invalid key name")
            }
            guard !base64.isEmpty, let data = StrictBase64.decode(base64), data.count >= 5 else {
                throw NoteFormatError(message: "the signature of '\(name)' is not base64 of a key hash and a signature")
            }
            signatures.append(
                NoteSignature(
                    name: name, keyHash: data.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }, signature: Array(data.dropFirst(4))))
            if signatures.count > maxSignatures { throw NoteFormatError(message: "more than \(maxSignatures) signatures") }
        }
        return SignedNote(text: text, signatures: signatures)
    }

    /// The text, a blank line and the signature lines.
    public func encoded() -> [UInt8] {
        text + [0x0a] + signatures.flatMap { Array($0.line.utf8) }
    }
}
