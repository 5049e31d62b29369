import Digest
import Foundation
import PropertyList

/// What `verify` and `install` require of a signature (`--trusted-key`), and where to find it.
public struct SignaturePolicy: Sendable {
    /// The keys whose signature is accepted; at least one must have signed.
    public var trustedKeys: [VerifierKey]
    /// The note's file; nil for `ARCHIVE.hcsig`.
    public var signaturePath: String?
    /// The current time, against which `expires` is checked (injectable for tests).
    public var now: Date

    public init(trustedKeys: [VerifierKey], signaturePath: String? = nil, now: Date = Date()) {
        self.trustedKeys = trustedKeys
        self.signaturePath = signaturePath
        self.now = now
    }
}

/// A key that signed a note, as reports and receipts show it.
public struct NoteSigner: Sendable, Equatable, Hashable, Codable {
    /// The key's name.
    public var name: String
    /// The key hash, 8 lower-case hex digits.
    public var keyHash: String

    public init(name: String, keyHash: String) {
        self.name = name
        self.keyHash = keyHash
    }
}

/// What is known about an archive's signature: whether there is one, who signed it, until when, and (when
/// trusted keys were given) whether it holds.
public struct SignatureSummary: Sendable, Equatable {
    /// The note's file.
    public var path: String
    /// Whether the file exists.
    public var isPresent: Bool
    /// Why the note cannot be read, when it cannot.
    public var malformed: String?
    /// Every signature line's key, in note order.
    public var signers: [NoteSigner]
    /// The signers whose signature a trusted key verified.
    public var trustedSigners: [NoteSigner]
    /// The statement's `expires`, when it has one.
    public var expires: Date?
    /// The statement, when the note could be read.
    public var statement: PackageStatement?
    /// nil when not checked (no trusted keys); otherwise whether every signature check passed.
    public var isValid: Bool?
}

/// The signature checks of docs/signing.md, in two steps: the note against the archive file (before anything of
/// the archive is unpacked), then the note against the package as read (plist, product, version, records).
public enum SignatureChecker {
    /// The note file of `archive`: `signaturePath`, or `ARCHIVE.hcsig`.
    public static func notePath(for archive: String, signaturePath: String?) -> String {
        signaturePath ?? archive + ".hcsig"
    }

    /// Reads the note beside `archive` and reports what it says, checking signatures only against `trusted`.
    static func read(archive: String, notePath: String, trusted: [VerifierKey]) throws(HCPackError)
        -> (SignatureSummary, SignedNote?, ProblemList)
    {
        var summary = SignatureSummary(path: notePath, isPresent: false, signers: [], trustedSigners: [])
        var problems = ProblemList()
        guard let status = try FileSystem.status(notePath) else {
            problems.add(
                .signatureMissing, path: "",
                "no signature: \(notePath) does not exist; sign the archive (hcpack sign) or pass --signature FILE")
            return (summary, nil, problems)
        }
        summary.isPresent = true
        guard status.kind == .file, status.size <= SignedNote.maxBytes else {
            summary.malformed = "not a regular file of at most \(SignedNote.maxBytes) bytes"
            problems.add(.signatureMalformed, path: "", "\(notePath): \(summary.malformed ?? ""); sign the archive again")
            return (summary, nil, problems)
        }
        let bytes = try FileSystem.readFile(notePath, limit: SignedNote.maxBytes)
        let note: SignedNote
        let statement: PackageStatement
        do {
            note = try SignedNote.parse(bytes)
            statement = try PackageStatement(text: note.text)
        } catch {
            summary.malformed = error.message
            problems.add(.signatureMalformed, path: "", "\(notePath): \(error.message); sign the archive again (hcpack sign)")
            return (summary, nil, problems)
        }
        summary.statement = statement
        summary.expires = statement.expires
        summary.signers = note.signatures.map { NoteSigner(name: $0.name, keyHash: VerifierKey.hashText($0.keyHash)) }
        guard !trusted.isEmpty else { return (summary, note, problems) }
        let (signers, found) = trustedSigners(of: note, trusted: trusted, notePath: notePath, remedy: "sign the archive again")
        summary.trustedSigners = signers
        problems.append(contentsOf: found)
        return (summary, note, problems)
    }

    /// The trusted keys whose signature on `note` verifies, as Go's `note.Open` decides: a signature by a
    /// trusted key (name and hash) must verify (`signature.invalid` otherwise), others are ignored; none at
    /// all is `signature.untrusted`. `remedy` ends the malformed-signature message.
    static func trustedSigners(of note: SignedNote, trusted: [VerifierKey], notePath: String, remedy: String)
        -> ([NoteSigner], ProblemList)
    {
        var problems = ProblemList()
        var signers: [NoteSigner] = []
        var seen: Set<NoteSigner> = []
        for signature in note.signatures {
            guard let key = trusted.first(where: { signature.isBy(name: $0.name, keyHash: $0.keyHash) }) else {
                continue
            }
            let signer = NoteSigner(name: key.name, keyHash: key.hashText)
            guard seen.insert(signer).inserted else { continue }
            guard signature.signature.count == Ed25519.signatureByteCount else {
                problems.add(
                    .signatureMalformed, path: "",
                    "\(notePath): the signature of '\(key.name)' is \(signature.signature.count) bytes, not \(Ed25519.signatureByteCount); \(remedy)"
                )
                continue
            }
            if Ed25519.isValidSignature(signature.signature, of: note.text, publicKey: key.publicKey) {
                signers.append(signer)
            } else {
                problems.add(
                    .signatureInvalid, path: "",
                    "\(notePath): the signature of '\(key.name)' (\(key.hashText)) does not verify: the note was changed after signing; do not install it"
                )
            }
        }
        if problems.problems.isEmpty && signers.isEmpty {
            let names = note.signatures.map { "\($0.name) (\(VerifierKey.hashText($0.keyHash)))" }.joined(separator: ", ")
            problems.add(
                .signatureUntrusted, path: "",
                "\(notePath) is signed by \(names.isEmpty ? "no key" : names), none of them a trusted key (\(trusted.map { "\($0.name) (\($0.hashText))" }.joined(separator: ", "))); pass the signer's .pub with --trusted-key"
            )
        }
        return (signers, problems)
    }

    /// The first step: the note is present, well formed, signed by a trusted key, not expired, and names this
    /// archive file (size and SHA-256, hashed once here). Reads only the note and the archive file.
    public static func checkArchive(_ archive: String, policy: SignaturePolicy) throws(HCPackError) -> ArchiveSignatureCheck {
        try checkArchive(archive, policy: policy) { () throws(HCPackError) in try ArchiveFingerprint.of(archive) }
    }

    /// `checkArchive`, where `fingerprint` reads and hashes the archive (only once the note holds).
    static func checkArchive(
        _ archive: String, policy: SignaturePolicy, fingerprint hash: () throws(HCPackError) -> ArchiveFingerprint
    ) throws(HCPackError) -> ArchiveSignatureCheck {
        var hashed: ArchiveFingerprint?
        let notePath = notePath(for: archive, signaturePath: policy.signaturePath)
        var (summary, _, problems) = try read(archive: archive, notePath: notePath, trusted: policy.trustedKeys)
        if let statement = summary.statement, !problems.hasErrors {
            if let expires = statement.expires, expires <= policy.now {
                problems.add(
                    .signatureExpired, path: "",
                    "\(notePath) expired at \(UTCTimestamp.format(expires)); ask for a fresh signature (hcpack sign) of the current release"
                )
            }
            let fingerprint = try hash()
            hashed = fingerprint
            if fingerprint.size != statement.archiveSize || fingerprint.sha256 != statement.archiveSHA256 {
                problems.add(
                    .signatureMismatch, path: "",
                    "\(archive) is not the archive that was signed (\(fingerprint.size) bytes, SHA-256 \(fingerprint.sha256); the note says \(statement.archiveSize) bytes, \(statement.archiveSHA256)); download it again"
                )
            }
        }
        summary.isValid = !problems.hasErrors
        return ArchiveSignatureCheck(summary: summary, problems: problems, fingerprint: hashed)
    }

    /// Summarises the note of `archive` without requiring it (verify without `--trusted-key`); nil when there is none.
    public static func describe(_ archive: String, signaturePath: String?) throws(HCPackError) -> SignatureSummary? {
        let notePath = notePath(for: archive, signaturePath: signaturePath)
        let (summary, _, _) = try read(archive: archive, notePath: notePath, trusted: [])
        return summary.isPresent || signaturePath != nil ? summary : nil
    }

    /// Problems with files that no integrity record covers: a signed plist must commit to every file installed.
    static func unsignedFiles(_ report: VerificationReport, including paths: [String]) -> ProblemList {
        var problems = ProblemList()
        let records = (try? report.contentInfo?.parseIntegrity()) ?? nil
        // A delta's files left in place are covered by the digest its base names (DeltaBase.unchangedSHA256).
        let digestedInPlace = report.deltaBase?.unchangedSHA256 != nil
        var carriedOrPatched: Set<String> = []
        if digestedInPlace {
            for entry in report.snapshot.entries where entry.kind == .file && entry.path.hasPrefix(Verifier.contentsPrefix) {
                carriedOrPatched.insert(String(entry.path.dropFirst(Verifier.contentsPrefix.count)))
            }
            if let info = report.contentInfo { carriedOrPatched.formUnion(FilePatch.patchedPaths(of: info)) }
        }
        for path in paths where records?[path] == nil && !(digestedInPlace && !carriedOrPatched.contains(path)) {
            problems.add(
                .signatureUnsigned, path: Verifier.contentsPrefix + path,
                "no HCPackIntegrity record, so the signature does not cover this file; rebuild the package with hcpack build and sign it again"
            )
        }
        return problems
    }

    /// The paths whose bytes a signed package must record: every file install would place. Files, and with
    /// `installAll` or without Files (install's "contents" selection) every file under Contents/ but OS junk,
    /// as `Installer.filesToInstall` selects them; sign, verify and install all ask this.
    static func coveredPaths(_ report: VerificationReport, installAll: Bool) -> [String] {
        var paths = report.contentInfo?.files ?? []
        if installAll || (report.contentInfo != nil && report.contentInfo?.files == nil) {
            let listed = Set(paths)
            for entry in report.snapshot.entries where entry.kind == .file && entry.path.hasPrefix(Verifier.contentsPrefix) {
                let path = String(entry.path.dropFirst(Verifier.contentsPrefix.count))
                if !listed.contains(path) && !PackagePath.isJunk(path) { paths.append(path) }
            }
        }
        return paths
    }
}

/// The outcome of `SignatureChecker.checkArchive`: problems, and the statement to hold the package to.
public struct ArchiveSignatureCheck: Sendable {
    public var summary: SignatureSummary
    public var problems: ProblemList
    /// The archive's size, SHA-256 and stamp as hashed; nil when the note was refused before.
    public var fingerprint: ArchiveFingerprint?

    /// The second step: the package as read matches the statement (plist SHA-256, product, version) and every
    /// file that will be installed (or, for verify, every listed file) has an integrity record.
    public func checkPackage(_ report: VerificationReport, installAll: Bool = false) -> ProblemList {
        var problems = ProblemList()
        guard let statement = summary.statement else { return problems }
        let note = summary.path
        if let bytes = report.snapshot.contentInfoBytes {
            let digest = Hasher.digest(.sha256, of: bytes).hexString
            if digest != statement.plistSHA256 {
                problems.add(
                    .signatureMismatch, path: ContentInfo.fileName,
                    "ContentInfo.plist (SHA-256 \(digest)) is not the one signed in \(note) (\(statement.plistSHA256)); the package was changed after signing"
                )
            }
        } else {
            problems.add(
                .signatureMismatch, path: ContentInfo.fileName, "the package has no readable ContentInfo.plist to match \(note)")
        }
        if let info = report.contentInfo {
            if let product = info.productIdentifier, product != statement.productIdentifier {
                problems.add(
                    .signatureMismatch, path: ContentInfo.fileName,
                    "the package is '\(product)' but \(note) was signed for '\(statement.productIdentifier)'; it belongs to another product"
                )
            }
            if let version = info.contentVersion, version != statement.version {
                problems.add(
                    .signatureMismatch, path: ContentInfo.fileName,
                    "the package is version \(version) but \(note) was signed for version \(statement.version)")
            }
        }
        problems.append(
            contentsOf: SignatureChecker.unsignedFiles(
                report, including: SignatureChecker.coveredPaths(report, installAll: installAll)))
        return problems
    }

    /// The signers that vouched for the package, for the receipt.
    public var signers: [NoteSigner] { summary.trustedSigners }

    /// A report that refuses the archive with these problems, before anything of it was read.
    func rejection(_ archive: String) -> VerificationReport {
        VerificationReport(
            problems: problems, contentInfo: nil, listedFileCount: 0, contentFileCount: 0, contentBytes: 0,
            snapshot: PackageSnapshot(origin: .archive(path: archive, format: "unread"), entries: [], contentInfoBytes: nil))
    }
}
