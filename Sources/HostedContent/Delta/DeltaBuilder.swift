import Digest
import Foundation
import PatchCodec
import PropertyList

/// Everything `DeltaBuilder` needs to know about one delta.
public struct DeltaOptions: Sendable {
    /// The base package: an archive or a folder.
    public var old: String
    /// The new version of the same product: an archive or a folder.
    public var new: String
    /// Where to write the delta archive.
    public var output: String
    /// zip or tar.gz; nil: implied by `output`'s extension, else zip.
    public var format: BuildFormat?
    /// Zip entries only; tar.gz compresses the whole stream.
    public var compression: CompressionPolicy
    /// The timestamp of every entry, in seconds since 1970.
    public var sourceDateEpoch: Int64
    /// Replace an existing output.
    public var force: Bool
    /// The rules' settings for reading OLD and NEW and checking the delta.
    public var verify: VerifyOptions
    /// The largest window (as a power of two) a binary patch may need (base and result together); files that
    /// need more travel whole. nil: no patches, every changed file whole.
    public var patchWindowLog: Int? = PatchCodec.largestWindowLog
    /// How many bytes of each archive's small changed files may be held in memory while making patches
    /// (`StagingArea.keptBudgetBytes`); the rest are staged as files.
    var memoryBudgetBytes: Int64 = 64 << 20
    /// Build a delta whose files are all small from memory instead of its scratch folder (tests compare both).
    var buildsInMemory = true

    /// Describes a delta from `old` to `new`, written to `output`.
    public init(
        old: String, new: String, output: String, format: BuildFormat? = nil, compression: CompressionPolicy = .auto,
        sourceDateEpoch: Int64 = BuildOptions.defaultSourceDateEpoch, force: Bool = false, verify: VerifyOptions = VerifyOptions()
    ) {
        self.old = old
        self.new = new
        self.output = output
        self.format = format
        self.compression = compression
        self.sourceDateEpoch = sourceDateEpoch
        self.force = force
        self.verify = verify
    }
}

/// What a delta build wrote.
public struct DeltaResult: Sendable {
    /// The archive written (output, size, SHA-256, warnings).
    public var build: BuildResult
    /// The base record written into the delta's plist.
    public var base: DeltaBase
    /// Listed files the delta carries (new, or changed since the base).
    public var carried: [String]
    /// Listed files the delta does not carry: the base's copies stay.
    public var unchangedCount: Int
    /// Files of the base that the new version no longer lists.
    public var removed: [String]
    /// Carried files that travel as binary patches, sorted by path.
    public var patched: [DeltaPatchSummary] = []
    /// The delta was built from memory, not from its scratch folder (`DeltaOptions.buildsInMemory`).
    var builtFromMemory = false
}

/// Makes delta packages (docs/self-hosting.md): NEW's plist plus `HCPackDeltaBase`, and only the files that are
/// new or changed since OLD, written by `Builder` (reproducible, checked, atomic).
public enum DeltaBuilder {
    /// Builds the delta from `options.old` to `options.new`.
    /// - Throws: `HCPackError` `.invalidPackage` when OLD or NEW is invalid, they are different products, NEW
    ///   is not newer, or NEW lacks integrity records; `.invalidRequest` for an existing output without
    ///   `force` or a folder format; environment errors otherwise. Nothing is written then.
    public static func build(_ options: DeltaOptions, progress: ProgressHandler? = nil) throws(HCPackError) -> DeltaResult {
        let format = options.format ?? BuildFormat.implied(byOutput: options.output) ?? .zip
        guard format != .directory else {
            throw HCPackError(.invalidRequest, "a delta is an archive: pass --format zip or tar.gz", path: options.output)
        }
        try Builder.refuseExisting(Builder.normalizedPath(options.output), force: options.force)
        try refuseInputAsOutput(options)
        let parent = Builder.parentFolder(of: Builder.normalizedPath(options.output))
        let name = String(options.output.split(separator: "/").last ?? "delta")
        // Named after this process: a run that ended without removing it (SIGBUS: an input cut short while
        // mapped; SIGKILL) leaves a folder the next delta to this output recognises as abandoned and removes.
        let scratchPrefix = "." + name + ".hcpack-delta-"
        removeAbandonedScratch(in: parent, prefix: scratchPrefix)
        let scratch = try FileSystem.makeTemporaryDirectory(
            template: parent + "/" + scratchPrefix + "\(FileSystem.processID)-XXXXXX", for: options.output)
        defer {
            if let parentFolder = try? DirectoryHandle.open(parent) {
                try? parentFolder.removeTree(String(scratch.split(separator: "/").last ?? ""))
            }
        }
        // Two archives as hcpack build writes them are read once each, only what the delta needs (DeltaReading.swift).
        let inputs = try readArchivesOnce(options, scratch: scratch)
        // OLD needs no integrity records: the digests read stand in for them.
        let old: PackageSide
        let new: PackageSide
        if let inputs {
            (old, new) = (inputs.old, inputs.new)
        } else {
            old = try PackageSide(options.old, role: "OLD", options: options.verify, requireRecords: false)
            new = try PackageSide(options.new, role: "NEW", options: options.verify)
        }
        guard old.productIdentifier == new.productIdentifier else {
            throw HCPackError(
                .invalidPackage,
                "\(options.old) is '\(old.productIdentifier)' but \(options.new) is '\(new.productIdentifier)'; a delta goes between two versions of one product",
                path: options.new)
        }
        guard new.version > old.version else {
            throw HCPackError(
                .invalidPackage,
                "\(options.new) has version \(new.version.text), not greater than \(options.old)'s \(old.version.text); a delta goes from an older version to a newer one (swap OLD and NEW?)",
                path: options.new)
        }
        let carried = new.files.filter { old.records[$0] != new.records[$0] }
        let carriedSet = Set(carried)
        // Records only for what the delta carries or patches; the rest are DEST's, checked against their digest.
        let unchanged = new.files.filter { !carriedSet.contains($0) }.compactMap { path in new.records[path].map { (path, $0) } }
        let base = DeltaBase(
            baseVersion: old.version.text, basePlistSHA256: old.plistSHA256, targetPlistSHA256: new.plistSHA256,
            unchangedSHA256: DeltaBase.unchangedDigest(unchanged))
        var info = new.info
        info.dictionary[DeltaBase.key] = base.plistValue
        info.integrity = new.records.filter { carriedSet.contains($0.key) }

        let root: String
        if let inputs {
            root = inputs.newRoot
        } else {
            root = try new.extract(carriedSet, into: scratch, options: options.verify)
        }
        // Changed files OLD also has may travel as patches against OLD's copies (DeltaPatching.swift).
        let changed = carried.filter { old.records[$0] != nil }
        let patches = try options.patchWindowLog.map { limit throws(HCPackError) in
            try makePatches(
                old: old, new: new, changed: changed, root: root, oldRoot: inputs?.oldRoot, kept: (inputs?.oldKept ?? [:], inputs?.newKept ?? [:]),
                scratch: scratch, windowLogLimit: limit, options: options.verify)
        }
        if let patches, !patches.records.isEmpty { info.dictionary[FilePatch.key] = FilePatch.plistValue(patches.records) }
        if let patches, !patches.groups.isEmpty { info.dictionary[PatchGroup.key] = PatchGroup.plistValue(patches.groups) }
        var buildOptions = BuildOptions(
            source: root, output: options.output, format: format, compression: options.compression,
            sourceDateEpoch: options.sourceDateEpoch, force: options.force, verify: options.verify)
        buildOptions.layout = .delta
        let small = patches?.small ?? SmallOutputs(inputs?.newKept ?? [:])
        // Nothing on disk in the delta folder and every file small: built from memory, the same bytes
        // (PackageScanner.MemoryPackage); otherwise the small files join the folder.
        if options.buildsInMemory, let inputs, inputs.newStagedFiles == 0, !small.wroteFiles, format == .zip,
            options.compression != .store, small.files.values.allSatisfy({ Int64($0.count) <= PreparedEntries.largestFile })
        {
            let contents = Verifier.contentsPrefix
            buildOptions.memorySource = PackageScanner.MemoryPackage(
                plist: info.encodeXML(),
                files: Dictionary(uniqueKeysWithValues: small.files.map { (contents + $0.key, $0.value) }),
                folders: Set([Verifier.contentsFolder] + small.folders.map { contents + $0 }))
        } else {
            // The scratch folder is this run's own and removed at the end: no fsync, no rename.
            try small.write(into: try DirectoryHandle.open(root + "/" + Verifier.contentsFolder))
            let rootFolder = try DirectoryHandle.open(root)
            _ = try rootFolder.removeFile(ContentInfo.fileName)
            try writeWhole([ContentInfo.fileName: info.encodeXML()], into: rootFolder)
        }
        var plan = try Builder.prepare(buildOptions, progress: progress)
        guard plan.isValid else {
            let first = plan.report.problems.problems.first { $0.severity == .error }
            throw HCPackError(
                .invalidPackage,
                "\(options.new): the delta would be invalid (\(first.map { "[\($0.rule.rawValue)] \($0.path): \($0.message)" } ?? "")); nothing was written",
                path: options.new)
        }
        // Digests checked before writing: what was copied out of NEW is what NEW records.
        let built = (try? plan.contentInfo?.parseIntegrity()) ?? nil
        for path in carried where built?[path] != new.records[path] {
            throw HCPackError(
                .io, "\(options.new): Contents/\(path) changed while the delta was being made; run again once nothing writes to it",
                path: options.new)
        }
        plan.releaseCheckedContents()
        let result = try Builder.write(plan, options: buildOptions, progress: progress)
        let removed = old.records.keys.filter { new.records[$0] == nil }.sorted()
        return DeltaResult(
            build: result, base: base, carried: carried, unchangedCount: new.files.count - carried.count, removed: removed,
            patched: patches?.summaries ?? [], builtFromMemory: buildOptions.memorySource != nil)
    }
}

extension DeltaBuilder {
    /// Refuses an output that is OLD or NEW (by any name): with `--force` the delta would replace its input.
    static func refuseInputAsOutput(_ options: DeltaOptions) throws(HCPackError) {
        func identity(_ path: String) -> (UInt64, UInt64)? {
            let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            return (try? FileSystem.status(resolved)).flatMap { $0 }.map { ($0.device, $0.inode) }
        }
        guard let output = identity(options.output) else { return }
        for (input, role) in [(options.old, "OLD"), (options.new, "NEW")] where identity(input).map({ $0 == output }) == true {
            throw HCPackError(
                .invalidRequest, "\(options.output) is \(input) (\(role)); write the delta to another file", path: options.output)
        }
    }

    /// Removes the scratch folders `prefix` + PID + "-" + suffix in `parent` whose process no longer exists.
    /// Best effort: a folder that cannot be removed is left for the next run.
    static func removeAbandonedScratch(in parent: String, prefix: String) {
        guard let items = try? FileSystem.listDirectory(parent), let folder = try? DirectoryHandle.open(parent) else { return }
        for item in items where item.isUTF8 && item.name.hasPrefix(prefix) {
            let rest = item.name.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]), pid != FileSystem.processID,
                !FileSystem.processExists(pid), (try? folder.status(item.name))??.kind == .directory
            else { continue }
            try? folder.removeTree(item.name)
        }
    }
}

/// One side of a delta, read and verified.
struct PackageSide {
    let path: String
    let info: ContentInfo
    let productIdentifier: String
    let version: ContentVersion
    let plistSHA256: String
    /// The listed files.
    let files: [String]
    /// Size and SHA-256 per listed file.
    let records: [String: FileRecord]
    let isFolder: Bool
    let rootFolder: String?

    /// Reads and verifies the package at `path`; `role` ("OLD", "NEW") names it in errors.
    init(_ path: String, role: String, options: VerifyOptions, requireRecords: Bool = true) throws(HCPackError) {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such package (\(role)); check the path", path: path)
        }
        try self.init(
            path, role: role, report: Verifier.verify(path, options: options), isFolder: status.kind == .directory,
            requireRecords: requireRecords)
    }

    /// The package at `path` as `report` found it.
    /// - Parameter known: the records and SHA-256 of the plist `report` read, when the caller has them already.
    init(
        _ path: String, role: String, report: VerificationReport, isFolder: Bool, requireRecords: Bool = true,
        known: (records: [String: FileRecord], plistSHA256: String)? = nil
    ) throws(HCPackError) {
        guard report.isValid() else {
            let errors = report.problems.problems.filter { $0.severity == .error }
            let first = errors.first.map { "[\($0.rule.rawValue)] \($0.path.isEmpty ? "" : $0.path + ": ")\($0.message)" } ?? ""
            let more = errors.count > 1 ? " (and \(errors.count - 1) more error\(errors.count == 2 ? "" : "s"))" : ""
            throw HCPackError(
                .invalidPackage, "\(path) (\(role)) is not a valid package: \(first)\(more); run hcpack verify on it for the full report",
                path: path)
        }
        guard let info = report.contentInfo, let identifier = info.productIdentifier, let version = info.version,
            let plist = report.snapshot.contentInfoBytes, let files = info.files
        else {
            throw HCPackError(
                .invalidPackage,
                "\(path) (\(role)) has no Files list, product or version; rebuild it with hcpack build", path: path)
        }
        if info.dictionary[DeltaBase.key] != nil {
            throw HCPackError(
                .invalidPackage, "\(path) (\(role)) is itself a delta; make deltas between full packages", path: path)
        }
        var records: [String: FileRecord] = [:]
        let recorded = known?.records ?? (try? info.parseIntegrity()) ?? nil
        var digests: [String: FileRecord] = [:]
        if recorded == nil {
            for entry in report.snapshot.entries where entry.kind == .file && entry.path.hasPrefix(Verifier.contentsPrefix) {
                if let digest = entry.sha256 {
                    digests[String(entry.path.dropFirst(Verifier.contentsPrefix.count))] = FileRecord(
                        size: entry.size, sha256: digest.hexString)
                }
            }
        }
        for file in files {
            if let record = recorded?[file] ?? digests[file] {
                records[file] = record
            } else if requireRecords {
                throw HCPackError(
                    .invalidPackage,
                    "\(path) (\(role)) has no \(ContentInfo.integrityKey) record for Contents/\(file); a delta records every file of the new version, so build NEW with hcpack build",
                    path: path)
            }
        }
        self.path = path
        self.info = info
        self.productIdentifier = identifier
        self.version = version
        self.plistSHA256 = known?.plistSHA256 ?? Digest.Hasher.digest(.sha256, of: plist).hexString
        self.files = files
        self.records = records
        self.isFolder = isFolder
        self.rootFolder = report.snapshot.rootFolder
    }

    /// Copies the listed files in `wanted` out of the package into `scratch`, as `ROOT/Contents/...`.
    /// - Returns: the package folder made (its plist still to be written).
    func extract(_ wanted: Set<String>, into scratch: String, options: VerifyOptions) throws(HCPackError) -> String {
        let folder = try DirectoryHandle.open(scratch)
        if isFolder {
            let (package, _) = try folder.makeDirectory("package")
            let (contents, _) = try package.makeDirectory(Verifier.contentsFolder)
            for file in wanted.sorted() {
                var parts = file.split(separator: "/")
                guard let leaf = parts.popLast() else { continue }
                let target = try contents.makeDirectories(parts)
                let source = try OpenFile(reading: path + "/" + Verifier.contentsPrefix + file)
                let written = try target.createFile(String(leaf))
                try source.readChunks { (chunk) throws(HCPackError) in try written.write(chunk) }
                try written.finish(synchronize: false)
            }
            return scratch + "/package"
        }
        // An archive: streamed once into a staging folder, writing only the wanted files (when the plist comes
        // first, as hcpack build writes it; otherwise the others are removed afterwards).
        let staging = try StagingArea(in: folder)
        let unwanted = files.filter { !wanted.contains($0) }
        staging.inPlaceNames = { plistName, _ in
            let prefix = plistName.dropLast(ContentInfo.fileName.count) + Verifier.contentsPrefix
            return Set(unwanted.map { prefix + $0 })
        }
        let snapshot = try PackageScanner.readArchive(path, limits: options.limits, staging: staging)
        let report = Verifier.check(snapshot, options: options)
        guard report.isValid(), snapshot.contentInfoBytes.map({ Digest.Hasher.digest(.sha256, of: $0).hexString }) == plistSHA256
        else {
            throw HCPackError(.io, "\(path) changed while the delta was being made; run again once nothing writes to it", path: path)
        }
        let root = scratch + "/" + staging.name + (snapshot.rootFolder.map { "/" + $0 } ?? "")
        let rootParts = (snapshot.rootFolder.map { [Substring($0)] } ?? []) + [Substring(Verifier.contentsFolder)]
        let contents = try staging.directory.makeDirectories(rootParts)
        for file in unwanted {
            var parts = file.split(separator: "/")
            guard let leaf = parts.popLast(), let parent = try? contents.openDirectories(parts) else { continue }
            _ = try? parent.removeFile(String(leaf))
        }
        return root
    }
}
