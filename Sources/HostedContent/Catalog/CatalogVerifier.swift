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
    /// The catalog, when it parses.
    public var catalog: Catalog?
    /// The trusted keys whose signature verifies.
    public var signers: [NoteSigner]
    /// Why the catalog is refused, each naming a file and what to do; empty when accepted.
    public var problems: [String]

    /// Accepted: well formed, validly signed by a trusted key, matching its note, unexpired, serial high enough.
    public var isValid: Bool { problems.isEmpty }
}

/// Checks catalogs as an app must before trusting one (docs/self-hosting.md).
public enum CatalogVerifier {
    /// Verifies the catalog at `path` and its note against `policy`.
    /// - Throws: `HCPackError` only when the catalog file cannot be read (missing, permission, I/O).
    public static func verify(_ path: String, policy: CatalogPolicy) throws(HCPackError) -> CatalogVerification {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such catalog; check the path", path: path)
        }
        var result = CatalogVerification(catalog: nil, signers: [], problems: [])
        guard status.kind == .file, status.size <= Catalog.maxBytes else {
            result.problems.append("\(path) is not a regular file of at most \(Catalog.maxBytes) bytes; fetch the catalog again")
            return result
        }
        let bytes = try FileSystem.readFile(path, limit: Catalog.maxBytes)
        do {
            result.catalog = try Catalog.decode(bytes)
        } catch {
            result.problems.append("\(path) is not an hcpack catalog: \(error.message); fetch it again or make it with hcpack catalog")
        }
        let notePath = policy.signaturePath ?? path + ".hcsig"
        guard try FileSystem.status(notePath)?.kind == .file else {
            result.problems.append("\(path) is unsigned: \(notePath) does not exist; sign it (hcpack catalog --sign-key) or fetch the note")
            return result
        }
        let statement: CatalogStatement
        let note: SignedNote
        do {
            note = try SignedNote.parse(try FileSystem.readFile(notePath, limit: SignedNote.maxBytes))
            statement = try CatalogStatement(text: note.text)
        } catch let error as NoteFormatError {
            result.problems.append("\(notePath): \(error.message); make the catalog again")
            return result
        } catch let error as HCPackError {
            throw error
        } catch {
            throw HCPackError(.io, "\(notePath): \(error)", path: notePath)
        }
        let (signers, problems) = SignatureChecker.trustedSigners(
            of: note, trusted: policy.trustedKeys, notePath: notePath, remedy: "make the catalog again")
        result.signers = signers
        result.problems += problems.problems.map(\.message)
        guard result.problems.isEmpty, let catalog = result.catalog else { return result }

        let digest = Hasher.digest(.sha256, of: bytes).hexString
        if digest != statement.catalogSHA256 {
            result.problems.append(
                "\(path) (SHA-256 \(digest)) is not the catalog signed in \(notePath) (\(statement.catalogSHA256)); it was changed after signing, fetch both again")
        }
        if statement.serial != catalog.serial || statement.expires != catalog.expires {
            result.problems.append("\(path): its serial or expiry differs from the signed note's; make the catalog again")
        }
        if let expires = statement.expires, expires <= policy.now {
            result.problems.append(
                "\(path) expired at \(UTCTimestamp.format(expires)); the publisher must publish a fresh catalog (a mirror may be serving an old one)")
        }
        if statement.serial < policy.minimumSerial {
            result.problems.append(
                "\(path) has serial \(statement.serial), lower than \(policy.minimumSerial) already seen; an old catalog is being replayed, do not use it")
        }
        return result
    }
}
