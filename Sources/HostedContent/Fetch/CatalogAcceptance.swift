import Digest
import Foundation
import PropertyList

/// A catalog fetch trusts: its entries, who signed it, and its SHA-256.
public struct AcceptedCatalog: Sendable {
    public var catalog: Catalog
    /// The trusted keys whose signature on the note verifies (at least one).
    public var signers: [NoteSigner]
    /// The catalog bytes' SHA-256, as the note names it.
    public var sha256: String
}

/// Trust before parsing: the one place `fetch` decides whether catalog bytes may be read at all.
///
/// The note is parsed and its signature checked first, then the catalog's size and SHA-256 against the note,
/// and only then is the JSON parsed; serial and expiry as `verify-catalog` (the stored-serial rollback check is
/// the caller's: it depends on DIR). When the strict catalog reader with its own "note + SHA-256 before parse"
/// entry point lands (issue 25), this function becomes a call to it.
enum CatalogAcceptance {
    /// - Parameters:
    ///   - source, noteSource: where the bytes came from, for messages.
    /// - Throws: `.invalidPackage` naming what is wrong and what to do.
    static func accept(
        catalog bytes: [UInt8], note noteBytes: [UInt8], source: String, noteSource: String, trustedKeys: [VerifierKey], now: Date
    ) throws(HCPackError) -> AcceptedCatalog {
        func refuse(_ message: String) -> HCPackError { HCPackError(.invalidPackage, message, path: source) }
        let note: SignedNote
        let statement: CatalogStatement
        do {
            note = try SignedNote.parse(noteBytes)
            statement = try CatalogStatement(text: note.text)
        } catch {
            throw refuse("\(noteSource) is not a catalog note: \(error.message); the publisher must sign the catalog again (hcpack catalog --sign-key)")
        }
        let (signers, problems) = SignatureChecker.trustedSigners(
            of: note, trusted: trustedKeys, notePath: noteSource, remedy: "the publisher must sign the catalog again")
        if let problem = problems.problems.first { throw refuse(problem.message) }
        guard bytes.count <= Catalog.maxBytes else {
            throw refuse("\(source) is larger than \(Catalog.maxBytes) bytes; it is not the catalog the note signs")
        }
        let digest = Hasher.digest(.sha256, of: bytes).hexString
        guard digest == statement.catalogSHA256 else {
            throw refuse(
                "\(source) (SHA-256 \(digest)) is not the catalog signed in \(noteSource) (\(statement.catalogSHA256)): a cache or mirror serves a catalog and a note that do not match; try again later"
            )
        }
        let catalog: Catalog
        do {
            catalog = try Catalog.decode(bytes)
        } catch {
            throw refuse("\(source) is not an hcpack catalog: \(error.message); the publisher must make it again with hcpack catalog")
        }
        guard statement.serial == catalog.serial, statement.expires == catalog.expires else {
            throw refuse("\(source): its serial or expiry differs from the signed note's; the publisher must make the catalog again")
        }
        if let expires = statement.expires, expires <= now {
            throw refuse(
                "\(source) expired at \(UTCTimestamp.format(expires)); the publisher must publish a fresh catalog (a mirror may be serving an old one)")
        }
        return AcceptedCatalog(catalog: catalog, signers: signers, sha256: digest)
    }
}
