import Digest
import Foundation
import PropertyList

/// Settings for `PackageSigner.sign`.
public struct SignOptions: Sendable {
    /// When the statement expires; nil never (or, when co-signing, the existing note's).
    public var expires: Date?
    /// Where to write the note; nil for `ARCHIVE.hcsig`.
    public var signaturePath: String?
    /// Replace a note for a different text (or one that cannot be read).
    public var force: Bool
    /// The rules the package is checked with first.
    public var verify: VerifyOptions
    /// The current time (injectable for tests).
    public var now: Date

    public init(
        expires: Date? = nil, signaturePath: String? = nil, force: Bool = false, verify: VerifyOptions = VerifyOptions(),
        now: Date = Date()
    ) {
        self.expires = expires
        self.signaturePath = signaturePath
        self.force = force
        self.verify = verify
        self.now = now
    }
}

/// What `sign` wrote.
public struct SignResult: Sendable {
    /// The note's file.
    public var signaturePath: String
    /// The signed statement.
    public var statement: PackageStatement
    /// Every signer of the note written, in order.
    public var signers: [NoteSigner]
    /// True when the signature was added to an existing note for the same text (co-signing).
    public var addedToExisting: Bool
    /// True when the note already had this key's signature: nothing was written.
    public var alreadySigned: Bool
    /// The package's verification (warnings only).
    public var report: VerificationReport
}

/// A signing either wrote the note, or the package was refused and nothing was written.
public indirect enum SignOutcome: Sendable {
    case signed(SignResult)
    /// The package failed verification, or lists a file without an integrity record.
    case rejected(VerificationReport)
}

/// Signs a package archive: checks it like `verify`, then writes (or co-signs) its signed note atomically.
public enum PackageSigner {
    /// Signs `archive` with `key`.
    /// - Throws: `.invalidRequest` when the note file holds a note for a different text (without `force`), or
    ///   `expires` is not in the future; environment errors as `HCPackError`.
    public static func sign(_ archive: String, with key: SigningKey, options: SignOptions = SignOptions())
        throws(HCPackError) -> SignOutcome
    {
        let (fingerprint, made, checked) = try statement(of: archive, options: options.verify)
        var report = checked
        if !report.problems.hasErrors {
            report.problems.append(
                contentsOf: SignatureChecker.unsignedFiles(
                    report, including: SignatureChecker.coveredPaths(report, installAll: false)))
        }
        guard report.isValid(), var statement = made else { return .rejected(report) }
        guard try fingerprint.isCurrent(archive) else {
            throw HCPackError(
                .io, "\(archive) changed while it was being signed; run again once nothing writes to it", path: archive)
        }
        statement.expires = options.expires

        let notePath = SignatureChecker.notePath(for: archive, signaturePath: options.signaturePath)
        var note = SignedNote(text: [])
        var addedToExisting = false
        if let existing = try existingNote(notePath, force: options.force) {
            var candidate = statement
            // Co-signing without --expires takes the existing note's expiry, so both keys sign one text.
            if options.expires == nil, let existingStatement = try? PackageStatement(text: existing.text) {
                candidate.expires = existingStatement.expires
            }
            if Array(candidate.text.utf8) == existing.text {
                statement = candidate
                note = existing
                addedToExisting = true
            } else if !options.force {
                throw HCPackError(
                    .invalidRequest,
                    "\(notePath) holds a signed note for a different text (another archive, version or expiry); pass --force to replace it, or --signature FILE to write elsewhere",
                    path: notePath)
            }
        }
        if let expires = statement.expires, expires <= options.now {
            throw HCPackError(
                .invalidRequest,
                "the signature would expire at \(UTCTimestamp.format(expires)), which is not in the future; pass a later --expires"
            )
        }
        if note.text.isEmpty { note.text = Array(statement.text.utf8) }
        let signature = try key.sign(note.text)
        let alreadySigned = note.signatures.contains { $0.isBy(name: signature.name, keyHash: signature.keyHash) }
        if !alreadySigned {
            note.signatures.append(signature)
            try writeNote(note, to: notePath)
        }
        report.releaseContents()
        return .signed(
            SignResult(
                signaturePath: notePath, statement: statement,
                signers: note.signatures.map { NoteSigner(name: $0.name, keyHash: VerifierKey.hashText($0.keyHash)) },
                addedToExisting: addedToExisting && !alreadySigned, alreadySigned: alreadySigned, report: report))
    }

    /// What a note for `archive` would say (without expiry), with the archive's fingerprint and verification;
    /// the statement is nil when the package has no readable plist, product or version. Signs nothing.
    public static func statement(of archive: String, options: VerifyOptions = VerifyOptions()) throws(HCPackError)
        -> (ArchiveFingerprint, PackageStatement?, VerificationReport)
    {
        guard let status = try FileSystem.status(archive) else {
            throw HCPackError(.notFound, "\(archive): no such archive; check the path", path: archive)
        }
        guard status.kind == .file else {
            throw HCPackError(
                .invalidRequest, "\(archive) is a \(status.kind.noun); sign archives (hcpack build makes one)", path: archive)
        }
        let fingerprint = try ArchiveFingerprint.of(archive)
        let report = try Verifier.verify(archive, options: options)
        guard let info = report.contentInfo, let product = info.productIdentifier, let version = info.contentVersion,
            let plist = report.snapshot.contentInfoBytes
        else { return (fingerprint, nil, report) }
        let statement = PackageStatement(
            productIdentifier: product, version: version, archiveSHA256: fingerprint.sha256, archiveSize: fingerprint.size,
            plistSHA256: Hasher.digest(.sha256, of: plist).hexString, expires: nil)
        return (fingerprint, statement, report)
    }

    /// The note already at `path`, if any; one that cannot be read is refused unless `force` (then ignored).
    static func existingNote(_ path: String, force: Bool) throws(HCPackError) -> SignedNote? {
        guard try FileSystem.status(path) != nil else { return nil }
        do {
            return try SignedNote.parse(try FileSystem.readFile(path, limit: SignedNote.maxBytes))
        } catch let error as NoteFormatError {
            if force { return nil }
            throw HCPackError(
                .invalidRequest, "\(path) exists but is not a signed note (\(error.message)); pass --force to replace it",
                path: path)
        } catch let error as HCPackError {
            if force && error.code == .invalidRequest { return nil }
            throw error
        } catch {
            throw HCPackError(.io, "\(path): \(error)", path: path)
        }
    }

    /// Replaces `path` with the note atomically (temporary file, fsync, rename).
    static func writeNote(_ note: SignedNote, to path: String) throws(HCPackError) {
        let (folderPath, name) = SigningKey.folderAndName(path)
        try DirectoryHandle.open(folderPath).writeAtomically(name, note.encoded())
    }
}

extension Verifier {
    /// Verifies an archive and its signed note against `policy` (docs/signing.md): the report has every package
    /// problem and every `signature.*` problem; the summary says who signed.
    public static func verify(_ archive: String, options: VerifyOptions = VerifyOptions(), signature policy: SignaturePolicy)
        throws(HCPackError) -> (report: VerificationReport, signature: SignatureSummary)
    {
        // One descriptor for the hash and the scan; a swap or a write in between is refused (SignedArchiveRead).
        let read = try SignedArchiveRead(archive, policy: policy)
        let signature = read.check
        var report =
            read.file == nil
            ? try verify(archive, options: options) : check(try read.scan(limits: options.limits, staging: nil), options: options)
        let changed = try read.changes()
        report.problems.append(contentsOf: signature.problems)
        report.problems.append(contentsOf: changed)
        if !signature.problems.hasErrors && !changed.hasErrors { report.problems.append(contentsOf: signature.checkPackage(report)) }
        var summary = signature.summary
        summary.isValid = !report.problems.rules.contains { $0.rawValue.hasPrefix("signature.") }
        return (report, summary)
    }
}
