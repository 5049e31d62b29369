import Digest

/// How one file differs between two packages.
public enum FileChangeKind: String, Sendable, Codable, CaseIterable {
    case added, removed, changed, unchanged
}

/// One file of either package and what happened to it.
public struct FileChange: Sendable, Equatable {
    /// Path relative to Contents/.
    public var path: String
    /// Added, removed, changed or unchanged.
    public var kind: FileChangeKind
    /// Size in the old package (nil when added).
    public var oldSize: Int64?
    /// SHA-256 in the old package, lowercase hexadecimal (nil when added).
    public var oldSHA256: String?
    /// Size in the new package (nil when removed).
    public var newSize: Int64?
    /// SHA-256 in the new package, lowercase hexadecimal (nil when removed).
    public var newSHA256: String?

    /// Bytes the new package gains (negative: loses) for this file.
    public var sizeDelta: Int64 { (newSize ?? 0) - (oldSize ?? 0) }
}

/// How NEW's ContentVersion relates to OLD's.
public enum VersionChange: String, Sendable, Codable {
    /// NEW's version is greater.
    case upgrade
    /// Both versions compare equal ("1.0" == "1").
    case same
    /// NEW's version is lower.
    case downgrade
    /// One of the versions is missing or malformed.
    case unknown
}

/// One side of a comparison: which package, and which of its files were compared.
public struct DiffSide: Sendable {
    /// The path as given.
    public var path: String
    /// The package's ContentInfo.plist.
    public var contentInfo: ContentInfo
    /// True when the Files list chose the compared files; false when every regular file under Contents/ did.
    public var usesFilesList: Bool
    /// Compared files by path (relative to Contents/).
    public var files: [String: FileRecord]
    /// The delta record when the side is a delta package: its listed files that it does not carry count with
    /// their recorded size and SHA-256, so a delta compares like the full version it stands for.
    public var delta: DeltaBase?
    /// A delta's listed files that it neither carries nor records (DeltaBase.unchangedSHA256): compared with
    /// the other side's copies when those are what the digest names, else not compared.
    public var leftInPlace: [String] = []
    /// Total size of the compared files.
    /// (Saturating: a delta's records are its own claims, and several near 2^63 trapped.)
    public var bytes: Int64 { files.values.saturatingSum(\.size) }
}

/// The difference between two packages' content files.
public struct PackageDiff: Sendable {
    /// The earlier package.
    public var old: DiffSide
    /// The later package.
    public var new: DiffSide
    /// Every compared path of either package, sorted by path.
    public var changes: [FileChange]

    /// The changes of one kind, sorted by path.
    public func files(_ kind: FileChangeKind) -> [FileChange] { changes.filter { $0.kind == kind } }

    /// NEW's compared bytes minus OLD's (files a delta leaves in place, not compared, count on neither side).
    public var sizeDelta: Int64 { changes.saturatingSum(\.sizeDelta) }

    /// How the ContentVersions compare.
    public var versionChange: VersionChange {
        guard let oldVersion = old.contentInfo.version, let newVersion = new.contentInfo.version else { return .unknown }
        if newVersion > oldVersion { return .upgrade }
        return newVersion == oldVersion ? .same : .downgrade
    }

    /// True when both packages name the same product.
    public var sameProduct: Bool { old.contentInfo.productIdentifier == new.contentInfo.productIdentifier }

    /// True when some file was added, removed or changed.
    public var hasContentChanges: Bool { changes.contains { $0.kind != .unchanged } }
}

/// Compares two packages (folders or archives) file by file, by SHA-256.
public enum PackageComparer {
    /// Reads both packages completely and compares their Contents/ files.
    ///
    /// The compared files are each package's Files list (paths that exist as regular files), or every regular
    /// file under Contents/ (junk aside) when the package has no Files list.
    /// - Throws: `HCPackError` `.notFound`/`.io`/... when an input cannot be read; `.invalidPackage` when an input
    ///   has no readable ContentInfo.plist or is a damaged archive.
    public static func diff(old: String, new: String, limits: ReadLimits = ReadLimits()) throws(HCPackError) -> PackageDiff {
        let oldSide = try side(old, limits: limits)
        let newSide = try side(new, limits: limits)
        return compare(old: oldSide, new: newSide)
    }

    /// Compares two sides already read.
    public static func compare(old: DiffSide, new: DiffSide) -> PackageDiff {
        let old = old.resolvingLeftInPlace(from: new)
        let new = new.resolvingLeftInPlace(from: old)
        var changes: [FileChange] = []
        // What a delta leaves in place, unresolved, is unknown here: neither added nor removed.
        let unknown = Set(old.leftInPlace).union(new.leftInPlace)
        for path in Set(old.files.keys).union(new.files.keys) where !unknown.contains(path) {
            let before = old.files[path]
            let after = new.files[path]
            let kind: FileChangeKind
            switch (before, after) {
            case (nil, _): kind = .added
            case (_, nil): kind = .removed
            case (let before?, let after?): kind = before == after ? .unchanged : .changed
            }
            changes.append(
                FileChange(
                    path: path, kind: kind, oldSize: before?.size, oldSHA256: before?.sha256, newSize: after?.size,
                    newSHA256: after?.sha256))
        }
        changes.sort { Array($0.path.utf8).lexicographicallyPrecedes(Array($1.path.utf8)) }
        return PackageDiff(old: old, new: new, changes: changes)
    }

    /// Reads one package, hashing every file, and picks the files to compare.
    public static func side(_ path: String, limits: ReadLimits = ReadLimits()) throws(HCPackError) -> DiffSide {
        let snapshot = try PackageScanner.scan(path, limits: limits, hashFolderFiles: { _ in true })
        if !snapshot.isComplete {
            let reason = snapshot.scanProblems.problems.first?.message ?? "the archive could not be read to its end"
            throw HCPackError(.invalidPackage, "\(path): \(reason); run 'hcpack verify \(path)' for details", path: path)
        }
        guard let bytes = snapshot.contentInfoBytes else {
            throw HCPackError(
                .invalidPackage,
                "\(path): no readable ContentInfo.plist at the package root, so it is not a package to compare; run 'hcpack verify \(path)' for details",
                path: path)
        }
        let info: ContentInfo
        do {
            info = try ContentInfo.decode(bytes, limits: limits.plist)
        } catch {
            throw HCPackError(.invalidPackage, "\(path): ContentInfo.plist: \(error); fix the plist so it parses", path: path)
        }
        var present: [String: FileRecord] = [:]
        for entry in snapshot.entries where entry.kind == .file && entry.path.hasPrefix(Verifier.contentsPrefix) {
            let relative = String(entry.path.dropFirst(Verifier.contentsPrefix.count))
            present[relative] = FileRecord(size: entry.size, sha256: entry.sha256?.hexString ?? "")
        }
        let delta = try? DeltaBase.of(info)
        let carried = delta == nil ? nil : (try? info.parseIntegrity()) ?? nil
        if let listed = info.files {
            var files: [String: FileRecord] = [:]
            var leftInPlace: [String] = []
            // With a digest, the files left in place are what it names, whatever records the delta has (as install reads it).
            let digested = delta?.unchangedSHA256 != nil
            let patched = digested ? FilePatch.patchedPaths(of: info) : []
            for file in listed {
                if let record = present[file] ?? (digested && !patched.contains(file) ? nil : carried?[file]) {
                    files[file] = record
                } else if digested {
                    leftInPlace.append(file)
                }
            }
            var side = DiffSide(path: path, contentInfo: info, usesFilesList: true, files: files, delta: delta)
            side.leftInPlace = leftInPlace
            return side
        }
        let files = present.filter { !PackagePath.isJunk(Verifier.contentsPrefix + $0.key) }
        return DiffSide(path: path, contentInfo: info, usesFilesList: false, files: files)
    }
}

extension DiffSide {
    /// This side with the files it leaves in place taken from `other`, when `other` holds exactly the records
    /// this delta's digest names for them (so `other` is its base, or the version it makes).
    func resolvingLeftInPlace(from other: DiffSide) -> DiffSide {
        guard !leftInPlace.isEmpty, let digest = delta?.unchangedSHA256 else { return self }
        var found: [(path: String, record: FileRecord)] = []
        for path in leftInPlace {
            guard let record = other.files[path] else { return self }
            found.append((path, record))
        }
        guard DeltaBase.unchangedDigest(found) == digest else { return self }
        var resolved = self
        for (path, record) in found { resolved.files[path] = record }
        resolved.leftInPlace = []
        return resolved
    }
}
