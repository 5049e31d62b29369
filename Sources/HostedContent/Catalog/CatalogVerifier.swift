import Digest
import Foundation
import PropertyList

/// What `verify-catalog` requires of a catalog.
public struct CatalogPolicy: Sendable {
    /// The keys a catalog must be signed by (one is enough).
    public var trustedKeys: [VerifierKey]
    /// The lowest serial accepted: the highest an app has seen (rollback and freeze protection).
    public var minimumSerial: Int64
    /// The note (default: CATALOG.hcsig).
    public var signaturePath: String?
    /// The time expiry is checked against.
    public var now: Date

    public init(trustedKeys: [VerifierKey], minimumSerial: Int64 = 0, signaturePath: String? = nil, now: Date = Date()) {
        self.trustedKeys = trustedKeys
        self.minimumSerial = minimumSerial
        self.signaturePath = signaturePath
        self.now = now
    }
}

/// The verdict on a catalog: every problem found (none: accepted), and what it says.
public struct CatalogVerification: Sendable {
    /// The catalog, once its bytes are the ones a trusted key signed and they parse.
    public var catalog: Catalog?
    /// The trusted keys whose signature verifies.
    public var signers: [NoteSigner]
    /// Why the catalog is refused, each naming a file and what to do; empty when accepted.
    public var problems: [String]

    /// Accepted: well formed, validly signed by a trusted key, matching its note, unexpired, serial high enough.
    public var isValid: Bool { problems.isEmpty }
}

/// Checks catalogs as an app must before trusting one (docs/self-hosting.md).
///
/// The note is checked before the catalog is parsed: its signature by a trusted key, then the catalog's size
/// and SHA-256 against it. Only bytes that a trusted key vouched for reach the JSON reader, so a large or
/// hostile catalog with a wrong note costs one hash, never a parse.
public enum CatalogVerifier {
    /// Verifies the catalog at `path` and its note against `policy`.
    /// - Throws: `HCPackError` only when a file cannot be read (missing, permission, I/O).
    public static func verify(_ path: String, policy: CatalogPolicy) throws(HCPackError) -> CatalogVerification {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such catalog; check the path", path: path)
        }
        let notePath = policy.signaturePath ?? path + ".hcsig"
        let refused = { (problem: String) in CatalogVerification(catalog: nil, signers: [], problems: [problem]) }
        guard let noteStatus = try FileSystem.status(notePath), noteStatus.kind == .file else {
            return refused(
                "\(path) is unsigned: \(notePath) does not exist; sign it (hcpack catalog --sign-key) or fetch the note")
        }
        guard noteStatus.size <= SignedNote.maxBytes else {
            return refused(
                "\(notePath) is larger than \(SignedNote.maxBytes) bytes, so not a catalog's note; make the catalog again")
        }
        guard status.kind == .file, status.size <= Catalog.maxBytes else {
            return refused("\(path) is not a regular file of at most \(Catalog.maxBytes) bytes; fetch the catalog again")
        }
        let note = try FileSystem.readFile(notePath, limit: SignedNote.maxBytes)
        // The note alone decides whether the catalog is read at all.
        var result = verifyNote(note, policy: policy, notePath: notePath)
        guard let statement = result.statement else { return result.verification }
        let bytes = try FileSystem.readFile(path, limit: Catalog.maxBytes)
        (result.verification.catalog, result.verification.problems) = check(
            bytes, against: statement, policy: policy, path: path, notePath: notePath)
        return result.verification
    }

    /// Verifies catalog bytes and their note's bytes against `policy`, for a caller that fetched them (hcpack
    /// fetch, an app): the note is parsed and its signature checked, then the catalog's size (at most
    /// `Catalog.maxBytes`) and SHA-256 are compared with it, and only then is the catalog parsed (`StrictJSON`)
    /// and its serial, expiry and the policy's minimum serial checked. Use the result's `catalog` only when
    /// `isValid` (it is also set for a signed catalog refused as expired or replayed, for messages).
    /// - Parameters:
    ///   - catalogName: how messages name the catalog (a path or a URL).
    ///   - noteName: how messages name the note.
    public static func verify(
        catalog bytes: [UInt8], note: [UInt8], policy: CatalogPolicy, catalogName: String = "the catalog",
        noteName: String = "the catalog's note"
    ) -> CatalogVerification {
        var result = verifyNote(note, policy: policy, notePath: noteName)
        guard let statement = result.statement else { return result.verification }
        (result.verification.catalog, result.verification.problems) = check(
            bytes, against: statement, policy: policy, path: catalogName, notePath: noteName)
        return result.verification
    }

    /// The note's statement when it is well formed and a trusted key's signature verifies; otherwise the
    /// problems (and no statement).
    static func verifyNote(_ bytes: [UInt8], policy: CatalogPolicy, notePath: String)
        -> (statement: CatalogStatement?, verification: CatalogVerification)
    {
        var verification = CatalogVerification(catalog: nil, signers: [], problems: [])
        guard bytes.count <= SignedNote.maxBytes else {
            verification.problems.append(
                "\(notePath) is larger than \(SignedNote.maxBytes) bytes, so not a catalog's note; make the catalog again")
            return (nil, verification)
        }
        let note: SignedNote
        let statement: CatalogStatement
        do throws(NoteFormatError) {
            note = try SignedNote.parse(bytes)
            statement = try CatalogStatement(text: note.text)
        } catch {
            verification.problems.append("\(notePath): \(error.message); make the catalog again")
            return (nil, verification)
        }
        let (signers, problems) = SignatureChecker.trustedSigners(
            of: note, trusted: policy.trustedKeys, notePath: notePath, remedy: "make the catalog again")
        verification.signers = signers
        verification.problems = problems.problems.map(\.message)
        return (verification.problems.isEmpty ? statement : nil, verification)
    }

    /// The problems of catalog `bytes` held to a verified `statement`: size and SHA-256 first, then (only for the
    /// signed bytes) the parse, serial and expiry, and the policy's time and minimum serial.
    static func check(
        _ bytes: [UInt8], against statement: CatalogStatement, policy: CatalogPolicy, path: String, notePath: String
    )
        -> (Catalog?, [String])
    {
        guard bytes.count <= Catalog.maxBytes else {
            return (
                nil,
                ["\(path) is larger than \(Catalog.maxBytes) bytes, so not the catalog signed in \(notePath); fetch both again"]
            )
        }
        let digest = Hasher.digest(.sha256, of: bytes).hexString
        guard digest == statement.catalogSHA256 else {
            return (
                nil,
                [
                    "\(path) (SHA-256 \(digest)) is not the catalog signed in \(notePath) (\(statement.catalogSHA256)); it was changed after signing, fetch both again"
                ]
            )
        }
        let catalog: Catalog
        do {
            catalog = try Catalog.decode(bytes)
        } catch {
            return (nil, ["\(path) is not an hcpack catalog: \(error.message); make it again with hcpack catalog"])
        }
        var problems: [String] = []
        if statement.serial != catalog.serial || statement.expires != catalog.expires {
            problems.append("\(path): its serial or expiry differs from the signed note's; make the catalog again")
        }
        if let expires = statement.expires, expires <= policy.now {
            problems.append(
                "\(path) expired at \(UTCTimestamp.format(expires)); the publisher must publish a fresh catalog (a mirror may be serving an old one)"
            )
        }
        if statement.serial < policy.minimumSerial {
            problems.append(
                "\(path) has serial \(statement.serial), lower than \(policy.minimumSerial) already seen; an old catalog is being replayed, do not use it"
            )
        }
        return (catalog, problems)
    }
}
