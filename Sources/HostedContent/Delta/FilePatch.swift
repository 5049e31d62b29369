import ArchiveIO
import Digest
import PatchCodec
import PropertyList

/// One listed file a delta carries as a binary patch against the base's copy of the same path
/// (docs/format.md, `HCPackPatches`).
///
/// The patch is the archive entry `Contents/.hcpack-patches/PATH`, a single zstd frame made in "patch from"
/// mode with the base file as its prefix. The file it makes is the one `HCPackIntegrity` records for PATH
/// (size and SHA-256); this record names the file it applies to, the patch's own bytes and its window.
public struct FilePatch: Sendable, Equatable {
    /// The plist key: a dictionary from listed path to record.
    public static let key = "HCPackPatches"
    /// The folder under Contents/ that holds the patches.
    public static let folder = ".hcpack-patches"
    static let baseSizeKey = "BaseSize"
    static let baseDigestKey = "BaseSHA256"
    static let patchSizeKey = "PatchSize"
    static let patchDigestKey = "PatchSHA256"
    static let windowKey = "WindowLog"

    /// The listed path the patch makes (relative to Contents/).
    public var path: String
    /// The file the patch applies to: DEST's copy of `path` must have exactly this size and SHA-256.
    public var base: FileRecord
    /// The patch entry's own size and SHA-256.
    public var patch: FileRecord
    /// The window the patch needs, as a power of two (bytes of memory an applier may map or hold).
    public var windowLog: Int

    /// A patch record.
    public init(path: String, base: FileRecord, patch: FileRecord, windowLog: Int) {
        self.path = path
        self.base = base
        self.patch = patch
        self.windowLog = windowLog
    }

    /// The patch's archive path below the package root.
    public var entryPath: String { Verifier.contentsPrefix + Self.folder + "/" + path }

    /// True for an archive path (below the package root) inside the patches folder.
    static func isPatchEntry(_ path: String) -> Bool {
        path.hasPrefix(Verifier.contentsPrefix + folder + "/")
    }

    /// True for a name, below the package root or below one top-level folder (an archive's names before its
    /// root is known), inside the patches folder: a scan keeps such a file's first bytes.
    static func mayBePatch(_ name: String) -> Bool {
        let bytes = name.utf8
        if bytes.starts(with: patchPrefix) { return true }
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")) else { return false }
        return bytes[bytes.index(after: slash)...].starts(with: patchPrefix)
    }

    private static let patchPrefix = Array((Verifier.contentsPrefix + folder + "/").utf8)

    /// Why `HCPackPatches` is malformed.
    public struct FormatError: Error, Sendable {
        public var message: String
    }

    /// The plist's patch records, by path; empty when it has none.
    /// - Throws: `FormatError` when the key is there but a record is not well formed.
    public static func all(of info: ContentInfo) throws(FormatError) -> [String: FilePatch] {
        guard let value = info.dictionary[key] else { return [:] }
        guard case .dictionary(let records) = value else {
            throw FormatError(message: "\(key) must be a dictionary, found \(value.typeName)")
        }
        var result: [String: FilePatch] = [:]
        for entry in records.entries {
            let path = entry.key
            guard case .dictionary(let fields) = entry.value else {
                throw FormatError(message: "\(key) '\(path)' must be a dictionary of \(baseSizeKey), \(baseDigestKey), \(patchSizeKey), \(patchDigestKey), \(windowKey)")
            }
            func size(_ name: String) throws(FormatError) -> Int64 {
                guard case .integer(let value)? = fields[name], value >= 0 else {
                    throw FormatError(message: "\(key) '\(path)' needs \(name), a byte count (integer >= 0)")
                }
                return value
            }
            func digest(_ name: String) throws(FormatError) -> String {
                guard let text = fields[name]?.stringValue, DeltaBase.isHexDigest(text) else {
                    throw FormatError(message: "\(key) '\(path)' needs \(name), 64 lower-case hex digits")
                }
                return text
            }
            guard case .integer(let window)? = fields[windowKey], window >= 10, window <= Int64(PatchCodec.largestWindowLog) else {
                throw FormatError(message: "\(key) '\(path)' needs \(windowKey), an integer from 10 to \(PatchCodec.largestWindowLog)")
            }
            guard PackagePath.unsafeArchiveNameReason(path) == nil else {
                throw FormatError(message: "\(key) names '\(path)', which is not a safe relative path")
            }
            result[path] = FilePatch(
                path: path, base: FileRecord(size: try size(baseSizeKey), sha256: try digest(baseDigestKey)),
                patch: FileRecord(size: try size(patchSizeKey), sha256: try digest(patchDigestKey)), windowLog: Int(window))
        }
        return result
    }

    /// The plist value of `HCPackPatches` for `patches`, sorted by path.
    public static func plistValue(_ patches: [FilePatch]) -> PlistValue {
        .dictionary(
            PlistDictionary(
                patches.sorted { $0.path < $1.path }.map { patch in
                    .init(
                        key: patch.path,
                        value: .dictionary(
                            PlistDictionary([
                                .init(key: baseSizeKey, value: .integer(patch.base.size)),
                                .init(key: baseDigestKey, value: .string(patch.base.sha256)),
                                .init(key: patchSizeKey, value: .integer(patch.patch.size)),
                                .init(key: patchDigestKey, value: .string(patch.patch.sha256)),
                                .init(key: windowKey, value: .integer(Int64(patch.windowLog))),
                            ])))
                }))
    }

    /// The sizes `check` holds the patches' output to (`PatchOutput`).
    struct Bounds {
        var limits: ArchiveLimits
        /// `--max-size`; `Int64.max` when the content is already reported over it.
        var maxSize: Int64
        /// The bytes of every file entry of the package.
        var archiveBytes: Int64
        /// The bytes of the files under Contents/, patches included.
        var contentBytes: Int64
    }

    /// Verify's checks of a package's patches, as far as they go without the base: the records are well
    /// formed and belong to a delta, each names a listed file with an integrity record that the delta does not
    /// also carry whole, its window covers base and result, and its entry is there with the recorded size
    /// and SHA-256 and a zstd frame header that declares the recorded result, a window within the record's
    /// and no dictionary; nothing else is in the patches folder; what the patches make keeps to `bounds`.
    /// - Parameters:
    ///   - entry: the snapshot's entry at a path below the package root, if any.
    ///   - patchEntries: the file entries inside the patches folder.
    static func check(
        _ info: ContentInfo, isDelta: Bool, listed: Set<String>, entry: (String) -> PackageEntry?, patchEntries: [PackageEntry],
        bounds: Bounds
    ) -> [Problem] {
        var problems = ProblemList()
        let patches: [String: FilePatch]
        do {
            patches = try all(of: info)
        } catch {
            problems.add(.patchMalformed, path: ContentInfo.fileName, "\(error.message); make the delta again (hcpack delta OLD NEW)")
            return problems.problems
        }
        if !patches.isEmpty && !isDelta {
            problems.add(.patchMalformed, path: ContentInfo.fileName, "\(key) belongs to a delta, and this package has no \(DeltaBase.key); make the delta again")
        }
        let records = (try? info.parseIntegrity()) ?? nil
        var output = PatchOutput()
        var results: [(path: String, size: Int64)] = []
        for patch in patches.values.sorted(by: { $0.path < $1.path }) {
            let target = Verifier.contentsPrefix + patch.path
            guard listed.contains(patch.path), let made = records?[patch.path] else {
                problems.add(.patchMalformed, path: target, "\(key) has a patch for a file that Files does not list or \(ContentInfo.integrityKey) does not record; make the delta again")
                continue
            }
            if entry(target) != nil {
                problems.add(.patchMalformed, path: target, "the delta carries this file both whole and as a patch; make the delta again")
            }
            output.add(result: made.size, patch: patch.patch.size, base: patch.base.size)
            results.append((target, made.size))
            if PatchCodec.windowLog(baseSize: patch.base.size, targetSize: made.size, limit: patch.windowLog) == nil {
                problems.add(.patchMalformed, path: target, "the patch's window (2^\(patch.windowLog) bytes) is smaller than its base and result together; make the delta again")
            }
            guard let stored = entry(patch.entryPath), stored.kind == .file else {
                problems.add(.patchMismatch, path: patch.entryPath, "\(key) records a patch that the delta does not carry; make the delta again")
                continue
            }
            if stored.size != patch.patch.size {
                problems.add(.patchMismatch, path: patch.entryPath, "is \(stored.size) bytes but \(key) records \(patch.patch.size); the patch changed after the delta was made")
            } else if let digest = stored.sha256, !digest.matchesHex(patch.patch.sha256) {
                problems.add(.patchMismatch, path: patch.entryPath, "SHA-256 \(digest.hexString) differs from the recorded \(patch.patch.sha256); the patch changed after the delta was made")
            } else if let head = stored.head,
                let mismatch = head.withUnsafeBytes({ PatchCodec.headerMismatch($0, windowLog: patch.windowLog, resultSize: made.size) })
            {
                // Install would refuse it while applying it: verify says so first, with the same rule.
                problems.add(.patchResult, path: patch.entryPath, "the patch's frame header does not fit its record: \(mismatch.message); make the delta again")
            } else if let frame = stored.patchFrame, frame != .oneFrame {
                // Install applies only exactly one frame (ZSTD_findFrameCompressedSize): verify says so first.
                let shape =
                    switch frame {
                    case .trailing(let count): "\(count) bytes follow its zstd frame"
                    case .truncated: "it ends inside its zstd frame"
                    default: "it is not a zstd frame"
                    }
                problems.add(.patchResult, path: patch.entryPath, "the patch is not exactly one zstd frame: \(shape); make the delta again")
            }
        }
        let expected = Set(patches.values.map(\.entryPath))
        var patchBytes: Int64 = 0
        for stored in patchEntries {
            patchBytes = patchBytes.addingSaturated(stored.size)
            if !expected.contains(stored.path) {
                problems.add(.patchMismatch, path: stored.path, "a file in \(Verifier.contentsPrefix)\(folder)/ that \(key) does not record; make the delta again")
            }
        }
        let carried = bounds.contentBytes == .max ? .max : max(0, bounds.contentBytes - patchBytes)
        problems.append(
            contentsOf: output.problems(
                results: results, archiveBytes: bounds.archiveBytes, carriedBytes: carried, limits: bounds.limits, maxSize: bounds.maxSize))
        return problems.problems
    }
}
