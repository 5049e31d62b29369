/// Bounds applied while reading untrusted archives; the reader counts bytes that actually arrive.
public struct ArchiveLimits: Sendable, Equatable {
    /// Most entries in one archive.
    public var maxEntries: Int
    /// Largest uncompressed size of one entry.
    public var maxEntryBytes: Int64
    /// Largest uncompressed size of all entries together.
    public var maxTotalBytes: Int64
    /// Largest ratio of uncompressed bytes to compressed bytes read so far, checked once more than
    /// `ratioGraceBytes` have been produced.
    public var maxCompressionRatio: Double
    public var ratioGraceBytes: Int64

    public init(
        maxEntries: Int = 1_000_000, maxEntryBytes: Int64 = 8 << 30, maxTotalBytes: Int64 = 16 << 30,
        maxCompressionRatio: Double = 200, ratioGraceBytes: Int64 = 16 << 20
    ) {
        self.maxEntries = maxEntries
        self.maxEntryBytes = maxEntryBytes
        self.maxTotalBytes = maxTotalBytes
        self.maxCompressionRatio = maxCompressionRatio
        self.ratioGraceBytes = ratioGraceBytes
    }
}

/// Streams the entries of a zip, tar (plain, gzip, bzip2, xz, zstd) or xar archive.
///
/// Format is detected by content. Only those readers and filters are enabled. Anything short of
/// `ARCHIVE_OK` from libarchive is a failure.
public final class ArchiveReader {
    /// Opens the archive at `path` (`archive_read_open_filename`).
    public init(path: String, limits: ArchiveLimits = ArchiveLimits()) throws(ArchiveError) {
        throw ArchiveError(.usage, "not implemented yet")
    }

    /// Reads an archive held in memory (tests, fuzzing).
    public init(bytes: [UInt8], limits: ArchiveLimits = ArchiveLimits()) throws(ArchiveError) {
        throw ArchiveError(.usage, "not implemented yet")
    }

    /// The format name libarchive reports after the first header ("ZIP 2.0 (deflation)", "POSIX ustar", ...).
    public var formatName: String? { nil }

    /// The next entry's header, or nil at the end of the archive (`archive_read_next_header`).
    public func next() throws(ArchiveError) -> ArchiveEntry? {
        throw ArchiveError(.usage, "not implemented yet")
    }

    /// Streams the current entry's data in blocks (`archive_read_data_block`), enforcing limits.
    /// - Returns: the number of bytes delivered.
    public func readData(_ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int64 {
        throw ArchiveError(.usage, "not implemented yet")
    }
}
