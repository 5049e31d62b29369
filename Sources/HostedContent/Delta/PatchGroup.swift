import Digest
import PatchCodec
import PropertyList

/// A patch entry's record: its size and SHA-256 and the window its frames need (a file's own patch, or a group's).
public struct PatchFrame: Sendable, Equatable {
    /// The patch entry's size and SHA-256.
    public var patch: FileRecord
    /// The window the frame needs, as a power of two (bytes of memory an applier may map or hold).
    public var windowLog: Int

    /// A frame record.
    public init(patch: FileRecord, windowLog: Int) {
        self.patch = patch
        self.windowLog = windowLog
    }

    /// The record's fields in a plist dictionary.
    static func plistEntries(_ frame: PatchFrame) -> [PlistDictionary.Entry] {
        [
            .init(key: FilePatch.patchSizeKey, value: .integer(frame.patch.size)),
            .init(key: FilePatch.patchDigestKey, value: .string(frame.patch.sha256)),
            .init(key: FilePatch.windowKey, value: .integer(Int64(frame.windowLog))),
        ]
    }
}

/// Small patched files whose patches travel in one archive entry (docs/format.md, `HCPackPatchGroups`): the
/// entry is the files' zstd frames one after another, in `paths` order, each made against its own file's base
/// as a patch of its own is. Forty patches of small JSON files as entries of their own cost 18,449 bytes of
/// delta, nearly all of it their entries' zip headers and their records; in one entry, 8,295
/// (bench/README.md, "json's size: patch groups").
///
/// A grouped file has no `HCPackPatches` record: the group names its bases once, by the SHA-256 of their
/// records in the `UnchangedSHA256` form (`DeltaBase.unchangedDigest`) and their total size, and install takes
/// the records themselves from DEST's receipt of the base, as it does for the files left in place.
///
/// Each frame needs only its own base, so a file is made or found already made on its own: a rerun after an
/// install killed halfway, with some of the files already placed, makes the rest.
///
/// The entry is `Contents/.hcpack-patches/.hcpack/group-N`: no listed path starts with `.hcpack/` (the
/// records' folder), so no file's own patch can have that name. Install holds a file's base and result in
/// memory, so a group takes only files of at most `largestMember` bytes.
public struct PatchGroup: Sendable, Equatable {
    /// The plist key: an array of group records.
    public static let key = "HCPackPatchGroups"
    static let pathsKey = "Paths"
    static let basesSizeKey = "BasesSize"
    static let basesDigestKey = "BasesSHA256"
    /// The largest window a group may declare: a file's base and result are held in memory.
    public static let largestWindowLog = 22
    /// The largest base or result a group takes: larger files get an entry of their own.
    static let largestMember: Int64 = 1 << 20
    /// The most files one group makes (its entry's frames, which verify walks).
    public static let largestCount = FrameExtent.largestFrameCount

    /// The group's number, from 1, in the order of the plist's array.
    public var number: Int
    /// The listed paths the group makes, in the order of the entry's frames.
    public var paths: [String]
    /// The group's entry (size and SHA-256) and the window each of its frames needs at most.
    public var frame: PatchFrame
    /// The bases' total size and the SHA-256 of their records (`DeltaBase.unchangedDigest`).
    public var bases: FileRecord

    /// A group record.
    public init(number: Int, paths: [String], frame: PatchFrame, bases: FileRecord) {
        self.number = number
        self.paths = paths
        self.frame = frame
        self.bases = bases
    }

    /// The group's archive path below the package root.
    public var entryPath: String { Self.entryPath(number) }

    static func entryPath(_ number: Int) -> String { entryPrefix + "group-\(number)" }

    /// The folder of group entries, below the package root.
    static let entryPrefix = Verifier.contentsPrefix + FilePatch.folder + "/" + Installer.metadataFolder + "/"

    /// The `bases` record of files with these base records.
    static func bases(_ records: [(path: String, record: FileRecord)]) -> FileRecord {
        FileRecord(
            size: records.reduce(Int64(0)) { $0.addingSaturated($1.record.size) }, sha256: DeltaBase.unchangedDigest(records))
    }

    /// The plist's groups, checked against its patch records: no path of a group has a record of its own, and
    /// no path is in two groups.
    /// - Throws: `FilePatch.FormatError` when a group is not well formed or does not fit the records.
    public static func all(of info: ContentInfo, patches: [String: FilePatch]) throws(FilePatch.FormatError) -> [PatchGroup] {
        var groups: [PatchGroup] = []
        var grouped: Set<String> = []
        guard let value = info.dictionary[key] else { return [] }
        guard case .array(let records) = value else {
            throw FilePatch.FormatError(message: "\(key) must be an array, found \(value.typeName)")
        }
        let fieldKeys = [pathsKey, FilePatch.patchSizeKey, FilePatch.patchDigestKey, FilePatch.windowKey, basesSizeKey, basesDigestKey]
        for (index, record) in records.enumerated() {
            let name = "\(key) item \(index + 1)"
            guard case .dictionary(let fields) = record else {
                throw FilePatch.FormatError(message: "\(name) must be a dictionary of \(fieldKeys.joined(separator: ", "))")
            }
            guard case .array(let items)? = fields[pathsKey], !items.isEmpty, items.count <= largestCount else {
                throw FilePatch.FormatError(message: "\(name) needs \(pathsKey), an array of 1 to \(largestCount) paths it makes")
            }
            var paths: [String] = []
            for item in items {
                guard let path = item.stringValue, PackagePath.unsafeArchiveNameReason(path) == nil else {
                    throw FilePatch.FormatError(
                        message: "\(name) names \(item.stringValue.map { "'\($0)'" } ?? "a \(item.typeName)"), which is not a safe relative path")
                }
                guard patches[path] == nil else {
                    throw FilePatch.FormatError(message: "\(name) names '\(path)', which has a patch of its own in \(FilePatch.key)")
                }
                guard grouped.insert(path).inserted else {
                    throw FilePatch.FormatError(message: "\(name) names '\(path)', which another group or this one names already")
                }
                paths.append(path)
            }
            func size(_ field: String) throws(FilePatch.FormatError) -> Int64 {
                guard case .integer(let size)? = fields[field], size >= 0 else {
                    throw FilePatch.FormatError(message: "\(name) needs \(field), a byte count (integer >= 0)")
                }
                return size
            }
            func digest(_ field: String) throws(FilePatch.FormatError) -> String {
                guard let digest = fields[field]?.stringValue, DeltaBase.isHexDigest(digest) else {
                    throw FilePatch.FormatError(message: "\(name) needs \(field), 64 lower-case hex digits")
                }
                return digest
            }
            let patch = FileRecord(size: try size(FilePatch.patchSizeKey), sha256: try digest(FilePatch.patchDigestKey))
            let bases = FileRecord(size: try size(basesSizeKey), sha256: try digest(basesDigestKey))
            guard case .integer(let window)? = fields[FilePatch.windowKey], window >= 10, window <= Int64(largestWindowLog) else {
                throw FilePatch.FormatError(
                    message: "\(name) needs \(FilePatch.windowKey), an integer from 10 to \(largestWindowLog) (a group's files are made in memory)")
            }
            if let unknown = fields.entries.first(where: { !fieldKeys.contains($0.key) }) {
                throw FilePatch.FormatError(message: "\(name) has the key \(unknown.key), which hcpack does not know")
            }
            groups.append(PatchGroup(number: index + 1, paths: paths, frame: PatchFrame(patch: patch, windowLog: Int(window)), bases: bases))
        }
        return groups
    }

    /// The plist value of `HCPackPatchGroups` for `groups`, in their order.
    static func plistValue(_ groups: [PatchGroup]) -> PlistValue {
        .array(
            groups.map { group in
                .dictionary(
                    PlistDictionary(
                        [
                            .init(key: basesSizeKey, value: .integer(group.bases.size)),
                            .init(key: basesDigestKey, value: .string(group.bases.sha256)),
                            .init(key: pathsKey, value: .array(group.paths.map { .string($0) })),
                        ] + PatchFrame.plistEntries(group.frame)))
            })
    }

    /// `total` split in proportion to `sizes`, the remainder to the last: what each file of a group is shown to
    /// cost where only the plist is at hand (inspect, diff).
    static func shares(of total: Int64, by sizes: [Int64]) -> [Int64] {
        guard !sizes.isEmpty else { return [] }
        let sum = sizes.reduce(Int64(0)) { $0.addingSaturated(max(0, $1)) }
        var shares = sizes.map { size in sum > 0 ? Int64(Double(total) * Double(max(0, size)) / Double(sum)) : total / Int64(sizes.count) }
        shares[shares.count - 1] = total - shares.dropLast().reduce(0, +)
        return shares
    }
}
