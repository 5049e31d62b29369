import Digest
import PropertyList

/// Planning: what is at each target path, and what to place, skip, remove and keep (docs/install.md, step 5).
extension InstallSession {
    // MARK: Planning

    /// What is at a target path.
    enum Target {
        case absent
        case file(size: Int64)
        case other(EntryKind)
        /// A parent is not a folder (a file or a symlink): never installed through, even with --force.
        case blocked(String)
    }

    struct Plan {
        var place: [InstalledFile] = []
        var skip: [String] = []
        var remove: [String] = []
        var keep: [String] = []
        /// Paths this product installed that changed since, replaced (`replaceChangedInstalledFiles`).
        var replacedChanged: [String] = []
        /// Paths of the previous version that are gone already (an interrupted install moved them): their
        /// folders are removed if empty.
        var gone: [String] = []
        var previous: InstallReceipt?
        var journal: InstallJournal?
        var status = InstallStatus.installed
    }

    func inspect(_ path: String) throws(HCPackError) -> Target {
        let folderPath: Substring
        let leaf: Substring
        var parts: [Substring]?
        if PackagePath.isASCII(path) && PackagePath.isPlainRelativePath(path) {
            // One Character a byte and no empty component: the folder and leaf that splitting by Characters and
            // joining gives, found without a String per component (this runs for every file installed).
            let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
            folderPath = slash.map { path[..<$0] } ?? ""
            leaf = slash.map { path[path.utf8.index(after: $0)...] } ?? path[...]
        } else {
            var split = path.split(separator: "/")
            guard let last = split.popLast() else { return .absent }
            leaf = last
            folderPath = Substring(split.joined(separator: "/"))
            parts = split
        }
        let folder: DirectoryHandle?
        if let lastInspected, lastInspected.path == folderPath {
            folder = lastInspected.handle
        } else {
            do {
                folder = try destination.openDirectories(parts ?? folderPath.split(separator: "/"))
            } catch {
                return .blocked(error.message)
            }
            lastInspected = (String(folderPath), folder)
        }
        guard let folder, let status = try folder.status(String(leaf)) else { return .absent }
        return status.kind == .file ? .file(size: status.size) : .other(status.kind)
    }

    func digest(_ path: String) throws(HCPackError) -> FileRecord? {
        var parts = path.split(separator: "/")
        guard let leaf = parts.popLast(), let folder = try destination.openDirectories(parts) else { return nil }
        return try folder.digest(String(leaf))
    }

    /// True when the file at `path` has exactly one of the `records` (hashing only when a size matches).
    func matches(_ path: String, size: Int64, _ records: [FileRecord?]) throws(HCPackError) -> FileRecord? {
        let candidates = records.compactMap { $0 }.filter { $0.size == size }
        if candidates.isEmpty { return nil }
        if let known = hashedInPlace[path], known.size == size { return candidates.first { $0 == known } }
        guard let actual = try digest(path) else { return nil }
        return candidates.first { $0 == actual }
    }

    func makePlan(package: Package, wanted: [InstalledFile]) throws(HCPackError) -> Plan {
        var plan = Plan()
        let identifier = package.productIdentifier
        let receipts = try metadata.openDirectory(Installer.receiptsFolder)
        let limits = options.verify.limits
        plan.previous = try usableReceipt(identifier, in: receipts)
        plan.journal = try usableRecord { () throws(HCPackError) in try InstallRecords.journal(identifier, in: metadata, limits: limits) }
        // Another product's unusable receipt is an error even with --force: its files' ownership is never skipped.
        let ownership = try Ownership.load(excluding: identifier, in: receipts, limits: limits)
        let previousVersion = plan.previous.flatMap { ContentVersion($0.version) }
        if let previousVersion, previousVersion > package.version, !options.force || options.signature != nil {
            // With trusted keys, never (rollback protection): an old signed release stays signed.
            let remedy = options.signature == nil ? "Pass --force to downgrade" : "A signed install never downgrades"
            throw HCPackError(
                .invalidPackage,
                "\(destinationPath) has version \(previousVersion.text) of '\(identifier)'; this package is the older \(package.version.text). \(remedy)",
                path: destinationPath)
        }
        let owned = plan.previous?.recordsByPath ?? [:]
        let journaled = Dictionary((plan.journal?.files ?? []).map { ($0.path, $0.record) }, uniquingKeysWith: { a, _ in a })

        var conflicts: [String] = []
        lastInspected = nil  // may be from the streaming phase: look again
        var aliases = NameAliases(owned: owned, journaled: journaled)
        for file in wanted {
            let location = destinationPath + "/" + file.path
            if let conflict = ownership.conflict(installing: file, productIdentifier: identifier, destination: destinationPath) {
                conflicts.append(conflict)
                continue
            }
            switch try inspect(file.path) {
            case .absent:
                plan.place.append(file)
            case .file(let size):
                if try matches(file.path, size: size, [file.record]) != nil {
                    plan.skip.append(file.path)
                } else if try matches(file.path, size: size, [owned[file.path], journaled[file.path]] + aliasRecords(file.path, &aliases))
                    != nil || options.force
                {
                    plan.place.append(file)
                } else if options.replaceChangedInstalledFiles && owned[file.path] != nil {
                    plan.place.append(file)
                    plan.replacedChanged.append(file.path)
                } else {
                    conflicts.append(
                        "\(location): a file hcpack did not install (or one changed since) is in the way; move it away or pass --force to overwrite it"
                    )
                }
            case .other(let kind):
                if kind == .directory {
                    conflicts.append("\(location) is a folder where the package has a file; remove or rename the folder")
                } else if options.force {
                    plan.place.append(file)  // rename replaces the link or special file itself, never its target
                } else {
                    conflicts.append(
                        "\(location) is a \(kind.noun) where the package has a file; remove it or pass --force to replace it")
                }
            case .blocked(let message):
                conflicts.append(message)
            }
        }
        if !conflicts.isEmpty {
            throw HCPackError(
                .invalidPackage,
                "\(conflicts.count == 1 ? "a path" : "\(conflicts.count) paths") in the destination block the install; nothing was changed:\n  "
                    + conflicts.joined(separator: "\n  "),
                path: destinationPath)
        }
        // A file judged in place while streaming (so not staged) that changed since: its bytes are not at hand.
        for file in plan.place where staging?.wasSkipped(stagedPath(package, file)) == true {
            throw HCPackError(
                .io, "\(destinationPath)/\(file.path) changed while the archive was being read; run the install again",
                path: destinationPath + "/" + file.path)
        }

        // Files of the previous install (or of an interrupted one) that this version no longer lists.
        let wantedPaths = Set(wanted.map(\.path))
        for path in Set(owned.keys).union(journaled.keys).subtracting(wantedPaths).sorted() {
            // Another product lists it too: it stays while any product does.
            if !ownership.otherOwners(of: path).isEmpty { continue }
            // The same file as one this version installs, by another name (a case-insensitive DEST).
            if try isAlias(path, ofOneOf: wanted, &aliases) { continue }
            let target = try inspect(path)
            if case .absent = target { plan.gone.append(path) }
            guard case .file(let size) = target else {
                continue  // gone already, or replaced by something that is not ours
            }
            if try matches(path, size: size, [owned[path], journaled[path]]) != nil {
                plan.remove.append(path)
            } else {
                plan.keep.append(path)
            }
        }

        lastInspected = nil
        if let previousVersion {
            if package.version > previousVersion {
                plan.status = .upgraded
            } else if package.version < previousVersion {
                plan.status = .downgraded
            } else {
                let sameReceipt = plan.previous == receipt(package, wanted)
                plan.status =
                    plan.place.isEmpty && plan.remove.isEmpty && sameReceipt && plan.journal == nil && !setAsideRecord
                    ? .unchanged : .installed
            }
        }
        return plan
    }

    /// Names that may be one file on DEST's file system (the same up to case and Unicode normalization), found
    /// lazily: most installs never need them.
    struct NameAliases {
        let owned: [String: FileRecord]
        let journaled: [String: FileRecord]
        private var recordedByKey: [String: [String]]?
        private var wantedByKey: [String: [String]]?

        init(owned: [String: FileRecord], journaled: [String: FileRecord]) {
            self.owned = owned
            self.journaled = journaled
        }

        /// Recorded paths (receipt, journal) whose folded name is `path`'s.
        mutating func recorded(like path: String) -> [String] {
            if recordedByKey == nil {
                var index: [String: [String]] = [:]
                for name in Set(owned.keys).union(journaled.keys) { index[PackagePath.foldKey(name), default: []].append(name) }
                recordedByKey = index
            }
            return (recordedByKey?[PackagePath.foldKey(path)] ?? []).filter { ExactPath($0) != ExactPath(path) }
        }

        /// Paths of `wanted` whose folded name is `path`'s.
        mutating func wanted(like path: String, in wanted: [InstalledFile]) -> [String] {
            if wantedByKey == nil {
                var index: [String: [String]] = [:]
                for file in wanted { index[PackagePath.foldKey(file.path), default: []].append(file.path) }
                wantedByKey = index
            }
            return (wantedByKey?[PackagePath.foldKey(path)] ?? []).filter { ExactPath($0) != ExactPath(path) }
        }
    }

    /// The same device and inode: one file, whatever names reach it.
    func sameFile(_ first: String, _ second: String) throws(HCPackError) -> Bool {
        guard let one = try identity(first), let other = try identity(second) else { return false }
        return one == other
    }

    /// Device and inode of the file at `path` (relative to DEST); nil when absent or not a file.
    func identity(_ path: String) throws(HCPackError) -> FileIdentity? {
        var parts = path.split(separator: "/")
        guard let leaf = parts.popLast(), let folder = try? destination.openDirectories(parts),
            let status = try folder.status(String(leaf)), status.kind == .file
        else { return nil }
        return status.identity
    }

    /// Records of the file at `path` under another spelling of its name that reaches the same file (on a
    /// case-insensitive DEST, `Level1.json` recorded and `level1.json` installed now).
    func aliasRecords(_ path: String, _ aliases: inout NameAliases) throws(HCPackError) -> [FileRecord?] {
        var records: [FileRecord?] = []
        for other in aliases.recorded(like: path) where try sameFile(path, other) {
            records += [aliases.owned[other], aliases.journaled[other]]
        }
        return records
    }

    /// Whether the stale `path` is, on DEST's file system, the same file as one this version installs.
    func isAlias(_ path: String, ofOneOf wanted: [InstalledFile], _ aliases: inout NameAliases) throws(HCPackError) -> Bool {
        for other in aliases.wanted(like: path, in: wanted) where try sameFile(path, other) { return true }
        return false
    }

    /// Where a file to install is in the archive, and so in the staging folder.
    func stagedPath(_ package: Package, _ file: InstalledFile) -> String {
        package.contentsPrefix + (stagedNames[ExactPath(file.path)] ?? file.path)
    }

    func receipt(_ package: Package, _ wanted: [InstalledFile]) -> InstallReceipt {
        InstallReceipt(
            productIdentifier: package.productIdentifier, version: package.version.text, files: wanted,
            signers: signature?.signers ?? [], plistSHA256: plistSHA256, catalog: options.catalog)
    }
}
