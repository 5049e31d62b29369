import Foundation

/// The text of a release file's signed note (`hcpack sign-file`): a detached signature over a file that is
/// not a package, such as hcpack's own release tarball, in the note format and with the keys packages use.
/// Exactly these lines, each ending in "\n":
///
///     hcpack file v1
///     name hcpack-0.1.0-linux-x86_64.tar.gz
///     size 1234567
///     sha256 <64 lower-case hex>
///
/// The header keeps it from ever reading as a package statement; `name` binds the note to the file's name,
/// so a signed older release renamed to a newer one's name is refused.
public struct FileStatement: Sendable, Equatable {
    /// The first line of the text.
    public static let header = "hcpack file v1"

    /// The file's name, without its folder.
    public var name: String
    /// The file's size in bytes.
    public var size: Int64
    /// The file's SHA-256, lower-case hex.
    public var sha256: String

    public init(name: String, size: Int64, sha256: String) {
        self.name = name
        self.size = size
        self.sha256 = sha256
    }

    /// Parses a note's text; anything but the four documented lines is malformed.
    public init(text: [UInt8]) throws(NoteFormatError) {
        let lines = try StatementText(text, header: Self.header, kind: "file", counts: [4])
        name = try lines.value(1, "name")
        let sizeText = try lines.value(2, "size")
        guard let size = Int64(sizeText), size >= 0, String(size) == sizeText else {
            throw NoteFormatError(message: "line 3: size '\(sizeText)' is not a decimal byte count")
        }
        self.size = size
        sha256 = try lines.hex(3, "sha256")
    }

    /// The signed text.
    public var text: String {
        "\(Self.header)\nname \(name)\nsize \(size)\nsha256 \(sha256)\n"
    }
}

/// What `FileSignature.check` found: problems (`signature.*` rules) and, when readable, the statement and the
/// trusted keys that signed it.
public struct FileSignatureCheck: Sendable {
    /// The note's path.
    public var notePath: String
    /// The note's statement, when it could be read.
    public var statement: FileStatement?
    /// The trusted keys whose signature verifies.
    public var trustedSigners: [NoteSigner]
    /// Every reason to refuse the file; empty when it is the signed one.
    public var problems: ProblemList
}

/// Detached signatures over release files (`FILE.hcsig`): `sign` writes one, `check` verifies a file against
/// its note and trusted keys, as Go's `note.Open` and a size and SHA-256 comparison would (docs/signing.md).
public enum FileSignature {
    /// The note of `path`: `path.hcsig`.
    public static func notePath(for path: String) -> String { path + ".hcsig" }

    /// Signs `path` with `key`: writes `path.hcsig` atomically. An existing note is kept unless `force`.
    /// - Throws: `.notFound` for a missing file, `.invalidRequest` for a folder, a name a note cannot hold, or
    ///   a note already there (without `force`); environment errors as `HCPackError`.
    public static func sign(_ path: String, with key: SigningKey, force: Bool = false) throws(HCPackError) -> FileStatement {
        let statement = try fingerprint(path)
        let notePath = notePath(for: path)
        if !force, try FileSystem.status(notePath) != nil {
            throw HCPackError(
                .invalidRequest, "\(notePath) already exists; pass --force to replace it with a new signature", path: notePath)
        }
        var note = SignedNote(text: Array(statement.text.utf8))
        note.signatures = [try key.sign(note.text)]
        try PackageSigner.writeNote(note, to: notePath)
        return statement
    }

    /// Checks `path` against `path.hcsig`: a well-formed file note, a valid signature by a key in `trusted`,
    /// and the file's name, size and SHA-256 as signed.
    public static func check(_ path: String, trusted: [VerifierKey]) throws(HCPackError) -> FileSignatureCheck {
        let notePath = notePath(for: path)
        var result = FileSignatureCheck(notePath: notePath, statement: nil, trustedSigners: [], problems: ProblemList())
        let actual = try fingerprint(path)
        guard let status = try FileSystem.status(notePath) else {
            result.problems.add(
                .signatureMissing, path: "", "no signature: \(notePath) does not exist; download it beside \(actual.name)")
            return result
        }
        guard status.kind == .file, status.size <= SignedNote.maxBytes else {
            result.problems.add(
                .signatureMalformed, path: "", "\(notePath): not a regular file of at most \(SignedNote.maxBytes) bytes")
            return result
        }
        let note: SignedNote
        let statement: FileStatement
        do {
            note = try SignedNote.parse(try FileSystem.readFile(notePath, limit: SignedNote.maxBytes))
            statement = try FileStatement(text: note.text)
        } catch let error as NoteFormatError {
            result.problems.add(.signatureMalformed, path: "", "\(notePath): \(error.message); it is not a file's signed note")
            return result
        } catch let error as HCPackError {
            throw error
        } catch {
            throw HCPackError(.io, "\(notePath): \(error)", path: notePath)
        }
        result.statement = statement
        let (signers, problems) = SignatureChecker.trustedSigners(
            of: note, trusted: trusted, notePath: notePath, remedy: "download the file and its note again")
        result.trustedSigners = signers
        result.problems.append(contentsOf: problems)
        if statement.name != actual.name {
            result.problems.add(
                .signatureMismatch, path: "",
                "\(notePath) signs a file named '\(statement.name)', not '\(actual.name)'; a renamed file is not the one signed")
        }
        if statement.size != actual.size || statement.sha256 != actual.sha256 {
            result.problems.add(
                .signatureMismatch, path: "",
                "\(path): \(actual.size) bytes with SHA-256 \(actual.sha256), but the note signs \(statement.size) bytes with SHA-256 \(statement.sha256); the file changed after signing, do not use it"
            )
        }
        return result
    }

    /// The statement `path` would get now.
    static func fingerprint(_ path: String) throws(HCPackError) -> FileStatement {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such file; check the path", path: path)
        }
        guard status.kind == .file else {
            throw HCPackError(.invalidRequest, "\(path) is a \(status.kind.noun), not a file", path: path)
        }
        let name = SigningKey.folderAndName(path).name
        guard !name.isEmpty, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw HCPackError(.invalidRequest, "\(path): a signed note cannot hold a file name with control characters; rename it", path: path)
        }
        let fingerprint = try ArchiveFingerprint.of(path)
        return FileStatement(name: name, size: fingerprint.size, sha256: fingerprint.sha256)
    }
}
