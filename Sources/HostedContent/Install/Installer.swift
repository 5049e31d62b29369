import Digest
import PropertyList


/// Settings for `Installer.install`.
public struct InstallOptions: Sendable {
    /// The folder files are installed into; it must exist.
    public var destination: String
    /// Install every regular file under Contents/ (junk aside), whether or not Files lists it. A package
    /// without a Files key (as Xcode builds them) is installed this way anyway.
    public var installAll: Bool
    /// Refuse a package whose IAPProductIdentifier differs.
    public var expectedProductIdentifier: String?
    /// Refuse a package whose ContentVersion differs (compared numerically: "1" equals "1.0").
    public var expectedVersion: String?
    /// Allow a downgrade, and overwrite files at target paths that hcpack did not install.
    public var force: Bool
    /// Replace files this product's receipt records that changed since they were installed (fetch, falling back
    /// from a refused delta); files hcpack did not install are still refused. `force` implies it.
    public var replaceChangedInstalledFiles = false
    /// Wait for another install into the same destination instead of failing at once.
    public var wait: Bool
    /// Rules and read limits (`verify.limits.archive` bounds entries, bytes and compression ratio).
    public var verify: VerifyOptions
    /// Trusted keys: the archive is installed only with a valid signed note by one of them, and never below the
    /// receipt's version (docs/signing.md); nil requires no signature.
    public var signature: SignaturePolicy?
    /// The signed catalog this archive was chosen from (`hcpack fetch`), recorded in the receipt; nil for none.
    public var catalog: CatalogProvenance?

    /// Options for installing into `destination`; everything else off by default.
    public init(
        destination: String, installAll: Bool = false, expectedProductIdentifier: String? = nil,
        expectedVersion: String? = nil, force: Bool = false, wait: Bool = false, verify: VerifyOptions = VerifyOptions()
    ) {
        self.destination = destination
        self.installAll = installAll
        self.expectedProductIdentifier = expectedProductIdentifier
        self.expectedVersion = expectedVersion
        self.force = force
        self.wait = wait
        self.verify = verify
    }
}

/// What an install did to the destination as a whole.
public enum InstallStatus: String, Sendable {
    /// First install of the product, or the same version again with missing or changed files restored.
    case installed
    /// The same version was already installed intact: nothing was written.
    case unchanged
    /// A newer version replaced an older one.
    case upgraded
    /// An older version replaced a newer one (only with `force`).
    case downgraded
}

/// Which files an install placed.
public enum InstallSelection: String, Sendable, Codable {
    /// The files that ContentInfo.plist's Files array lists.
    case files
    /// Every regular file under Contents/ (junk aside): the plist has no Files key (Xcode-built packages), or
    /// `installAll` asked for it.
    case contents
}

/// The result of an install that went through.
public struct InstallResult: Sendable {
    /// What happened to DEST as a whole.
    public var status: InstallStatus
    /// The package's IAPProductIdentifier.
    public var productIdentifier: String
    /// The package's ContentVersion, as written.
    public var version: String
    /// The version the receipt recorded before, if any.
    public var previousVersion: String?
    /// Whether the Files list or everything under Contents/ was installed.
    public var selection: InstallSelection
    /// Paths (relative to DEST) placed by this install.
    public var installed: [String]
    /// Paths already holding exactly the right bytes, left untouched.
    public var skipped: [String]
    /// Paths of the previous version that this one no longer lists, removed.
    public var removed: [String]
    /// Paths of the previous version that this one no longer lists, kept because they changed since install.
    public var kept: [String]
    /// Paths this product installed that changed since and were replaced (`replaceChangedInstalledFiles`).
    public var replacedChanged: [String] = []
    /// Bytes placed by this install.
    public var bytes: Int64
    /// Bytes written to the staging folder: files DEST already held with the recorded bytes are not staged.
    public var stagedBytes: Int64
    /// The verification of the package (warnings only, or none): its problems and counts. The plist and the
    /// entries are not kept (tens of MB for a big package); `Verifier.verify` on the archive gives them.
    public var report: VerificationReport
    /// Why the staging folder (or its `.replaced` folder) is still in `DEST/.hcpack/` after a complete install:
    /// removing it failed. The next install removes it. Nil when nothing was left.
    public var leftover: String? = nil
}

/// An install either went through, or the package was invalid and nothing was written.
// `indirect`: without it, Swift 6.3.1 debug builds corrupt this two-payload enum when it is copied (a crash
// in `outlined copy of InstallOutcome`; clean under AddressSanitizer, so a code generation bug, not ours).
public indirect enum InstallOutcome: Sendable {
    case completed(InstallResult)
    /// The package failed verification or the listed-file checks; the report has every problem.
    case rejected(VerificationReport)
}

/// Installs a hosted content package archive into a folder (docs/install.md).
///
/// Stage (stream into `DEST/.hcpack/staging-*`), verify, check every listed file, plan against the receipt,
/// write a journal, rename each file into place, remove stale files, write the receipt, drop the journal.
public enum Installer {
    /// hcpack's own folder inside DEST.
    public static let metadataFolder = ".hcpack"

    /// True when `name` is `.hcpack` on a case-insensitive file system too (APFS, ext4 casefold): `.HCPACK`, or
    /// `.hcpac` with a KELVIN SIGN (U+212A, which folds to k), would be the records' folder there.
    public static func isMetadataFolder(_ name: Substring) -> Bool {
        // ASCII keeps its length through NFC and case and width folding: only 7 letters can match.
        if name.utf8.allSatisfy({ $0 < 0x80 }) { return name.utf8.count == 7 && name.lowercased() == metadataFolder }
        guard name.utf8.count <= 64 else { return false }  // folding cannot shrink a long name to 7 letters
        return String(name).precomposedStringWithCanonicalMapping.folding(options: [.caseInsensitive, .widthInsensitive], locale: nil)
            == metadataFolder
    }
    /// Receipts folder inside `metadataFolder`.
    public static let receiptsFolder = "receipts"

    /// The journal's file name inside `DEST/.hcpack/`.
    public static func journalName(_ productIdentifier: String) -> String { "journal-\(productIdentifier).json" }
    /// The receipt's file name inside `DEST/.hcpack/receipts/`.
    public static func receiptName(_ productIdentifier: String) -> String { "\(productIdentifier).json" }

    /// Installs the package archive at `archive` into `options.destination`.
    /// - Returns: `.rejected` with every problem when the package is invalid (DEST untouched).
    /// - Throws: `HCPackError`: `.invalidPackage` for a refused install (wrong product or version, downgrade,
    ///   a user file in the way, no Files list) with DEST untouched; `.notFound`, `.permissionDenied`,
    ///   `.diskFull`, `.io`, `.locked` for the environment.
    public static func install(_ archive: String, options: InstallOptions, progress: ProgressHandler? = nil) throws(HCPackError)
        -> InstallOutcome
    {
        guard let archiveStatus = try FileSystem.status(archive) else {
            throw HCPackError(.notFound, "\(archive): no such archive; check the path", path: archive)
        }
        if archiveStatus.kind == .directory {
            throw HCPackError(
                .invalidRequest,
                "\(archive) is a folder; install reads archives (zip, tar): pack the folder first (hcpack build)",
                path: archive)
        }
        // The note and the archive file are checked before DEST is even opened.
        let signed = try options.signature.map { policy throws(HCPackError) in try SignedArchiveRead(archive, policy: policy) }
        if let signature = signed?.check, signature.problems.hasErrors { return .rejected(signature.rejection(archive)) }
        let session = try InstallSession(options: options, progress: progress)
        session.signed = signed
        do {
            return try session.run(archive)
        } catch {
            session.abandon()
            throw error
        }
    }
}

extension Installer {
    /// Removes what killed installs left in DEST's records folder and the next install removes first (staging
    /// folders, records not yet renamed into place), installing nothing: for a caller (fetch) that finds the
    /// product up to date and so runs no install. The install lock is taken only when there is something to
    /// remove. A journal is not such a leftover: only an install of the version it names completes it.
    public static func removeLeftovers(in destination: String) throws(HCPackError) {
        guard let metadata = try DirectoryHandle.open(destination).openDirectory(metadataFolder) else { return }
        var names = try metadata.list()
        if let receipts = try metadata.openDirectory(receiptsFolder) { names += try receipts.list() }
        guard names.contains(where: InstallSession.isLeftover) else { return }
        let session = try InstallSession(options: InstallOptions(destination: destination, wait: true), progress: nil)
        defer { session.lock.release() }
        try session.removeLeftovers()
    }
}

/// One install: the open destination, its lock and staging folder, and how far it got.
final class InstallSession {
    let options: InstallOptions
    let progress: ProgressHandler?
    let destinationPath: String
    let destination: DirectoryHandle
    let metadata: DirectoryHandle
    let createdMetadata: Bool
    let lock: DestinationLock
    var staging: StagingArea?
    /// Set once the journal is on disk: from then on DEST may change, and a failure keeps the journal.
    var committed = false
    /// The Contents/-relative name each file to install has in the archive (and so in staging), where it is
    /// not spelled exactly as in Files.
    var stagedNames: [ExactPath: String] = [:]
    /// The signed archive, hashed and checked against its note through the descriptor the scan reads; the
    /// package is held to its statement.
    var signed: SignedArchiveRead?
    var signature: ArchiveSignatureCheck? { signed?.check }
    /// SHA-256 of the installed version's full ContentInfo.plist, for the receipt (a delta names its target's).
    var plistSHA256: String?
    /// Files of DEST hashed already by this install (a delta's carried-over files), so planning does not read
    /// them a second time.
    var hashedInPlace: [String: FileRecord] = [:]

    init(options: InstallOptions, progress: ProgressHandler?) throws(HCPackError) {
        self.options = options
        self.progress = progress
        let path = options.destination
        destinationPath = path
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such folder; create the destination folder first", path: path)
        }
        if status.kind == .symlink {
            throw HCPackError(
                .permissionDenied, "\(path) is a symlink; hcpack installs only into a real folder, pass the folder it points to",
                path: path)
        }
        guard status.kind == .directory else {
            throw HCPackError(
                .notFound, "\(path) is a \(status.kind.noun), not a folder; pass the destination folder", path: path)
        }
        destination = try DirectoryHandle.open(path)
        // A waiting install whose lock file was removed under it starts over (see DestinationLock).
        while true {
            let (folder, created) = try destination.makeDirectory(Installer.metadataFolder)
            let acquired: DestinationLock?
            do {
                acquired = try DestinationLock.acquire(in: folder, destination: path, wait: options.wait)
            } catch {
                if created { destination.removeEmptyDirectory(Installer.metadataFolder) }
                throw error
            }
            if let acquired {
                metadata = folder
                createdMetadata = created
                lock = acquired
                break
            }
        }
    }

    /// Removes the `*.tmp` files of `folder`: records `writeAtomically` had not yet renamed when a kill came.
    static func removeTemporaryRecords(in folder: DirectoryHandle) throws(HCPackError) {
        for name in try folder.list() where name.hasSuffix(".tmp") {
            if try folder.status(name)?.kind == .file { try folder.removeFile(name) }
        }
    }

    /// Undoes what a failed install left: the staging folder always; before the commit also the lock file and
    /// `.hcpack/` when this install created them, so DEST is exactly as it was.
    func abandon() {
        try? staging?.remove()
        staging = nil
        if committed {
            lock.release()
            return
        }
        if lock.createdFile { lock.removeFileAndRelease() } else { lock.release() }
        if createdMetadata { destination.removeEmptyDirectory(Installer.metadataFolder) }
    }

    /// Removes what killed installs left: staging folders and records not yet renamed into place. Nobody else
    /// can be using them while this session holds the lock.
    func removeLeftovers() throws(HCPackError) {
        for name in try metadata.list() where name.hasPrefix(StagingArea.namePrefix) {
            try metadata.removeTree(name)
        }
        // Temporary records a kill left before their rename (journal-ID.json.tmp, receipts/ID.json.tmp).
        try Self.removeTemporaryRecords(in: metadata)
        if let receipts = try metadata.openDirectory(Installer.receiptsFolder) { try Self.removeTemporaryRecords(in: receipts) }
    }

    /// A name `removeLeftovers` removes: a staging folder, or a record not yet renamed into place.
    static func isLeftover(_ name: String) -> Bool { name.hasPrefix(StagingArea.namePrefix) || name.hasSuffix(".tmp") }

    func run(_ archive: String) throws(HCPackError) -> InstallOutcome {
        try removeLeftovers()
        let staging = try StagingArea(in: metadata, progress: progress)
        self.staging = staging
        if !options.force {
            // With --force a changed file may need the package's bytes after all: stage everything then.
            staging.inPlaceNames = { [unowned self] plistName, bytes in self.namesInPlace(plistName: plistName, plist: bytes) }
        }
        staging.startFlushing()
        var report = try readAndCheck(archive, staging: staging)
        if let signed {
            // Before anything is placed: what was staged is what was hashed, then it is held to the statement.
            let changed = try signed.changes()
            report.problems.append(contentsOf: changed)
            if !changed.hasErrors {
                report.problems.append(contentsOf: signed.check.checkPackage(report, installAll: options.installAll))
            }
        }
        if !report.isValid() {
            abandon()
            return .rejected(report)
        }
        let package = try identify(report, archive: archive)
        // A delta installs like the full version, its carried-over files found in DEST (DeltaInstall.swift).
        let delta = report.deltaBase
        plistSHA256 = delta?.targetPlistSHA256 ?? report.snapshot.contentInfoBytes.map { Hasher.digest(.sha256, of: $0).hexString }
        let carried = try delta.map { _ throws(HCPackError) in try carriedFiles(report, package: package, archive: archive) } ?? []
        // Issue 32 (binary patches, DeltaPatchInstall.swift): files made from DEST's copies by a patch; this
        // line and the two marked "issue 32" below are all that install changes for them.
        let patched = try delta.map { _ throws(HCPackError) in try patchedFiles(report, archive: archive) } ?? []
        // Only Files is needed from the plist now: its bytes and tree (20 MB at 26,000 files) go first, then
        // the entries once `wanted` holds what to place, before placing and the receipt need memory of their own.
        var listed = report.contentInfo?.files
        report.releasePlist()
        if !carried.isEmpty || !patched.isEmpty { listed = Self.removing(carried + patched.map(\.file), from: listed) }  // issue 32
        let selection: InstallSelection = delta == nil && (options.installAll || listed == nil) ? .contents : .files
        var wanted = try filesToInstall(report, listed: selection == .files ? listed : nil, archive: archive)
        report.releaseContents()
        if let delta {
            wanted = (wanted + carried + patched.map(\.file)).sorted { $0.path < $1.path }
            try checkBase(delta, package: package, carried: carried, archive: archive)
            try applyPatches(patched, delta: delta, package: package, archive: archive)  // issue 32
        }
        let plan = try makePlan(package: package, wanted: wanted)
        if delta != nil { try checkCarriedStayInPlace(plan, carried: carried) }
        var result = try execute(plan, package: package, wanted: wanted, report: report)
        result.selection = selection
        // The install is complete (the receipt is written): a failing removal now is reported, not an error.
        // Tried twice, as a failed unlink may be passing; what is left the next install removes.
        do {
            try staging.remove()
        } catch {
            do { try staging.remove() } catch { result.leftover = error.message }
        }
        self.staging = nil
        lock.release()
        return .completed(result)
    }

    /// Streams the archive into staging and runs the rules; the snapshot lives only as long as this call.
    /// The verdict is verify's, unchanged: install refuses exactly the packages `verify` reports invalid.
    func readAndCheck(_ archive: String, staging: StagingArea) throws(HCPackError) -> VerificationReport {
        let snapshot =
            if let signed { try signed.scan(limits: options.verify.limits, staging: staging) } else {
                try PackageScanner.readArchive(archive, limits: options.verify.limits, staging: staging)
            }
        staging.startSynchronizing()
        return Verifier.check(snapshot, options: options.verify)
    }

    struct Package {
        var productIdentifier: String
        var version: ContentVersion
        /// Prefix of Contents/ in the archive ("Contents/" or "ROOT/Contents/").
        var contentsPrefix: String
    }

    func identify(_ report: VerificationReport, archive: String) throws(HCPackError) -> Package {
        guard let info = report.contentInfo, let identifier = info.productIdentifier, let version = info.version else {
            throw HCPackError(
                .invalidPackage,
                "\(archive): ContentInfo.plist has no usable IAPProductIdentifier or ContentVersion; run hcpack verify on it",
                path: archive)
        }
        if let expected = options.expectedProductIdentifier, expected != identifier {
            throw HCPackError(
                .invalidPackage,
                "\(archive) holds product '\(identifier)', not the expected '\(expected)'; check that you downloaded the right package",
                path: archive)
        }
        if let expected = options.expectedVersion {
            let matches = ContentVersion(expected).map { $0 == version } ?? (expected == version.text)
            if !matches {
                throw HCPackError(
                    .invalidPackage,
                    "\(archive) holds version \(version.text) of '\(identifier)', not the expected \(expected); check that you downloaded the right package",
                    path: archive)
            }
        }
        let root = report.snapshot.rootFolder.map { $0 + "/" } ?? ""
        return Package(productIdentifier: identifier, version: version, contentsPrefix: root + "Contents/")
    }

    /// The files to place, with their size and digest as streamed (already checked against HCPackIntegrity):
    /// those `listed`, or with no list every regular file under Contents/ (junk aside).
    func filesToInstall(_ report: VerificationReport, listed: [String]?, archive: String) throws(HCPackError) -> [InstalledFile] {
        // Positions in the snapshot by name under Contents/, matched as Strings are (NFC finds NFD).
        let entries = report.snapshot.entries
        // "Contents/" is ASCII: its length in UTF-8 is its length in Characters, and slicing by UTF-8 is O(1).
        let prefixLength = "Contents/".utf8.count
        func name(_ index: Int) -> Substring {
            let path = entries[index].path
            return path[path.utf8.index(path.utf8.startIndex, offsetBy: prefixLength)...]
        }
        func hash(_ name: Substring) -> UInt32 { UInt32(truncatingIfNeeded: name.hashValue) }
        var byPath = PositionIndex(expectedCount: entries.count)
        for (index, entry) in entries.enumerated() where entry.kind == .file && entry.path.hasPrefix("Contents/") {
            let key = name(index)
            byPath.update(index, hash: hash(key)) { name($0) == key }
        }
        func position(_ path: Substring) -> Int? { byPath.find(hash(path)) { name($0) == path } }
        let paths: [String]
        if let listed {
            paths = listed
        } else {
            // One path per name (the last entry, as the lookup finds it).
            paths = entries.indices.filter { entries[$0].kind == .file && entries[$0].path.hasPrefix("Contents/") && position(name($0)) == $0 }
                .map { String(name($0)) }.filter { !PackagePath.isJunk($0) }.sorted()
        }
        var result: [InstalledFile] = []
        result.reserveCapacity(paths.count)
        for path in paths {
            if let first = Self.firstComponent(of: path), Installer.isMetadataFolder(first) {
                throw HCPackError(
                    .invalidPackage,
                    "\(archive): Contents/\(path) would land in DEST/\(Installer.metadataFolder), where hcpack keeps its records; rename that folder in the package",
                    path: archive)
            }
            guard PackagePath.unsafeArchiveNameReason(path) == nil, let index = position(path[...]), let digest = entries[index].sha256
            else {
                // Verify reports these as errors; this only guards against a rule being relaxed later.
                throw HCPackError(
                    .invalidPackage, "\(archive): Contents/\(path) is not a regular file in the package; run hcpack verify on it",
                    path: archive)
            }
            let entry = entries[index]
            result.append(InstalledFile(path: path, size: entry.size, sha256: digest.hexString))
            // Files may spell a name in another Unicode normalization than the archive: stage by the archive's.
            if ExactPath(name(index)) != ExactPath(path) {
                stagedNames[ExactPath(path)] = String(entry.path.dropFirst("Contents/".count))
            }
        }
        result.sort { $0.path < $1.path }
        return result
    }

    /// `path.split(separator: "/").first`, without splitting the whole path by Characters when it is a plain
    /// ASCII path (one Character a byte, no empty component): this runs for every file installed.
    static func firstComponent(of path: String) -> Substring? {
        guard PackagePath.isASCII(path) && PackagePath.isPlainRelativePath(path) else { return path.split(separator: "/").first }
        return path[..<(path.utf8.firstIndex(of: UInt8(ascii: "/")) ?? path.endIndex)]
    }

    /// Archive names of content files that DEST already holds with the bytes this plist records, as installed
    /// by hcpack (the receipt records the same size and digest, and the file has that size now).
    func namesInPlace(plistName: String, plist: [UInt8]) -> Set<String> {
        let prefix = plistName.dropLast(ContentInfo.fileName.count) + "Contents/"
        // Nothing was installed here before: no need to parse the plist a second time. After a crash (a
        // journal is left) a file may hold the journal's bytes at the receipt's size: stage everything then.
        guard (try? metadata.status(Installer.receiptsFolder)) != nil,
            let info = try? ContentInfo.decode(plist, limits: options.verify.limits.plist),
            let identifier = info.productIdentifier, let files = info.files,
            (try? metadata.status(Installer.journalName(identifier))) == nil,
            let records = try? info.parseIntegrity(),
            let receipt = try? InstallRecords.receipt(
                identifier, in: metadata.openDirectory(Installer.receiptsFolder), limits: options.verify.limits)
        else { return [] }
        let owned = receipt.recordsByPath
        var names: Set<String> = []
        for path in files where PackagePath.unsafeArchiveNameReason(path) == nil {
            guard let record = records[path], owned[path] == record, case .file(let size)? = try? inspect(path),
                size == record.size
            else { continue }
            names.insert(prefix + path)
        }
        return names
    }

    /// A record read by `read`; with --force an unusable one is set aside (nil: as if absent), and this
    /// install writes its own in its place.
    func usableRecord<Record>(_ read: () throws(HCPackError) -> Record?) throws(HCPackError) -> Record? {
        do {
            return try read()
        } catch {
            guard options.force && error.code == .invalidPackage else { throw error }
            setAsideRecord = true
            return nil
        }
    }

    /// The installing product's receipt in `receipts`. With --force an unusable one is set aside, but never
    /// under --trusted-key: the version it records cannot be known, and setting it aside would skip the
    /// downgrade check (rollback protection).
    func usableReceipt(_ identifier: String, in receipts: DirectoryHandle?) throws(HCPackError) -> InstallReceipt? {
        let limits = options.verify.limits
        let remedy: InstallRecords.Remedy = options.signature == nil ? .force : .removeByHand
        let read = { () throws(HCPackError) in
            try InstallRecords.receipt(identifier, in: receipts, limits: limits, remedy: remedy)
        }
        return options.signature == nil ? try usableRecord(read) : try read()
    }

    /// An unusable record was set aside (--force): this install then writes DEST's records anew, even where
    /// nothing else changes.
    var setAsideRecord = false

    /// The folder `inspect` looked in last (nil: absent). Files come sorted, so most share their folder with
    /// the one before; this only reads, placing walks from DEST again.
    var lastInspected: (path: String, handle: DirectoryHandle?)?
    /// DEST's receipt, once a delta's install has checked that it is the delta's base (`baseReceipt`).
    var deltaBaseReceipt: InstallReceipt?
}
