internal import CArchive

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

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
    /// Uncompressed bytes (all entries together) read before the ratio is checked, so that small, highly
    /// compressible files are not refused.
    public var ratioGraceBytes: Int64

    /// Limits; the defaults suit hosted content packages (8 GiB per entry, 16 GiB in all, ratio 200).
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
/// Format is detected by content. Only those readers and filters are enabled
/// (`archive_read_support_format_zip`/`_tar`/`_xar`, `archive_read_support_filter_gzip`/`_bzip2`/`_xz`/
/// `_zstd`/`_none`). Anything short of `ARCHIVE_OK` from libarchive is a failure.
///
/// Zip: `archive_read_support_format_zip` registers both zip readers; for files and memory (both seekable)
/// libarchive picks the seekable one, which walks the central directory. Note that it still takes each
/// entry's name from the local file header.
///
/// Memory stays bounded: a regular file is mapped 2 MiB at a time (`MappedInput`), anything else is read in
/// 256 KiB blocks, and data is handed to the caller block by block (plus a fixed 64 KiB buffer of zeros for
/// sparse holes). Not thread-safe: use one reader from one task at a time.
public final class ArchiveReader {
    /// The `struct archive *`, freed in `deinit` (`archive_read_free`).
    private let archive: OpaquePointer
    /// The descriptor opened by `init(path:)`, closed in `deinit`; -1 otherwise.
    private var fileDescriptor: Int32 = -1
    /// The copy of the input owned by `init(bytes:)`, freed in `deinit`.
    private var memory: UnsafeMutableRawBufferPointer?
    /// How `init(path:)` hands a regular file to libarchive; released after `archive_read_free`.
    private var mappedInput: MappedInput?
    private let limits: ArchiveLimits
    /// How errors name the input: the quoted path, or "input" for bytes.
    private let inputName: String

    private enum State {
        /// Before the first header, or after the current entry's data was read.
        case betweenEntries
        /// `next()` returned `entry`; its data has not been read yet.
        case atEntry(ArchiveEntry)
        case ended
        /// A previous failure left the archive unusable; every call throws it again.
        case failed(ArchiveError)
    }
    private var state = State.betweenEntries
    private var entryCount = 0
    private var totalBytes: Int64 = 0
    private var firstFormatName: String?

    /// Block size handed to libarchive for reads from a descriptor that cannot be mapped.
    private static let blockSize = 256 * 1024

    /// Opens the archive at `path` (`open(2)`; then a regular file goes to libarchive through `MappedInput`
    /// and `archive_read_open1`, anything else through `archive_read_open_fd`).
    ///
    /// The file is opened once by us so that a missing or unreadable file is `.io` with the exact `errno`.
    /// libarchive can seek the descriptor, so zip archives are read through their central directory.
    /// - Throws: `.io` (with `errno`) when the file cannot be opened or is a directory;
    ///   `.unsupportedFormat` when it is not a zip, tar or xar archive.
    public init(path: String, limits: ArchiveLimits = ArchiveLimits()) throws(ArchiveError) {
        self.limits = limits
        self.inputName = "'\(path)'"
        self.archive = try Self.makeArchive()
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let number = errno
            throw ArchiveError(.io, "cannot open '\(path)': \(Self.describe(errno: number))", errno: number)
        }
        fileDescriptor = fd
        var info = stat()
        if fstat(fd, &info) != 0 {
            let number = errno
            throw ArchiveError(.io, "cannot stat '\(path)': \(Self.describe(errno: number))", errno: number)
        }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            throw ArchiveError(.io, "'\(path)' is a directory, not an archive", errno: EISDIR)
        }
        if (info.st_mode & S_IFMT) == S_IFREG && info.st_size > 0 {
            let input = MappedInput(descriptor: fd, size: Int64(info.st_size))
            mappedInput = input
            let rc = withArchiveLocale { () -> Int32 in
                archive_read_set_read_callback(archive) { archive, context, buffer in
                    guard let context, let buffer else { return -1 }
                    let count = Unmanaged<MappedInput>.fromOpaque(context).takeUnretainedValue().read(buffer)
                    if count < 0 {
                        let number = errno
                        carchive_set_error(archive, number, "cannot map the archive: \(String(cString: strerror(number)))")
                    }
                    return count
                }
                archive_read_set_seek_callback(archive) { _, context, offset, whence in
                    guard let context else { return -1 }
                    return Unmanaged<MappedInput>.fromOpaque(context).takeUnretainedValue().seek(offset, whence)
                }
                archive_read_set_skip_callback(archive) { _, context, request in
                    guard let context else { return 0 }
                    return Unmanaged<MappedInput>.fromOpaque(context).takeUnretainedValue().skip(request)
                }
                archive_read_set_callback_data(archive, Unmanaged.passUnretained(input).toOpaque())
                return archive_read_open1(archive)
            }
            try handleOpenResult(rc)
            return
        }
        let rc = withArchiveLocale { archive_read_open_fd(archive, fd, Self.blockSize) }
        try handleOpenResult(rc)
    }

    /// Reads an archive held in memory (`archive_read_open_memory` on a copy owned by the reader).
    /// - Throws: `.unsupportedFormat` when the bytes are not a zip, tar or xar archive.
    public init(bytes: [UInt8], limits: ArchiveLimits = ArchiveLimits()) throws(ArchiveError) {
        self.limits = limits
        self.inputName = "input"
        self.archive = try Self.makeArchive()
        // One extra byte so an empty input still gets a valid allocation.
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        copy.copyBytes(from: bytes)
        memory = copy
        let rc = withArchiveLocale {
            archive_read_open_memory(archive, copy.baseAddress, bytes.count)
        }
        try handleOpenResult(rc)
    }

    deinit {
        archive_read_free(archive)
        mappedInput = nil
        if fileDescriptor >= 0 { close(fileDescriptor) }
        memory?.deallocate()
    }

    /// The format name libarchive reports after the first header ("ZIP 2.0 (deflation)", "POSIX ustar", ...)
    /// (`archive_format_name`).
    public var formatName: String? { firstFormatName }

    /// The next entry's header, or nil at the end of the archive (`archive_read_next_header`).
    ///
    /// Data of an entry that was not read is skipped by libarchive (a seek for zip, decompression for
    /// compressed tar); skipped data is not checked and not counted against the limits.
    /// - Throws: `.corrupt` for a damaged header (including any `ARCHIVE_WARN`), `.limitExceeded` past
    ///   `maxEntries`, `.unsupportedFormat` for an ISO 9660 image (which libarchive's tar reader sees as
    ///   an empty archive).
    public func next() throws(ArchiveError) -> ArchiveEntry? {
        switch state {
        case .failed(let error): throw error
        case .ended: return nil
        case .betweenEntries, .atEntry: break
        }
        return try failing { () throws(ArchiveError) -> ArchiveEntry? in
            var header: OpaquePointer?
            let rc = withArchiveLocale { archive_read_next_header(archive, &header) }
            if rc == ARCHIVE_EOF {
                if entryCount == 0, let detected = sniff(), detected.contains("ISO") {
                    throw ArchiveError(
                        .unsupportedFormat, "\(inputName) is \(detected), not a zip, tar or xar archive")
                }
                state = .ended
                return nil
            }
            try check(rc, archive, "damaged entry header after \(entryCount) entries", as: .corrupt)
            guard let header else {
                throw ArchiveError(.corrupt, "libarchive returned no entry header")
            }
            entryCount += 1
            if entryCount > limits.maxEntries {
                throw ArchiveError(
                    .limitExceeded, "archive has more than \(limits.maxEntries) entries (limit maxEntries)")
            }
            if firstFormatName == nil, let name = archive_format_name(archive) {
                firstFormatName = String(decoding: cStringBytes(name), as: UTF8.self)
                // Compression inside compression only serves to multiply a bomb's ratio: refuse it.
                let filters = (0..<archive_filter_count(archive)).compactMap { index -> String? in
                    guard let name = archive_filter_name(archive, index) else { return nil }
                    let text = String(decoding: cStringBytes(name), as: UTF8.self)
                    return text == "none" ? nil : text
                }
                if filters.count > 1 {
                    throw ArchiveError(
                        .unsupportedFormat,
                        "\(inputName) is compressed more than once (\(filters.reversed().joined(separator: " inside ")))")
                }
            }
            let entry = try withArchiveLocale { () throws(ArchiveError) in try Self.makeEntry(header) }
            state = .atEntry(entry)
            return entry
        }
    }

    /// Streams the current entry's data in blocks (`archive_read_data_block`), enforcing limits.
    ///
    /// Every byte handed to `body` is counted; declared sizes are never trusted. Holes in sparse tar
    /// entries are delivered as zeros, so `body` sees one contiguous stream, and count against the limits.
    /// - Returns: the number of bytes delivered.
    /// - Throws: `ArchiveError` `.encrypted` for an encrypted entry, `.corrupt` for a checksum mismatch,
    ///   truncation or a size different from the declared one, `.limitExceeded` when a limit is crossed
    ///   (before the offending bytes reach `body`), `.usage` when there is no current entry;
    ///   or whatever `body` throws.
    public func readData(_ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int64 {
        let entry: ArchiveEntry
        switch state {
        case .failed(let error): throw error
        case .atEntry(let current): entry = current
        case .betweenEntries, .ended:
            throw ArchiveError(.usage, "readData called without a current entry (call next() first)")
        }
        let name = Self.displayName(entry)
        if entry.isEncrypted {
            // Not fatal: the caller may skip this entry and go on.
            state = .betweenEntries
            throw ArchiveError(.encrypted, "entry \(name) is encrypted; encrypted entries are not read")
        }
        var delivered: Int64 = 0
        // Tags errors thrown by `body`, so they are told apart from the reader's own.
        func forward(_ buffer: UnsafeRawBufferPointer) throws {
            do { try body(buffer) } catch { throw CallerError(underlying: error) }
        }
        do {
            while true {
                var block: UnsafeRawPointer?
                var size = 0
                var offset: la_int64_t = 0
                let rc = withArchiveLocale { archive_read_data_block(archive, &block, &size, &offset) }
                if rc == ARCHIVE_EOF { break }
                if rc != ARCHIVE_OK {
                    var error = ArchiveError(libarchive: archive, code: .corrupt, operation: "reading \(name)")
                    if error.message.mentionsChecksum {
                        error.message = "checksum mismatch in \(name): " + error.message
                    }
                    throw error
                }
                if offset < delivered {
                    throw ArchiveError(.corrupt, "\(name): data blocks overlap (offset \(offset) < \(delivered))")
                }
                if offset > delivered {
                    try deliverZeros(offset - delivered, for: entry, name: name, delivered: &delivered, forward)
                }
                if size > 0, let block {
                    try account(Int64(size), for: entry, name: name, delivered: delivered)
                    try forward(UnsafeRawBufferPointer(start: block, count: size))
                    delivered += Int64(size)
                }
            }
            // A sparse entry's trailing hole is not reported as a block: fill up to the declared size.
            if entry.isSparse, let declared = entry.declaredSize, declared > delivered {
                try deliverZeros(declared - delivered, for: entry, name: name, delivered: &delivered, forward)
            }
            if let declared = entry.declaredSize, declared != delivered {
                throw ArchiveError(
                    .corrupt, "\(name) declares \(declared) bytes but holds \(delivered) (truncated or damaged)")
            }
        } catch let error as CallerError {
            // `body` gave up: the rest of this entry is skipped by the next `next()`.
            state = .betweenEntries
            throw error.underlying
        } catch {
            state = .failed(error as? ArchiveError ?? ArchiveError(.io, "\(error)"))
            throw error
        }
        state = .betweenEntries
        return delivered
    }

    // MARK: - Internals

    private struct CallerError: Error {
        let underlying: any Error
    }

    private static func makeArchive() throws(ArchiveError) -> OpaquePointer {
        guard let archive = archive_read_new() else {
            throw ArchiveError(.io, "archive_read_new failed (out of memory)", errno: ENOMEM)
        }
        // Only what hcpack needs; never archive_read_support_format_all / _filter_all.
        let setups: [(String, (OpaquePointer) -> Int32)] = [
            ("zip", { archive_read_support_format_zip($0) }),
            ("tar", { archive_read_support_format_tar($0) }),
            ("xar", { archive_read_support_format_xar($0) }),
            ("gzip", { archive_read_support_filter_gzip($0) }),
            ("bzip2", { archive_read_support_filter_bzip2($0) }),
            ("xz", { archive_read_support_filter_xz($0) }),
            ("zstd", { archive_read_support_filter_zstd($0) }),
            ("none", { archive_read_support_filter_none($0) }),
        ]
        for (name, setup) in setups {
            // ARCHIVE_WARN here means "supported through an external program": not acceptable either.
            let rc = setup(archive)
            if rc != ARCHIVE_OK {
                let error = ArchiveError(libarchive: archive, code: .io, operation: "enabling \(name) support")
                archive_read_free(archive)
                throw error
            }
        }
        return archive
    }

    private func handleOpenResult(_ rc: Int32) throws(ArchiveError) {
        let name = inputName
        if rc == ARCHIVE_OK { return }
        let number = archive_errno(archive)
        if number == EILSEQ {  // ARCHIVE_ERRNO_FILE_FORMAT: no enabled reader bid for the input.
            let detected = sniff().map { "it looks like \($0)" } ?? "unrecognized data"
            throw ArchiveError(.unsupportedFormat, "\(name) is not a zip, tar or xar archive: \(detected)")
        }
        throw ArchiveError(libarchive: archive, code: number > 0 ? .io : .corrupt, operation: "opening \(name)")
    }

    /// The leading bytes of the input, described by `FormatSniffer`.
    private func sniff() -> String? {
        if let memory {
            return FormatSniffer.describe(Array(memory.prefix(FormatSniffer.prefixLength)))
        }
        guard fileDescriptor >= 0 else { return nil }
        var prefix = [UInt8](repeating: 0, count: FormatSniffer.prefixLength)
        // pread leaves the descriptor's offset, which libarchive uses, alone.
        let count = prefix.withUnsafeMutableBytes { pread(fileDescriptor, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { return nil }
        return FormatSniffer.describe(Array(prefix.prefix(count)))
    }

    /// Runs `body`; any error it throws makes the reader unusable (later calls throw it again).
    private func failing<T>(_ body: () throws(ArchiveError) -> T) throws(ArchiveError) -> T {
        do {
            return try body()
        } catch {
            state = .failed(error)
            throw error
        }
    }

    /// Checks the limits for `count` more bytes of `entry` before they reach the caller.
    private func account(_ count: Int64, for entry: ArchiveEntry, name: String, delivered: Int64) throws(ArchiveError) {
        let entryBytes = delivered + count
        if entryBytes > limits.maxEntryBytes {
            throw ArchiveError(
                .limitExceeded, "\(name) is larger than \(limits.maxEntryBytes) bytes (limit maxEntryBytes)")
        }
        // Not `totalBytes + count`: a sparse hole can be nearly Int64.max bytes, which overflowed (trapped)
        // when maxEntryBytes allowed it. totalBytes never exceeds the limit, so this cannot overflow.
        if count > limits.maxTotalBytes - totalBytes {
            throw ArchiveError(
                .limitExceeded, "archive content is larger than \(limits.maxTotalBytes) bytes (limit maxTotalBytes)")
        }
        totalBytes += count
        if totalBytes > limits.ratioGraceBytes {
            // Raw bytes consumed from the file or memory so far (the bottom of the filter chain).
            let compressed = max(archive_filter_bytes(archive, -1), 1)
            let ratio = Double(totalBytes) / Double(compressed)
            if ratio > limits.maxCompressionRatio {
                throw ArchiveError(
                    .limitExceeded,
                    "\(name): \(totalBytes) bytes expanded from \(compressed) (ratio \(Int(ratio)) exceeds "
                        + "limit maxCompressionRatio \(Int(limits.maxCompressionRatio)))")
            }
        }
        if let declared = entry.declaredSize, entryBytes > declared {
            throw ArchiveError(.corrupt, "\(name) declares \(declared) bytes but holds more")
        }
    }

    private func deliverZeros(
        _ count: Int64, for entry: ArchiveEntry, name: String, delivered: inout Int64,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        // Limits first, for the whole hole, so a huge hole fails before any zero is produced.
        try account(count, for: entry, name: name, delivered: delivered)
        var remaining = count
        try Self.zeros.withUnsafeBytes { zeros in
            while remaining > 0 {
                let chunk = Int(min(remaining, Int64(zeros.count)))
                try body(UnsafeRawBufferPointer(rebasing: zeros[0..<chunk]))
                remaining -= Int64(chunk)
                delivered += Int64(chunk)
            }
        }
    }

    private static let zeros = [UInt8](repeating: 0, count: 64 * 1024)

    private static func makeEntry(_ header: OpaquePointer) throws(ArchiveError) -> ArchiveEntry {
        guard let rawPath = archive_entry_pathname(header) ?? archive_entry_pathname_utf8(header) else {
            throw ArchiveError(.corrupt, "entry has no name")
        }
        let pathBytes = cStringBytes(rawPath)
        let path = String(validating: pathBytes, as: UTF8.self)

        var kind: ArchiveEntryKind
        switch archive_entry_filetype(header) & fileTypeMask {
        case 0o100000: kind = .file
        case 0o040000: kind = .directory
        case 0o120000: kind = .symlink
        case 0o020000: kind = .characterDevice
        case 0o060000: kind = .blockDevice
        case 0o010000: kind = .fifo
        case 0o140000: kind = .socket
        default: kind = .unknown
        }
        var linkTarget: String?
        if let hardlink = archive_entry_hardlink(header) {
            kind = .hardlink
            linkTarget = String(validating: cStringBytes(hardlink), as: UTF8.self)
        } else if kind == .symlink, let symlink = archive_entry_symlink(header) {
            linkTarget = String(validating: cStringBytes(symlink), as: UTF8.self)
        }
        return ArchiveEntry(
            pathBytes: pathBytes,
            path: path,
            kind: kind,
            declaredSize: archive_entry_size_is_set(header) != 0 ? archive_entry_size(header) : nil,
            permissions: UInt32(archive_entry_mode(header)) & 0o7777,
            linkTarget: linkTarget,
            isEncrypted: archive_entry_is_encrypted(header) != 0,
            isSparse: archive_entry_sparse_count(header) > 0,
            modificationTime: archive_entry_mtime_is_set(header) != 0 ? Int64(archive_entry_mtime(header)) : nil
        )
    }

    /// `AE_IFMT`; the `AE_IF*` macros are casts, which Swift does not import.
    private static let fileTypeMask: mode_t = 0o170000

    private static func displayName(_ entry: ArchiveEntry) -> String {
        "'\(entry.path ?? String(decoding: entry.pathBytes, as: UTF8.self))'"
    }

    private static func describe(errno number: Int32) -> String {
        guard let text = strerror(number) else { return "errno \(number)" }
        return String(decoding: cStringBytes(text), as: UTF8.self)
    }
}

extension String {
    /// True when a libarchive message is about a checksum (zip "ZIP bad CRC", xar "checksum error").
    fileprivate var mentionsChecksum: Bool {
        let lower = lowercased()
        return lower.contains("crc") || lower.contains("checksum")
    }
}

/// Serves a regular file to libarchive through a read-only mapping that slides along it (`mmap` of
/// `windowBytes` at a time), instead of `read(2)` into a buffer: the page cache is read in place. The copy
/// that `read` makes was a fifth of verify's time. Memory stays bounded: one window is mapped at a time,
/// and libarchive keeps using a block only until its next read.
///
/// A file truncated by another process while it is mapped ends the process with SIGBUS (the command line
/// reports it; see docs/SECURITY.md), where `read` would have returned short: the reader never writes, so
/// nothing is left half-done beyond what a kill leaves.
private final class MappedInput {
    private let descriptor: Int32
    private let size: Int64
    private var position: Int64 = 0
    private var window: (base: UnsafeMutableRawPointer, length: Int)?
    /// Mapped pages count in the process's RSS: small windows keep it low, and 128 mmap calls for 256 MB
    /// cost nothing measurable.
    private static let windowBytes: Int64 = 2 << 20
    private static let pageMask = Int64(sysconf(Int32(_SC_PAGESIZE)) - 1)

    init(descriptor: Int32, size: Int64) {
        self.descriptor = descriptor
        self.size = size
    }

    deinit { unmap() }

    private func unmap() {
        if let window { munmap(window.base, window.length) }
        window = nil
    }

    /// Maps the next window and points `buffer` at the current position; 0 at the end, -1 on failure.
    fileprivate func read(_ buffer: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        unmap()
        guard position < size else { return 0 }
        let start = position & ~Self.pageMask
        let length = Int(min(Self.windowBytes, size - start))
        // MAP_POPULATE: one call maps every page of the window rather than one fault per few pages.
        guard let base = mmap(nil, length, PROT_READ, MAP_SHARED | MAP_POPULATE, descriptor, off_t(start)),
            base != MAP_FAILED
        else { return -1 }
        window = (base, length)
        let skip = Int(position - start)
        buffer.pointee = UnsafeRawPointer(base + skip)
        position = start + Int64(length)
        return length - skip
    }

    fileprivate func seek(_ offset: Int64, _ whence: Int32) -> Int64 {
        let target: Int64
        switch whence {
        case SEEK_SET: target = offset
        case SEEK_CUR: target = position + offset
        case SEEK_END: target = size + offset
        default: return -1
        }
        guard target >= 0 else { return -1 }
        position = target
        return target
    }

    fileprivate func skip(_ request: Int64) -> Int64 {
        let skipped = max(0, min(request, size - position))
        position += skipped
        return skipped
    }
}
