import Digest
import PatchCodec

/// Installing a delta's binary patches (FilePatch.swift, docs/self-hosting.md): each patched file is made in
/// the staging folder from DEST's copy of its base, then placed like any staged file, so the journal, the
/// rollback, the lock and the crash guarantees are those of every install.
///
/// DEST's copy of every patched file must be the base (size and SHA-256), or already the file the patch makes,
/// or the install is refused naming the files, before the journal: DEST is untouched. A patch that does not
/// make the recorded file (a damaged frame, a window over the declared one, another size or SHA-256) is refused
/// there too.
extension InstallSession {
    /// A listed file that a delta makes from a patch.
    struct PatchedFile {
        /// The file to place, as the new version records it.
        var file: InstalledFile
        /// The file's own patch; nil for a file a group makes.
        var patch: FilePatch?
        /// The group whose entry holds the file's frame; nil for a patch of its own.
        var group: PatchGroup?
    }

    /// The delta's patched files, with the size and SHA-256 the new version records for each. Read from the
    /// plist before it is released; verify's rules have checked the records and the patch entries.
    func patchedFiles(_ report: VerificationReport, archive: String) throws(HCPackError) -> [PatchedFile] {
        guard let info = report.contentInfo, FilePatch.hasPatches(info) else { return [] }
        let patches: [String: FilePatch]
        let groups: [PatchGroup]
        do {
            patches = try FilePatch.all(of: info)
            groups = try PatchGroup.all(of: info, patches: patches)
        } catch {
            throw HCPackError(.invalidPackage, "\(archive): [\(Rule.patchMalformed.rawValue)] \(error.message)", path: archive)
        }
        let records = (try? info.parseIntegrity()) ?? nil
        var result: [PatchedFile] = []
        func add(_ path: String, patch: FilePatch?, group: PatchGroup?) throws(HCPackError) {
            guard let record = records?[path], path.split(separator: "/").first != Substring(Installer.metadataFolder) else {
                throw HCPackError(
                    .invalidPackage, "\(archive): [\(Rule.patchMalformed.rawValue)] Contents/\(path) has a patch but no record; run hcpack verify on it",
                    path: archive)
            }
            result.append(PatchedFile(file: InstalledFile(path: path, size: record.size, sha256: record.sha256), patch: patch, group: group))
        }
        for patch in patches.values { try add(patch.path, patch: patch, group: nil) }
        for group in groups {
            for path in group.paths { try add(path, patch: nil, group: group) }
        }
        return result.sorted { $0.file.path < $1.file.path }
    }

    /// Refuses the install unless DEST's copy of every patched file is its base; makes each file in the staging
    /// folder and checks its size and SHA-256. Writes only inside the staging folder, which a refusal discards.
    func applyPatches(_ patched: [PatchedFile], delta: DeltaBase, package: Package, archive: String) throws(HCPackError) {
        guard !patched.isEmpty, let staging else { return }
        let target = "\(package.productIdentifier) \(package.version.text)"
        var damaged: [String] = []
        var made = false
        lastInspected = nil
        for item in patched {
            guard let patch = item.patch else { continue }
            let needing = "the delta patches the \(patch.base.size)-byte file with SHA-256 \(patch.base.sha256)"
            let location = "\(destinationPath)/\(patch.path)"
            // DEST's copy has the base's size: it is hashed on a second thread while the patch is applied to it
            // (a large base read twice at once, not one pass after the other), and the result kept only if it
            // was the base. Otherwise it is found as any file is: already the new file (the same version again,
            // or an interrupted install run again: nothing to make, planning skips it), the base, or neither.
            let checkingBase: Bool
            if damaged.isEmpty, case .file(let size) = try inspect(patch.path), size == patch.base.size {
                checkingBase = true
            } else {
                let found = try findInPlace(patch.path, [item.file.record, patch.base], needing: needing, damaged: &damaged)
                guard damaged.isEmpty, let found, found != item.file.record else { continue }
                checkingBase = false
            }
            switch try apply(item.file, patch, package: package, staging: staging, archive: archive, checkingBase: checkingBase) {
            case .made: made = true
            case .alreadyMade: break
            case .notBase: damaged.append("\(location) changed since it was installed (\(needing))")
            case .changedWhileRead: damaged.append("\(location) changed while the delta was being installed (\(needing))")
            }
        }
        // Each group once, in plist order, its files in its entry's order.
        let byPath = Dictionary(patched.map { ($0.file.path, $0) }, uniquingKeysWith: { first, _ in first })
        var seen: Set<Int> = []
        let groups = patched.compactMap(\.group).filter { seen.insert($0.number).inserted }.sorted { $0.number < $1.number }
        let owned = groups.isEmpty ? [:] : try baseRecords(delta, package: package, archive: archive)
        for group in groups {
            let members = group.paths.compactMap { byPath[$0] }
            guard members.count == group.paths.count else {
                throw HCPackError(.invalidPackage, "\(archive): [\(Rule.patchMalformed.rawValue)] \(group.entryPath) names a file without a record; run hcpack verify on it", path: archive)
            }
            let bases = try owned.map { owned throws(HCPackError) in try groupBases(group, members, owned: owned, archive: archive, target: target) }
            if try applyGroup(group, members, bases: bases, package: package, staging: staging, archive: archive, damaged: &damaged) { made = true }
        }
        lastInspected = nil
        guard damaged.isEmpty else {
            throw damagedFiles(
                damaged, rule: .patchBase, "\(archive) patches {files} of \(destinationPath) that changed since they were installed",
                remedy: "install the full archive of \(target) instead")
        }
        // The made files are durable before the journal says they may be placed: one syncfs for all of them
        // (40 fsyncs made installing 40 patched JSON files 1.5 times slower than the full archive).
        if made && FileSystemSync.isAvailable { try FileSystemSync.synchronize(staging.directory) }
    }

    /// The files DEST's receipt records by path, when it is the receipt of the delta's base; nil when it is of the
    /// version the delta makes (a rerun: the group's files are then found in place as made).
    private func baseRecords(_ delta: DeltaBase, package: Package, archive: String) throws(HCPackError) -> [String: FileRecord]? {
        let receipt = try baseReceipt(delta, package: package, archive: archive)
        if ContentVersion(receipt.version) == package.version && receipt.plistSHA256 == delta.targetPlistSHA256 { return nil }
        return receipt.recordsByPath
    }

    /// The bases of a group's files, in its order, from DEST's receipt of the base (`owned`), when they are the
    /// ones the group names (`PatchGroup.bases`) and each fits the group (at most `largestMember` bytes, and
    /// within its window with the file it makes). Refuses the delta otherwise; reads only.
    private func groupBases(
        _ group: PatchGroup, _ members: [PatchedFile], owned: [String: FileRecord], archive: String, target: String
    ) throws(HCPackError) -> [FileRecord] {
        let remedy = "nothing was changed; install the full archive of \(target) instead"
        var bases: [(path: String, record: FileRecord)] = []
        for path in group.paths {
            guard let record = owned[path] else {
                throw HCPackError(
                    .invalidPackage,
                    "\(destinationPath): [\(Rule.patchBase.rawValue)] the receipt does not record \(path), which \(archive) patches (\(group.entryPath)); \(remedy)",
                    path: destinationPath)
            }
            bases.append((path, record))
        }
        let found = PatchGroup.bases(bases)
        let shown = group.paths.prefix(5).joined(separator: ", ") + (group.paths.count > 5 ? ", ..." : "")
        guard found.sha256 == group.bases.sha256 else {
            throw HCPackError(
                .invalidPackage,
                "\(destinationPath): [\(Rule.patchBase.rawValue)] the receipt's records of the \(group.paths.count) files patch group \(group.number) of \(archive) patches (\(shown)) are not the bases it was made from (the records' SHA-256 is \(found.sha256), BasesSHA256 says \(group.bases.sha256)); \(remedy)",
                path: destinationPath)
        }
        // The records are the bases, so a BasesSize that is not their sum is the delta's own error.
        guard found.size == group.bases.size else {
            throw HCPackError(
                .invalidPackage,
                "\(archive): [\(Rule.patchMalformed.rawValue)] patch group \(group.number) records BasesSize \(group.bases.size), but its bases (\(shown)) have \(found.size) bytes; \(remedy)",
                path: archive)
        }
        for ((path, base), member) in zip(bases, members) {
            guard base.size <= PatchGroup.largestMember,
                PatchCodec.windowLog(baseSize: base.size, targetSize: member.file.size, limit: group.frame.windowLog) != nil
            else {
                throw HCPackError(
                    .invalidPackage,
                    "\(archive): [\(Rule.patchMalformed.rawValue)] \(group.entryPath) makes Contents/\(path) from its \(base.size)-byte base, more than a group's window (2^\(group.frame.windowLog) bytes) or files (\(PatchGroup.largestMember) bytes) take; \(remedy)",
                    path: archive)
            }
        }
        return bases.map(\.record)
    }

    /// What `apply` found DEST's copy to be, when it checked it.
    enum AppliedPatch {
        /// The base: the file was made.
        case made
        /// Already the file the patch makes: nothing was made.
        case alreadyMade
        /// Neither: nothing was made.
        case notBase
        /// Written to while the patch was applied to it: nothing was made.
        case changedWhileRead
    }

    /// Makes one patched file in the staging folder, where placing looks for it (`stagedPath`). `checkingBase`:
    /// DEST's copy has not been hashed yet; it is, beside the patching, and what was made is removed unless the
    /// copy was the base.
    private func apply(
        _ file: InstalledFile, _ patch: FilePatch, package: Package, staging: StagingArea, archive: String, checkingBase: Bool
    ) throws(HCPackError) -> AppliedPatch {
        let frame = patch.frame
        var parts = patch.path.split(separator: "/")
        guard let leaf = parts.popLast().map(String.init) else { return .alreadyMade }
        let refusal = { (message: String) in
            HCPackError(
                .invalidPackage,
                "\(archive): [\(Rule.patchResult.rawValue)] the patch of Contents/\(patch.path) \(message); nothing was changed; install the full archive instead",
                path: archive)
        }
        // The base, mapped from DEST (read only; a copy written to meanwhile is refused below, by its stamp).
        guard let baseFolder = try destination.openDirectories(parts), let baseDescriptor = try baseFolder.openForReading(leaf) else {
            throw HCPackError(.io, "\(destinationPath)/\(patch.path) vanished while the delta was being installed; run the install again", path: destinationPath)
        }
        var baseDigest: BackgroundResult<FileRecord>?
        defer {
            _ = baseDigest?.outcome()  // the descriptor is the thread's until it is done
            Descriptor.release(baseDescriptor)
        }
        let baseFile = PositionedFile(descriptor: baseDescriptor, path: baseFolder.describe(leaf))
        let baseStamp = try FileStamp(of: baseDescriptor, path: baseFile.path)
        // The copy's digest, from the same open file, read on its own thread while the patch is applied.
        if checkingBase { baseDigest = BackgroundResult { () throws(HCPackError) in try baseFile.digest() } }
        let base = try MappedFile(reading: baseDescriptor, path: baseFile.path)
        let stagedPatch = package.contentsPrefix + FilePatch.folder + "/" + patch.path
        guard let patchFolder = try staging.folder(of: stagedPatch), let patchDescriptor = try patchFolder.openForReading(leaf) else {
            throw HCPackError(.io, "internal error: \(stagedPatch) was not staged", path: stagedPatch)
        }
        let patchBytes: MappedFile
        do {
            defer { Descriptor.release(patchDescriptor) }
            patchBytes = try MappedFile(reading: patchDescriptor, path: patchFolder.describe(leaf))
        }
        guard Int64(patchBytes.count) == frame.patch.size else { throw refusal("is not the recorded \(frame.patch.size) bytes") }
        let outputName = package.contentsPrefix + file.path
        let outputFolder = try staging.directory.makeDirectories(outputName.split(separator: "/").dropLast().map { $0 })
        let descriptor = try outputFolder.createFileForMapping(leaf)
        defer { Descriptor.release(descriptor) }
        guard file.size <= Int64(Int.max) else { throw refusal("makes a file too large to map") }
        let hasher = Digest.Hasher(.sha256)
        var failure: HCPackError?
        do {
            let output = try MappedFile(writing: descriptor, count: Int(file.size), path: outputFolder.describe(leaf))
            do {
                try PatchCodec.applyPatch(base: base, patch: patchBytes, windowLog: frame.windowLog, output: output) { hasher.update($0) }
            } catch {
                failure = refusal("does not apply: \(error.message)")
            }
        }
        let madeRecorded = failure == nil && hasher.finalize().matchesHex(file.sha256)
        // DEST's copy decides first: written to while it was read, or not the base, the refusal names it, not the
        // patch. A patch that failed on a copy hashed earlier has the copy hashed again to tell which.
        let changedWhileRead = try FileStamp(of: baseDescriptor, path: baseFile.path) != baseStamp
        var copy = try baseDigest?.value()
        if copy == nil && !madeRecorded { copy = try baseFile.digest() }
        if changedWhileRead || copy.map({ $0 != patch.base }) == true {
            _ = try outputFolder.removeFile(leaf)
            if changedWhileRead { return .changedWhileRead }
            if copy == file.record {
                hashedInPlace[patch.path] = copy
                return .alreadyMade
            }
            return .notBase
        }
        if let copy { hashedInPlace[patch.path] = copy }
        if let failure { throw failure }
        guard madeRecorded else { throw refusal("makes a file whose SHA-256 is not the recorded \(file.sha256)") }
        // Unmapped: its pages are in the page cache; without syncfs, each file is made durable here.
        if !FileSystemSync.isAvailable { try Descriptor.synchronize(descriptor, path: outputFolder.describe(leaf)) }
        return .made
    }

    /// Makes a patch group's files in the staging folder (`PatchGroup`), each from its own frame of the group's
    /// entry and DEST's copy of its base, both in memory, and checks each before it is written. A DEST copy
    /// that is already the file the group makes is skipped, one that is neither added to `damaged`. Returns
    /// whether it made a file.
    /// - Parameter bases: each member's base, from DEST's receipt (`groupBases`); nil when DEST's receipt is
    ///   of the version the delta makes, whose files must then all be in place already.
    private func applyGroup(
        _ group: PatchGroup, _ members: [PatchedFile], bases: [FileRecord]?, package: Package, staging: StagingArea, archive: String,
        damaged: inout [String]
    ) throws(HCPackError) -> Bool {
        let refusal = { (path: String, message: String) in
            HCPackError(
                .invalidPackage,
                "\(archive): [\(Rule.patchResult.rawValue)] the patch of Contents/\(path) in \(group.entryPath) \(message); nothing was changed; install the full archive instead",
                path: archive)
        }
        // The entry's frames, found once a file needs one.
        var entry: MappedFile?
        var frames: [Range<Int>] = []
        func frame(_ index: Int) throws(HCPackError) -> UnsafeRawBufferPointer {
            if entry == nil {
                let first = members[0].file.path
                let stagedPatch = package.contentsPrefix + String(group.entryPath.dropFirst(Verifier.contentsPrefix.count))
                let leaf = String(stagedPatch.split(separator: "/").last ?? "")
                guard let patchFolder = try staging.folder(of: stagedPatch), let patchDescriptor = try patchFolder.openForReading(leaf) else {
                    throw HCPackError(.io, "internal error: \(stagedPatch) was not staged", path: stagedPatch)
                }
                defer { Descriptor.release(patchDescriptor) }
                let mapped = try MappedFile(reading: patchDescriptor, path: patchFolder.describe(leaf))
                guard Int64(mapped.count) == group.frame.patch.size else { throw refusal(first, "is not the recorded \(group.frame.patch.size) bytes") }
                guard let found = PatchCodec.frames(mapped.bytes, limit: PatchGroup.largestCount), found.count == members.count else {
                    throw refusal(first, "is not one zstd frame for each of its \(members.count) files")
                }
                entry = mapped
                frames = found
            }
            return UnsafeRawBufferPointer(rebasing: entry!.bytes[frames[index]])
        }
        defer { withExtendedLifetime(entry) {} }  // `frame`'s bytes are the mapping's
        var made = false
        for (index, item) in members.enumerated() {
            let path = item.file.path
            guard let baseRecord = bases?[index] else {
                // DEST has the version the delta makes: its copy must be that version's.
                _ = try findInPlace(path, [item.file.record], needing: "\(package.version.text) has \(item.file.size) bytes, SHA-256 \(item.file.sha256)", damaged: &damaged)
                continue
            }
            let needing = "the delta patches the \(baseRecord.size)-byte file with SHA-256 \(baseRecord.sha256)"
            // DEST's copy read whole when it has the base's size (at most largestMember, groupBases checked): the
            // base, or found as any file is, already the new file (planning skips it) or neither.
            guard case .file(let found) = try inspect(path), found == baseRecord.size, let base = try read(path, count: Int(found)),
                Digest.Hasher.digest(.sha256, of: base).matchesHex(baseRecord.sha256)
            else {
                switch try findInPlace(path, [item.file.record, baseRecord], needing: needing, damaged: &damaged) {
                case item.file.record?, nil: break  // already made, or damaged (added)
                default: damaged.append("\(destinationPath)/\(path) changed while the delta was being installed (\(needing))")
                }
                continue
            }
            hashedInPlace[path] = baseRecord
            guard damaged.isEmpty else { continue }  // refused anyway: only the rest is looked at
            guard item.file.size <= PatchGroup.largestMember else { throw refusal(item.file.path, "makes a file larger than a group's files may be") }
            let patch = try frame(index)
            var result = [UInt8](repeating: 0, count: Int(item.file.size))
            var failure: PatchError?
            base.withUnsafeBytes { base in
                result.withUnsafeMutableBytes { output in
                    do throws(PatchError) {
                        try PatchCodec.applyPatch(base: base, patch: patch, windowLog: group.frame.windowLog, output: output)
                    } catch {
                        failure = error
                    }
                }
            }
            if let failure { throw refusal(item.file.path, "does not apply: \(failure.message)") }
            guard Digest.Hasher.digest(.sha256, of: result).matchesHex(item.file.sha256) else {
                throw refusal(item.file.path, "makes a file whose SHA-256 is not the recorded \(item.file.sha256)")
            }
            let outputName = (package.contentsPrefix + item.file.path).split(separator: "/")
            let folder = try staging.directory.makeDirectories(Array(outputName.dropLast()))
            let written = try folder.createFile(String(outputName.last ?? ""))
            try written.write(result)
            // Without syncfs, each file is made durable here (applyPatches syncs the staging folder once otherwise).
            try written.finish(synchronize: !FileSystemSync.isAvailable)
            made = true
        }
        return made
    }

    /// DEST's `path`, read whole; nil unless it has exactly `count` bytes. Read, not mapped: a copy truncated
    /// meanwhile is then a short read, found as changed, not a SIGBUS that ends the install (review: 400 grouped
    /// bases truncated while installing ended it with exit 3 and its staging folder left).
    private func read(_ path: String, count: Int) throws(HCPackError) -> [UInt8]? {
        var parts = path.split(separator: "/")
        guard let leaf = parts.popLast().map(String.init), let folder = try destination.openDirectories(parts),
            let descriptor = try folder.openForReading(leaf)
        else { return nil }
        defer { Descriptor.release(descriptor) }
        // One byte more than the base: a copy grown meanwhile is found too.
        let bytes = try PositionedFile(descriptor: descriptor, path: folder.describe(leaf)).readAvailable(count + 1, at: 0)
        return bytes.count == count ? bytes : nil
    }
}
