import PatchCodec

/// A native executable or script, recognised by its first bytes.
public enum ExecutableKind: String, Sendable, Codable {
    case machO = "Mach-O"
    case fatMachO = "fat Mach-O"
    case elf = "ELF"
    case pe = "PE"
    case script = "script"

    /// Looks at the start of a file. Fat Mach-O shares CAFEBABE with Java class files; a small architecture
    /// count tells them apart (class files have their version there, 45 or more).
    public static func detect(_ head: UnsafeRawBufferPointer) -> ExecutableKind? {
        guard head.count >= 2 else { return nil }
        if head[0] == 0x23 && head[1] == 0x21 { return .script }  // "#!"
        if head[0] == 0x4d && head[1] == 0x5a { return .pe }  // "MZ"
        guard head.count >= 4 else { return nil }
        let magic = UInt32(head[0]) << 24 | UInt32(head[1]) << 16 | UInt32(head[2]) << 8 | UInt32(head[3])
        switch magic {
        case 0x7f45_4c46: return .elf
        case 0xfeed_face, 0xfeed_facf, 0xcefa_edfe, 0xcffa_edfe: return .machO
        case 0xcafe_babe, 0xcafe_babf:
            guard head.count >= 8 else { return .fatMachO }
            let count = UInt32(head[4]) << 24 | UInt32(head[5]) << 16 | UInt32(head[6]) << 8 | UInt32(head[7])
            return count > 0 && count < 40 ? .fatMachO : nil
        default: return nil
        }
    }

    /// How many leading bytes `detect` needs.
    public static let headLength = 8
}

/// One entry of a package, its path relative to the package root.
public struct PackageEntry: Sendable, Equatable {
    /// How many leading bytes a scan reads of each file: enough to tell executables apart and to hold a
    /// patch's whole zstd frame header.
    public static let headLength = max(ExecutableKind.headLength, PatchCodec.frameHeaderMaxSize)

    /// The part of `head` a scan keeps in the entry named `name`: all of it for a file that may be a patch
    /// (`FilePatch.mayBePatch`), none otherwise.
    static func keptHead(_ head: [UInt8], name: String) -> [UInt8]? {
        FilePatch.mayBePatch(name) ? head : nil
    }

    /// Relative path, '/'-separated, no trailing slash (lossy UTF-8 when `nameIsUTF8` is false).
    public var path: String
    public var kind: EntryKind
    /// Bytes of data (regular files).
    public var size: Int64
    public var permissions: UInt32
    /// Symlink target, or the package path a hard link refers to.
    public var linkTarget: String?
    public var nameIsUTF8: Bool
    /// What the first bytes say, for regular files.
    public var executable: ExecutableKind?
    /// SHA-256 of the data, when it was computed.
    public var sha256: [UInt8]?
    /// CRC-32 of the data, computed with `sha256` from a folder: a build's stored zip entry records it before
    /// its data (`ArchiveWriteEntry.crc32`).
    var crc32: UInt32?
    /// The first bytes (up to `headLength`) of a file in a delta's patches folder, whose zstd frame header
    /// verify checks (FilePatch.swift); nil for every other entry.
    public var head: [UInt8]?
    /// For the same files: whether their bytes are exactly one zstd frame, from the block headers as they
    /// were read (install applies only such a patch); nil for every other entry, and when not read whole.
    public var patchFrame: FrameExtent.Verdict?
    /// The folder file's stamp when it was hashed: a later equal stamp means the same bytes.
    public var stamp: FileStamp?
    /// True when the scan left the data unread because its caller needed nothing of it (`StagingArea.unreadNames`):
    /// no digest, no checksum, nothing checked but the declared size.
    public var dataUnread = false

    public init(
        path: String, kind: EntryKind, size: Int64 = 0, permissions: UInt32 = 0o644, linkTarget: String? = nil,
        nameIsUTF8: Bool = true, executable: ExecutableKind? = nil, sha256: [UInt8]? = nil
    ) {
        self.path = path
        self.kind = kind
        self.size = size
        self.permissions = permissions
        self.linkTarget = linkTarget
        self.nameIsUTF8 = nameIsUTF8
        self.executable = executable
        self.sha256 = sha256
    }
}

/// Everything the rules look at: the entries of one package and its ContentInfo.plist bytes.
public struct PackageSnapshot: Sendable {
    public enum Origin: Sendable, Equatable {
        case folder(path: String)
        case archive(path: String, format: String)
    }

    public var origin: Origin
    /// In an archive, the top-level folder that is the package root (nil when it is the archive root).
    public var rootFolder: String?
    /// Entries relative to the package root, in the order found.
    public var entries: [PackageEntry]
    /// The raw bytes of ContentInfo.plist when it is a regular file within the size limit.
    public var contentInfoBytes: [UInt8]?
    /// Problems found while reading (unsafe entry names, corrupt data, ...).
    public var scanProblems: ProblemList
    /// False when reading stopped early (corrupt or unsupported archive): absence proves nothing then.
    public var isComplete: Bool
    /// How many entries' data was read beside libarchive, straight from the file (`StoredDataHashing`).
    var entriesReadBeside = 0

    public init(
        origin: Origin, rootFolder: String? = nil, entries: [PackageEntry], contentInfoBytes: [UInt8]?,
        scanProblems: ProblemList = ProblemList(), isComplete: Bool = true
    ) {
        self.origin = origin
        self.rootFolder = rootFolder
        self.entries = entries
        self.contentInfoBytes = contentInfoBytes
        self.scanProblems = scanProblems
        self.isComplete = isComplete
    }
}
