import Digest
import Foundation

/// Everything `CatalogBuilder` needs to know about one catalog.
public struct CatalogOptions: Sendable {
    /// Full package archives and deltas, of one product or several.
    public var archives: [String]
    /// The URL the archives are published under: each entry's URL is this, "/", and the archive's file name.
    public var baseURL: String
    /// Where to write the catalog (its note goes beside it, `OUTPUT.hcsig`).
    public var output: String
    /// The catalog's serial: higher than any catalog published before.
    public var serial: Int64
    /// When the catalog stops being accepted; nil never.
    public var expires: Date?
    /// The rules' settings for checking each archive.
    public var verify: VerifyOptions
    /// Download policies by product (`--policy ID=essential`); products not named are `onDemand`.
    public var policies: [String: DownloadPolicy] = [:]

    public init(
        archives: [String], baseURL: String, output: String, serial: Int64, expires: Date? = nil, verify: VerifyOptions = VerifyOptions()
    ) {
        self.archives = archives
        self.baseURL = baseURL
        self.output = output
        self.serial = serial
        self.expires = expires
        self.verify = verify
    }
}

/// What `CatalogBuilder.write` wrote.
public struct CatalogResult: Sendable {
    public var catalog: Catalog
    public var output: String
    /// The catalog's SHA-256.
    public var sha256: String
    /// The note written beside it, when signed.
    public var signaturePath: String?
    /// Its signer, when signed.
    public var signer: NoteSigner?
    /// Archives left out: full packages below their product's highest version, deltas to another version.
    public var skipped: [String]
}

/// Makes and signs catalogs (docs/self-hosting.md).
public enum CatalogBuilder {
    /// One archive, checked.
    struct Candidate {
        var path: String
        var name: String
        var product: String
        var version: ContentVersion
        var size: Int64
        var sha256: String
        var plistSHA256: String
        var delta: DeltaBase?
        var hasSignature: Bool
        /// A delta with binary patches (HCPackPatches).
        var hasPatches = false
    }

    /// Checks every archive and writes the catalog (and with `key`, its note) atomically.
    /// - Throws: `.invalidPackage` for an invalid archive, a product with deltas but no full archive, two
    ///   different builds of a product's newest version, or a delta to a version whose full archive is another build; `.invalidRequest` for a bad base URL or serial.
    public static func write(_ options: CatalogOptions, key: SigningKey?) throws(HCPackError) -> CatalogResult {
        guard !options.archives.isEmpty else { throw HCPackError(.invalidRequest, "no archives given; pass the release's archives") }
        guard options.serial >= 0 else { throw HCPackError(.invalidRequest, "the serial must not be negative") }
        var base = options.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        guard !base.isEmpty, !base.contains(where: { $0.isWhitespace }) else {
            throw HCPackError(.invalidRequest, "--base-url '\(options.baseURL)' is not a URL (https://cdn.example.com/levels)")
        }
        if let unknown = options.policies.keys.sorted().first(where: { !ContentInfo.isValidProductIdentifier($0) }) {
            throw HCPackError(.invalidRequest, "--policy names '\(unknown)', which is not a product identifier")
        }
        var candidates: [Candidate] = []
        for path in options.archives { candidates.append(try candidate(path, options: options.verify)) }

        var packages: [CatalogPackage] = []
        var skipped: [String] = []
        for product in Set(candidates.map(\.product)).sorted() {
            let mine = candidates.filter { $0.product == product }
            guard let newest = mine.filter({ $0.delta == nil }).max(by: { $0.version < $1.version }) else {
                throw HCPackError(
                    .invalidPackage, "'\(product)' has only deltas here; list its full archive too (a delta needs its base installed)")
            }
            // Two different builds of the newest version: which one devices get must not depend on argument order.
            if let other = mine.first(where: { $0.delta == nil && $0.version == newest.version && $0.sha256 != newest.sha256 }) {
                throw HCPackError(
                    .invalidPackage,
                    "\(other.path) and \(newest.path) are two different builds of '\(product)' \(newest.version.text); list only the one to publish",
                    path: other.path)
            }
            var deltas: [CatalogDelta] = []
            for candidate in mine where candidate.path != newest.path {
                guard let delta = candidate.delta, candidate.version == newest.version else {
                    skipped.append(candidate.path)
                    continue
                }
                guard delta.targetPlistSHA256 == newest.plistSHA256 else {
                    throw HCPackError(
                        .invalidPackage,
                        "\(candidate.path) leads to another build of '\(product)' \(newest.version.text) than \(newest.path); make the delta again from the published archives",
                        path: candidate.path)
                }
                var entry = CatalogDelta(
                    baseVersion: delta.baseVersion, url: base + "/" + candidate.name, size: candidate.size, sha256: candidate.sha256,
                    signatureURL: candidate.hasSignature ? base + "/" + candidate.name + ".hcsig" : nil,
                    basePlistSHA256: delta.basePlistSHA256)
                entry.patches = candidate.hasPatches
                deltas.append(entry)
            }
            deltas.sort { (ContentVersion($0.baseVersion)?.components ?? []).lexicographicallyPrecedes(ContentVersion($1.baseVersion)?.components ?? []) }
            packages.append(
                CatalogPackage(
                    productIdentifier: product, version: newest.version.text, url: base + "/" + newest.name, size: newest.size,
                    sha256: newest.sha256, plistSHA256: newest.plistSHA256,
                    signatureURL: newest.hasSignature ? base + "/" + newest.name + ".hcsig" : nil, deltas: deltas,
                    policy: options.policies[product] ?? .onDemand))
        }
        if let missing = Set(options.policies.keys).subtracting(packages.map(\.productIdentifier)).sorted().first {
            throw HCPackError(.invalidRequest, "--policy names '\(missing)', but no archive given is of that product")
        }
        let catalog = Catalog(serial: options.serial, expires: options.expires, packages: packages)
        let bytes = catalog.encoded()
        let digest = Hasher.digest(.sha256, of: bytes).hexString
        let (folderPath, name) = SigningKey.folderAndName(options.output)
        let folder = try DirectoryHandle.open(folderPath)
        var signaturePath: String?
        var signer: NoteSigner?
        if let key {
            let statement = CatalogStatement(catalogSHA256: digest, serial: options.serial, expires: options.expires)
            var note = SignedNote(text: Array(statement.text.utf8))
            let signature = try key.sign(note.text)
            note.signatures = [signature]
            // The note first: a reader between the two renames sees a catalog its note does not match, and refuses it.
            try folder.writeAtomically(name + ".hcsig", note.encoded())
            signaturePath = options.output + ".hcsig"
            signer = NoteSigner(name: signature.name, keyHash: VerifierKey.hashText(signature.keyHash))
        }
        try folder.writeAtomically(name, bytes)
        return CatalogResult(catalog: catalog, output: options.output, sha256: digest, signaturePath: signaturePath, signer: signer, skipped: skipped)
    }

    /// Verifies one archive and reads what the catalog says about it.
    static func candidate(_ path: String, options: VerifyOptions) throws(HCPackError) -> Candidate {
        let (fingerprint, statement, report) = try PackageSigner.statement(of: path, options: options)
        guard report.isValid(), let statement else {
            throw HCPackError(
                .invalidPackage, "\(path) is not a valid package (\(report.problems.errorCount) errors); run hcpack verify on it", path: path)
        }
        guard let version = ContentVersion(statement.version) else {
            throw HCPackError(.invalidPackage, "\(path): ContentVersion '\(statement.version)' is not a version", path: path)
        }
        guard try fingerprint.isCurrent(path) else {
            throw HCPackError(.io, "\(path) changed while it was being read; run again once nothing writes to it", path: path)
        }
        var candidate = Candidate(
            path: path, name: SigningKey.folderAndName(path).name, product: statement.productIdentifier, version: version,
            size: fingerprint.size, sha256: fingerprint.sha256, plistSHA256: statement.plistSHA256, delta: report.deltaBase,
            hasSignature: FileSystem.exists(path + ".hcsig"))
        candidate.hasPatches = report.deltaBase != nil && report.contentInfo.map(FilePatch.hasPatches) == true
        return candidate
    }
}
