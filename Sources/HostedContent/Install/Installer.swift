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
    /// Wait for another install into the same destination instead of failing at once.
    public var wait: Bool
    /// Rules and read limits (`verify.limits.archive` bounds entries, bytes and compression ratio).
    public var verify: VerifyOptions
    /// Trusted keys: the archive is installed only with a valid signed note by one of them, and never below the
    /// receipt's version (docs/signing.md); nil requires no signature.
    public var signature: SignaturePolicy?

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
    /// Bytes placed by this install.
    public var bytes: Int64
    /// Bytes written to the staging folder: files DEST already held with the recorded bytes are not staged.
    public var stagedBytes: Int64
    /// The verification of the package (warnings only, or none): its problems and counts. The plist and the
    /// entries are not kept (tens of MB for a big package); `Verifier.verify` on the archive gives them.
    public var report: VerificationReport
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
    /// Receipts folder inside `metadataFolder`.
    public static let receiptsFolder = "receipts"
    /// Largest receipt or journal read back (a receipt lists at most `maxEntries` files).
    static let recordLimit = 256 << 20

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
        let signature = try options.signature.map { policy throws(HCPackError) in
            try SignatureChecker.checkArchive(archive, policy: policy)
        }
        if let signature, signature.problems.hasErrors { return .rejected(signature.rejection(archive)) }
        let session = try InstallSession(options: options, progress: progress)
        session.signature = signature
        do {
            return try session.run(archive)
        } catch {
            session.abandon()
            throw error
        }
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
    /// The archive's signature, checked against the archive file; the package is held to its statement.
    var signature: ArchiveSignatureCheck?
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

    func run(_ archive: String) throws(HCPackError) -> InstallOutcome {
        // Leftovers of installs that were killed: nobody else can be using them while we hold the lock.
        for name in try metadata.list() where name.hasPrefix(StagingArea.namePrefix) {
            try metadata.removeTree(name)
        }
        let staging = try StagingArea(in: metadata, progress: progress)
        self.staging = staging
        if !options.force {
            // With --force a changed file may need the package's bytes after all: stage everything then.
            staging.inPlaceNames = { [unowned self] plistName, bytes in self.namesInPlace(plistName: plistName, plist: bytes) }
        }
        staging.startFlushing()
        var report = try readAndCheck(archive, staging: staging)
        if let signature { report.problems.append(contentsOf: signature.checkPackage(report, installAll: options.installAll)) }
        if !report.isValid() {
            abandon()
            return .rejected(report)
        }
        let package = try identify(report, archive: archive)
        // A delta installs like the full version, its carried-over files found in DEST (DeltaInstall.swift).
        let delta = report.deltaBase
        plistSHA256 = delta?.targetPlistSHA256 ?? report.snapshot.contentInfoBytes.map { Hasher.digest(.sha256, of: $0).hexString }
        let carried = try delta.map { _ throws(HCPackError) in try carriedFiles(report, archive: archive) } ?? []
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
            try applyPatches(patched, package: package, archive: archive)  // issue 32
        }
        let plan = try makePlan(package: package, wanted: wanted)
        if delta != nil { try checkCarriedStayInPlace(plan, carried: carried) }
        var result = try execute(plan, package: package, wanted: wanted, report: report)
        result.selection = selection
        try? staging.remove()
        self.staging = nil
        lock.release()
        return .completed(result)
    }

    /// Streams the archive into staging and runs the rules; the snapshot lives only as long as this call.
    /// The verdict is verify's, unchanged: install refuses exactly the packages `verify` reports invalid.
    func readAndCheck(_ archive: String, staging: StagingArea) throws(HCPackError) -> VerificationReport {
        let snapshot = try PackageScanner.readArchive(archive, limits: options.verify.limits, staging: staging)
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
            if Self.firstComponent(of: path) == Substring(Installer.metadataFolder) {
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
        // Nothing was installed here before: no need to parse the plist a second time.
        guard (try? metadata.status(Installer.receiptsFolder)) != nil,
            let info = try? ContentInfo.decode(plist, limits: options.verify.limits.plist),
            let identifier = info.productIdentifier, let files = info.files,
            let records = try? info.parseIntegrity(),
            let receiptBytes = try? metadata.openDirectory(Installer.receiptsFolder)?.readFile(
                Installer.receiptName(identifier), limit: Installer.recordLimit),
            let receipt = InstallReceipt.decode(receiptBytes), receipt.productIdentifier == identifier
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

    // MARK: Planning

    /// What is at a target path.
    enum Target {
        case absent
        case file(size: Int64)
        case other(EntryKind)
        /// A parent is not a folder (a file or a symlink): never installed through, even with --force.
        case blocked(String)
    }

    struct Plan {
        var place: [InstalledFile] = []
        var skip: [String] = []
        var remove: [String] = []
        var keep: [String] = []
        /// Paths of the previous version that are gone already (an interrupted install moved them): their
        /// folders are removed if empty.
        var gone: [String] = []
        var previous: InstallReceipt?
        var journal: InstallJournal?
        var status = InstallStatus.installed
    }

    func inspect(_ path: String) throws(HCPackError) -> Target {
        let folderPath: Substring
        let leaf: Substring
        var parts: [Substring]?
        if PackagePath.isASCII(path) && PackagePath.isPlainRelativePath(path) {
            // One Character a byte and no empty component: the folder and leaf that splitting by Characters and
            // joining gives, found without a String per component (this runs for every file installed).
            let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
            folderPath = slash.map { path[..<$0] } ?? ""
            leaf = slash.map { path[path.utf8.index(after: $0)...] } ?? path[...]
        } else {
            var split = path.split(separator: "/")
            guard let last = split.popLast() else { return .absent }
            leaf = last
            folderPath = Substring(split.joined(separator: "/"))
            parts = split
        }
        let folder: DirectoryHandle?
        if let lastInspected, lastInspected.path == folderPath {
            folder = lastInspected.handle
        } else {
            do {
                folder = try destination.openDirectories(parts ?? folderPath.split(separator: "/"))
            } catch {
                return .blocked(error.message)
            }
            lastInspected = (String(folderPath), folder)
        }
        guard let folder, let status = try folder.status(String(leaf)) else { return .absent }
        return status.kind == .file ? .file(size: status.size) : .other(status.kind)
    }

    /// The folder `inspect` looked in last (nil: absent). Files come sorted, so most share their folder with
    /// the one before; this only reads, placing walks from DEST again.
    var lastInspected: (path: String, handle: DirectoryHandle?)?

    func digest(_ path: String) throws(HCPackError) -> FileRecord? {
        var parts = path.split(separator: "/")
        guard let leaf = parts.popLast(), let folder = try destination.openDirectories(parts) else { return nil }
        return try folder.digest(String(leaf))
    }

    /// True when the file at `path` has exactly one of the `records` (hashing only when a size matches).
    func matches(_ path: String, size: Int64, _ records: [FileRecord?]) throws(HCPackError) -> FileRecord? {
        let candidates = records.compactMap { $0 }.filter { $0.size == size }
        if candidates.isEmpty { return nil }
        if let known = hashedInPlace[path], known.size == size { return candidates.first { $0 == known } }
        guard let actual = try digest(path) else { return nil }
        return candidates.first { $0 == actual }
    }

    func makePlan(package: Package, wanted: [InstalledFile]) throws(HCPackError) -> Plan {
        var plan = Plan()
        let identifier = package.productIdentifier
        if let bytes = try metadata.openDirectory(Installer.receiptsFolder)?.readFile(
            Installer.receiptName(identifier), limit: Installer.recordLimit)
        {
            plan.previous = InstallReceipt.decode(bytes).flatMap { $0.productIdentifier == identifier ? $0 : nil }
        }
        if let bytes = try metadata.readFile(Installer.journalName(identifier), limit: Installer.recordLimit) {
            plan.journal = InstallJournal.decode(bytes)
        }
        let previousVersion = plan.previous.flatMap { ContentVersion($0.version) }
        if let previousVersion, previousVersion > package.version, !options.force || options.signature != nil {
            // With trusted keys, never (rollback protection): an old signed release stays signed.
            let remedy = options.signature == nil ? "Pass --force to downgrade" : "A signed install never downgrades"
            throw HCPackError(
                .invalidPackage,
                "\(destinationPath) has version \(previousVersion.text) of '\(identifier)'; this package is the older \(package.version.text). \(remedy)",
                path: destinationPath)
        }
        let owned = plan.previous?.recordsByPath ?? [:]
        let journaled = Dictionary((plan.journal?.files ?? []).map { ($0.path, $0.record) }, uniquingKeysWith: { a, _ in a })

        var conflicts: [String] = []
        lastInspected = nil  // may be from the streaming phase: look again
        for file in wanted {
            let location = destinationPath + "/" + file.path
            switch try inspect(file.path) {
            case .absent:
                plan.place.append(file)
            case .file(let size):
                if try matches(file.path, size: size, [file.record]) != nil {
                    plan.skip.append(file.path)
                } else if try matches(file.path, size: size, [owned[file.path], journaled[file.path]]) != nil || options.force {
                    plan.place.append(file)
                } else {
                    conflicts.append(
                        "\(location): a file hcpack did not install (or one changed since) is in the way; move it away or pass --force to overwrite it"
                    )
                }
            case .other(let kind):
                if kind == .directory {
                    conflicts.append("\(location) is a folder where the package has a file; remove or rename the folder")
                } else if options.force {
                    plan.place.append(file)  // rename replaces the link or special file itself, never its target
                } else {
                    conflicts.append(
                        "\(location) is a \(kind.noun) where the package has a file; remove it or pass --force to replace it")
                }
            case .blocked(let message):
                conflicts.append(message)
            }
        }
        if !conflicts.isEmpty {
            throw HCPackError(
                .invalidPackage,
                "\(conflicts.count == 1 ? "a path" : "\(conflicts.count) paths") in the destination block the install; nothing was changed:\n  "
                    + conflicts.joined(separator: "\n  "),
                path: destinationPath)
        }
        // A file judged in place while streaming (so not staged) that changed since: its bytes are not at hand.
        for file in plan.place where staging?.wasSkipped(stagedPath(package, file)) == true {
            throw HCPackError(
                .io, "\(destinationPath)/\(file.path) changed while the archive was being read; run the install again",
                path: destinationPath + "/" + file.path)
        }

        // Files of the previous install (or of an interrupted one) that this version no longer lists.
        let wantedPaths = Set(wanted.map(\.path))
        for path in Set(owned.keys).union(journaled.keys).subtracting(wantedPaths).sorted() {
            let target = try inspect(path)
            if case .absent = target { plan.gone.append(path) }
            guard case .file(let size) = target else {
                continue  // gone already, or replaced by something that is not ours
            }
            if try matches(path, size: size, [owned[path], journaled[path]]) != nil {
                plan.remove.append(path)
            } else {
                plan.keep.append(path)
            }
        }

        lastInspected = nil
        if let previousVersion {
            if package.version > previousVersion {
                plan.status = .upgraded
            } else if package.version < previousVersion {
                plan.status = .downgraded
            } else {
                let sameReceipt = plan.previous == receipt(package, wanted)
                plan.status =
                    plan.place.isEmpty && plan.remove.isEmpty && sameReceipt && plan.journal == nil ? .unchanged : .installed
            }
        }
        return plan
    }

    /// Where a file to install is in the archive, and so in the staging folder.
    func stagedPath(_ package: Package, _ file: InstalledFile) -> String {
        package.contentsPrefix + (stagedNames[ExactPath(file.path)] ?? file.path)
    }

    func receipt(_ package: Package, _ wanted: [InstalledFile]) -> InstallReceipt {
        InstallReceipt(
            productIdentifier: package.productIdentifier, version: package.version.text, files: wanted,
            signers: signature?.signers ?? [], plistSHA256: plistSHA256)
    }

    // MARK: Placing

    func execute(_ plan: Plan, package: Package, wanted: [InstalledFile], report: VerificationReport)
        throws(HCPackError) -> InstallResult
    {
        var result = InstallResult(
            status: plan.status, productIdentifier: package.productIdentifier, version: package.version.text,
            previousVersion: plan.previous?.version, selection: .files, installed: [], skipped: plan.skip, removed: [],
            kept: plan.keep,
            bytes: 0, stagedBytes: staging?.writtenBytes ?? 0, report: report)
        if plan.status == .unchanged { return result }
        guard let staging else { throw HCPackError(.io, "internal error: no staging folder", path: destinationPath) }

        try staging.synchronize()
        // The journal marks every path that may hold our bytes after a crash, before the first rename.
        let wantedPaths = Set(wanted.map(\.path))
        let carried = (plan.journal?.files ?? []).filter { !wantedPaths.contains($0.path) }
        let journal = InstallJournal(
            productIdentifier: package.productIdentifier, version: package.version.text, files: wanted + carried)
        let journalName = Installer.journalName(package.productIdentifier)
        do throws(HCPackError) {
            try metadata.writeAtomically(journalName) { file throws(HCPackError) in try journal.write(chunks: file.write) }
        } catch {
            // Nothing in DEST changed yet. The rename may have happened before a failing fsync: without an older
            // journal to keep (its paths are carried in this one), remove it so DEST is exactly as before.
            if plan.journal == nil { _ = try? metadata.removeFile(journalName) }
            throw error
        }
        committed = true

        // Until the receipt is renamed into place, every change is recorded so a failure can be undone.
        var undo = Undo()
        let receiptName = Installer.receiptName(package.productIdentifier)
        let receipts: DirectoryHandle
        do throws(HCPackError) {
            try place(plan, package: package, staging: staging, result: &result, undo: &undo)
            let (folder, created) = try metadata.makeDirectory(Installer.receiptsFolder)
            receipts = folder
            undo.createdReceipts = created
            try metadata.synchronize()
            let receipt = receipt(package, wanted)
            let temporary = try receipts.writeTemporary(receiptName) { file throws(HCPackError) in try receipt.write(chunks: file.write) }
            do throws(HCPackError) {
                try receipts.rename(temporary, to: receipts, receiptName)
            } catch {
                _ = try? receipts.removeFile(temporary)
                throw error
            }
        } catch {
            if rollBack(undo, staging: staging, removeJournal: plan.journal == nil ? journalName : nil) {
                throw HCPackError(
                    error.code, "\(error.message); the install was undone, \(destinationPath) is as it was before",
                    path: error.path)
            }
            throw HCPackError(
                error.code, "\(error.message); run the install again to complete it (the journal records how far it got)",
                path: error.path)
        }

        // The receipt is in place: the new version is installed, whatever fails from here on (a rerun tidies up).
        try receipts.synchronize()
        try metadata.removeFile(journalName)
        try metadata.synchronize()
        return result
    }

    /// What placing changed in DEST, newest last.
    struct Undo {
        enum Step {
            /// The file at `path` (relative to DEST) was renamed into place; `backup` names the file it
            /// replaced, kept in the staging area's replaced folder. (The path alone, sharing the plan's
            /// string: one step per installed file, and split parts cost 220 bytes a file.)
            case placed(path: String, backup: String?)
            /// `name` in the folder at `parent` (a stale file) was moved to `backup` in the replaced folder.
            case removed(parent: [Substring], name: String, backup: String)
            /// The empty folder `name` in the folder at `parent`, with mode `mode`, was removed.
            case removedFolder(parent: [Substring], name: String, mode: FileMode)
            /// The staged folder `staged` (an archive path) was moved to `name` in DEST, files and all.
            case movedFolder(name: String, staged: String)
        }
        var steps: [Step] = []
        /// Folders made for new files, parents first. (Paths, not descriptors: a package may have more folders
        /// than a process may hold open; undoing reopens each, never following a symlink.)
        var createdFolders: [(parent: [Substring], name: String)] = []
        var createdReceipts = false
    }

    /// Renames every staged file into place, moves stale files aside and removes the folders they leave empty,
    /// recording each step in `undo`.
    func place(_ plan: Plan, package: Package, staging: StagingArea, result: inout InstallResult, undo: inout Undo)
        throws(HCPackError)
    {
        let totalBytes = plan.place.reduce(Int64(0)) { $0 + $1.size }
        var touchedFolders: Set<String> = [""]
        // `isNew`: this install made the folder, so nothing but what it placed there can be in it.
        var destinationFolder: (path: String, handle: DirectoryHandle, isNew: Bool)?
        var stagingFolder: (path: String, handle: DirectoryHandle)?
        let movable = try foldersToMoveWhole(plan, package: package, staging: staging)
        var moved: Set<String> = []
        var notMoved: Set<String> = []
        for file in plan.place {
            if let top = Self.topFolder(of: file.path), movable.contains(top), !notMoved.contains(top) {
                if !moved.contains(top) {
                    // One rename instead of one per file, and no folders to make: the whole folder is this
                    // install's (checked by foldersToMoveWhole), and DEST has nothing by that name.
                    let staged = package.contentsPrefix + top
                    guard let source = try staging.folder(of: staged) else {
                        throw HCPackError(.io, "internal error: \(staged) was not staged", path: staged)
                    }
                    if try source.renameWithoutReplacing(top, to: destination, top) {
                        moved.insert(top)
                        undo.steps.append(.movedFolder(name: top, staged: staged))
                        touchedFolders.insert(top)
                    } else {
                        notMoved.insert(top)  // taken meanwhile, or no renameat2: file by file below
                    }
                }
                if moved.contains(top) {
                    record(file, into: &result, totalBytes: totalBytes, totalFiles: plan.place.count)
                    continue
                }
            }
            var parts = file.path.split(separator: "/")
            guard let leaf = parts.popLast().map(String.init) else { continue }
            let folderPath = parts.joined(separator: "/")
            let target: DirectoryHandle
            let targetIsNew: Bool
            if let destinationFolder, destinationFolder.path == folderPath {
                target = destinationFolder.handle
                targetIsNew = destinationFolder.isNew
            } else {
                var current = destination
                var created = false
                for (index, component) in parts.enumerated() {
                    (current, created) = try current.makeDirectory(String(component))
                    if created { undo.createdFolders.append((Array(parts[..<index]), String(component))) }
                }
                target = current
                targetIsNew = created
                destinationFolder = (folderPath, target, targetIsNew)
                for index in parts.indices { touchedFolders.insert(parts[...index].joined(separator: "/")) }
            }
            let stagedName = stagedPath(package, file)
            var stagedParts = stagedName.split(separator: "/")
            guard let stagedLeaf = stagedParts.popLast() else {
                throw HCPackError(.io, "internal error: \(stagedName) was not staged", path: stagedName)
            }
            // The staging folder is ours alone (0700, inside DEST/.hcpack), so reusing its handles is safe.
            let stagedFolderPath = stagedParts.joined(separator: "/")
            let source: DirectoryHandle
            if let stagingFolder, stagingFolder.path == stagedFolderPath {
                source = stagingFolder.handle
            } else {
                guard let opened = try staging.folder(of: stagedName) else {
                    throw HCPackError(.io, "internal error: \(stagedName) was not staged", path: stagedName)
                }
                source = opened
                stagingFolder = (stagedFolderPath, opened)
            }
            // A second name for the file being replaced keeps its bytes until the receipt is written. Where a
            // hard link is refused (a file system without them, protected_hardlinks for another user's file),
            // the file is moved aside instead: the path is then briefly absent, never partial.
            var backup: String?
            if !targetIsNew, try target.status(leaf) != nil {
                let name = String(undo.steps.count)
                let replaced = try staging.replacedFolder()
                do throws(HCPackError) {
                    try target.link(leaf, to: replaced, name)
                } catch {
                    try target.rename(leaf, to: replaced, name)
                }
                backup = name
            }
            try source.rename(String(stagedLeaf), to: target, leaf)
            undo.steps.append(.placed(path: file.path, backup: backup))
            record(file, into: &result, totalBytes: totalBytes, totalFiles: plan.place.count)
        }
        destinationFolder = nil
        stagingFolder = nil

        for path in plan.remove {
            var parts = path.split(separator: "/")
            guard let leaf = parts.popLast().map(String.init), let folder = try destination.openDirectories(parts),
                try folder.status(leaf) != nil
            else {
                continue
            }
            let backup = String(undo.steps.count)
            try folder.rename(leaf, to: staging.replacedFolder(), backup)
            undo.steps.append(.removed(parent: parts, name: leaf, backup: backup))
            result.removed.append(path)
            for index in parts.indices { touchedFolders.insert(parts[...index].joined(separator: "/")) }
            try removeEmptyFolders(parts, undo: &undo)
        }
        for path in plan.gone {
            let parts = Array(path.split(separator: "/").dropLast())
            for index in parts.indices { touchedFolders.insert(parts[...index].joined(separator: "/")) }
            try removeEmptyFolders(parts, undo: &undo)
        }

        // Renames and removals reach the disk before the receipt says they happened. Every folder touched is
        // opened again from DEST, which also catches one swapped for a symlink meanwhile; then one syncfs for
        // the whole file system (DEST and the staging area share it) rather than an fsync per folder, which
        // cost a third of placing with a few hundred folders.
        let oneSync = FileSystemSync.isAvailable
        for folderPath in touchedFolders.sorted(by: >) {
            let parts = folderPath.split(separator: "/")
            let folder = try destination.openDirectories(parts)
            if !oneSync { try folder?.synchronize() }
        }
        if oneSync { try FileSystemSync.synchronize(destination) }
    }

    /// Counts a placed file in the result and reports progress.
    private func record(_ file: InstalledFile, into result: inout InstallResult, totalBytes: Int64, totalFiles: Int) {
        result.installed.append(file.path)
        result.bytes += file.size
        progress?(
            ProgressUpdate(
                phase: "installing", completedBytes: result.bytes, totalBytes: totalBytes, completedFiles: result.installed.count,
                totalFiles: totalFiles))
    }

    /// The first folder of a path ("media" for "media/a/b.png"); nil for a file at the top.
    static func topFolder(of path: String) -> String? {
        path.firstIndex(of: "/").map { String(path[..<$0]) }
    }

    /// Top folders (of paths relative to DEST) that can be moved into DEST whole: DEST has nothing by that
    /// name, and the staging area holds exactly the files to place there, under the same names (a name that
    /// Files spells in another normalization than the archive, or a staged file Files does not list, keeps
    /// the folder out). A first install then renames a handful of folders rather than every file.
    func foldersToMoveWhole(_ plan: Plan, package: Package, staging: StagingArea) throws(HCPackError) -> Set<String> {
        var wanted: [String: StagingArea.FolderSummary] = [:]
        for file in plan.place {
            guard let top = Self.topFolder(of: file.path) else { continue }
            wanted[top, default: StagingArea.FolderSummary()].add(file.path[...])
        }
        var movable: Set<String> = []
        for (top, summary) in wanted where staging.summary(ofTopFolder: package.contentsPrefix + top) == summary {
            if try destination.status(top) == nil { movable.insert(top) }
        }
        return movable
    }

    /// Removes the folder at `folder` if empty, then its parents while they are empty (a folder with anything
    /// else in it stays), recording each in `undo`.
    func removeEmptyFolders(_ folder: [Substring], undo: inout Undo) throws(HCPackError) {
        var parts = folder
        while let last = parts.popLast().map(String.init) {
            guard let parent = try destination.openDirectories(parts), let status = try parent.status(last),
                status.kind == .directory
            else { break }
            guard try parent.removeDirectoryIfEmpty(last) else { break }
            undo.steps.append(.removedFolder(parent: parts, name: last, mode: FileMode(status.permissions)))
        }
    }

    /// Undoes `undo` newest first: replaced and removed files go back, new files and the folders made for them
    /// go. Then the journal (when this install wrote the only one) goes too.
    /// - Returns: true when DEST is back as it was.
    func rollBack(_ undo: Undo, staging: StagingArea, removeJournal journalName: String?) -> Bool {
        var intact = true
        let replaced = undo.steps.isEmpty ? nil : try? staging.replacedFolder()
        for step in undo.steps.reversed() {
            switch step {
            case .placed(let path, let backup):
                var parent = path.split(separator: "/")
                let name = parent.popLast().map(String.init) ?? path
                guard let folder = try? destination.openDirectories(parent) else {
                    intact = false
                    continue
                }
                if let backup {
                    intact = (replaced.map { (try? $0.rename(backup, to: folder, name)) != nil } ?? false) && intact
                } else {
                    intact = (try? folder.removeFile(name)) == true && intact
                }
                try? folder.synchronize()
            case .removed(let parent, let name, let backup):
                guard let replaced, let folder = try? destination.openDirectories(parent),
                    (try? replaced.rename(backup, to: folder, name)) != nil
                else {
                    intact = false
                    continue
                }
                try? folder.synchronize()
            case .movedFolder(let name, let staged):
                // Back where it was staged; the staging area is removed afterwards either way.
                guard let source = try? staging.folder(of: staged),
                    (try? destination.rename(name, to: source, name)) != nil
                else {
                    intact = false
                    continue
                }
                try? destination.synchronize()
            case .removedFolder(let parent, let name, let mode):
                guard let folder = try? destination.openDirectories(parent),
                    (try? folder.createDirectory(name, mode: mode)) == true
                else {
                    intact = false
                    continue
                }
                try? folder.setPermissions(name, mode)  // exactly the mode it had, whatever the umask
                try? folder.synchronize()
            }
        }
        for (parent, name) in undo.createdFolders.reversed() {
            guard let folder = try? destination.openDirectories(parent) else {
                intact = false
                continue
            }
            intact = folder.removeEmptyDirectory(name) && intact
            try? folder.synchronize()
        }
        if undo.createdReceipts { metadata.removeEmptyDirectory(Installer.receiptsFolder) }
        guard intact else { return false }
        if let journalName {
            guard (try? metadata.removeFile(journalName)) != nil, (try? metadata.synchronize()) != nil else { return false }
            committed = false
        }
        return true
    }
}
