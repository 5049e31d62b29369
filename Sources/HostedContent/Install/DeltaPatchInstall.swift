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
        var patch: FilePatch
        /// The group whose entry holds the file's frame; nil for a patch of its own.
        var group: PatchGroup?
    }

    /// The delta's patched files, with the size and SHA-256 the new version records for each. Read from the
    /// plist before it is released; verify's rules have checked the records and the patch entries.
    func patchedFiles(_ report: VerificationReport, archive: String) throws(HCPackError) -> [PatchedFile] {
        guard let info = report.contentInfo, info.dictionary[FilePatch.key] != nil else { return [] }
        let patches: [String: FilePatch]
        var groupOf: [String: PatchGroup] = [:]
        do {
            patches = try FilePatch.all(of: info)
            for group in try PatchGroup.all(of: info, patches: patches) {
                for path in group.paths { groupOf[path] = group }
            }
        } catch {
            throw HCPackError(.invalidPackage, "\(archive): [\(Rule.patchMalformed.rawValue)] \(error.message)", path: archive)
        }
        let records = (try? info.parseIntegrity()) ?? nil
        var result: [PatchedFile] = []
        for patch in patches.values.sorted(by: { $0.path < $1.path }) {
            guard let record = records?[patch.path], patch.path.split(separator: "/").first != Substring(Installer.metadataFolder) else {
                throw HCPackError(
                    .invalidPackage, "\(archive): [\(Rule.patchMalformed.rawValue)] Contents/\(patch.path) has a patch but no record; run hcpack verify on it",
                    path: archive)
            }
            result.append(
                PatchedFile(file: InstalledFile(path: patch.path, size: record.size, sha256: record.sha256), patch: patch, group: groupOf[patch.path]))
        }
        return result
    }

    /// Refuses the install unless DEST's copy of every patched file is its base; makes each file in the staging
    /// folder and checks its size and SHA-256. Writes only inside the staging folder, which a refusal discards.
    func applyPatches(_ patched: [PatchedFile], package: Package, archive: String) throws(HCPackError) {
        guard !patched.isEmpty, let staging else { return }
        let target = "\(package.productIdentifier) \(package.version.text)"
        var damaged: [String] = []
        var made = false
        lastInspected = nil
        for item in patched where item.group == nil {
            let needing = "the delta patches the \(item.patch.base.size)-byte file with SHA-256 \(item.patch.base.sha256)"
            let location = "\(destinationPath)/\(item.patch.path)"
            // DEST's copy has the base's size: it is hashed on a second thread while the patch is applied to it
            // (a large base read twice at once, not one pass after the other), and the result kept only if it
            // was the base. Otherwise it is found as any file is: already the new file (the same version again,
            // or an interrupted install run again: nothing to make, planning skips it), the base, or neither.
            let checkingBase: Bool
            if damaged.isEmpty, case .file(let size) = try inspect(item.patch.path), size == item.patch.base.size {
                checkingBase = true
            } else {
                let found = try findInPlace(item.patch.path, [item.file.record, item.patch.base], needing: needing, damaged: &damaged)
                guard damaged.isEmpty, let found, found != item.file.record else { continue }
                checkingBase = false
            }
            switch try apply(item, package: package, staging: staging, archive: archive, checkingBase: checkingBase) {
            case .made: made = true
            case .alreadyMade: break
            case .notBase: damaged.append("\(location) changed since it was installed (\(needing))")
            case .changedWhileRead: damaged.append("\(location) changed while the delta was being installed (\(needing))")
            }
        }
        // Each group once, in plist order, its files in its entry's order.
        let byPath = Dictionary(patched.map { ($0.file.path, $0) }, uniquingKeysWith: { first, _ in first })
        var seen: Set<Int> = []
        for group in patched.compactMap(\.group).filter({ seen.insert($0.number).inserted }).sorted(by: { $0.number < $1.number }) {
            let members = group.paths.compactMap { byPath[$0] }
            guard members.count == group.paths.count else {
                throw HCPackError(.invalidPackage, "\(archive): [\(Rule.patchMalformed.rawValue)] \(group.entryPath) names a file without a patch record; run hcpack verify on it", path: archive)
            }
            if try applyGroup(group, members, package: package, staging: staging, archive: archive, damaged: &damaged) { made = true }
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
        _ item: PatchedFile, package: Package, staging: StagingArea, archive: String, checkingBase: Bool
    ) throws(HCPackError) -> AppliedPatch {
        let patch = item.patch
        var parts = patch.path.split(separator: "/")
        guard let leaf = parts.popLast().map(String.init), let frame = patch.frame else { return .alreadyMade }
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
        let outputName = package.contentsPrefix + item.file.path
        let outputFolder = try staging.directory.makeDirectories(outputName.split(separator: "/").dropLast().map { $0 })
        let descriptor = try outputFolder.createFileForMapping(leaf)
        defer { Descriptor.release(descriptor) }
        guard item.file.size <= Int64(Int.max) else { throw refusal("makes a file too large to map") }
        let hasher = Digest.Hasher(.sha256)
        var failure: HCPackError?
        do {
            let output = try MappedFile(writing: descriptor, count: Int(item.file.size), path: outputFolder.describe(leaf))
            do {
                try PatchCodec.applyPatch(base: base, patch: patchBytes, windowLog: frame.windowLog, output: output) { hasher.update($0) }
            } catch {
                failure = refusal("does not apply: \(error.message)")
            }
        }
        let madeRecorded = failure == nil && hasher.finalize().matchesHex(item.file.sha256)
        // DEST's copy decides first: written to while it was read, or not the base, the refusal names it, not the
        // patch. A patch that failed on a copy hashed earlier has the copy hashed again to tell which.
        let changedWhileRead = try FileStamp(of: baseDescriptor, path: baseFile.path) != baseStamp
        var copy = try baseDigest?.value()
        if copy == nil && !madeRecorded { copy = try baseFile.digest() }
        if changedWhileRead || copy.map({ $0 != patch.base }) == true {
            _ = try outputFolder.removeFile(leaf)
            if changedWhileRead { return .changedWhileRead }
            if copy == item.file.record {
                hashedInPlace[patch.path] = copy
                return .alreadyMade
            }
            return .notBase
        }
        if let copy { hashedInPlace[patch.path] = copy }
        if let failure { throw failure }
        guard madeRecorded else { throw refusal("makes a file whose SHA-256 is not the recorded \(item.file.sha256)") }
        // Unmapped: its pages are in the page cache; without syncfs, each file is made durable here.
        if !FileSystemSync.isAvailable { try Descriptor.synchronize(descriptor, path: outputFolder.describe(leaf)) }
        return .made
    }

    /// Makes a patch group's files in the staging folder (`PatchGroup`), each from its own frame of the group's
    /// entry and DEST's copy of its base, both in memory, and checks each before it is written. A DEST copy
    /// that is already the file the group makes is skipped, one that is neither added to `damaged`. Returns
    /// whether it made a file.
    private func applyGroup(
        _ group: PatchGroup, _ members: [PatchedFile], package: Package, staging: StagingArea, archive: String, damaged: inout [String]
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
                let first = members[0].patch.path
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
            let needing = "the delta patches the \(item.patch.base.size)-byte file with SHA-256 \(item.patch.base.sha256)"
            // DEST's copy read whole when it has the base's size (at most largestMember): the base, or found as
            // any file is, already the new file (planning skips it) or neither.
            guard item.patch.base.size <= PatchGroup.largestMember, case .file(let found) = try inspect(item.patch.path),
                found == item.patch.base.size, let base = try read(item.patch.path, count: Int(found)),
                Digest.Hasher.digest(.sha256, of: base).matchesHex(item.patch.base.sha256)
            else {
                switch try findInPlace(item.patch.path, [item.file.record, item.patch.base], needing: needing, damaged: &damaged) {
                case item.file.record?, nil: break  // already made, or damaged (added)
                default: damaged.append("\(destinationPath)/\(item.patch.path) changed while the delta was being installed (\(needing))")
                }
                continue
            }
            hashedInPlace[item.patch.path] = item.patch.base
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

    /// DEST's `path`, read whole; nil unless it has exactly `count` bytes.
    private func read(_ path: String, count: Int) throws(HCPackError) -> [UInt8]? {
        var parts = path.split(separator: "/")
        guard let leaf = parts.popLast().map(String.init), let folder = try destination.openDirectories(parts),
            let descriptor = try folder.openForReading(leaf)
        else { return nil }
        defer { Descriptor.release(descriptor) }
        let mapped = try MappedFile(reading: descriptor, path: folder.describe(leaf))
        guard mapped.count == count else { return nil }
        return withExtendedLifetime(mapped) { Array(mapped.bytes) }
    }
}
