import Synchronization

/// A signed archive opened once (docs/signing.md): the note is checked against the SHA-256 and size of the bytes
/// read through `file`, the scan reads that same descriptor (never the path again), and `changes()` then checks
/// that the file was not written to since it was hashed and that the path still names it. So what is placed or
/// reported valid is what was hashed, with or without `Files`, whatever a second open of the path would return.
final class SignedArchiveRead {
    /// The archive, open since before it was hashed; nil when the note was refused before the archive was read.
    let file: OpenFile?
    let check: ArchiveSignatureCheck
    let path: String

    /// Checks the note of `archive` against `policy`, hashing the archive through a descriptor kept open.
    init(_ archive: String, policy: SignaturePolicy) throws(HCPackError) {
        var opened: OpenFile?
        check = try SignatureChecker.checkArchive(archive, policy: policy) { () throws(HCPackError) in
            let file = try OpenFile(reading: archive)
            opened = file
            return try ArchiveFingerprint.of(file)
        }
        file = opened
        path = archive
        Self.afterCheck.withLock { $0 }?(archive)
    }

    /// Test hook: runs between the signature check and the scan, given the archive's path (a test swaps or
    /// rewrites the archive there, as another writer of its folder could).
    static let afterCheck = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// A snapshot of the archive read through `file` (or the path, when the archive was never hashed).
    func scan(limits: ReadLimits, staging: StagingArea?) throws(HCPackError) -> PackageSnapshot {
        try PackageScanner.readArchive(path, limits: limits, staging: staging, descriptor: file?.descriptor)
    }

    /// `signature.mismatch` when the archive changed after it was hashed: written to (its `fstat` stamp differs)
    /// or replaced (the path names another file now, or none). Empty when it was never hashed.
    func changes() throws(HCPackError) -> ProblemList {
        var problems = ProblemList()
        guard let file, let fingerprint = check.fingerprint else { return problems }
        let atPath: FileStamp?
        do {
            atPath = try OpenFile(reading: path).stamp()
        } catch {
            guard error.code == .notFound else { throw error }
            atPath = nil  // removed: not the file hashed either
        }
        if try file.stamp() != fingerprint.stamp || atPath != fingerprint.stamp {
            problems.add(
                .signatureMismatch, path: "",
                "\(path) changed while it was being read (written to or replaced after its SHA-256 was checked against the note); nothing of it was used: make sure nothing writes to it, and run again"
            )
        }
        return problems
    }
}
