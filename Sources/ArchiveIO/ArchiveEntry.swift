/// What kind of file system object an archive entry describes.
public enum ArchiveEntryKind: String, Sendable {
    case file, directory, symlink, hardlink, characterDevice, blockDevice, fifo, socket, unknown
}

/// The header of one archive entry, as the archive states it (nothing here is trusted).
public struct ArchiveEntry: Sendable, Equatable {
    /// The name exactly as stored (bytes; may be any encoding).
    public var pathBytes: [UInt8]
    /// The name decoded as UTF-8, or nil when it is not valid UTF-8.
    public var path: String?
    /// From `archive_entry_filetype`; `.hardlink` whenever `archive_entry_hardlink` is set.
    public var kind: ArchiveEntryKind
    /// The size the header declares, or nil when the archive does not say.
    public var declaredSize: Int64?
    /// Permission and mode bits (`0o7777` part: setuid, setgid, sticky, rwx).
    public var permissions: UInt32
    /// Target of a symlink, or the entry a hard link refers to; nil when absent or not valid UTF-8.
    public var linkTarget: String?
    /// True when the entry's data or metadata is encrypted.
    public var isEncrypted: Bool
    /// True for sparse entries (tar).
    public var isSparse: Bool
    /// Modification time in seconds since 1970, when set.
    public var modificationTime: Int64?

    /// Builds an entry; `ArchiveReader.next()` fills these from `archive_entry_*` accessors.
    public init(
        pathBytes: [UInt8], path: String?, kind: ArchiveEntryKind, declaredSize: Int64?, permissions: UInt32,
        linkTarget: String? = nil, isEncrypted: Bool = false, isSparse: Bool = false, modificationTime: Int64? = nil
    ) {
        self.pathBytes = pathBytes
        self.path = path
        self.kind = kind
        self.declaredSize = declaredSize
        self.permissions = permissions
        self.linkTarget = linkTarget
        self.isEncrypted = isEncrypted
        self.isSparse = isSparse
        self.modificationTime = modificationTime
    }
}
