import Digest
import PropertyList

/// Undoing a failed install between the journal and the receipt: only what this install placed.
extension InstallSession {
    /// What `rollBack` achieved.
    struct Rollback {
        /// DEST is back as it was, apart from `leftInPlace`.
        var intact = true
        /// Paths the user changed during the install (a file replaced, a folder moved in whole that gained
        /// files): left as they are now rather than lose what was written there.
        var leftInPlace: [String] = []
    }

    /// Undoes `undo` newest first: replaced and removed files go back, new files and the folders made for them
    /// go, but only what this install placed (checked by identity, or for a folder moved in whole by its
    /// names). Then the journal (when this install wrote the only one) goes too.
    func rollBack(_ undo: Undo, staging: StagingArea, removeJournal journalName: String?) -> Rollback {
        var outcome = Rollback()
        let replaced = undo.steps.isEmpty ? nil : try? staging.replacedFolder()
        for step in undo.steps.reversed() {
            switch step {
            case .placed(let path, let backup, let identity):
                var parent = path.split(separator: "/")
                let name = parent.popLast().map(String.init) ?? path
                guard let folder = try? destination.openDirectories(parent) else {
                    outcome.intact = false
                    continue
                }
                let present = (try? folder.status(name)) ?? nil
                let ours = present == nil || identity == nil || present?.identity == identity
                if let backup {
                    let original = replaced.flatMap { (try? $0.status(backup)) ?? nil }
                    if let present, present.identity == original?.identity {
                        // Never replaced (the rename into place failed after a hard link): nothing to undo.
                    } else if ours {
                        outcome.intact = (replaced.map { (try? $0.rename(backup, to: folder, name)) != nil } ?? false) && outcome.intact
                    } else {
                        outcome.leftInPlace.append(path)
                    }
                } else if present != nil {
                    if ours {
                        outcome.intact = (try? folder.removeFile(name)) == true && outcome.intact
                    } else {
                        outcome.leftInPlace.append(path)
                    }
                }
                try? folder.synchronize()
            case .removed(let parent, let name, let backup):
                guard let replaced, let folder = try? destination.openDirectories(parent),
                    (try? replaced.rename(backup, to: folder, name)) != nil
                else {
                    outcome.intact = false
                    continue
                }
                try? folder.synchronize()
            case .movedFolder(let name, let staged):
                // A folder that gained anything during the install stays, with what this install put in it:
                // the journal covers those files, so the next run finishes or tidies up.
                guard holdsOnly(name, staging.summary(ofTopFolder: staged)) else {
                    outcome.leftInPlace.append(name)
                    outcome.intact = false
                    continue
                }
                // Back where it was staged; the staging area is removed afterwards either way.
                guard let source = try? staging.folder(of: staged),
                    (try? destination.rename(name, to: source, name)) != nil
                else {
                    outcome.intact = false
                    continue
                }
                try? destination.synchronize()
            case .removedFolder(let parent, let name, let mode):
                guard let folder = try? destination.openDirectories(parent),
                    (try? folder.createDirectory(name, mode: mode)) == true
                else {
                    outcome.intact = false
                    continue
                }
                try? folder.setPermissions(name, mode)  // exactly the mode it had, whatever the umask
                try? folder.synchronize()
            }
        }
        for (parent, name) in undo.createdFolders.reversed() {
            guard let folder = try? destination.openDirectories(parent) else {
                outcome.intact = false
                continue
            }
            outcome.intact = folder.removeEmptyDirectory(name) && outcome.intact
            try? folder.synchronize()
        }
        if undo.createdReceipts { metadata.removeEmptyDirectory(Installer.receiptsFolder) }
        guard outcome.intact else { return outcome }
        if let journalName {
            guard (try? metadata.removeFile(journalName)) != nil, (try? metadata.synchronize()) != nil else {
                outcome.intact = false
                return outcome
            }
            committed = false
        }
        return outcome
    }

    /// Whether the folder `top` of DEST holds exactly the files staged for it (`expected`), and nothing else:
    /// no other file, no empty folder, no link. Walked from DEST folder by folder, one descriptor at a time.
    func holdsOnly(_ top: String, _ expected: StagingArea.FolderSummary?) -> Bool {
        guard let expected else { return false }
        var found = StagingArea.FolderSummary()
        var pending = [top]
        while let folderPath = pending.popLast() {
            guard let folder = try? destination.openDirectories(folderPath.split(separator: "/")), let names = try? folder.list(),
                !names.isEmpty
            else { return false }
            for name in names {
                guard let status = (try? folder.status(name)) ?? nil else { return false }
                let path = folderPath + "/" + name
                switch status.kind {
                case .directory: pending.append(path)
                case .file: found.add(path[...])
                default: return false
                }
                if found.files > expected.files { return false }
            }
        }
        return found == expected
    }
}
