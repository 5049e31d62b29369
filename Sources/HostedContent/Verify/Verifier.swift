import Digest
import Foundation
import PropertyList

/// Settings for `Verifier`.
public struct VerifyOptions: Sendable {
    /// Largest total content size: the 2 GB that App Store hosted content allowed.
    public static let defaultMaxSize: Int64 = 2_000_000_000

    public var maxSize: Int64
    public var limits: ReadLimits
    /// Size limits to check (`budget.*` rules); nil checks none.
    public var budget: SizeBudget?

    public init(maxSize: Int64 = VerifyOptions.defaultMaxSize, limits: ReadLimits = ReadLimits(), budget: SizeBudget? = nil) {
        self.maxSize = maxSize
        self.limits = limits
        self.budget = budget
    }
}

/// The outcome of verifying one package: every problem found, and what the package is.
public struct VerificationReport: Sendable {
    public var problems: ProblemList
    /// The parsed plist, when it could be read.
    public var contentInfo: ContentInfo?
    /// Number of paths in Files (0 when absent).
    public var listedFileCount: Int
    /// Regular files under Contents/, and their total size.
    public var contentFileCount: Int
    public var contentBytes: Int64
    public var snapshot: PackageSnapshot

    /// Drops the plist (bytes and tree) and the entries, keeping problems and counts: for callers that
    /// only report problems after acting on a big package.
    public mutating func releaseContents() {
        releasePlist()
        snapshot.entries = []
    }

    /// Drops the plist, bytes and tree.
    mutating func releasePlist() {
        contentInfo = nil
        snapshot.contentInfoBytes = nil
    }

    /// Valid when there is no error (and, with `strict`, no warning either).
    public func isValid(strict: Bool = false) -> Bool {
        strict ? problems.problems.isEmpty : !problems.hasErrors
    }
}

/// Runs every rule of docs/rules.md over a package and reports all problems at once.
public enum Verifier {
    static let contentsFolder = "Contents"
    static let contentsPrefix = "Contents/"
    /// Where install keeps its records in DEST, as a path in the package.
    static let reservedPrefix = contentsPrefix + Installer.metadataFolder + "/"

    static let patchFolderMessage =
        "hcpack delta keeps its binary patches in \(contentsPrefix)\(FilePatch.folder)/, so no delta could carry or patch this file; rename that folder"

    /// True for a path under Contents/.hcpack/, spelled in any case (`Installer.isMetadataFolder`).
    static func isReserved(_ path: String) -> Bool {
        guard path.hasPrefix(contentsPrefix) else { return false }
        let rest = path.dropFirst(contentsPrefix.count)
        guard let slash = rest.firstIndex(of: "/"), rest[rest.index(after: slash)...].contains(where: { $0 != "/" }) else {
            return false
        }
        return Installer.isMetadataFolder(rest[..<slash])
    }

    /// Verifies a package folder or archive.
    /// - Throws: `HCPackError` only when the input cannot be read at all (missing, permission, I/O).
    public static func verify(_ path: String, options: VerifyOptions = VerifyOptions()) throws(HCPackError) -> VerificationReport {
        var hashPolicy: (String) -> Bool = { _ in false }
        var parsed: ParsedPlist?
        if try FileSystem.status(path)?.kind == .directory {
            // Hash only what the plist records a digest for; nothing to prove otherwise.
            let plistPath = path + "/" + ContentInfo.fileName
            if try FileSystem.status(plistPath)?.kind == .file,
                let bytes = try? FileSystem.readFile(plistPath, limit: options.limits.plist.maxBytes),
                let value = try? PropertyList.decode(bytes, limits: options.limits.plist).value
            {
                parsed = ParsedPlist(bytes: bytes, value: value)
                if case .dictionary(let dictionary) = value,
                    let records = try? ContentInfo(dictionary: dictionary).parseIntegrity()
                {
                    // The plist's own strings; each path is matched without its "Contents/" prefix.
                    let recorded = Set(records.keys)
                    let prefix = Array(contentsPrefix.utf8)
                    // And a delta's patches, whose records (HCPackPatches) give their SHA-256.
                    hashPolicy = { path in
                        path.utf8.starts(with: prefix)
                            && (recorded.contains(String(decoding: path.utf8.dropFirst(prefix.count), as: UTF8.self))
                                || FilePatch.isPatchEntry(path))
                    }
                }
            }
        }
        let snapshot = try PackageScanner.scan(
            path, limits: options.limits, knownPlist: parsed?.bytes, hashFolderFiles: hashPolicy)
        // The walk read the plist again; when it is unchanged, reuse the parse (tens of MB for big packages).
        let reusable = parsed.flatMap { $0.bytes == snapshot.contentInfoBytes ? $0.value : nil }
        parsed = nil  // a stale copy of the bytes, should the plist have changed since
        hashPolicy = { _ in false }  // and the set of recorded paths
        var checker = RuleChecker(snapshot: snapshot, options: options)
        checker.parsedPlist = reusable
        return report(of: &checker)
    }

    /// Applies the rules to a snapshot already read.
    public static func check(_ snapshot: PackageSnapshot, options: VerifyOptions = VerifyOptions()) -> VerificationReport {
        check(snapshot, options: options, decodedPlist: nil)
    }

    /// `check`, where the caller already has `snapshot.contentInfoBytes` decoded.
    static func check(_ snapshot: PackageSnapshot, options: VerifyOptions, decodedPlist: PlistValue?) -> VerificationReport {
        var checker = RuleChecker(snapshot: snapshot, options: options)
        checker.parsedPlist = decodedPlist
        return report(of: &checker)
    }

    /// The plist bytes read before the walk, and their parse.
    private struct ParsedPlist {
        var bytes: [UInt8]
        var value: PlistValue
    }

    private static func report(of checker: inout RuleChecker) -> VerificationReport {
        checker.run()
        return VerificationReport(
            problems: checker.problems, contentInfo: checker.contentInfo, listedFileCount: checker.listed.count,
            contentFileCount: checker.contentFileCount, contentBytes: checker.contentBytes, snapshot: checker.snapshot)
    }
}

/// One pass of the rules over a snapshot. Lookups are by dictionary, so cost grows linearly with entries.
private struct RuleChecker {
    let snapshot: PackageSnapshot
    let options: VerifyOptions
    var problems = ProblemList()
    var contentInfo: ContentInfo?
    var listed: [String] = []
    /// Positions in `listed` by exact path, the first of each (built by `checkFilesList`).
    var listedIndex = PositionIndex()
    var contentFileCount = 0
    var contentBytes: Int64 = 0
    /// Position of each entry in `snapshot.entries` by exact path (the last one, should a name repeat).
    var indexByPath: PositionIndex
    /// Folders that exist only implicitly, as prefixes of entry names (archives may omit folder entries);
    /// symlink entries are marked in it, for `symlinkAncestor`.
    var impliedFolders = FolderTree()
    /// Whether any entry is a symlink; without one, no path can lie inside a symlinked folder.
    var hasSymlinks = false
    /// The plist has HCPackDeltaBase: listed files may be absent (carried over from the base), but every one
    /// needs an integrity record, unless `unchangedDigested`.
    var isDelta = false
    /// The delta's base names the digest of the records of the files it neither carries nor patches
    /// (`DeltaBase.unchangedSHA256`): those need no record of their own; install checks DEST's against it.
    var unchangedDigested = false

    /// `snapshot.contentInfoBytes` already decoded, when the caller has done it.
    var parsedPlist: PlistValue?

    init(snapshot: PackageSnapshot, options: VerifyOptions) {
        self.snapshot = snapshot
        self.options = options
        indexByPath = PositionIndex(expectedCount: snapshot.entries.count)
        let entries = snapshot.entries
        for (index, entry) in entries.enumerated() {
            indexByPath.update(index, exactly: entry.path) { entries[$0].path }
            if entry.kind == .symlink { hasSymlinks = true }
            impliedFolders.addAncestors(of: entry.path)
        }
        // A name that repeats counts as what its last entry is, as `entry(_:)` finds it. Marked after every
        // folder is known: only a symlink that other entries lie in matters.
        for entry in entries where entry.kind == .symlink && self.entry(entry.path)?.kind == .symlink {
            impliedFolders.mark(entry.path)
        }
    }

    mutating func run() {
        problems.append(contentsOf: snapshot.scanProblems)
        checkStructure()
        checkFileFolderClashes()
        checkPlist()
        checkFilesList()
        checkContent()
        checkIntegrity()
        checkPatches()
        if let budget = options.budget { problems.append(contentsOf: budget.check(snapshot)) }
    }

    /// The entry named exactly `path`, if any.
    func entry(_ path: Substring) -> PackageEntry? {
        let entries = snapshot.entries
        return indexByPath.find(exactly: path) { entries[$0].path }.map { entries[$0] }
    }

    func entry(_ path: String) -> PackageEntry? { entry(path[...]) }

    func isFolder(_ path: String) -> Bool {
        guard let found = entry(path) else { return impliedFolders.contains(path) }
        return found.kind == .directory
    }

    // MARK: Structure

    mutating func checkStructure() {
        let plist = entry(ContentInfo.fileName)
        if let plist, plist.kind != .file {
            problems.add(.plistNotFile, path: ContentInfo.fileName, "ContentInfo.plist is a \(plist.kind.noun); it must be a regular file")
        } else if plist == nil && snapshot.isComplete && !snapshot.scanProblems.rules.contains(.multipleRoots) {
            problems.add(.missingPlist, path: ContentInfo.fileName, "no ContentInfo.plist at the package root; create one (hcpack init) next to Contents/")
        }
        if let contents = entry(Verifier.contentsFolder), contents.kind != .directory {
            problems.add(.contentsNotFolder, path: Verifier.contentsFolder, "Contents is a \(contents.kind.noun); it must be a folder")
        } else if !isFolder(Verifier.contentsFolder) && snapshot.isComplete {
            problems.add(.missingContents, path: Verifier.contentsPrefix, "no Contents/ folder at the package root; put the content files in Contents/")
        }
        for entry in snapshot.entries where !entry.path.utf8.contains(UInt8(ascii: "/")) {
            if entry.path == ContentInfo.fileName || entry.path == Verifier.contentsFolder || PackagePath.isJunk(entry.path) { continue }
            problems.add(.strayEntry, path: entry.path, "only ContentInfo.plist and Contents/ belong at the package root; move it under Contents/ or remove it")
        }
    }

    /// A file whose name is also the folder of other entries ("d" and "d/x", in either order): extractors
    /// disagree on which survives, and install could stage only one of them. (A symlink used as a folder is
    /// `archive.unsafe-path`; Contents/ as a file is `structure.contents-not-folder`.)
    mutating func checkFileFolderClashes() {
        for entry in snapshot.entries
        where entry.kind != .directory && entry.kind != .symlink && entry.path != Verifier.contentsFolder
            && impliedFolders.contains(entry.path)
        {
            problems.add(
                .duplicateEntry, path: entry.path,
                "the archive has a \(entry.kind.noun) and a folder with this name; an extractor would keep only one of them")
        }
    }

    // MARK: ContentInfo.plist

    mutating func checkPlist() {
        guard let bytes = snapshot.contentInfoBytes else { return }
        let value: PlistValue
        do {
            value = try parsedPlist ?? PropertyList.decode(bytes, limits: options.limits.plist).value
        } catch {
            problems.add(.plistParse, path: ContentInfo.fileName, "ContentInfo.plist: \(error); fix the plist so it parses")
            return
        }
        guard case .dictionary(let dictionary) = value else {
            problems.add(.plistNotDictionary, path: ContentInfo.fileName, "the top-level value is a \(value.typeName); ContentInfo.plist must hold a dictionary")
            return
        }
        let info = ContentInfo(dictionary: dictionary)
        contentInfo = info

        switch dictionary[ContentInfo.productIdentifierKey] {
        case nil:
            problems.add(.plistMissingKey, path: ContentInfo.fileName, "IAPProductIdentifier is missing; add the product's identifier (e.g. com.example.levels)")
        case .string(let identifier)?:
            if !ContentInfo.isValidProductIdentifier(identifier) {
                problems.add(
                    .productIdentifierSyntax, path: ContentInfo.fileName,
                    "IAPProductIdentifier '\(PackagePath.printable(identifier))' must be 1 to 100 letters, digits, '.', '-' or '_'")
            }
        case let other?:
            problems.add(.plistWrongType, path: ContentInfo.fileName, "IAPProductIdentifier is a \(other.typeName); make it a string")
        }

        switch dictionary[ContentInfo.contentVersionKey] {
        case nil:
            problems.add(.plistMissingKey, path: ContentInfo.fileName, "ContentVersion is missing; add it as a string such as 1.0")
        case .string(let version)?:
            if ContentVersion(version) == nil {
                problems.add(
                    .contentVersionSyntax, path: ContentInfo.fileName,
                    "ContentVersion '\(PackagePath.printable(version))' must be integers separated by periods (1, 1.0, 2.10.3)")
            }
        case let other?:
            problems.add(.plistWrongType, path: ContentInfo.fileName, "ContentVersion is a \(other.typeName); make it a string such as \"1.0\"")
        }

        switch dictionary[ContentInfo.filesKey] {
        case nil:
            problems.add(.filesKeyMissing, path: ContentInfo.fileName, "no Files array (as in packages Xcode builds): hcpack install installs every file under Contents/, but installers that copy only the listed files copy nothing; hcpack build can generate it")
        case .array(let values)?:
            for (index, value) in values.enumerated() {
                if let path = value.stringValue {
                    listed.append(path)
                } else {
                    problems.add(.plistWrongType, path: ContentInfo.fileName, "Files item \(index) is a \(value.typeName); every item must be a path string")
                }
            }
        case let other?:
            problems.add(.plistWrongType, path: ContentInfo.fileName, "Files is a \(other.typeName); make it an array of path strings")
        }
        checkDeltaBase(info)
    }

    /// A delta's HCPackDeltaBase: well formed, an older base, and a Files list to say what the delta covers.
    mutating func checkDeltaBase(_ info: ContentInfo) {
        guard info.dictionary[DeltaBase.key] != nil else { return }
        isDelta = true
        do {
            guard let base = try DeltaBase.of(info) else { return }
            unchangedDigested = base.unchangedSHA256 != nil
            if let version = info.version, let baseVersion = ContentVersion(base.baseVersion), baseVersion >= version {
                problems.add(
                    .deltaMalformed, path: ContentInfo.fileName,
                    "the delta's base version \(base.baseVersion) is not older than its ContentVersion \(version.text); make the delta again (hcpack delta OLD NEW)")
            }
        } catch {
            // Still read as the kind of delta it claims to be: one error, not one more per file left in place.
            if case .dictionary(let fields)? = info.dictionary[DeltaBase.key] { unchangedDigested = fields[DeltaBase.unchangedKey] != nil }
            problems.add(.deltaMalformed, path: ContentInfo.fileName, "\(error.message); make the delta again (hcpack delta OLD NEW)")
        }
        if info.files == nil {
            problems.add(.deltaMalformed, path: ContentInfo.fileName, "a delta needs a Files array listing every file of the new version")
        }
    }

    // MARK: Files

    mutating func checkFilesList() {
        let listed = self.listed
        let entries = snapshot.entries
        listedIndex = PositionIndex(expectedCount: listed.count)
        var collisions = CollisionFinder(expectedCount: listed.count)
        for (position, path) in listed.enumerated() {
            let syntax = PackagePath.filesEntryProblems(path)
            for (rule, message) in syntax { problems.add(rule, path: path, message) }
            if listedIndex.insert(position, exactly: path, keyAt: { listed[$0] }) != nil {
                problems.add(.filesDuplicate, path: path, "'\(path)' is listed more than once; list each file once")
                continue
            }
            switch collisions.add(position, path: path, pathAt: { listed[$0] }) {
            case .normalization(let earlier):
                problems.add(.filesNormalizationDuplicate, path: path, "'\(path)' and '\(earlier)' differ only in Unicode normalization (NFC/NFD); keep one")
            case .folded(let earlier):
                problems.add(.filesCaseDuplicate, path: path, "'\(path)' and '\(earlier)' differ only in case and collide on case-insensitive file systems; keep one")
            case nil:
                break
            }
            guard syntax.isEmpty else { continue }
            if let position = indexByPath.find(exactly: path[...], after: Verifier.contentsPrefix, keyAt: { entries[$0].path }) {
                let kind = entries[position].kind
                if kind != .file {
                    problems.add(.filesNotRegular, path: Verifier.contentsPrefix + path, "listed in Files but is a \(kind.noun); list regular files only")
                }
            } else if impliedFolders.contains(Verifier.contentsPrefix + path) {
                problems.add(.filesNotRegular, path: Verifier.contentsPrefix + path, "listed in Files but is a folder; list the files inside it instead")
            } else if snapshot.isComplete && !isDelta {
                problems.add(
                    .filesNotFound, path: Verifier.contentsPrefix + path,
                    "listed in Files but not present under Contents/; add the file or remove it from Files")
            } else if isDelta {
                checkAbsentListedPath(Verifier.contentsPrefix + path)
            }
        }
        if contentInfo?.dictionary[ContentInfo.filesKey] != nil {
            for entry in snapshot.entries where entry.kind == .file && entry.path.hasPrefix(Verifier.contentsPrefix) {
                if !isListed(entry.path.dropFirst(Verifier.contentsPrefix.count)) && !PackagePath.isJunk(entry.path)
                    && !(isDelta && FilePatch.isPatchEntry(entry.path))
                {
                    problems.add(.filesUnlisted, path: entry.path, "not listed in Files, so installers skip it; list it or remove it")
                }
            }
        }
    }

    /// A file a delta lists but leaves in place or patches: the rules checkContent gives an entry's path,
    /// since the version the delta makes has the file there.
    mutating func checkAbsentListedPath(_ path: String) {
        if Verifier.isReserved(path) {
            problems.add(
                .reservedName, path: path,
                "the delta lists it, but install keeps its records in DEST/\(Installer.metadataFolder)/, never a package's file; make the delta again from packages hcpack build accepts")
        }
        if path.utf8.count > PackagePath.maxPathBytes || PackagePath.longestComponentBytes(path) > PackagePath.maxComponentBytes {
            problems.add(.longPath, path: path, "the delta lists a path longer than \(PackagePath.maxPathBytes) bytes or with a name over \(PackagePath.maxComponentBytes) bytes, which no installed version can hold; make the delta again")
        }
        if FilePatch.isPatchEntry(path) {
            problems.add(.reservedName, path: path, Verifier.patchFolderMessage)
        }
        if PackagePath.isJunk(path) {
            problems.add(.junk, path: path, "the delta lists operating system junk, which install never places, so no DEST has it; make the delta again")
        }
    }

    /// A delta's binary patches (FilePatch.swift), as far as they can be checked without the base.
    mutating func checkPatches() {
        guard let info = contentInfo, isDelta || info.dictionary[FilePatch.key] != nil || info.dictionary[PatchGroup.key] != nil else { return }
        let patchEntries = snapshot.entries.filter { $0.kind == .file && FilePatch.isPatchEntry($0.path) }
        let archiveBytes = snapshot.entries.saturatingSum { $0.kind == .file ? $0.size : 0 }
        let bounds = FilePatch.Bounds(
            limits: options.limits.archive, maxSize: contentBytes > options.maxSize ? .max : options.maxSize,
            archiveBytes: archiveBytes, contentBytes: contentBytes)
        let found = FilePatch.check(
            info, isDelta: isDelta, listed: Set(listed), entry: { self.entry($0) }, patchEntries: patchEntries, bounds: bounds)
        for problem in found { problems.add(problem.rule, path: problem.path, problem.message) }
    }

    /// Whether Files lists exactly `path` (after `checkFilesList`).
    func isListed(_ path: Substring) -> Bool {
        let listed = self.listed
        return listedIndex.find(exactly: path) { listed[$0] } != nil
    }

    // MARK: Content

    mutating func checkContent() {
        let entries = snapshot.entries
        var collisions = CollisionFinder(expectedCount: entries.count)
        var junkReported: Set<String> = []
        for (position, entry) in entries.enumerated() {
            let path = entry.path
            if entry.kind == .file {
                // Saturating: an encrypted entry is never read, so its size is the archive's unchecked claim
                // (up to Int64.max in a zip64 header); two such claims overflowed and trapped.
                if path.hasPrefix(Verifier.contentsPrefix) {
                    contentFileCount += 1
                    contentBytes = contentBytes.addingSaturated(entry.size)
                }
            }
            if hasSymlinks, let link = symlinkAncestor(of: path) {
                problems.add(.unsafePath, path: path, "lies inside '\(link)', which is a symlink; an extractor following it would write elsewhere")
            }
            if !entry.nameIsUTF8 {
                problems.add(.nonUTF8Name, path: path, "the name is not valid UTF-8; rename it")
            }
            if entry.kind != .directory && Verifier.isReserved(path) {
                problems.add(
                    .reservedName, path: path,
                    "install would place it in DEST/\(Installer.metadataFolder)/, where hcpack keeps its records; rename that folder")
            } else if entry.kind != .directory && !isDelta && FilePatch.isPatchEntry(path) {
                problems.add(.reservedName, path: path, Verifier.patchFolderMessage)
            }
            if path.utf8.count > PackagePath.maxPathBytes || PackagePath.longestComponentBytes(path) > PackagePath.maxComponentBytes {
                problems.add(.longPath, path: path, "the path is longer than \(PackagePath.maxPathBytes) bytes or has a name over \(PackagePath.maxComponentBytes) bytes; shorten it")
            }
            if PackagePath.isJunk(path) {
                // Reported once, at its outermost junk name, whether or not the archive has an entry for that folder
                // (Finder's zips have none for __MACOSX/Contents/).
                var outermost: [Substring] = []
                for component in path.split(separator: "/") {
                    outermost.append(component)
                    if PackagePath.isJunk(String(component)) { break }
                }
                let junk = outermost.joined(separator: "/")
                if junkReported.insert(junk).inserted {
                    problems.add(
                        .junk, path: junk,
                        junk.hasPrefix(Verifier.contentsPrefix)
                            ? "operating system junk; leave it out of the package (hcpack build does)"
                            : "operating system junk outside Contents/, which install never places; leave it out of the archive (hcpack build does)")
                }
            }
            switch collisions.add(position, path: path, pathAt: { entries[$0].path }) {
            case .normalization(let earlier):
                problems.add(.normalizationCollision, path: path, "'\(path)' and '\(earlier)' differ only in Unicode normalization and are the same file on Apple file systems; rename one")
            case .folded(let earlier):
                problems.add(.caseCollision, path: path, "'\(path)' and '\(earlier)' differ only in case and collide on case-insensitive file systems; rename one")
            case nil:
                break
            }
            if entry.permissions & 0o6000 != 0 || (entry.permissions & 0o002 != 0 && entry.kind != .symlink) {
                // In an archive, setuid or setgid has no innocent reason to be there: install refuses it.
                let setID = isArchive && entry.permissions & 0o6000 != 0
                problems.add(
                    .unsafePermissions, path: path,
                    String(format: "mode %04o is setuid, setgid or world-writable; installed files get 0644 or 0755", entry.permissions)
                        + (setID ? ", and install refuses setuid and setgid entries: store the file with mode 0644 (rebuild with hcpack build)" : ""),
                    severity: setID ? .error : nil)
            }
            switch entry.kind {
            case .symlink:
                let target = entry.linkTarget ?? ""
                if PackagePath.resolveLink(target: target, from: path) == nil {
                    problems.add(.symlinkEscapes, path: path, "symlink to '\(target)' points outside the package; replace it with the file itself")
                } else {
                    // An archive is what install and the apps' zip readers unpack: they would not agree on a link.
                    problems.add(
                        .symlink, path: path,
                        "symlink to '\(target)'; installers copy regular files, so replace it with the file itself"
                            + (isArchive ? " (install refuses links in an archive; hcpack build stores files)" : ""),
                        severity: isArchive ? .error : nil)
                }
            case .hardlink:
                let target = entry.linkTarget ?? "/"
                if target.hasPrefix("/") || PackagePath.unsafeArchiveNameReason(target) != nil || self.entry(target) == nil {
                    problems.add(.hardlinkEscapes, path: path, "hard link to '\(target)', which is not an entry of this package; store the file itself")
                } else {
                    problems.add(
                        .hardlink, path: path,
                        "hard link to '\(target)'; store the file itself so every extractor gets a regular file"
                            + (isArchive ? " (install refuses links in an archive)" : ""),
                        severity: isArchive ? .error : nil)
                }
            case .device, .fifo, .socket, .unknown:
                problems.add(.specialFile, path: path, "a \(entry.kind.noun) cannot be hosted content; remove it")
            case .file:
                switch entry.executable {
                case .script?:
                    problems.add(.script, path: path, "starts with '#!' (a script); hosted content may not carry code")
                case let kind?:
                    problems.add(.executable, path: path, "a \(kind.rawValue) executable; hosted content may not carry native code, remove it")
                case nil:
                    break
                }
            case .directory:
                break
            }
        }
        // The content size of the summary line: files under Contents/, not ContentInfo.plist (docs/rules.md).
        if contentBytes > options.maxSize {
            problems.add(.tooLarge, path: "", "the content is \(contentBytes) bytes, over the \(options.maxSize)-byte limit; split it into several products or raise --max-size")
        }
    }

    /// Whether the package is an archive: what install unpacks, so every problem install refuses is an error.
    var isArchive: Bool {
        if case .archive = snapshot.origin { return true }
        return false
    }

    /// The first folder of `path` that is a symlink entry, if any (a walk down `impliedFolders`, so the cost
    /// grows with the path's length, not its square).
    func symlinkAncestor(of path: String) -> String? {
        impliedFolders.firstMarkedAncestor(of: path).map(String.init)
    }

    // MARK: Integrity

    mutating func checkIntegrity() {
        guard let info = contentInfo else { return }
        let records: ContentInfo.IntegrityRecords
        do {
            guard let parsed = try info.integrityRecords() else {
                if isDelta {
                    problems.add(
                        .deltaMissingRecord, path: ContentInfo.fileName,
                        "a delta without \(ContentInfo.integrityKey) cannot say what the files it does not carry must hold; make the delta again")
                }
                return
            }
            records = parsed
        } catch {
            problems.add(.integrityMalformed, path: ContentInfo.fileName, "\(ContentInfo.integrityKey) '\(error.path)': \(error.message)")
            return
        }
        let entries = snapshot.entries
        // With UnchangedSHA256, DEST's receipt holds the left-in-place files' records; a record of one in the
        // plist would be a second, unchecked claim a client reading the plist could believe instead.
        var patched: Set<ExactPath> = []
        if unchangedDigested { patched = Set(FilePatch.patchedPaths(of: info).map(ExactPath.init)) }
        // hcpack build writes the records in Files order: while they follow it, the next record is the one
        // a listed path has when their bytes agree (keys are unique as Strings, so no other record is).
        var nextRecord = 0
        for path in listed {
            let inOrder = nextRecord < records.count && ExactPath(records.path(at: nextRecord)) == ExactPath(path)
            if inOrder { nextRecord += 1 }
            let recordIndex = nextRecord - 1
            func record() -> FileRecord? { inOrder ? records.record(at: recordIndex) : records[path] }
            let position = indexByPath.find(exactly: path[...], after: Verifier.contentsPrefix) { entries[$0].path }
            guard let position, entries[position].kind == .file else {
                if unchangedDigested && position == nil && record() != nil && !patched.contains(ExactPath(path)) {
                    problems.add(
                        .deltaMalformed, path: Verifier.contentsPrefix + path,
                        "the delta records this file but leaves it in place, which UnchangedSHA256 covers from DEST's receipt; make the delta again (hcpack delta OLD NEW)")
                }
                if isDelta && !unchangedDigested && record() == nil && position == nil && !impliedFolders.contains(Verifier.contentsPrefix + path) {
                    problems.add(
                        .deltaMissingRecord, path: Verifier.contentsPrefix + path,
                        "the delta lists this file but neither carries it nor records its size and digest; make the delta again")
                }
                continue
            }
            guard let record = record() else {
                problems.add(
                    .integrityMissingRecord, path: Verifier.contentsPrefix + path,
                    "no size/digest record in \(ContentInfo.integrityKey); rebuild the package with hcpack build")
                continue
            }
            let size = entries[position].size
            if size != record.size {
                problems.add(
                    .sizeMismatch, path: Verifier.contentsPrefix + path,
                    "is \(size) bytes but the plist records \(record.size); the file changed after the build, rebuild or restore it")
            } else if let digest = entries[position].sha256, !digest.matchesHex(record.sha256) {
                problems.add(
                    .digestMismatch, path: Verifier.contentsPrefix + path,
                    "SHA-256 \(digest.hexString) differs from the recorded \(record.sha256); the file changed after the build, rebuild or restore it")
            }
        }
        // Every record was met in order, so each one's path is listed: none is stray.
        guard nextRecord < records.count else { return }
        // Files and the record keys match as Strings do (NFC equals NFD), as the records lookup above does.
        let nonASCIIListed = Set(listed.filter { !$0.utf8.allSatisfy { $0 < 0x80 } })
        for path in records.paths.filter({ !isListed($0[...]) && !nonASCIIListed.contains($0) }).sorted() {
            problems.add(.integrityStrayRecord, path: Verifier.contentsPrefix + path, "\(ContentInfo.integrityKey) has a record for a file that Files does not list; rebuild the package")
        }
    }
}
