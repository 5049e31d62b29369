import Digest
import PatchCodec

/// A file a delta carries as a patch, and what that saves.
public struct DeltaPatchSummary: Sendable, Equatable {
    /// The listed path (relative to Contents/).
    public var path: String
    /// The new file's size: what carrying it whole would take, before compression.
    public var size: Int64
    /// The patch's size: its frame's; where only the plist is at hand (`FilePatch.summaries`), a grouped file's
    /// share of its group's entry, by result size.
    public var patchSize: Int64
    /// The patch group whose entry holds the file's frame (`PatchGroup.number`); nil for a patch of its own.
    public var group: Int? = nil
    /// Bytes saved against the whole file.
    public var saved: Int64 { size - patchSize }
}

/// Binary patches for the changed files of a delta (FilePatch.swift): each changed file OLD also has is
/// patched against OLD's copy, and the patch kept instead of the file when it is smaller.
extension DeltaBuilder {
    /// Bytes a patch must save against the whole file to be kept.
    static let minimumSaving: Int64 = 1024

    /// Makes patches for `changed` (paths both versions list, with different bytes) inside the delta folder
    /// `root`, whose Contents/ holds NEW's copies: a kept patch replaces the whole file there.
    /// - Parameters:
    ///   - oldRoot: a package folder already holding OLD's copies of `changed`; nil: they are copied out of OLD.
    ///   - kept: OLD's and NEW's copies of some of `changed` in memory, in neither folder; each NEW one ends in
    ///     the delta folder, as a patch or whole.
    ///   - scratch: a private folder for OLD's copies.
    ///   - windowLogLimit: files whose base and result need a larger window travel whole.
    /// - Returns: the patches kept, sorted by path.
    static func makePatches(
        old: PackageSide, new: PackageSide, changed: [String], root: String, oldRoot staged: String?,
        kept: (old: [String: [UInt8]], new: [String: [UInt8]]) = ([:], [:]), scratch: String, windowLogLimit: Int,
        options: VerifyOptions
    ) throws(HCPackError) -> MadePatches {
        let contents = try DirectoryHandle.open(root + "/" + Verifier.contentsFolder)
        // A package that lists files in the patches folder itself keeps every file whole.
        let prefix = FilePatch.folder + "/"
        let candidates = new.files.contains(where: { $0.hasPrefix(prefix) }) ? [] : changed.filter { path in
            guard let base = old.records[path], let made = new.records[path], made.size > minimumSaving else { return false }
            return PatchCodec.windowLog(baseSize: base.size, targetSize: made.size, limit: windowLogLimit) != nil
        }
        // NEW's copies in memory that are not patched there go into the delta folder whole, as staged ones are.
        var keptNew = kept.new
        var outputs = SmallOutputs()
        var records: [FilePatch] = []
        var groups: [PatchGroup] = []
        var summaries: [DeltaPatchSummary] = []
        if !candidates.isEmpty {
            // Small files' patches, kept, waiting to be grouped (PatchGroup) or written as frames of their own.
            var small: [SmallPatch] = []
            let oldContents = try openOldCopies(old, of: candidates, staged: staged, scratch: scratch, options: options)
            // What the kept patches make, held to the ratio install holds them to (PatchOutput).
            var patchedOutput = PatchOutput()
            let smallPatches = PatchMaker()
            for path in candidates.sorted() {
                guard let baseRecord = old.records[path], let madeRecord = new.records[path] else { continue }
                var parts = path.split(separator: "/")
                guard let leaf = parts.popLast().map(String.init),
                    let windowLog = PatchCodec.windowLog(baseSize: baseRecord.size, targetSize: madeRecord.size, limit: windowLogLimit)
                else { continue }
                let location = root + "/" + FilePatch(path: path, base: baseRecord, patch: baseRecord, windowLog: windowLog).entryPath
                let level = PatchCodec.level(forSize: madeRecord.size)
                func failed(_ error: PatchError) -> HCPackError {
                    HCPackError(.io, "\(location): could not make the patch of Contents/\(path): \(error.message)", path: location)
                }
                // Whole unless the patch saves more than its own cost (its plist record and longer entry names, a
                // few hundred bytes): re-encoded media, a file rewritten through and through, small files. Whole
                // too when install would refuse what the patches make from so little (--max-ratio): the archive's
                // own limits then judge the file, as build's do.
                func keeps(patchOf size: Int64) -> Bool {
                    let withPatch = patchedOutput.adding(result: madeRecord.size, patch: size, base: baseRecord.size)
                    guard size + minimumSaving <= madeRecord.size, withPatch.withinRatio(options.limits.archive) else { return false }
                    patchedOutput = withPatch
                    return true
                }
                func record(_ patch: FileRecord) {
                    records.append(FilePatch(path: path, base: baseRecord, patch: patch, windowLog: windowLog))
                    summaries.append(DeltaPatchSummary(path: path, size: madeRecord.size, patchSize: patch.size))
                }
                // Small: both sides in memory (read from the folders when the memory budget left them there), the
                // patch kept there until its group's entry is written.
                if baseRecord.size <= PatchGroup.largestMember && madeRecord.size <= PatchGroup.largestMember {
                    // A copy kept in memory is the bytes the scan hashed and the rules held to the record; one
                    // read from a folder is checked again once copied (the mapping is checked as it is read).
                    let madeOnDisk = keptNew[path] == nil
                    let baseBytes: [UInt8]
                    if let kept = kept.old[path] { baseBytes = kept } else {
                        let mapped = try map(oldContents, parts, leaf, expecting: baseRecord, side: old, path: path)
                        baseBytes = withExtendedLifetime(mapped) { Array(mapped.bytes) }
                        try check(baseBytes, expecting: baseRecord, side: old, path: path)
                    }
                    let madeBytes: [UInt8]
                    if let kept = keptNew[path] { madeBytes = kept } else {
                        let mapped = try map(contents, parts, leaf, expecting: madeRecord, side: new, path: path)
                        madeBytes = withExtendedLifetime(mapped) { Array(mapped.bytes) }
                        try check(madeBytes, expecting: madeRecord, side: new, path: path)
                    }
                    let patch: [UInt8]
                    do {
                        patch = try smallPatches.makePatch(base: baseBytes, target: madeBytes, windowLog: windowLog, level: level)
                    } catch {
                        throw failed(error)
                    }
                    guard keeps(patchOf: Int64(patch.count)) else { continue }
                    keptNew[path] = nil
                    small.append(
                        SmallPatch(
                            path: path, base: baseRecord, made: madeRecord, patch: patch, windowLog: windowLog, madeOnDisk: madeOnDisk))
                    continue
                }
                // On disk: one side (or both) was too large to keep in memory.
                if let madeBytes = keptNew.removeValue(forKey: path) { try writeWhole([path: madeBytes], into: contents) }
                outputs.wroteFiles = true
                if let baseBytes = kept.old[path] { try writeWhole([path: baseBytes], into: oldContents) }
                let base = try map(oldContents, parts, leaf, expecting: baseRecord, side: old, path: path)
                let made = try map(contents, parts, leaf, expecting: madeRecord, side: new, path: path)
                // Made beside the delta folder and moved in when kept: a patch not kept leaves no folder behind.
                let scratchFolder = try DirectoryHandle.open(scratch)
                let madePatch = "patch-\(records.count)"
                _ = try scratchFolder.removeFile(madePatch)
                let output = try scratchFolder.createFileForMapping(madePatch)
                let size: Int64
                do {
                    defer { Descriptor.release(output) }
                    do {
                        size = try PatchCodec.makePatch(
                            base: base, target: made, windowLog: windowLog, level: level, output: output, outputPath: location)
                    } catch {
                        throw failed(error)
                    }
                }
                guard keeps(patchOf: size) else {
                    _ = try scratchFolder.removeFile(madePatch)
                    continue
                }
                let patchFolder = try contents.makeDirectories([Substring(FilePatch.folder)] + parts)
                try scratchFolder.rename(madePatch, to: patchFolder, leaf)
                guard let digest = try patchFolder.digest(leaf) else {
                    throw HCPackError(.io, "\(location) vanished while the delta was being made", path: location)
                }
                guard let folder = try contents.openDirectories(parts) else { continue }
                _ = try folder.removeFile(leaf)
                record(digest)
            }
            // Small patches, in path order, share an entry (PatchGroup): its zip headers and one record instead of
            // one a file.
            for run in groupRuns(small) {
                let members = run.map { small[$0] }
                if members.count > 1 {
                    let framed = members.flatMap(\.patch)
                    let frame = PatchFrame(
                        patch: FileRecord(size: Int64(framed.count), sha256: Digest.Hasher.digest(.sha256, of: framed).hexString),
                        windowLog: members.reduce(0) { max($0, $1.windowLog) })
                    let group = PatchGroup(
                        number: groups.count + 1, paths: members.map(\.path), frame: frame,
                        bases: PatchGroup.bases(members.map { ($0.path, $0.base) }))
                    groups.append(group)
                    outputs.add(String(group.entryPath.dropFirst(Verifier.contentsPrefix.count)), framed)
                    for member in members {
                        summaries.append(
                            DeltaPatchSummary(path: member.path, size: member.made.size, patchSize: Int64(member.patch.count), group: group.number))
                    }
                } else {
                    for member in members {
                        outputs.add(FilePatch.folder + "/" + member.path, member.patch)
                        records.append(
                            FilePatch(
                                path: member.path, base: member.base,
                                patch: FileRecord(size: Int64(member.patch.count), sha256: Digest.Hasher.digest(.sha256, of: member.patch).hexString),
                                windowLog: member.windowLog))
                        summaries.append(DeltaPatchSummary(path: member.path, size: member.made.size, patchSize: Int64(member.patch.count)))
                    }
                }
                // Each folder opened once: 40 files in one folder were 40 openat.
                var folders: [[Substring]: DirectoryHandle] = [:]
                for member in members {
                    var parts = member.path.split(separator: "/")
                    guard let leaf = parts.popLast().map(String.init) else { continue }
                    // The file's folder stays, as when NEW's copy is staged and then replaced by its patch: the same
                    // inputs give the same delta whichever way they were read.
                    outputs.addFolder(parts)
                    guard member.madeOnDisk else { continue }
                    let folder: DirectoryHandle
                    if let opened = folders[parts] { folder = opened } else {
                        folder = try contents.makeDirectories(parts)
                        folders[parts] = folder
                    }
                    _ = try folder.removeFile(leaf)
                }
            }
        }
        for (path, bytes) in keptNew { outputs.add(path, bytes) }
        records.sort { $0.path < $1.path }
        summaries.sort { $0.path < $1.path }
        return MadePatches(records: records, groups: groups, summaries: summaries, small: outputs)
    }

    /// What `makePatches` made.
    struct MadePatches {
        var records: [FilePatch]
        var groups: [PatchGroup]
        var summaries: [DeltaPatchSummary]
        /// The small files the delta folder is still to hold (patches, and NEW's files kept whole).
        var small: SmallOutputs
    }

    /// Files of at most `PatchGroup.largestMember` bytes (by path under Contents/) and folders the delta folder
    /// is to hold: written into it (`write(into:)`), or built from memory when nothing else is on disk.
    struct SmallOutputs {
        var files: [String: [UInt8]] = [:]
        /// Paths under Contents/, with every parent.
        var folders: Set<String> = []
        /// Some file went into the delta folder on disk (a large patch, a large file kept whole).
        var wroteFiles = false

        init(_ files: [String: [UInt8]] = [:]) {
            for (path, bytes) in files { add(path, bytes) }
        }

        mutating func add(_ path: String, _ bytes: [UInt8]) {
            files[path] = bytes
            addFolder(path.split(separator: "/").dropLast())
        }

        mutating func addFolder(_ parts: some Collection<Substring>) {
            var path = ""
            for part in parts {
                path += (path.isEmpty ? "" : "/") + part
                folders.insert(path)
            }
        }

        /// Writes the files and folders into `contents`, the delta folder's Contents/.
        func write(into contents: DirectoryHandle) throws(HCPackError) {
            try DeltaBuilder.writeWhole(files, into: contents)
            for folder in folders.sorted() where !files.keys.contains(where: { $0.hasPrefix(folder + "/") }) {
                _ = try contents.makeDirectories(folder.split(separator: "/"))
            }
        }
    }

    /// A small file's kept patch, waiting for its group.
    struct SmallPatch {
        var path: String
        var base: FileRecord
        var made: FileRecord
        var patch: [UInt8]
        var windowLog: Int
        /// NEW's copy is in the delta folder, to be removed once its patch is written.
        var madeOnDisk: Bool
    }

    /// `small`'s indices in runs of at most `PatchGroup.largestCount`, in order.
    static func groupRuns(_ small: [SmallPatch]) -> [[Int]] {
        stride(from: 0, to: small.count, by: PatchGroup.largestCount).map { start in
            Array(start..<min(small.count, start + PatchGroup.largestCount))
        }
    }

    /// The Contents/ folder holding OLD's copies of `candidates`: `staged` when the caller staged them, OLD
    /// itself when it is a folder, else a copy out of OLD in `scratch`.
    private static func openOldCopies(
        _ old: PackageSide, of candidates: [String], staged: String?, scratch: String, options: VerifyOptions
    ) throws(HCPackError) -> DirectoryHandle {
        let oldRoot: String
        if let staged {
            oldRoot = staged
        } else if old.isFolder {
            oldRoot = old.path + (old.rootFolder.map { "/" + $0 } ?? "")
        } else {
            let folder = scratch + "/old"
            _ = try DirectoryHandle.open(scratch).makeDirectory("old")
            oldRoot = try old.extract(Set(candidates), into: folder, options: options)
        }
        return try DirectoryHandle.open(oldRoot + "/" + Verifier.contentsFolder)
    }

    /// Writes each file (by listed path) into `contents`, making its folders.
    static func writeWhole(_ files: [String: [UInt8]], into contents: DirectoryHandle) throws(HCPackError) {
        for (path, bytes) in files.sorted(by: { $0.key < $1.key }) {
            var parts = path.split(separator: "/")
            guard let leaf = parts.popLast() else { continue }
            let written = try contents.makeDirectories(parts).createFile(String(leaf))
            try written.write(bytes)
            try written.finish(synchronize: false)
        }
    }

    /// Checks that a copy read into memory is the file `side` records (the patch must be made from exactly the
    /// recorded bytes; the scan checked them already, this keeps the promise next to its use).
    private static func check(_ bytes: [UInt8], expecting record: FileRecord, side: PackageSide, path: String) throws(HCPackError) {
        guard Int64(bytes.count) == record.size, Digest.Hasher.digest(.sha256, of: bytes).matchesHex(record.sha256) else {
            throw HCPackError(
                .io, "\(side.path): Contents/\(path) changed while the delta was being made; run again once nothing writes to it",
                path: side.path)
        }
    }

    /// Maps `folder/parts/leaf` and checks it is the file `side` records (its copy was taken while it might
    /// change, and the patch must be made from exactly the recorded bytes).
    private static func map(
        _ folder: DirectoryHandle, _ parts: [Substring], _ leaf: String, expecting record: FileRecord, side: PackageSide,
        path: String
    ) throws(HCPackError) -> MappedFile {
        let location = side.path + ": Contents/" + path
        guard let parent = try folder.openDirectories(parts), let descriptor = try parent.openForReading(leaf) else {
            throw HCPackError(.io, "\(location) vanished while the delta was being made; run again once nothing writes to it", path: side.path)
        }
        defer { Descriptor.release(descriptor) }
        let mapped = try MappedFile(reading: descriptor, path: parent.describe(leaf))
        let hasher = Digest.Hasher(.sha256)
        let bytes = mapped.bytes
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + (16 << 20))
            hasher.update(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
            mapped.release(below: end)
            offset = end
        }
        guard Int64(mapped.count) == record.size, hasher.finalize().matchesHex(record.sha256) else {
            throw HCPackError(.io, "\(location) changed while the delta was being made; run again once nothing writes to it", path: side.path)
        }
        return mapped
    }
}

extension FilePatch {
    /// The patched files `info` records (a delta's `HCPackPatches`), each with the new file's size from
    /// `HCPackIntegrity` and the patch's; empty for a package without patches or with malformed records.
    public static func summaries(of info: ContentInfo) -> [DeltaPatchSummary] {
        guard hasPatches(info), let patches = try? all(of: info), let groups = try? PatchGroup.all(of: info, patches: patches)
        else { return [] }
        let records = (try? info.parseIntegrity()) ?? nil
        var summaries: [String: DeltaPatchSummary] = [:]
        for patch in patches.values {
            guard let made = records?[patch.path] else { continue }
            summaries[patch.path] = DeltaPatchSummary(path: patch.path, size: made.size, patchSize: patch.frame.patch.size)
        }
        for group in groups {
            let sizes = group.paths.map { records?[$0]?.size ?? 0 }
            for (index, share) in PatchGroup.shares(of: group.frame.patch.size, by: sizes).enumerated() {
                guard let made = records?[group.paths[index]] else { continue }
                summaries[group.paths[index]] = DeltaPatchSummary(path: group.paths[index], size: made.size, patchSize: share, group: group.number)
            }
        }
        return summaries.values.sorted { $0.path < $1.path }
    }
}
