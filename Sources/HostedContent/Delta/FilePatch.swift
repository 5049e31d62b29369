import ArchiveIO
import Digest
import PatchCodec
import PropertyList

/// One listed file a delta carries as a binary patch against the base's copy of the same path
/// (docs/format.md, `HCPackPatches`).
///
/// The patch is the archive entry `Contents/.hcpack-patches/PATH`, a single zstd frame made in "patch from"
/// mode with the base file as its prefix, or that frame inside a patch group's entry (`PatchGroup`). The file it
/// makes is the one `HCPackIntegrity` records for PATH (size and SHA-256); this record names the file it
/// applies to, the patch's bytes and its window. A file a group's frame makes has no record here.
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
    /// The patch's frame.
    public var frame: PatchFrame

    /// A patch record with a frame of its own.
    public init(path: String, base: FileRecord, patch: FileRecord, windowLog: Int) {
        self.path = path
        self.base = base
        self.frame = PatchFrame(patch: patch, windowLog: windowLog)
    }

    /// The patch's archive path below the package root.
    public var entryPath: String { Verifier.contentsPrefix + Self.folder + "/" + path }

    /// True for an archive path (below the package root) inside the patches folder.
    public static func isPatchEntry(_ path: String) -> Bool {
        path.hasPrefix(Verifier.contentsPrefix + folder + "/")
    }

    /// True for a name, below the package root or below one top-level folder (an archive's names before its
    /// root is known), inside the patches folder: a scan keeps such a file's first bytes.
    static func mayBePatch(_ name: String) -> Bool { startsBelowRoot(name, with: patchPrefix) }

    /// True when `name`, or `name` after its first component (an archive's top-level folder), starts with `prefix`.
    private static func startsBelowRoot(_ name: String, with prefix: [UInt8]) -> Bool {
        let bytes = name.utf8
        if bytes.starts(with: prefix) { return true }
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")) else { return false }
        return bytes[bytes.index(after: slash)...].starts(with: prefix)
    }

    private static let patchPrefix = Array((Verifier.contentsPrefix + folder + "/").utf8)
    private static let groupPrefix = Array(PatchGroup.entryPrefix.utf8)

    /// The walk of a name's zstd frames, for a name `mayBePatch` holds: a sequence for a patch group's entry
    /// (`PatchGroup`), one frame for any other; nil for every other name.
    static func frameExtent(for name: String) -> FrameExtent? {
        guard mayBePatch(name) else { return nil }
        return FrameExtent(sequence: startsBelowRoot(name, with: groupPrefix))
    }

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
            guard PackagePath.unsafeArchiveNameReason(path) == nil else {
                throw FormatError(message: "\(key) names '\(path)', which is not a safe relative path")
            }
            let base = FileRecord(size: try size(baseSizeKey), sha256: try digest(baseDigestKey))
            guard case .integer(let window)? = fields[windowKey], window >= 10, window <= Int64(PatchCodec.largestWindowLog) else {
                throw FormatError(message: "\(key) '\(path)' needs \(windowKey), an integer from 10 to \(PatchCodec.largestWindowLog)")
            }
            result[path] = FilePatch(
                path: path, base: base, patch: FileRecord(size: try size(patchSizeKey), sha256: try digest(patchDigestKey)),
                windowLog: Int(window))
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
                            PlistDictionary(
                                [
                                    .init(key: baseSizeKey, value: .integer(patch.base.size)),
                                    .init(key: baseDigestKey, value: .string(patch.base.sha256)),
                                ] + PatchFrame.plistEntries(patch.frame))))
                }))
    }

    /// The listed paths `info` says a patch makes, its own or a group's, as the plist names them (unchecked:
    /// for readers that only tell patched files from files left in place); empty without patches.
    public static func patchedPaths(of info: ContentInfo) -> Set<String> {
        var paths: Set<String> = []
        if case .dictionary(let records)? = info.dictionary[key] { paths.formUnion(records.entries.map(\.key)) }
        if case .array(let groups)? = info.dictionary[PatchGroup.key] {
            for case .dictionary(let fields) in groups {
                if case .array(let items)? = fields[PatchGroup.pathsKey] { paths.formUnion(items.compactMap(\.stringValue)) }
            }
        }
        return paths
    }

    /// True when `info` has patch records of either kind.
    public static func hasPatches(_ info: ContentInfo) -> Bool {
        info.dictionary[key] != nil || info.dictionary[PatchGroup.key] != nil
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
        let groups: [PatchGroup]
        do {
            patches = try all(of: info)
            groups = try PatchGroup.all(of: info, patches: patches)
        } catch {
            problems.add(.patchMalformed, path: ContentInfo.fileName, "\(error.message); make the delta again (hcpack delta OLD NEW)")
            return problems.problems
        }
        if !isDelta, let found = [key, PatchGroup.key].first(where: { info.dictionary[$0] != nil }) {
            problems.add(.patchMalformed, path: ContentInfo.fileName, "\(found) belongs to a delta, and this package has no \(DeltaBase.key); make the delta again")
        }
        let records = (try? info.parseIntegrity()) ?? nil
        var output = PatchOutput()
        var results: [(path: String, size: Int64)] = []
        // The record of the file a patch makes, when Files lists it, HCPackIntegrity records it and the delta
        // does not also carry it whole; its size counted in what the patches make.
        func recordedResult(_ path: String, recordKey: String) -> FileRecord? {
            let target = Verifier.contentsPrefix + path
            guard listed.contains(path), let made = records?[path] else {
                problems.add(
                    .patchMalformed, path: target,
                    "\(recordKey) has a patch for a file that Files does not list or \(ContentInfo.integrityKey) does not record; make the delta again")
                return nil
            }
            if entry(target) != nil {
                problems.add(.patchMalformed, path: target, "the delta carries this file both whole and as a patch; make the delta again")
            }
            output.add(result: made.size, patch: 0, base: 0)
            results.append((target, made.size))
            return made
        }
        for patch in patches.values.sorted(by: { $0.path < $1.path }) {
            output.add(result: 0, patch: patch.frame.patch.size, base: patch.base.size)
            guard let made = recordedResult(patch.path, recordKey: key) else { continue }
            checkOwnFrame(patch, made: made, entry: entry(patch.entryPath), problems: &problems)
        }
        for group in groups {
            output.add(result: 0, patch: group.frame.patch.size, base: group.bases.size)
            let results = group.paths.map { recordedResult($0, recordKey: PatchGroup.key) }
            checkGroup(group, made: results, entry: entry(group.entryPath), problems: &problems)
        }
        let expected = Set(patches.values.map(\.entryPath) + groups.map(\.entryPath))
        var patchBytes: Int64 = 0
        for stored in patchEntries {
            patchBytes = patchBytes.addingSaturated(stored.size)
            if !expected.contains(stored.path) {
                problems.add(
                    .patchMismatch, path: stored.path,
                    "a file in \(Verifier.contentsPrefix)\(folder)/ that neither \(key) nor \(PatchGroup.key) records; make the delta again")
            }
        }
        let carried = bounds.contentBytes == .max ? .max : max(0, bounds.contentBytes - patchBytes)
        problems.append(
            contentsOf: output.problems(
                results: results, archiveBytes: bounds.archiveBytes, carriedBytes: carried, limits: bounds.limits, maxSize: bounds.maxSize))
        return problems.problems
    }

    /// The checks of a patch with a frame of its own: its window covers base and result, and its entry is there
    /// with the recorded size and SHA-256 and a zstd frame header that declares the result, a window within the
    /// record's and no dictionary, and is exactly one frame.
    private static func checkOwnFrame(_ patch: FilePatch, made: FileRecord, entry stored: PackageEntry?, problems: inout ProblemList) {
        let frame = patch.frame
        if PatchCodec.windowLog(baseSize: patch.base.size, targetSize: made.size, limit: frame.windowLog) == nil {
            problems.add(
                .patchMalformed, path: Verifier.contentsPrefix + patch.path,
                "the patch's window (2^\(frame.windowLog) bytes) is smaller than its base and result together; make the delta again")
        }
        guard let stored = storedEntry(stored, recorded: frame.patch, at: patch.entryPath, recordKey: key, noun: "patch", problems: &problems)
        else { return }
        if let head = stored.head,
            let mismatch = head.withUnsafeBytes({ PatchCodec.headerMismatch($0, windowLog: frame.windowLog, resultSize: made.size) })
        {
            // Install would refuse it while applying it: verify says so first, with the same rule.
            problems.add(.patchResult, path: patch.entryPath, "the patch's frame header does not fit its record: \(mismatch.message); make the delta again")
        } else if let shape = stored.patchFrame, shape != .oneFrame {
            // Install applies only exactly one frame (ZSTD_findFrameCompressedSize): verify says so first.
            let described =
                switch shape {
                case .trailing(let count): "\(count) bytes follow its zstd frame"
                case .truncated: "it ends inside its zstd frame"
                default: "it is not a zstd frame"
                }
            problems.add(.patchResult, path: patch.entryPath, "the patch is not exactly one zstd frame: \(described); make the delta again")
        }
    }

    /// The entry a patch or group record names, when it is there with the recorded size and SHA-256; nil, with
    /// the problem (`delta.patch-mismatch`) added, otherwise.
    private static func storedEntry(
        _ stored: PackageEntry?, recorded: FileRecord, at entryPath: String, recordKey: String, noun: String, problems: inout ProblemList
    ) -> PackageEntry? {
        guard let stored, stored.kind == .file else {
            problems.add(.patchMismatch, path: entryPath, "\(recordKey) records a \(noun) that the delta does not carry; make the delta again")
            return nil
        }
        if stored.size != recorded.size {
            problems.add(
                .patchMismatch, path: entryPath,
                "is \(stored.size) bytes but \(recordKey) records \(recorded.size); the \(noun) changed after the delta was made")
            return nil
        }
        if let digest = stored.sha256, !digest.matchesHex(recorded.sha256) {
            problems.add(
                .patchMismatch, path: entryPath,
                "SHA-256 \(digest.hexString) differs from the recorded \(recorded.sha256); the \(noun) changed after the delta was made")
            return nil
        }
        return stored
    }

    /// The checks of a patch group: its bases total at most `largestMember` bytes a file, each file's result is at
    /// most that and fits the group's window, and its entry is there with the recorded size and SHA-256 and is
    /// exactly one zstd frame a file, in order, each frame's header declaring its file's result, a window within
    /// the record's and no dictionary. Each base's own size is known only from DEST's receipt: install checks it.
    /// - Parameter made: the record of the file each of the group's paths makes, in order; nil where reported.
    private static func checkGroup(_ group: PatchGroup, made: [FileRecord?], entry stored: PackageEntry?, problems: inout ProblemList) {
        let window = group.frame.windowLog
        let largest = PatchGroup.largestMember
        if group.bases.size > largest * Int64(group.paths.count) {
            problems.add(
                .patchMalformed, path: ContentInfo.fileName,
                "\(PatchGroup.key) item \(group.number) records \(group.bases.size) bytes of bases for \(group.paths.count) files, over the \(largest) bytes a group's files may have each; make the delta again")
        }
        for (path, made) in zip(group.paths, made) {
            guard let made else { continue }
            // Install holds a grouped file's base and result in memory: larger files have entries of their own.
            if made.size > largest {
                problems.add(
                    .patchMalformed, path: Verifier.contentsPrefix + path,
                    "a patch group makes this file of \(made.size) bytes, over the \(largest) bytes a group's files may have; make the delta again")
            } else if PatchCodec.windowLog(baseSize: 0, targetSize: made.size, limit: window) == nil {
                problems.add(
                    .patchMalformed, path: Verifier.contentsPrefix + path,
                    "the patch group's window (2^\(window) bytes) is smaller than this file's result; make the delta again")
            }
        }
        guard
            let stored = storedEntry(
                stored, recorded: group.frame.patch, at: group.entryPath, recordKey: PatchGroup.key, noun: "patch group", problems: &problems)
        else { return }
        // Install applies exactly one frame a file, in order: verify says so first, with the same rule.
        guard let shape = stored.patchFrame else { return }  // not read whole: install walks the frames
        guard case .frames(let heads) = shape else {
            let described =
                switch shape {
                case .truncated: "it ends inside a zstd frame"
                default: "it is not a sequence of zstd frames"
                }
            problems.add(.patchResult, path: group.entryPath, "the patch group is not one zstd frame a file: \(described); make the delta again")
            return
        }
        guard heads.count == group.paths.count else {
            problems.add(
                .patchResult, path: group.entryPath,
                "the patch group holds \(heads.count) zstd frames for the \(group.paths.count) files it makes; make the delta again")
            return
        }
        for (head, (path, made)) in zip(heads, zip(group.paths, made)) {
            guard let made,
                let mismatch = head.withUnsafeBytes({ PatchCodec.headerMismatch($0, windowLog: window, resultSize: made.size) })
            else { continue }
            problems.add(
                .patchResult, path: group.entryPath,
                "the frame of Contents/\(path) does not fit its record: \(mismatch.message); make the delta again")
        }
    }
}
