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
    /// Longest time, in seconds, that one libarchive call (or a read of the input) may go without progress
    /// before `ArchiveWatchdog` ends the process; 0 turns the watchdog off.
    public var stallSeconds: Double
    /// Most the process's resident memory may grow during one libarchive call without progress before
    /// `ArchiveWatchdog` ends the process; 0 turns this check off.
    public var maxStallMemoryGrowth: Int64

    /// Limits; the defaults suit hosted content packages (8 GiB per entry, 16 GiB in all, ratio 200; the
    /// watchdog stops a call after 30 s, or `ArchiveWatchdog.setDefaultStallSeconds`, or 512 MiB without
    /// progress).
    public init(
        maxEntries: Int = 1_000_000, maxEntryBytes: Int64 = 8 << 30, maxTotalBytes: Int64 = 16 << 30,
        maxCompressionRatio: Double = 200, ratioGraceBytes: Int64 = 16 << 20, stallSeconds: Double? = nil,
        maxStallMemoryGrowth: Int64 = 512 << 20
    ) {
        self.maxEntries = maxEntries
        self.maxEntryBytes = maxEntryBytes
        self.maxTotalBytes = maxTotalBytes
        self.maxCompressionRatio = maxCompressionRatio
        self.ratioGraceBytes = ratioGraceBytes
        self.stallSeconds = stallSeconds ?? ArchiveWatchdog.stallSecondsDefault
        self.maxStallMemoryGrowth = maxStallMemoryGrowth
    }
}

/// Streams the entries of a zip or tar (plain, gzip, bzip2, xz, zstd) archive.
///
/// libarchive never guesses: `FormatSniffer` reads the magic numbers, and the reader is given exactly one
/// filter (`archive_read_append_filter`, which also turns filter bidding off) and one format. A compressed
/// input is always a tar (`archive_read_set_format(ARCHIVE_FORMAT_TAR)`); before anything else, its first
/// decompressed bytes are looked at on a second, throwaway handle, and a second compression layer is
/// refused (`.nestedCompression`), so no gzip header inside a gzip is ever parsed (libarchive 3.6.2's gzip
/// filter loops without bound on one whose file-name field never ends). xar is not read at all.
///
/// Zip: only `archive_read_support_format_zip_seekable` is registered, which walks the central directory.
/// (`archive_read_set_format(ARCHIVE_FORMAT_ZIP)` would pick the first reader named "zip", the streaming
/// one that trusts local headers.) It still takes each entry's name from the local file header. A zip that
/// arrives through a pipe cannot be read that way and is refused.
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
    /// How `init(path:)` hands the file to libarchive (a `MappedInput` for a regular file, a `StreamInput`
    /// for a pipe or a device); released after `archive_read_free`.
    private var input: CallbackInput?
    /// The input's first bytes (up to `FormatSniffer.prefixLength`), for the format and for messages.
    private var prefix: [UInt8] = []
    private let limits: ArchiveLimits
    /// False when the caller checks each zip entry's CRC-32 itself (see `init(path:limits:checksZipCRC:)`).
    private let checksZipCRC: Bool
    /// How errors name the input: the quoted path, or "input" for bytes.
    private let inputName: String
    /// Ends the process when a call into libarchive stalls (nil when `limits.stallSeconds` is 0).
    private let watchdog: ReadWatchdog?
    /// The watchdog's progress counter, bumped by the input callbacks and around every libarchive call.
    private var progress: ReadProgress? { watchdog?.progress }

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
    ///   `.unsupportedFormat` when it is not a zip or tar archive; `.nestedCompression` for a compressed stream
    ///   inside a compressed stream.
    /// - Parameter checksZipCRC: false turns libarchive's CRC-32 check of zip entries off (its `ignorecrc32`
    ///   option): for a caller that computes each entry's CRC-32 on another thread and compares it with the
    ///   central directory's (`ZipDirectory`). Tar has no checksum of the data, so it changes nothing there.
    /// - Parameter descriptor: an open descriptor of the archive to read instead of opening `path` (which then
    ///   only names it): the reader reads a duplicate (`F_DUPFD_CLOEXEC`), the caller keeps and closes its own.
    ///   So a caller that hashed the file through `descriptor` reads the same file, whatever `path` names now.
    public init(path: String, descriptor: Int32? = nil, limits: ArchiveLimits = ArchiveLimits(), checksZipCRC: Bool = true)
        throws(ArchiveError)
    {
        self.limits = limits
        self.checksZipCRC = checksZipCRC
        self.inputName = "'\(path)'"
        self.watchdog = ReadWatchdog(limits: limits, inputName: "'\(path)'")
        self.archive = try Self.makeArchive()
        let fd = try Self.openOrDuplicate(path, descriptor, waitSeconds: limits.stallSeconds)
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
            let size = Int64(info.st_size)
            inputSize = size
            prefix = Self.readPrefix(fd, size: size, length: FormatSniffer.prefixLength)
            try configure(seekable: true) { Self.readPrefix(fd, size: size, length: Self.peekLength) }
            let input = MappedInput(descriptor: fd, size: Int64(info.st_size), progress: progress)
            self.input = input
            try handleOpenResult(openArchive(through: input))
            return
        }
        // A pipe, a device or an empty file: the head is read here (to choose filter and format) and handed
        // to libarchive again before the rest of the stream.
        let input = StreamInput(descriptor: fd, blockSize: Self.blockSize, progress: progress)
        self.input = input
        prefix = try watching("reading the first bytes") { () throws(ArchiveError) in
            try input.readHead(FormatSniffer.prefixLength, name: inputName)
        }
        try configure(seekable: false, longerPrefix: nil)
        try handleOpenResult(openArchive(through: input))
    }

    /// `archive_read_open1` with `input`'s read callback, and seek and skip callbacks for a `MappedInput`.
    private func openArchive(through input: CallbackInput) -> Int32 {
        withArchiveLocale { () -> Int32 in
            archive_read_set_read_callback(archive) { archive, context, buffer in
                guard let context, let buffer else { return -1 }
                let input = Unmanaged<CallbackInput>.fromOpaque(context).takeUnretainedValue()
                let count = input.read(buffer)
                if count < 0 {
                    let number = errno
                    input.failure = number
                    carchive_set_error(archive, number, "cannot \(input.role) the archive: \(String(cString: strerror(number)))")
                }
                return count
            }
            if input is MappedInput {
                archive_read_set_seek_callback(archive) { _, context, offset, whence in
                    MappedInput.from(context)?.seek(offset, whence) ?? -1
                }
                archive_read_set_skip_callback(archive) { _, context, request in
                    MappedInput.from(context)?.skip(request) ?? 0
                }
            }
            archive_read_set_callback_data(archive, Unmanaged.passUnretained(input).toOpaque())
            return watching("opening the archive") { archive_read_open1(archive) }
        }
    }

    /// Reads an archive held in memory (`archive_read_open_memory` on a copy owned by the reader).
    /// - Throws: `.unsupportedFormat` when the bytes are not a zip or tar archive; `.nestedCompression`.
    /// - Parameter checksZipCRC: as for `init(path:limits:checksZipCRC:)`.
    public init(bytes: [UInt8], limits: ArchiveLimits = ArchiveLimits(), checksZipCRC: Bool = true) throws(ArchiveError) {
        self.limits = limits
        self.checksZipCRC = checksZipCRC
        self.inputName = "input"
        self.watchdog = ReadWatchdog(limits: limits, inputName: "input")
        self.archive = try Self.makeArchive()
        // One extra byte so an empty input still gets a valid allocation.
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        copy.copyBytes(from: bytes)
        memory = copy
        inputSize = Int64(bytes.count)
        prefix = Array(bytes.prefix(FormatSniffer.prefixLength))
        try configure(seekable: true) { Array(bytes.prefix(Self.peekLength)) }
        let rc = withArchiveLocale {
            watching("opening the archive") { archive_read_open_memory(archive, copy.baseAddress, bytes.count) }
        }
        try handleOpenResult(rc)
    }

    deinit {
        archive_read_free(archive)
        input = nil
        if fileDescriptor >= 0 { close(fileDescriptor) }
        memory?.deallocate()
    }

    /// True when the input is a zip (chosen from its first bytes, before any header is read).
    public private(set) var isZip = false

    /// The input's size in bytes: a regular file's or the bytes'; nil for a pipe or a device.
    public private(set) var inputSize: Int64?

    /// The archive file's descriptor, for callers that read a zip's stored data beside the reader (`pread`
    /// only: the reader owns it and closes it); nil for bytes, pipes and devices.
    public var seekableDescriptor: Int32? {
        input is MappedInput ? fileDescriptor : nil
    }

    /// The format name libarchive reports after the first header ("ZIP 2.0 (deflation)", "POSIX ustar", ...)
    /// (`archive_format_name`).
    public var formatName: String? { firstFormatName }

    /// The next entry's header, or nil at the end of the archive (`archive_read_next_header`).
    ///
    /// Data of an entry that was not read is skipped by libarchive (a seek for zip, decompression for
    /// compressed tar); skipped data is not checked and not counted against the limits.
    /// - Throws: `.corrupt` for a damaged header (including any `ARCHIVE_WARN`), `.limitExceeded` past
    ///   `maxEntries`.
    public func next() throws(ArchiveError) -> ArchiveEntry? {
        switch state {
        case .failed(let error): throw error
        case .ended: return nil
        case .betweenEntries, .atEntry: break
        }
        return try failing { () throws(ArchiveError) -> ArchiveEntry? in
            var header: OpaquePointer?
            let rc = withArchiveLocale {
                watching("reading the header after \(entryCount) entries") { archive_read_next_header(archive, &header) }
            }
            if rc == ARCHIVE_EOF {
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
        let entry = try currentEntry("readData")
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
                let rc = withArchiveLocale {
                    watching("reading \(name)") { archive_read_data_block(archive, &block, &size, &offset) }
                }
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
            let blamed = blamingInput(error as? ArchiveError ?? ArchiveError(.io, "\(error)"))
            state = .failed(blamed)
            throw blamed
        }
        state = .betweenEntries
        return delivered
    }

    /// Leaves the current entry's data to the caller, who reads `count` bytes of it straight from the file (a
    /// zip entry stored uncompressed, as its records say): they count against the limits as if delivered, and
    /// `next()` then seeks past them. No ratio check: stored data expands nothing, and once passed it counts
    /// on both sides of the ratio, as read data would.
    /// - Throws: `.limitExceeded` as `readData` would for those bytes, `.corrupt` past the declared size,
    ///   `.usage` when there is no current entry.
    public func leaveData(toCaller count: Int64) throws(ArchiveError) {
        let entry = try currentEntry("leaveData")
        let name = Self.displayName(entry)
        try checkSizeLimits(adding: count, entryBytes: count, name: name)
        if let declared = entry.declaredSize, count != declared {
            throw ArchiveError(.corrupt, "\(name) declares \(declared) bytes but holds \(count) (truncated or damaged)")
        }
        totalBytes += count
        state = .betweenEntries
    }

    // MARK: - Internals

    /// The entry `next()` returned, whose data has not been read; throws an earlier failure again.
    private func currentEntry(_ operation: String) throws(ArchiveError) -> ArchiveEntry {
        switch state {
        case .failed(let error): throw error
        case .atEntry(let current): return current
        case .betweenEntries, .ended:
            throw ArchiveError(.usage, "\(operation) called without a current entry (call next() first)")
        }
    }

    private struct CallerError: Error {
        let underlying: any Error
    }

    private static func makeArchive() throws(ArchiveError) -> OpaquePointer {
        guard let archive = archive_read_new() else {
            throw ArchiveError(.io, "archive_read_new failed (out of memory)", errno: ENOMEM)
        }
        return archive
    }

    /// Gives libarchive the one filter and the one format that `prefix` shows, or throws why the input is
    /// refused. Never `archive_read_support_format_all`, `_filter_all` or any bidding between readers.
    /// `longerPrefix` gives up to `peekLength` leading bytes, for a compressed head that the first
    /// `FormatSniffer.prefixLength` bytes do not decompress (a bzip2 block is up to 900 kB); nil for a stream.
    private func configure(seekable: Bool, longerPrefix: (() -> [UInt8])?) throws(ArchiveError) {
        let name = inputName
        let head = prefix[...]
        var filter = ARCHIVE_FILTER_NONE
        let format: FormatSniffer.Format
        if let compression = FormatSniffer.compression(head) {
            filter = Self.filterCode(compression)
            var inner = watching("decompressing the first bytes") { Self.decompressedHead(head, filter: filter, count: 512) }
            var whole = prefix.count < FormatSniffer.prefixLength
            if inner.count < 512 && !whole, let longerPrefix {
                let longer = longerPrefix()
                inner = watching("decompressing the first bytes") { Self.decompressedHead(longer[...], filter: filter, count: 512) }
                whole = longer.count < Self.peekLength
            }
            if let nested = FormatSniffer.compression(inner[...]) {
                throw ArchiveError(
                    .nestedCompression,
                    "\(name) is \(nested.rawValue) data compressed again with \(compression.rawValue); hosted content is "
                        + "compressed once (a .tar.gz, never a .tar.gz.gz): rebuild the archive")
            }
            // A whole tar header, or all the input there is; otherwise (a damaged stream, a huge gzip header)
            // the tar reader reports what is wrong.
            let decided = inner.count >= 512 || (!inner.isEmpty && whole)
            if decided && !FormatSniffer.isTar(inner[...]) {
                let what = FormatSniffer.describe(inner[...]).map { " (it holds \($0))" } ?? ""
                throw ArchiveError(
                    .unsupportedFormat, "\(name) is \(compression.rawValue)-compressed data that is not a tar archive\(what)")
            }
            format = .tar
        } else if FormatSniffer.isZip(head) {
            guard seekable else {
                throw ArchiveError(
                    .unsupportedFormat,
                    "\(name) is a zip arriving through a pipe; a zip's central directory is at its end, so hcpack reads "
                        + "zips from files: save it to a file first")
            }
            format = .zip
        } else if FormatSniffer.isXar(head) {
            throw ArchiveError(
                .unsupportedFormat,
                "\(name) is a xar archive, which hcpack does not read (why: docs/SECURITY.md)")
        } else if FormatSniffer.isTar(head) && !FormatSniffer.isISO9660(head) {
            format = .tar
        } else {
            let detected = FormatSniffer.describe(head).map { "it looks like \($0)" } ?? "unrecognized data"
            throw ArchiveError(.unsupportedFormat, "\(name) is not a zip or tar archive: \(detected)")
        }
        try check(archive_read_append_filter(archive, filter), archive, "choosing the filter", as: .io)
        switch format {
        case .tar:
            try check(archive_read_set_format(archive, ARCHIVE_FORMAT_TAR), archive, "choosing the tar format", as: .io)
        case .zip:
            try check(archive_read_support_format_zip_seekable(archive), archive, "choosing the zip format", as: .io)
            isZip = true
            if !checksZipCRC {
                try check(
                    archive_read_set_format_option(archive, "zip", "ignorecrc32", "1"), archive,
                    "turning libarchive's CRC-32 check off", as: .io)
            }
        }
    }

    private static func filterCode(_ compression: FormatSniffer.Compression) -> Int32 {
        switch compression {
        case .gzip: ARCHIVE_FILTER_GZIP
        case .bzip2: ARCHIVE_FILTER_BZIP2
        case .xz: ARCHIVE_FILTER_XZ
        case .zstd: ARCHIVE_FILTER_ZSTD
        }
    }

    /// The first `count` bytes that `filter` makes of `compressed` (a prefix of the input), read on a handle
    /// of their own with libarchive's raw format; fewer when the prefix ends first or is damaged.
    private static func decompressedHead(_ compressed: ArraySlice<UInt8>, filter: Int32, count: Int) -> [UInt8] {
        guard let peek = archive_read_new() else { return [] }
        defer { archive_read_free(peek) }
        guard archive_read_append_filter(peek, filter) == ARCHIVE_OK, archive_read_support_format_raw(peek) == ARCHIVE_OK
        else { return [] }
        var head = [UInt8](repeating: 0, count: count)
        let filled = compressed.withUnsafeBytes { input -> Int in
            guard archive_read_open_memory(peek, input.baseAddress, input.count) == ARCHIVE_OK else { return 0 }
            var header: OpaquePointer?
            guard archive_read_next_header(peek, &header) == ARCHIVE_OK else { return 0 }
            return head.withUnsafeMutableBytes { output -> Int in
                guard let base = output.baseAddress else { return 0 }
                var filled = 0
                while filled < count {
                    let got = archive_read_data(peek, base + filled, count - filled)
                    if got <= 0 { break }
                    filled += got
                }
                return filled
            }
        }
        return Array(head.prefix(filled))
    }

    /// Up to `length` leading bytes of a regular file (`pread`: the offset stays put).
    /// How much compressed input the nested-compression check may decompress at most: a whole bzip2 block.
    private static let peekLength = 1 << 20

    /// `open(path)`, or a close-on-exec duplicate of `descriptor` when one is given.
    /// - Parameter waitSeconds: how long a fifo may wait for its writer's first bytes (0: no bound, as with the
    ///   watchdog off). Opening a fifo without `O_NONBLOCK` blocks until a writer comes, which may be never.
    static func openOrDuplicate(_ path: String, _ descriptor: Int32?, waitSeconds: Double = ArchiveWatchdog.stallSecondsDefault)
        throws(ArchiveError) -> Int32
    {
        let fd = descriptor.map { fcntl($0, F_DUPFD_CLOEXEC, 0) } ?? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            let number = errno
            throw ArchiveError(.io, "cannot open '\(path)': \(describe(errno: number))", errno: number)
        }
        guard descriptor == nil else { return fd }
        var info = stat()
        if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO {
            // Data, or a writer that came and went (POLLHUP), within the bound; a fifo nobody writes is refused.
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let timeout = waitSeconds > 0 ? Int32(clamping: Int(min(waitSeconds, 86_400) * 1000)) : -1
            var ready: Int32
            repeat { ready = poll(&poller, 1, timeout) } while ready < 0 && errno == EINTR
            if ready == 0 {
                close(fd)
                throw ArchiveError(
                    .io, "'\(path)' is a fifo that no writer fed for \(Int(waitSeconds)) s; pass a regular file", errno: ETIMEDOUT)
            }
        }
        let flags = fcntl(fd, F_GETFL)
        if flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 {
            let number = errno
            close(fd)
            throw ArchiveError(.io, "cannot open '\(path)': \(describe(errno: number))", errno: number)
        }
        return fd
    }

    private static func readPrefix(_ descriptor: Int32, size: Int64, length: Int) -> [UInt8] {
        var prefix = [UInt8](repeating: 0, count: Int(min(size, Int64(length))))
        let count = prefix.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        return Array(prefix.prefix(max(count, 0)))
    }

    private func handleOpenResult(_ rc: Int32) throws(ArchiveError) {
        let name = inputName
        if rc == ARCHIVE_OK { return }
        let number = archive_errno(archive)
        if input?.failure != nil { throw blamingInput(ArchiveError(.corrupt, "opening \(name)")) }
        if number == EILSEQ {  // ARCHIVE_ERRNO_FILE_FORMAT: the zip reader found no end of central directory.
            let detected = FormatSniffer.describe(prefix[...]).map { "it looks like \($0)" } ?? "unrecognized data"
            throw ArchiveError(.unsupportedFormat, "\(name) is not a zip or tar archive: \(detected)")
        }
        throw ArchiveError(libarchive: archive, code: number > 0 ? .io : .corrupt, operation: "opening \(name)")
    }

    /// Runs `body`, a call that may never return on hostile input, under the watchdog.
    private func watching<T, E: Error>(_ activity: @autoclosure () -> String, _ body: () throws(E) -> T) throws(E) -> T {
        guard let progress else { return try body() }
        return try progress.watching(activity(), body)
    }

    /// Runs `body`; any error it throws makes the reader unusable (later calls throw it again).
    private func failing<T>(_ body: () throws(ArchiveError) -> T) throws(ArchiveError) -> T {
        do {
            return try body()
        } catch {
            let blamed = blamingInput(error)
            state = .failed(blamed)
            throw blamed
        }
    }

    /// `error`, or an `.io` error when a read or map of the file failed (ENOMEM, EIO): libarchive then has a
    /// short header or block that it calls damaged, but the archive is not to blame, the system is.
    private func blamingInput(_ error: ArchiveError) -> ArchiveError {
        guard let number = input?.failure, error.code != .io else { return error }
        return ArchiveError(.io, "cannot \(input?.role ?? "read") the archive: \(Self.describe(errno: number))", errno: number)
    }

    /// Checks the limits for `count` more bytes of `entry` before they reach the caller.
    private func account(_ count: Int64, for entry: ArchiveEntry, name: String, delivered: Int64) throws(ArchiveError) {
        let entryBytes = delivered + count
        try checkSizeLimits(adding: count, entryBytes: entryBytes, name: name)
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

    /// Throws when `count` more bytes, making the entry `entryBytes` long, would pass `maxEntryBytes` or
    /// `maxTotalBytes`.
    private func checkSizeLimits(adding count: Int64, entryBytes: Int64, name: String) throws(ArchiveError) {
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
/// What libarchive reads through callbacks (`openArchive(through:)`).
private class CallbackInput {
    /// The verb of a failed read's message: "cannot map the archive", "cannot read the archive".
    var role = "read"
    /// The errno of the read or map that failed, if one did.
    var failure: Int32?

    /// Points `buffer` at the next bytes; 0 at the end, -1 on failure (errno set).
    func read(_ buffer: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int { 0 }
}

private final class MappedInput: CallbackInput {
    private let descriptor: Int32
    private let size: Int64
    private var position: Int64 = 0
    private var window: (base: UnsafeMutableRawPointer, start: Int64, length: Int)?
    /// Mapped pages count in the process's RSS: small windows keep it low, and 128 mmap calls for 256 MB
    /// cost nothing measurable.
    private static let windowBytes: Int64 = 2 << 20
    private static let pageMask = Int64(sysconf(Int32(_SC_PAGESIZE)) - 1)

    /// Told of every window handed out.
    private let progress: ReadProgress?

    init(descriptor: Int32, size: Int64, progress: ReadProgress?) {
        self.descriptor = descriptor
        self.size = size
        self.progress = progress
        super.init()
        role = "map"
    }

    deinit { unmap() }

    private func unmap() {
        if let window { munmap(window.base, window.length) }
        window = nil
    }

    /// Maps the next window and points `buffer` at the current position; 0 at the end, -1 on failure.
    /// The input behind libarchive's callback data.
    static func from(_ context: UnsafeMutableRawPointer?) -> MappedInput? {
        context.flatMap { Unmanaged<CallbackInput>.fromOpaque($0).takeUnretainedValue() as? MappedInput }
    }

    override func read(_ buffer: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        progress?.tick()
        guard position < size else {
            unmap()
            return 0
        }
        // A position inside the current window (libarchive seeks from entry to entry of a zip) is served from
        // it: mapping and populating a new window per entry was 7% of a small delta's CPU.
        if let window, position >= window.start, position < window.start + Int64(window.length) {
            let skip = Int(position - window.start)
            buffer.pointee = UnsafeRawPointer(window.base + skip)
            position = window.start + Int64(window.length)
            return window.length - skip
        }
        unmap()
        let start = position & ~Self.pageMask
        let length = Int(min(Self.windowBytes, size - start))
        // MAP_POPULATE: one call maps every page of the window rather than one fault per few pages.
        guard let base = mmap(nil, length, PROT_READ, MAP_SHARED | MAP_POPULATE, descriptor, off_t(start)),
            base != MAP_FAILED
        else { return -1 }
        window = (base, start, length)
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

/// Serves a descriptor that cannot be mapped (a pipe, a device) to libarchive: first the head that was read
/// to choose filter and format, then the rest, `blockSize` bytes at a time.
private final class StreamInput: CallbackInput {
    private let descriptor: Int32
    private let block: UnsafeMutableRawBufferPointer
    /// The head, handed out once before anything else is read.
    private var head: UnsafeMutableRawBufferPointer?
    private var headCount = 0

    /// Told of every block that arrives.
    private let progress: ReadProgress?

    init(descriptor: Int32, blockSize: Int, progress: ReadProgress?) {
        self.descriptor = descriptor
        self.progress = progress
        block = UnsafeMutableRawBufferPointer.allocate(byteCount: max(blockSize, FormatSniffer.prefixLength), alignment: 16)
    }

    deinit {
        block.deallocate()
        head?.deallocate()
    }

    /// Reads up to `count` bytes (fewer only at the end of the input) and keeps them for `read`.
    func readHead(_ count: Int, name: String) throws(ArchiveError) -> [UInt8] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        head = buffer
        while headCount < count {
            let got = Glibc.read(descriptor, buffer.baseAddress.map { $0 + headCount }, count - headCount)
            if got < 0 && errno == EINTR { continue }
            if got < 0 {
                let number = errno
                throw ArchiveError(.io, "cannot read \(name): \(String(cString: strerror(number)))", errno: number)
            }
            if got == 0 { break }
            headCount += got
            progress?.tick()
        }
        return Array(UnsafeRawBufferPointer(rebasing: buffer[0..<headCount]))
    }

    override func read(_ buffer: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        if let head {
            self.head = nil
            if headCount > 0 {
                // Copied into the block, so the head's memory can go now.
                block.copyMemory(from: UnsafeRawBufferPointer(rebasing: head[0..<headCount]))
                head.deallocate()
                buffer.pointee = UnsafeRawPointer(block.baseAddress)
                return headCount
            }
            head.deallocate()
        }
        while true {
            let got = Glibc.read(descriptor, block.baseAddress, block.count)
            if got < 0 && errno == EINTR { continue }
            progress?.tick()
            buffer.pointee = UnsafeRawPointer(block.baseAddress)
            return got
        }
    }
}
