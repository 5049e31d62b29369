import Digest
import PatchCodec

/// Installing a delta's binary patches (FilePatch.swift, docs/self-hosting.md): each patched file is made in
/// the staging folder from DEST's copy of its base, then placed like any staged file, so the journal, the
/// rollback, the lock and the crash guarantees are those of every install.
///
/// Before anything is made, DEST's copy of every patched file must be the base (size and SHA-256), or already
/// the file the patch makes, or the install is refused naming the files. A patch that does not make the recorded file (a damaged frame, a
/// window over the declared one, another size or SHA-256) is refused before the journal: DEST is untouched.
extension InstallSession {
    /// A listed file that a delta makes from a patch.
    struct PatchedFile {
        /// The file to place, as the new version records it.
        var file: InstalledFile
        var patch: FilePatch
    }

    /// The delta's patched files, with the size and SHA-256 the new version records for each. Read from the
    /// plist before it is released; verify's rules have checked the records and the patch entries.
    func patchedFiles(_ report: VerificationReport, archive: String) throws(HCPackError) -> [PatchedFile] {
        guard let info = report.contentInfo, info.dictionary[FilePatch.key] != nil else { return [] }
        let patches: [String: FilePatch]
        do {
            patches = try FilePatch.all(of: info)
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
            result.append(PatchedFile(file: InstalledFile(path: patch.path, size: record.size, sha256: record.sha256), patch: patch))
        }
        return result
    }

    /// Refuses the install unless DEST's copy of every patched file is its base; then makes each file in the
    /// staging folder and checks its size and SHA-256. Writes only inside the staging folder.
    func applyPatches(_ patched: [PatchedFile], package: Package, archive: String) throws(HCPackError) {
        guard !patched.isEmpty, let staging else { return }
        let target = "\(package.productIdentifier) \(package.version.text)"
        var damaged: [String] = []
        var toMake: [PatchedFile] = []
        lastInspected = nil
        for item in patched {
            // Already the new file (the same version again, or an interrupted install run again): nothing to make,
            // planning skips it.
            let found = try findInPlace(
                item.patch.path, [item.file.record, item.patch.base],
                needing: "the delta patches the \(item.patch.base.size)-byte file with SHA-256 \(item.patch.base.sha256)",
                damaged: &damaged)
            if let found, found != item.file.record { toMake.append(item) }
        }
        lastInspected = nil
        guard damaged.isEmpty else {
            throw damagedFiles(
                damaged, rule: .patchBase, "\(archive) patches {files} of \(destinationPath) that changed since they were installed",
                remedy: "install the full archive of \(target) instead")
        }
        for item in toMake { try apply(item, package: package, staging: staging, archive: archive) }
        // The made files are durable before the journal says they may be placed: one syncfs for all of them
        // (40 fsyncs made installing 40 patched JSON files 1.5 times slower than the full archive).
        if !toMake.isEmpty && FileSystemSync.isAvailable { try FileSystemSync.synchronize(staging.directory) }
    }

    /// Makes one patched file in the staging folder, where placing looks for it (`stagedPath`).
    private func apply(_ item: PatchedFile, package: Package, staging: StagingArea, archive: String) throws(HCPackError) {
        let patch = item.patch
        var parts = patch.path.split(separator: "/")
        guard let leaf = parts.popLast().map(String.init) else { return }
        let refusal = { (message: String) in
            HCPackError(
                .invalidPackage,
                "\(archive): [\(Rule.patchResult.rawValue)] the patch of Contents/\(patch.path) \(message); nothing was changed; install the full archive instead",
                path: archive)
        }
        // The base, mapped from DEST (read only; a copy that changed since it was hashed gives another result,
        // which the digest below refuses).
        guard let baseFolder = try destination.openDirectories(parts), let baseDescriptor = try baseFolder.openForReading(leaf) else {
            throw HCPackError(.io, "\(destinationPath)/\(patch.path) vanished while the delta was being installed; run the install again", path: destinationPath)
        }
        let base: MappedFile
        do {
            defer { Descriptor.release(baseDescriptor) }
            base = try MappedFile(reading: baseDescriptor, path: baseFolder.describe(leaf))
        }
        let stagedPatch = package.contentsPrefix + FilePatch.folder + "/" + patch.path
        guard let patchFolder = try staging.folder(of: stagedPatch), let patchDescriptor = try patchFolder.openForReading(leaf) else {
            throw HCPackError(.io, "internal error: \(stagedPatch) was not staged", path: stagedPatch)
        }
        let patchBytes: MappedFile
        do {
            defer { Descriptor.release(patchDescriptor) }
            patchBytes = try MappedFile(reading: patchDescriptor, path: patchFolder.describe(leaf))
        }
        guard Int64(patchBytes.count) == patch.patch.size else { throw refusal("is not the recorded \(patch.patch.size) bytes") }
        let outputName = package.contentsPrefix + item.file.path
        let outputFolder = try staging.directory.makeDirectories(outputName.split(separator: "/").dropLast().map { $0 })
        let descriptor = try outputFolder.createFileForMapping(leaf)
        defer { Descriptor.release(descriptor) }
        guard item.file.size <= Int64(Int.max) else { throw refusal("makes a file too large to map") }
        let hasher = Digest.Hasher(.sha256)
        do {
            let output = try MappedFile(writing: descriptor, count: Int(item.file.size), path: outputFolder.describe(leaf))
            do {
                try PatchCodec.applyPatch(base: base, patch: patchBytes, windowLog: patch.windowLog, output: output) { hasher.update($0) }
            } catch {
                throw refusal("does not apply: \(error.message)")
            }
        }
        guard hasher.finalize().matchesHex(item.file.sha256) else {
            throw refusal("makes a file whose SHA-256 is not the recorded \(item.file.sha256)")
        }
        // Unmapped: its pages are in the page cache; without syncfs, each file is made durable here.
        if !FileSystemSync.isAvailable { try Descriptor.synchronize(descriptor, path: outputFolder.describe(leaf)) }
    }
}
