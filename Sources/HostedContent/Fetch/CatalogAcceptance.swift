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
/// `CatalogVerifier` checks the note and its signature first, then the catalog's size and SHA-256 against the
/// note, and only then parses the JSON strictly; serial and expiry as `verify-catalog`. The stored-serial rollback
/// check is the caller's: it depends on DIR.
enum CatalogAcceptance {
    /// - Parameters:
    ///   - source, noteSource: where the bytes came from, for messages.
    /// - Throws: `.invalidPackage` naming what is wrong and what to do.
    static func accept(
        catalog bytes: [UInt8], note noteBytes: [UInt8], source: String, noteSource: String, trustedKeys: [VerifierKey], now: Date
    ) throws(HCPackError) -> AcceptedCatalog {
        let verification = CatalogVerifier.verify(
            catalog: bytes, note: noteBytes, policy: CatalogPolicy(trustedKeys: trustedKeys, now: now), catalogName: source,
            noteName: noteSource)
        guard verification.isValid, let catalog = verification.catalog else {
            throw HCPackError(.invalidPackage, verification.problems.joined(separator: "\n"), path: source)
        }
        // Verified: these are the bytes the note names.
        return AcceptedCatalog(catalog: catalog, signers: verification.signers, sha256: Hasher.digest(.sha256, of: bytes).hexString)
    }
}
