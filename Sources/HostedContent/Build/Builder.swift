import ArchiveIO
import Digest
import Dispatch
import Foundation
import PropertyList


/// A validated build, ready to write: the generated plist, what goes in, what is left out, and the verdict.
public struct BuildPlan: Sendable {
    /// How the source folder is laid out.
    public enum SourceKind: String, Sendable {
        /// ContentInfo.plist and/or Contents/ at the root.
        case package
        /// A folder of content: its files become Contents/.
        case plainFolder
    }

    /// One folder or file to write, in archive order.
    struct Item: Sendable {
        /// Path in the built package ("Contents/a/b.json").
        var path: String
        var kind: EntryKind
        /// Path relative to the source folder ("" for the folder itself): the source's own string, where a full
        /// path per file was 100 bytes a file.
        var sourceRelative: String
        var size: Int64
        var sha256: [UInt8]
        /// The source file's stamp when it was hashed (files only).
        var stamp: FileStamp? = nil
        /// The data's CRC-32, read with `sha256`: a stored zip entry needs it before its data.
        var crc32: UInt32? = nil
        /// The file's bytes, for a source held in memory (`BuildOptions.memorySource`).
        var bytes: [UInt8]? = nil
    }

    /// The source folder, without trailing slashes.
    public var source: String
    /// Whether the source is a package folder or a plain folder of content.
    public var sourceKind: SourceKind
    /// Where the output goes.
    public var output: String
    /// What is written there.
    public var format: BuildFormat
    /// The built plist (nil when the source plist could not be read: the report says why).
    public var contentInfo: ContentInfo?
    /// The XML written as ContentInfo.plist.
    public var plistBytes: [UInt8]
    /// The rules run over the would-be package.
    public var report: VerificationReport
    /// What the package leaves out.
    public var excluded: [ExcludedEntry]
    var items: [Item]
    /// Where `plistBytes` holds a zeroed digest, and the item it stands for, in the plist's order.
    var pendingDigests: [PendingDigest] = []
    /// The pending digests' hashing, started by `prepare`; the first `write` takes its results.
    var sourceHashing: SourceHashing?

    /// A digest `write` fills in once it has read the file.
    struct PendingDigest: Sendable {
        /// Offset of the 64 hex digits in `plistBytes`.
        var offset: Int
        /// Index of the file in `items`.
        var item: Int
    }

    /// True when the sources were still being hashed when `prepare(_:progress:deferringDigests:)` returned: the
    /// integrity records in `plistBytes` and `contentInfo` hold zeros, and `write` fills them in first.
    public var digestsPending: Bool { !pendingDigests.isEmpty }

    /// True when the package has no errors and may be written.
    public var isValid: Bool { report.isValid() }

    /// Lets go of what only the check needed: the rules' entries and the decoded plist (20 MB at 26,000
    /// files), before `write` needs memory of its own. Keeps the items, the plist's bytes, the problems and
    /// counts; `contentInfo` keeps only IAPProductIdentifier and ContentVersion.
    public mutating func releaseCheckedContents() {
        report.releaseContents()
        contentInfo = contentInfo.map { info in
            var identity = ContentInfo(dictionary: PlistDictionary())
            identity.productIdentifier = info.productIdentifier
            identity.contentVersion = info.contentVersion
            return identity
        }
    }
    /// The files to hash for the pending digests, in item order.
    var sourceFiles: [PackageScanner.PendingFile] { Self.filesToHash(items) }

    /// The files among `items`, to hash, each with its index in `items`.
    static func filesToHash(_ items: [Item]) -> [PackageScanner.PendingFile] {
        items.indices.filter { items[$0].kind == .file }.map {
            PackageScanner.PendingFile(index: $0, path: items[$0].sourceRelative, reading: .hashAndCRC, size: items[$0].size)
        }
    }

    /// Waits for the sources' digests, checks each file was hashed as planned (the stamp the copy checks
    /// too), and returns `plistBytes` with them filled in, as a `FilledReservation`, and each item's CRC-32.
    func filledPlist(from hashing: SourceHashing) throws(HCPackError) -> (plist: FilledReservation, crc32: [UInt32?]) {
        let files = sourceFiles
        let facts = try hashing.results()
        guard facts.count == files.count else { throw Builder.changedError(source) }  // not reached: a cancelled run
        var factOfItem = [Int](repeating: -1, count: items.count)
        var crc32 = [UInt32?](repeating: nil, count: items.count)
        for (position, (file, fact)) in zip(files, facts).enumerated() {
            guard fact.sha256?.count == 32, fact.stamp != nil, fact.stamp == items[file.index].stamp else {
                throw Builder.changedError(source + "/" + file.path)
            }
            factOfItem[file.index] = position
            crc32[file.index] = fact.crc32
        }
        var digests: [UInt8] = []
        digests.reserveCapacity(32 * pendingDigests.count)
        for pending in pendingDigests { digests += facts[factOfItem[pending.item]].sha256 ?? [] }
        return (FilledReservation(reserved: plistBytes, slots: pendingDigests.map(\.offset), digests: digests), crc32)
    }

    /// True when the zip is sure to need no zip64 directory (`ZipCentralDirectory.fits`), counting each
    /// entry's headers and descriptor generously and deflate's worst growth (zlib's `deflateBound`: under 0.1%).
    var fitsAssembledZip: Bool {
        let headers = items.reduce(Int64(0)) { $0 + 256 + 2 * Int64($1.path.utf8.count) }
        let data = contentBytes + contentBytes / 512 + Int64(plistBytes.count) * 2 + 4096
        return ZipCentralDirectory.fits(entryCount: items.count + 1, bytes: headers + data)
    }

    /// The size of the zip's central directory, as libarchive writes it (folder names end in "/").
    var centralDirectorySize: Int {
        items.reduce(ZipCentralDirectory.recordLength(nameLength: ContentInfo.fileName.utf8.count)) {
            $0 + ZipCentralDirectory.recordLength(nameLength: $1.path.utf8.count + ($1.kind == .directory ? 1 : 0))
        }
    }

    /// Regular files under Contents/ that will be written.
    public var fileCount: Int { items.count { $0.kind == .file } }
    /// Their total size.
    public var contentBytes: Int64 { items.reduce(0) { $0 + ($1.kind == .file ? $1.size : 0) } }
}

/// Builds hosted content packages: validate first, then write a reproducible archive or folder atomically.
///
/// Two passes over the data: `prepare` hashes every file (the integrity record lives in ContentInfo.plist,
/// the first entry), `write` streams each file again in 1 MiB chunks, comparing `fstat` stamps so a file that
/// changed in between fails the build rather than contradicting its record. A stored zip (`deferringDigests`)
/// hashes its files on threads of its own (`SourceHashing`) from the end of the scan, while the rules run;
/// `write` waits for them before the plist, the first entry.
///
/// Zip entries carry MS-DOS times that libarchive computes with `localtime`: callers wanting identical zips
/// across hosts run with `TZ=UTC0`, as the `hcpack` executable does.
public enum Builder {
    /// Names left out of every build: `PackagePath.isJunk` plus version-control folders.
    public static func isDefaultExcluded(name: String) -> Bool {
        name == ".git" || PackagePath.isJunk(name)
    }

    /// Validates a build and plans it; writes nothing.
    /// - Throws: `HCPackError` `.notFound` for a missing source, `.invalidRequest` for a source that is not a
    ///   folder, missing identity for a plain folder, or an existing output without `force`.
    /// - Parameters:
    ///   - progress: told of the files hashed so far (phase "checking"; totals are not known yet).
    ///   - deferringDigests: for a zip with `--compression store`, hash in the background while the rules run
    ///     (see `BuildPlan.digestsPending`). For a plan that will be written right away; other formats and
    ///     compressions hash here regardless.
    public static func prepare(
        _ options: BuildOptions, progress: ProgressHandler? = nil, deferringDigests: Bool = false
    ) throws(HCPackError) -> BuildPlan {
        let source = normalizedPath(options.source)
        let memory = options.memorySource
        if memory != nil {
            guard options.format == .zip, options.compression != .store, options.output != nil else {
                throw HCPackError(.invalidRequest, "\(source): a package in memory is built as a deflated zip to a named output; report this as a bug")
            }
        } else if let status = try FileSystem.status(source) {
            guard status.kind == .directory else {
            throw HCPackError(
                .invalidRequest,
                "\(source): not a folder; build takes a package folder or a folder of content (to check an archive, run hcpack verify)",
                path: source)
            }
        } else {
            throw HCPackError(.notFound, "\(source): no such folder; check the path", path: source)
        }

        let plistPath = source + "/" + ContentInfo.fileName
        let hasPlist = memory != nil || FileSystem.exists(plistPath)
        let hasContents: Bool
        if let memory {
            hasContents = memory.folders.contains(Verifier.contentsFolder)
        } else {
            hasContents = (try FileSystem.status(source + "/" + Verifier.contentsFolder))?.kind == .directory
        }
        let sourceKind: BuildPlan.SourceKind = hasPlist || hasContents ? .package : .plainFolder
        if !hasPlist {
            var missing: [String] = []
            if options.productIdentifier == nil { missing.append("--product-id") }
            if options.contentVersion == nil { missing.append("--content-version") }
            if !missing.isEmpty {
                throw HCPackError(
                    .invalidRequest,
                    "\(source) has no \(ContentInfo.fileName), so give \(missing.joined(separator: " and ")) (or run hcpack init to create one)",
                    path: source)
            }
        }

        // The output is settled before the scan, so a build into its own source folder leaves its output out.
        let output: String
        let format: BuildFormat
        if let explicit = options.output {
            output = normalizedPath(explicit)
            format = try resolveFormat(options, output: output)
        } else {
            format = options.format ?? .zip
            let original =
                hasPlist
                ? (try? FileSystem.readFile(plistPath, limit: options.verify.limits.plist.maxBytes)).flatMap {
                    try? ContentInfo.decode($0)
                } : nil
            let identifier = options.productIdentifier ?? original?.productIdentifier ?? "package"
            let version = options.contentVersion ?? original?.contentVersion ?? "0"
            output = normalizedPath(options.defaultOutputFolder) + "/" + identifier + "-" + version + format.fileExtension
        }
        try refuseExisting(output, force: options.force)

        // Only a stored plist keeps its size when its digests change, so only then can its entry be reserved.
        let defersDigests = deferringDigests && format == .zip && options.compression == .store
        let ownOutput = relativePath(output, inside: source)
        let filter = ExclusionFilter(patterns: options.excludes, contentsOnly: sourceKind == .plainFolder, ownOutput: ownOutput)
        var checkedFiles = 0
        var checkedBytes: Int64 = 0
        func reading(_ path: String) -> PackageScanner.FileReading {
            guard filter.reason(for: path) == nil && filter.isContent(path) else { return .head }
            if defersDigests { return .headAndStamp }
            if let progress {
                // Called just before each file is hashed: count it now, so a long first pass is not silent.
                progress(
                    ProgressUpdate(
                        phase: "checking", completedBytes: checkedBytes, totalBytes: nil, completedFiles: checkedFiles,
                        totalFiles: nil))
                checkedFiles += 1
                checkedBytes += (try? FileSystem.status(source + "/" + path))??.size ?? 0
            }
            return .hashAndCRC
        }
        var snapshot =
            if let memory {
                PackageScanner.scanMemory(memory, origin: source, limits: options.verify.limits, reading: reading)
            } else {
                try PackageScanner.scanFolder(source, limits: options.verify.limits, knownPlist: nil, reading: reading)
            }

        // Keep what the package will hold; symlinks and special files stay in the snapshot so the rules see them.
        // Filtered in place: a second array of entries was 4 MB at 26,000 files.
        var entries = snapshot.entries
        snapshot.entries = []
        var kept = 0
        var sourcePlistEntry: PackageEntry?
        var excluded: [ExcludedEntry] = []
        var excludedFolders: Set<ExactPath> = []
        var items: [BuildPlan.Item] = []
        items.reserveCapacity(entries.count + 1)
        var pendingDigests: [BuildPlan.PendingDigest] = []
        for index in entries.indices {
            var entry = entries[index]
            if isInside(entry.path, anyOf: excludedFolders) { continue }
            // Names are written in NFC (docs/format.md): libarchive's writers turn UTF-8 names into NFC, so an NFD
            // name (macOS makes them) would differ in the archive from the Files list built from it.
            let name = PackagePath.normalizationKey(entry.path)
            let packagePath = sourceKind == .plainFolder ? PackagePath.joined(Verifier.contentsFolder, name) : name
            if entry.path == ContentInfo.fileName && sourceKind == .package {
                sourcePlistEntry = entry
                continue  // replaced below
            }
            if let reason = filter.reason(for: entry.path) {
                excluded.append(ExcludedEntry(path: packagePath, reason: reason))
                if entry.kind == .directory { excludedFolders.insert(ExactPath(entry.path)) }
                continue
            }
            let sourceRelative = entry.path
            entry.path = packagePath
            switch entry.kind {
            case .file:
                entry.permissions = 0o644
                items.append(
                    BuildPlan.Item(
                        path: packagePath, kind: .file, sourceRelative: sourceRelative, size: entry.size,
                        sha256: entry.sha256 ?? [],
                        stamp: entry.stamp, crc32: entry.crc32, bytes: memory?.files[sourceRelative]))
            case .directory:
                guard options.layout == .package else { continue }
                entry.permissions = 0o755
                items.append(
                    BuildPlan.Item(path: packagePath, kind: .directory, sourceRelative: sourceRelative, size: 0, sha256: []))
            case .symlink:
                excluded.append(ExcludedEntry(path: packagePath, reason: .symlink))
            default:
                break
            }
            entries[kept] = entry
            kept += 1
        }
        entries.removeSubrange(kept...)
        if sourceKind == .plainFolder && options.layout == .package {
            entries.insert(PackageEntry(path: Verifier.contentsFolder, kind: .directory, permissions: 0o755), at: 0)
            items.append(BuildPlan.Item(path: Verifier.contentsFolder, kind: .directory, sourceRelative: "", size: 0, sha256: []))
        }
        items.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        // Deferred digests are hashed from here on, on threads of their own, while this thread runs the rules.
        var hashing = defersDigests ? SourceHashing(BuildPlan.filesToHash(items), root: source) : nil

        // The plist: the source's (overridden), or a new one; Files generated when absent; integrity recorded.
        var contentInfo: ContentInfo?
        var plistBytes = snapshot.contentInfoBytes
        snapshot.contentInfoBytes = nil  // one owner, so the source's bytes go as soon as they are replaced
        if !hasPlist {
            contentInfo = ContentInfo(dictionary: .init())
        } else if let bytes = plistBytes,
            let decoded = try? ContentInfo.decode(bytes, limits: options.verify.limits.plist)
        {
            contentInfo = decoded
        }
        if var info = contentInfo {
            // Only `info` holds the source plist now: its bytes and old records are freed before new ones are made.
            contentInfo = nil
            plistBytes = nil
            // A delta (HCPackDeltaBase) keeps the records of the listed files it does not carry.
            let carriedRecords = info.dictionary[DeltaBase.key] == nil ? nil : (try? info.parseIntegrity()) ?? nil
            info.dictionary[ContentInfo.integrityKey] = nil
            if let identifier = options.productIdentifier { info.productIdentifier = identifier }
            if let version = options.contentVersion { info.contentVersion = version }
            if info.dictionary[ContentInfo.filesKey] == nil {
                info.files = items.filter { $0.kind == .file }.map { String($0.path.dropFirst(Verifier.contentsPrefix.count)) }
            } else if let listed = info.files, listed.contains(where: { !PackagePath.normalizationKey($0).utf8.elementsEqual($0.utf8) }) {
                info.files = listed.map(PackagePath.normalizationKey)  // NFC, as the names are
            }
            // Byte-exact keys: String equality would merge NFC and NFD spellings of one name.
            var byPath = PositionIndex(expectedCount: items.count)
            for (index, item) in items.enumerated() {
                byPath.insert(index, exactly: item.path) { items[$0].path }
            }
            func item(listedAs path: String) -> Int? {
                let found = byPath.find(exactly: Verifier.contentsPrefix + path) { items[$0].path }
                return found.flatMap { items[$0].kind == .file ? $0 : nil }
            }
            func recordIntegrity(pending: Bool) {
                var records: [String: FileRecord] = [:]
                for path in info.files ?? [] {
                    guard let index = item(listedAs: path) else {
                        if let carried = carriedRecords?[path] { records[path] = carried }
                        continue
                    }
                    records[path] = FileRecord(
                        size: items[index].size, sha256: pending ? pendingDigest : items[index].sha256.hexString)
                }
                info.integrity = records
            }
            recordIntegrity(pending: defersDigests)
            var encoded = info.encodeXML(indented: options.layout == .package)
            if defersDigests {
                if let slots = pendingDigestSlots(
                    in: encoded, order: (try? info.integrityRecords())?.paths ?? [], item: item(listedAs:))
                {
                    pendingDigests = slots
                } else {
                    // Zeros elsewhere in the plist would make the slots ambiguous: hash now, as without deferral.
                    hashing?.cancel()
                    hashing = nil
                    try hashFiles(of: &items, source: source)
                    recordIntegrity(pending: false)
                    encoded = info.encodeXML(indented: options.layout == .package)
                }
            }
            contentInfo = info
            plistBytes = encoded
        }
        if let plistBytes, contentInfo != nil || hasPlist {
            entries.insert(PackageEntry(path: ContentInfo.fileName, kind: .file, size: Int64(plistBytes.count)), at: 0)
        } else if hasPlist, let original = sourcePlistEntry {
            entries.insert(original, at: 0)  // not a readable file: let the rules say what it is
        }

        var would = snapshot
        would.entries = entries
        would.contentInfoBytes = plistBytes
        // The rules read the plist as built, once a parse of the bytes (no second tree) shows they decode to it.
        var built: PlistValue?
        if let info = contentInfo, let plistBytes,
            (try? PropertyList.checkEncodedXML(plistBytes, limits: options.verify.limits.plist)) != nil
        {
            built = .dictionary(info.dictionary)
        }
        let report = Verifier.check(would, options: options.verify, decodedPlist: built)

        if pendingDigests.isEmpty { hashing?.cancel() }
        return BuildPlan(
            source: source, sourceKind: sourceKind, output: output, format: format, contentInfo: contentInfo,
            plistBytes: plistBytes ?? [], report: report, excluded: excluded, items: items, pendingDigests: pendingDigests,
            sourceHashing: pendingDigests.isEmpty ? nil : hashing)
    }

    /// What a deferred plist records in place of each digest until `write` has it.
    static let pendingDigest = String(repeating: "0", count: 64)

    /// Where each zeroed digest sits in `plist`, paired with its file, given the recorded paths in plist order;
    /// nil unless the zeros appear exactly once per record (a source plist could carry them elsewhere).
    static func pendingDigestSlots(
        in plist: [UInt8], order: [String], item: (String) -> Int?
    ) -> [BuildPlan.PendingDigest]? {
        let marker = Array(("<string>" + pendingDigest + "</string>").utf8)
        // A byte scan with memcmp: the standard library's `ranges(of:)` took a second for a 4 MB plist.
        var offsets: [Int] = []
        offsets.reserveCapacity(order.count)
        plist.withUnsafeBytes { haystack in
            marker.withUnsafeBytes { needle in
                guard let base = haystack.baseAddress, let needleBase = needle.baseAddress else { return }
                var offset = 0
                while offset + needle.count <= haystack.count {
                    if haystack[offset] == needle[0] && memcmp(base + offset, needleBase, needle.count) == 0 {
                        offsets.append(offset + 8)  // past "<string>"
                        offset += needle.count
                    } else {
                        offset += 1
                    }
                }
            }
        }
        guard offsets.count == order.count else { return nil }
        var slots: [BuildPlan.PendingDigest] = []
        slots.reserveCapacity(order.count)
        for (offset, path) in zip(offsets, order) {
            guard let index = item(path) else { return nil }
            slots.append(BuildPlan.PendingDigest(offset: offset, item: index))
        }
        return slots
    }

    /// Hashes the files of `items` on every core, as the scan does, for a plan whose deferral fell through.
    private static func hashFiles(of items: inout [BuildPlan.Item], source: String) throws(HCPackError) {
        let files = BuildPlan.filesToHash(items)
        for (file, facts) in zip(files, try PackageScanner.readAll(files, root: source)) {
            items[file.index].sha256 = facts.sha256 ?? []
            items[file.index].crc32 = facts.crc32
            items[file.index].size = facts.size
            items[file.index].stamp = facts.stamp
        }
    }

    /// Prepares and writes in one call.
    @discardableResult
    /// - Throws: `HCPackError` `.invalidPackage` when the package has errors (use `prepare` to get the report).
    public static func build(_ options: BuildOptions, progress: ProgressHandler? = nil) throws(HCPackError) -> BuildResult {
        var plan = try prepare(options, progress: progress, deferringDigests: true)
        plan.releaseCheckedContents()
        return try write(plan, options: options, progress: progress)
    }

    /// True when a folder in `folders` holds `path`.
    static func isInside(_ path: String, anyOf folders: Set<ExactPath>) -> Bool {
        guard !folders.isEmpty else { return false }
        var parent = Substring(path)
        while let slash = parent.lastIndex(of: "/") {
            parent = parent[..<slash]
            if folders.contains(ExactPath(parent)) { return true }
        }
        return false
    }

    /// The path without trailing slashes ("/" stays).
    static func normalizedPath(_ path: String) -> String {
        var result = Substring(path)
        while result.count > 1 && result.hasSuffix("/") { result = result.dropLast() }
        return String(result)
    }

    /// `path` relative to `folder` when it lies inside it (compared without '.', '..' or doubled slashes).
    static func relativePath(_ path: String, inside folder: String) -> String? {
        let inner = URL(fileURLWithPath: path).standardizedFileURL.path
        let outer = URL(fileURLWithPath: folder).standardizedFileURL.path
        let prefix = outer.hasSuffix("/") ? outer : outer + "/"
        return inner.hasPrefix(prefix) ? String(inner.dropFirst(prefix.count)) : nil
    }

    static func resolveFormat(_ options: BuildOptions, output: String) throws(HCPackError) -> BuildFormat {
        let implied = BuildFormat.implied(byOutput: output)
        switch (options.format, implied) {
        case (let chosen?, let implied?) where chosen != implied:
            throw HCPackError(
                .invalidRequest,
                "\(output): the name says \(implied.rawValue) but --format says \(chosen.rawValue); make them agree",
                path: output)
        case (let chosen?, _): return chosen
        case (nil, let implied?): return implied
        case (nil, nil):
            throw HCPackError(
                .invalidRequest,
                "\(output): cannot tell the format from the name; end it in .zip, .tar.gz or .tgz, or give --format zip|tar.gz|dir",
                path: output)
        }
    }

    static func refuseExisting(_ output: String, force: Bool) throws(HCPackError) {
        if !force && FileSystem.exists(output) {
            throw HCPackError(.invalidRequest, "\(output) already exists; use --force to replace it", path: output)
        }
    }

    // MARK: Writing

    /// Writes a valid plan to a temporary file (or folder) beside the output, then renames it into place.
    /// On any failure the temporary is removed and the output is untouched.
    /// - Throws: `HCPackError` `.invalidPackage` for a plan with errors; `.invalidRequest` when the output
    ///   exists without `force`; `.diskFull`/`.io`/`.permissionDenied` when writing fails, or `.io` when a
    ///   source file changed since `prepare` hashed it.
    public static func write(_ plan: BuildPlan, options: BuildOptions, progress: ProgressHandler? = nil) throws(HCPackError)
        -> BuildResult
    {
        try write(plan, options: options, progress: progress, assembling: true)
    }

    /// `write`; with `assembling` false a zip is written by one libarchive writer on this thread (tests compare
    /// the two).
    static func write(_ plan: BuildPlan, options: BuildOptions, progress: ProgressHandler?, assembling: Bool) throws(HCPackError)
        -> BuildResult
    {
        guard plan.isValid else {
            throw HCPackError(
                .invalidPackage, "\(plan.source): the package has \(plan.report.problems.errorCount) errors; nothing was written",
                path: plan.source)
        }
        try refuseExisting(plan.output, force: options.force)
        if let problem = ArchiveLimitCheck.problem(plan: plan, limits: options.verify.limits.archive) {
            throw ArchiveLimitCheck.refusal(problem, output: plan.output)
        }
        let output = plan.output
        let parent = parentFolder(of: output)
        guard (try FileSystem.status(parent))?.kind == .directory else {
            throw HCPackError(.notFound, "\(parent): the output folder does not exist; create it first", path: parent)
        }
        let name = String(output.split(separator: "/").last ?? "package")
        let template = parent + "/." + name + ".hcpack-XXXXXX"

        let sink: PackageSink
        let temporary: String
        // Deflating builds make their small files' entries on every core (`PreparedEntries`), where the zip
        // can be assembled; a stored build has little CPU work per byte to share.
        let assembles = assembling && plan.format == .zip && options.compression != .store && plan.fitsAssembledZip
        let isPrepared = { (item: BuildPlan.Item) in
            assembles && item.kind == .file && item.size <= PreparedEntries.largestFile
        }
        // A source in memory has no files to stream (BuildOptions.memorySource).
        if let unprepared = plan.items.first(where: { $0.bytes != nil && !isPrepared($0) }) {
            throw HCPackError(.invalidRequest, "\(plan.source): \(unprepared.path) is in memory but not small enough to prepare; report this as a bug")
        }
        // Pending digests: prepare's hashing, unless an earlier write took its results.
        let sourceHashing =
            plan.digestsPending
            ? plan.sourceHashing.flatMap { $0.claim() ? $0 : nil } ?? SourceHashing(plan.sourceFiles, root: plan.source) : nil
        defer { sourceHashing?.cancel() }
        if plan.format == .directory {
            temporary = try makeTemporaryFolder(template, for: output)
            sink = FolderSink(root: temporary, output: output, modificationTime: options.sourceDateEpoch)
        } else {
            let (descriptor, path) = try FileSystem.makeTemporaryFile(template: template, for: output)
            temporary = path
            do {
                sink = try ArchiveSink(
                    descriptor: descriptor, format: plan.format == .zip ? .zip : .tarGzip, output: output,
                    modificationTime: options.sourceDateEpoch, assembling: assembles ? plan.centralDirectorySize : nil,
                    contentBytes: plan.contentBytes)
            } catch {
                Descriptor.release(descriptor)
                FileSystem.removeFile(temporary)
                throw error
            }
        }
        var committed = false
        defer {
            if !committed { try? FileManager.default.removeItem(atPath: temporary) }
        }

        var tracker = ProgressTracker(handler: progress, totalBytes: plan.contentBytes, totalFiles: plan.fileCount)
        let prepared =
            assembles
            ? PreparedEntries(
                plan.items, including: isPrepared, root: plan.source, compression: options.compression,
                modificationTime: options.sourceDateEpoch) : nil
        defer { prepared?.cancel() }
        let reader = SourceReader(plan.items.filter { !isPrepared($0) }, root: plan.source, compression: options.compression) {
            sink.afterWritten($0)
        }
        defer { reader.cancel() }
        // Pending digests: the plist is written once all are known, whole and first, so the archive is hashed
        // as it is written; reserving it and hashing the archive afterwards left a serial tail (issue 16).
        let filled = try sourceHashing.map { (hashing) throws(HCPackError) in try plan.filledPlist(from: hashing) }
        let finalPlist = filled?.plist
        var plistCRC: UInt32 = 0
        if let finalPlist {
            for start in stride(from: 0, to: plan.plistBytes.count, by: FilledReservation.windowSize) {
                let end = min(start + FilledReservation.windowSize, plan.plistBytes.count)
                plistCRC = CRC32.update(plistCRC, with: finalPlist.bytes(start..<end))
            }
        } else {
            plistCRC = CRC32.checksum(plan.plistBytes)
        }
        try sink.addFile(
            ContentInfo.fileName, size: Int64(plan.plistBytes.count),
            compression: options.compression.choose(head: plan.plistBytes), crc32: plistCRC)
        if let finalPlist {
            for start in stride(from: 0, to: plan.plistBytes.count, by: FilledReservation.windowSize) {
                let window = finalPlist.bytes(start..<min(start + FilledReservation.windowSize, plan.plistBytes.count))
                try sink.write(window)
                // The sink may lend the window's bytes to its threads: keep them until they are written.
                let written = DispatchSemaphore(value: 0)
                sink.afterWritten { written.signal() }
                written.wait()
                withExtendedLifetime(window) {}
            }
        } else {
            try sink.write(plan.plistBytes)
        }
        try sink.endFile()
        for (index, item) in plan.items.enumerated() {
            if item.kind == .directory {
                try sink.addFolder(item.path)
            } else if let prepared, isPrepared(item), let archive = sink as? ArchiveSink {
                try archive.add(try prepared.entry(of: index))
                tracker.advance(bytes: item.size)
                tracker.finishFile()
            } else {
                try copy(item, crc32: filled?.crc32[index] ?? item.crc32, from: reader, into: sink, tracker: &tracker)
            }
        }
        if let prepared, let archive = sink as? ArchiveSink { archive.placeRuns(try prepared.centralRecords()) }
        try sink.finish()
        if plan.format == .zip {
            // Read back the zip's records: what verify and install will check, checked before the output exists.
            let found = try ZipStructureCheck.problems(file: temporary, bytes: nil, limits: options.verify.limits.archive)
            if let first = found.problems.first {
                throw HCPackError(
                    .io, "\(output): the zip written breaks \(first.rule.rawValue) (\(first.message)); nothing was written, report this as a bug",
                    path: output)
            }
        }
        // The ratio verify and install would refuse under the same limits, refused before the output exists.
        if let problem = ArchiveLimitCheck.ratioProblem(archive: temporary, plan: plan, limits: options.verify.limits.archive) {
            throw ArchiveLimitCheck.refusal(problem, output: output)
        }

        let (outputBytes, digest): (Int64, String?) =
            if let archive = sink as? ArchiveSink {
                (archive.bytesWritten, archive.digest?.hexString)
            } else {
                (Int64(plan.plistBytes.count) + plan.contentBytes, nil)
            }
        try commit(temporary, to: output, replacing: options.force)
        committed = true
        do {
            try FileSystem.synchronizeFolder(parent)
        } catch {
            // The output is complete and in place; only its name may not yet be on disk.
            throw HCPackError(
                error.code,
                "\(output) was written, but its folder could not be synced (\(error.message)), so it may not survive a power loss; once the disk is healthy, run the command again with --force",
                path: output)
        }

        return BuildResult(
            output: output, format: plan.format, productIdentifier: plan.contentInfo?.productIdentifier ?? "",
            contentVersion: plan.contentInfo?.contentVersion ?? "", fileCount: plan.fileCount, contentBytes: plan.contentBytes,
            outputBytes: outputBytes, sha256: digest, excluded: plan.excluded, problems: plan.report.problems)
    }

    /// Streams one file into the sink, as `reader` read it: still what `prepare` hashed.
    ///
    /// The reader compares `fstat` stamps before and after its read with the one taken when the file was
    /// hashed, rather than hashing a second time: any write changes the change time, and a second SHA-256
    /// pass was a third of the build's CPU.
    private static func copy(
        _ item: BuildPlan.Item, crc32: UInt32?, from reader: SourceReader, into sink: PackageSink, tracker: inout ProgressTracker
    ) throws(HCPackError) {
        try sink.addFile(item.path, size: item.size, compression: try reader.beginFile(), crc32: crc32)
        while let chunk = try reader.nextChunk() {
            try sink.write(chunk)
            tracker.advance(bytes: Int64(chunk.count))
        }
        try sink.endFile()
        tracker.finishFile()
    }

    static func changedError(_ sourcePath: String) -> HCPackError {
        HCPackError(
            .io, "\(sourcePath) changed while hcpack was building; nothing was written, run the build again when it is settled",
            path: sourcePath)
    }

    static func parentFolder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func makeTemporaryFolder(_ template: String, for output: String) throws(HCPackError) -> String {
        let path = try FileSystem.makeTemporaryDirectory(template: template, for: output)
        try? FileSystem.setPermissions(path, 0o755)  // mkdtemp makes it 0700
        return path
    }

    /// Renames the finished temporary into place. A file replaces a file atomically; anything else that is in
    /// the way (with `force`) is moved aside first and removed afterwards.
    private static func commit(_ temporary: String, to output: String, replacing: Bool) throws(HCPackError) {
        guard let existing = try FileSystem.status(output) else {
            let temporaryIsFolder = (try FileSystem.status(temporary))?.kind == .directory
            if !temporaryIsFolder && !replacing {
                // link(2) fails if the output appeared meanwhile, where rename(2) would replace it.
                switch FileSystem.linkWithoutReplacing(temporary, to: output) {
                case .linked:
                    FileSystem.removeFile(temporary)
                    return
                case .targetExists:
                    throw HCPackError(.invalidRequest, "\(output) already exists; use --force to replace it", path: output)
                case .unsupported:
                    break  // some file systems have no hard links: fall back to rename
                }
            }
            try FileSystem.rename(temporary, to: output, operation: "rename into")
            return
        }
        guard replacing else {
            throw HCPackError(.invalidRequest, "\(output) already exists; use --force to replace it", path: output)
        }
        let temporaryIsFolder = (try FileSystem.status(temporary))?.kind == .directory
        if existing.kind != .directory && !temporaryIsFolder {
            try FileSystem.rename(temporary, to: output, operation: "rename into")
            return
        }
        let aside = temporary + ".old"
        try FileSystem.rename(output, to: aside, operation: "move aside", naming: output)
        do throws(HCPackError) {
            try FileSystem.rename(temporary, to: output, operation: "rename into")
        } catch {
            try? FileSystem.rename(aside, to: output)
            throw error
        }
        try? FileManager.default.removeItem(atPath: aside)
    }

}

/// Decides which source entries a build leaves out.
struct ExclusionFilter {
    let patterns: [String]
    /// True for a plain folder, where every entry is content.
    let contentsOnly: Bool

    /// The build's output, relative to the source folder, when it lies inside it.
    let ownOutput: String?

    /// What temporaries of the output start with (`.NAME.hcpack-`), computed once rather than per entry.
    private let ownTemporaryPrefix: String?

    init(patterns: [String], contentsOnly: Bool, ownOutput: String? = nil) {
        self.ownOutput = ownOutput
        ownTemporaryPrefix = ownOutput.map { output in
            let slash = output.lastIndex(of: "/")
            let folder = slash.map { String(output[..<$0]) + "/" } ?? ""
            let name = slash.map { String(output[output.index(after: $0)...]) } ?? output
            return folder + "." + name + ".hcpack-"
        }
        // "build/" means the folder build: match it without the slash.
        self.patterns = patterns.map { $0.count > 1 && $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        self.contentsOnly = contentsOnly
    }

    /// The output itself, what is inside it (a folder build), or a temporary of it (`.NAME.hcpack-XXXXXX`).
    private func isOwnOutput(_ sourcePath: String, _ output: String) -> Bool {
        if sourcePath == output || sourcePath.hasPrefix(output + "/") { return true }
        return ownTemporaryPrefix.map { sourcePath.hasPrefix($0) } ?? false
    }

    /// True for entries under Contents/ (and everything in a plain folder).
    func isContent(_ sourcePath: String) -> Bool {
        contentsOnly || sourcePath.hasPrefix(Verifier.contentsPrefix)
    }

    /// Why `sourcePath` (relative to the source folder) is left out, or nil when it is kept.
    func reason(for sourcePath: String) -> ExcludedEntry.Reason? {
        if let ownOutput, isOwnOutput(sourcePath, ownOutput) { return .buildOutput }
        let relative: String
        if contentsOnly {
            relative = sourcePath
        } else if sourcePath.hasPrefix(Verifier.contentsPrefix) {
            relative = String(sourcePath.dropFirst(Verifier.contentsPrefix.count))
        } else {
            if sourcePath == ContentInfo.fileName || sourcePath == Verifier.contentsFolder { return nil }
            let name = String(sourcePath.split(separator: "/").first ?? "")
            return Builder.isDefaultExcluded(name: name) ? .junk : .outsideContents
        }
        // Junk or .git anywhere in the path; one byte scan each rather than a String per component.
        if PackagePath.isJunk(relative)
            || relative.utf8.split(separator: UInt8(ascii: "/")).contains(where: { $0.elementsEqual(".git".utf8) })
        {
            return .junk
        }
        guard !patterns.isEmpty else { return nil }
        let names = relative.split(separator: "/").map(String.init)
        // Each name, and each leading part of the path, so "assets/raw" also leaves out what is inside it.
        var prefixes: [String] = []
        var prefix = ""
        for name in names {
            prefix = prefix.isEmpty ? name : prefix + "/" + name
            prefixes.append(prefix)
        }
        for pattern in patterns
        where names.contains(where: { fnmatch(pattern, $0, 0) == 0 })
            || prefixes.contains(where: { fnmatch(pattern, $0, 0) == 0 })
        {
            return .pattern(pattern)
        }
        return nil
    }
}

/// Counts bytes and files written and reports them to a progress handler.
struct ProgressTracker {
    let handler: ProgressHandler?
    let totalBytes: Int64
    let totalFiles: Int
    var bytes: Int64 = 0
    var files = 0

    mutating func advance(bytes count: Int64) {
        bytes += count
        report()
    }

    mutating func finishFile() {
        files += 1
        report()
    }

    func report() {
        handler?(
            ProgressUpdate(
                phase: "packing", completedBytes: bytes, totalBytes: totalBytes, completedFiles: files, totalFiles: totalFiles))
    }
}
