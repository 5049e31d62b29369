import Digest

/// Where a package's root was found.
public enum PackageRoot: Sendable, Equatable {
    /// The input is a package folder.
    case folder(path: String)
    /// ContentInfo.plist and Contents/ sit at the archive's root.
    case archiveRoot
    /// The package is the archive's single top-level folder of this name.
    case archiveFolder(name: String)

    /// Words for output: "the folder itself", "archive root", "top-level folder 'X/'".
    public var summary: String {
        switch self {
        case .folder: "the folder itself"
        case .archiveRoot: "the archive root"
        case .archiveFolder(let name): "the archive's top-level folder '\(name)/'"
        }
    }
}

/// One regular file under Contents/, as `inspect` shows it.
public struct InspectedFile: Sendable, Equatable {
    /// Path relative to Contents/ (the form the Files list uses).
    public var path: String
    /// Size in bytes.
    public var size: Int64
    /// Lowercase hexadecimal SHA-256.
    public var sha256: String
    /// Whether ContentInfo.plist's Files lists it (false when Files is absent).
    public var isListed: Bool

    /// Creates a file record.
    public init(path: String, size: Int64, sha256: String, isListed: Bool) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.isListed = isListed
    }
}

/// Everything `inspect` reports about a package: identity, plist, files with digests, sizes, root.
public struct PackageInspection: Sendable {
    /// The verification of the same snapshot (problems are counted, not repeated, by `inspect`).
    public var report: VerificationReport
    /// How the package root was found.
    public var root: PackageRoot
    /// Regular files under Contents/, sorted by path.
    public var files: [InspectedFile]
    /// Sum of the sizes in `files`.
    public var contentBytes: Int64
    /// Every regular file of the package, ContentInfo.plist included.
    public var packageBytes: Int64
    /// Size of the archive file; nil for folders.
    public var archiveBytes: Int64?

    /// The parsed ContentInfo.plist, when it could be read.
    public var contentInfo: ContentInfo? { report.contentInfo }

    /// Archive-level compression ratio: archive file size / uncompressed bytes of every file in the package.
    ///
    /// Per-entry compressed sizes are not available from the streaming reader, so this is one number for the
    /// whole archive (container overhead included). Nil for folders and for empty packages.
    public var compressionRatio: Double? {
        guard let archiveBytes, packageBytes > 0 else { return nil }
        return Double(archiveBytes) / Double(packageBytes)
    }
}

/// Reads a package folder or archive completely, hashing every file, for `inspect`.
public enum Inspector {
    /// Inspects `path` (folder or archive).
    /// - Throws: `HCPackError` only when the input cannot be read at all (missing, permission, I/O).
    public static func inspect(_ path: String, options: VerifyOptions = VerifyOptions()) throws(HCPackError) -> PackageInspection
    {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such file or folder; check the path", path: path)
        }
        let snapshot: PackageSnapshot
        var archiveBytes: Int64?
        if status.kind == .directory {
            snapshot = try PackageScanner.scanFolder(path, limits: options.limits, hashFiles: { _ in true })
        } else {
            snapshot = try PackageScanner.scanArchive(path, limits: options.limits)
            archiveBytes = status.size
        }
        return inspection(of: snapshot, archiveBytes: archiveBytes, options: options)
    }

    /// Builds the inspection of a snapshot already read (its files must have been hashed).
    public static func inspection(of snapshot: PackageSnapshot, archiveBytes: Int64?, options: VerifyOptions = VerifyOptions())
        -> PackageInspection
    {
        let report = Verifier.check(snapshot, options: options)
        let listed = Set(report.contentInfo?.files ?? [])
        var files: [InspectedFile] = []
        var packageBytes: Int64 = 0
        for entry in snapshot.entries where entry.kind == .file {
            packageBytes = packageBytes.addingSaturated(entry.size)  // an encrypted entry's size is the header's claim
            guard entry.path.hasPrefix(Verifier.contentsPrefix) else { continue }
            let relative = String(entry.path.dropFirst(Verifier.contentsPrefix.count))
            files.append(
                InspectedFile(
                    path: relative, size: entry.size, sha256: entry.sha256?.hexString ?? "", isListed: listed.contains(relative)))
        }
        files.sort { Array($0.path.utf8).lexicographicallyPrecedes(Array($1.path.utf8)) }
        let root: PackageRoot
        switch snapshot.origin {
        case .folder(let path): root = .folder(path: path)
        case .archive: root = snapshot.rootFolder.map { .archiveFolder(name: $0) } ?? .archiveRoot
        }
        return PackageInspection(
            report: report, root: root, files: files, contentBytes: files.saturatingSum(\.size), packageBytes: packageBytes,
            archiveBytes: archiveBytes)
    }
}
