import Digest
import PropertyList

/// Placing: the journal, the renames into DEST, stale files moved aside, the receipt (docs/install.md, steps 6-9).
extension InstallSession {
    // MARK: Placing

    func execute(_ plan: Plan, package: Package, wanted: [InstalledFile], report: VerificationReport)
        throws(HCPackError) -> InstallResult
    {
        var result = InstallResult(
            status: plan.status, productIdentifier: package.productIdentifier, version: package.version.text,
            previousVersion: plan.previous?.version, selection: .files, installed: [], skipped: plan.skip, removed: [],
            kept: plan.keep, replacedChanged: plan.replacedChanged,
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
            let rollback = rollBack(undo, staging: staging, removeJournal: plan.journal == nil ? journalName : nil)
            let changed =
                rollback.leftInPlace.isEmpty
                ? ""
                : "; changed during the install and left as they are now: "
                    + rollback.leftInPlace.map { "\(destinationPath)/\($0)" }.joined(separator: ", ")
            if rollback.intact {
                throw HCPackError(
                    error.code, "\(error.message); the install was undone, \(destinationPath) is as it was before\(changed)",
                    path: error.path)
            }
            throw HCPackError(
                error.code,
                "\(error.message); run the install again to complete it (the journal records how far it got)\(changed)",
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
            /// `identity` is the placed file's, so undoing removes only that file, not one written there since.
            case placed(path: String, backup: String?, identity: FileIdentity?)
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
        let totalBytes = plan.place.saturatingSum(\.size)
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
            let identity = try source.status(String(stagedLeaf))?.identity
            var replacing = false
            if !targetIsNew, try target.status(leaf) != nil {
                let name = String(undo.steps.count)
                let replaced = try staging.replacedFolder()
                do throws(HCPackError) {
                    try target.link(leaf, to: replaced, name)
                } catch {
                    try target.rename(leaf, to: replaced, name)
                }
                // Recorded before the rename into place: if that fails, the file moved aside still goes back.
                undo.steps.append(.placed(path: file.path, backup: name, identity: identity))
                replacing = true
            }
            try source.rename(String(stagedLeaf), to: target, leaf)
            if !replacing { undo.steps.append(.placed(path: file.path, backup: nil, identity: identity)) }
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
}
