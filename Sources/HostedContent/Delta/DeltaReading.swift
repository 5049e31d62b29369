import ArchiveIO
import PatchCodec
import Digest
import PropertyList

/// OLD and NEW read for a delta, with the files the delta needs staged.
struct DeltaInputs {
    let old: PackageSide
    let new: PackageSide
    /// The delta's package folder: NEW's changed and new files under Contents/ (its plist still to write).
    let newRoot: String
    /// A package folder holding OLD's copies of the files that may travel as patches, but for `oldKept`.
    let oldRoot: String
    /// OLD's and NEW's copies of the small files that may travel as patches, read into memory (checked like
    /// every file read), by listed path: not in the folders.
    let oldKept: [String: [UInt8]]
    let newKept: [String: [UInt8]]
    /// How many files reading NEW staged in `newRoot` (none: the delta may be built from memory).
    let newStagedFiles: Int
}

/// Reading two archives for a delta once each, side by side, and only what the delta is made of: both plists,
/// every header (the zip structure rules), NEW's changed and new files and OLD's copies of the changed ones.
/// The files both versions record alike are left unread: the delta does not carry them, and install holds
/// DEST's copies to NEW's records. On a package of gigabytes with one file changed it reads that file, not the
/// gigabytes (bench/README.md, "Binary deltas", for what it saves); `hcpack verify` and `hcpack catalog` still
/// read every byte.
extension DeltaBuilder {
    /// Reads OLD and NEW that way when both are archives whose plist comes first and records every listed file
    /// (what `hcpack build` writes); nil otherwise, and the caller reads both whole.
    /// - Throws: as `PackageSide.init` does for an invalid package; `.io` when an archive changed meanwhile.
    static func readArchivesOnce(_ options: DeltaOptions, scratch: String) throws(HCPackError) -> DeltaInputs? {
        guard let oldStatus = try FileSystem.status(options.old), oldStatus.kind == .file,
            let newStatus = try FileSystem.status(options.new), newStatus.kind == .file
        else { return nil }
        let verify = options.verify
        // Two small archives are read one after the other on this thread (HashPipeline.inlineBytes), each on from
        // the reader that peeked at its plist: one open, one directory walk and one plist read an archive.
        let small = max(oldStatus.size, newStatus.size) <= HashPipeline.inlineBytes
        guard let (oldLead, oldPeek) = leadingPlist(options.old, options: verify, keepsReader: small),
            let (newLead, newPeek) = leadingPlist(options.new, options: verify, keepsReader: small)
        else { return nil }
        let oldFiles = oldLead.info.files ?? []
        let newFiles = newLead.info.files ?? []
        guard let oldRecords = (try? oldLead.info.parseIntegrity()) ?? nil,
            let newRecords = (try? newLead.info.parseIntegrity()) ?? nil,
            oldFiles.allSatisfy({ oldRecords[$0] != nil }), newFiles.allSatisfy({ newRecords[$0] != nil })
        else { return nil }
        let carried = Set(newFiles.filter { oldRecords[$0] != newRecords[$0] })
        // OLD's copies that may become patches: changed, and a size a patch is tried for (DeltaPatching.swift).
        let bases = Set(
            options.patchWindowLog.map { limit in
                carried.filter { path in
                    guard let base = oldRecords[path], let made = newRecords[path] else { return false }
                    return made.size > minimumSaving
                        && PatchCodec.windowLog(baseSize: base.size, targetSize: made.size, limit: limit) != nil
                }
            } ?? [])
        // Small ones are read into memory on both sides, each patch made without a file of its own (on 40 files of
        // 15 KiB, creating and removing the 80 files took a quarter of the CPU time); a package that lists files
        // in the patches folder gets no patches (makePatches), so nothing is kept for it.
        let patchesFolder = FilePatch.folder + "/"
        let listsPatchesFolder = newFiles.contains(where: { $0.hasPrefix(patchesFolder) })
        let kept = listsPatchesFolder ? [] : bases.filter { path in
            guard let base = oldRecords[path], let made = newRecords[path] else { return false }
            return base.size <= StagingArea.largestKeptBytes && made.size <= StagingArea.largestKeptBytes
        }
        // NEW's other small carried files too: a delta of small files is then built from memory (DeltaBuilder).
        let keptNew: Set<String> = listsPatchesFolder ? [] : Set(kept).union(carried.filter { (newRecords[$0]?.size ?? .max) <= PreparedEntries.largestFile })
        let folder = try DirectoryHandle.open(scratch)
        let (newFolder, _) = try folder.makeDirectory("new", mode: 0o700)
        let (oldFolder, _) = try folder.makeDirectory("old", mode: 0o700)
        let newStaging = try StagingArea(in: newFolder)
        let oldStaging = try StagingArea(in: oldFolder)
        newStaging.unreadNames = archiveNames(newFiles.filter { !carried.contains($0) }, ifPlistIs: newLead.bytes)
        oldStaging.unreadNames = archiveNames(oldFiles.filter { !bases.contains($0) }, ifPlistIs: oldLead.bytes)
        newStaging.keptBudgetBytes = options.memoryBudgetBytes
        oldStaging.keptBudgetBytes = options.memoryBudgetBytes
        newStaging.keptNames = archiveNames(keptNew.sorted(), ifPlistIs: newLead.bytes)
        oldStaging.keptNames = archiveNames(kept.sorted(), ifPlistIs: oldLead.bytes)
        let limits = options.verify.limits
        let oldSnapshot: PackageSnapshot
        let newSnapshot: PackageSnapshot
        if let oldPeek, let newPeek {
            oldSnapshot = try PackageScanner.readArchive(
                options.old, limits: limits, staging: oldStaging, continuing: oldPeek.reader, first: (oldPeek.header, oldLead.bytes))
            newSnapshot = try PackageScanner.readArchive(
                options.new, limits: limits, staging: newStaging, continuing: newPeek.reader, first: (newPeek.header, newLead.bytes))
        } else {
            let oldRead = BackgroundResult { () throws(HCPackError) in
                try PackageScanner.readArchive(options.old, limits: limits, staging: oldStaging)
            }
            do {
                newSnapshot = try PackageScanner.readArchive(options.new, limits: limits, staging: newStaging)
            } catch {
                _ = oldRead.outcome()
                throw error
            }
            oldSnapshot = try oldRead.value()
        }
        // The plists were decoded when peeked at: the rules take that parse when the bytes are the same.
        func check(_ snapshot: PackageSnapshot, _ lead: LeadingPlist) -> VerificationReport {
            Verifier.check(snapshot, options: verify, decodedPlist: snapshot.contentInfoBytes == lead.bytes ? lead.value : nil)
        }
        // What the peeks parsed and hashed stands for the plists read, when they are the same bytes.
        func known(_ snapshot: PackageSnapshot, _ lead: LeadingPlist, _ records: [String: FileRecord]) -> ([String: FileRecord], String)? {
            snapshot.contentInfoBytes == lead.bytes ? (records, lead.sha256) : nil
        }
        let old = try PackageSide(
            options.old, role: "OLD", report: check(oldSnapshot, oldLead), isFolder: false, requireRecords: false,
            known: known(oldSnapshot, oldLead, oldRecords))
        let new = try PackageSide(
            options.new, role: "NEW", report: check(newSnapshot, newLead), isFolder: false, known: known(newSnapshot, newLead, newRecords))
        for (side, lead) in [(old, oldLead), (new, newLead)] where side.plistSHA256 != lead.sha256 {
            throw HCPackError(.io, "\(side.path) changed while the delta was being made; run again once nothing writes to it", path: side.path)
        }
        return DeltaInputs(
            old: old, new: new,
            newRoot: try stagedRoot(newStaging, in: newFolder, snapshot: newSnapshot),
            oldRoot: try stagedRoot(oldStaging, in: oldFolder, snapshot: oldSnapshot),
            oldKept: listed(oldStaging.kept, snapshot: oldSnapshot), newKept: listed(newStaging.kept, snapshot: newSnapshot),
            newStagedFiles: newStaging.writtenFiles)
    }

    /// `kept` by listed path (archive names without the root folder and Contents/).
    private static func listed(_ kept: [String: [UInt8]], snapshot: PackageSnapshot) -> [String: [UInt8]] {
        let prefix = (snapshot.rootFolder.map { $0 + "/" } ?? "") + Verifier.contentsPrefix
        var listed: [String: [UInt8]] = [:]
        for (name, bytes) in kept where name.hasPrefix(prefix) { listed[String(name.dropFirst(prefix.count))] = bytes }
        return listed
    }

    /// The archive names of `files` under the plist's root, when the plist read is `expected` (an archive
    /// that changed since its plist was peeked at is read whole, and then refused as changed).
    private static func archiveNames(_ files: [String], ifPlistIs expected: [UInt8]) -> (String, [UInt8]) -> Set<String> {
        { plistName, bytes in
            guard bytes == expected else { return [] }
            let prefix = plistName.dropLast(ContentInfo.fileName.count) + Verifier.contentsPrefix
            return Set(files.map { prefix + $0 })
        }
    }

    /// The package folder a staging area holds, with its Contents/ made when nothing was staged in it.
    private static func stagedRoot(_ staging: StagingArea, in folder: DirectoryHandle, snapshot: PackageSnapshot) throws(HCPackError)
        -> String
    {
        let rootParts = (snapshot.rootFolder.map { [Substring($0)] } ?? []) + [Substring(Verifier.contentsFolder)]
        _ = try staging.directory.makeDirectories(rootParts)
        return folder.path + "/" + staging.name + (snapshot.rootFolder.map { "/" + $0 } ?? "")
    }

    /// The archive's first entry when it is a ContentInfo.plist (as `hcpack build` writes them): its bytes,
    /// decoded, and their SHA-256; nil for anything else, which is then read the ordinary way.
    struct LeadingPlist: Sendable {
        let bytes: [UInt8]
        let value: PlistValue
        let info: ContentInfo
        let sha256: String
    }

    /// An archive whose plist, its first entry, was read: the reader, left after it, and the entry's header.
    struct PeekedArchive {
        let reader: ArchiveReader
        let header: ArchiveEntry
    }

    /// The archive's leading plist, and with `keepsReader` the reader that read it (`PackageScanner.readArchive`
    /// reads on from it); nil when the archive does not start with a plist hcpack can read.
    private static func leadingPlist(_ path: String, options: VerifyOptions, keepsReader: Bool) -> (LeadingPlist, PeekedArchive?)? {
        guard let reader = try? ArchiveReader(path: path, limits: options.limits.archive, checksZipCRC: false),
            let header = try? reader.next(), header.kind == .file,
            ArchiveCollector.isPlistCandidate(PackagePath.normalizeArchiveName(header.path ?? "")),
            let declared = header.declaredSize, declared <= options.limits.plist.maxBytes
        else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(declared))
        let limit = options.limits.plist.maxBytes
        guard (try? reader.readData({ chunk in
            guard bytes.count + chunk.count <= limit else { throw HCPackError(.invalidPackage, "plist too large") }
            bytes += chunk
        })) != nil,
            let value = try? PropertyList.decode(bytes, limits: options.limits.plist).value,
            case .dictionary(let dictionary) = value
        else { return nil }
        let lead = LeadingPlist(
            bytes: bytes, value: value, info: ContentInfo(dictionary: dictionary), sha256: Digest.Hasher.digest(.sha256, of: bytes).hexString)
        return (lead, keepsReader ? PeekedArchive(reader: reader, header: header) : nil)
    }
}
