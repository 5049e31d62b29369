/// The archive formats hcpack writes.
public enum ArchiveWriteFormat: String, Sendable {
    case zip
    case tarGzip
}

/// How one zip entry's data is stored.
public enum EntryCompression: String, Sendable {
    case store
    case deflate
}

/// The header of an entry to write. Everything host-specific is fixed by the writer: uid/gid 0, no names.
public struct ArchiveWriteEntry: Sendable {
    public var path: String
    /// `.file` or `.directory`.
    public var kind: ArchiveEntryKind
    public var size: Int64
    public var permissions: UInt32
    public var modificationTime: Int64
    public var compression: EntryCompression

    public init(
        path: String, kind: ArchiveEntryKind, size: Int64 = 0, permissions: UInt32, modificationTime: Int64,
        compression: EntryCompression = .deflate
    ) {
        self.path = path
        self.kind = kind
        self.size = size
        self.permissions = permissions
        self.modificationTime = modificationTime
        self.compression = compression
    }
}

/// Writes a reproducible archive to an open file descriptor: the same calls give the same bytes.
public final class ArchiveWriter {
    /// Starts an archive on `fileDescriptor` (`archive_write_open_fd`); the caller owns and closes the descriptor.
    public init(fileDescriptor: Int32, format: ArchiveWriteFormat) throws(ArchiveError) {
        throw ArchiveError(.usage, "not implemented yet")
    }

    /// Writes an entry header (`archive_write_header`); a file's data follows through `write`.
    public func begin(_ entry: ArchiveWriteEntry) throws(ArchiveError) {
        throw ArchiveError(.usage, "not implemented yet")
    }

    /// Writes data for the current file entry (`archive_write_data`).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        throw ArchiveError(.usage, "not implemented yet")
    }

    /// Finishes the archive (`archive_write_close`); nothing may be written afterwards.
    public func finish() throws(ArchiveError) {
        throw ArchiveError(.usage, "not implemented yet")
    }
}
