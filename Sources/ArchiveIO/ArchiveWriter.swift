internal import CArchive

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The archive formats hcpack writes.
public enum ArchiveWriteFormat: String, Sendable {
    /// Zip (`archive_write_set_format_zip`); zip64 extensions appear only when an entry needs them.
    case zip
    /// Restricted pax tar (`archive_write_set_format_pax_restricted`) compressed with gzip
    /// (`archive_write_add_filter_gzip`, without a timestamp in the gzip header).
    case tarGzip
}

/// How one zip entry's data is stored.
public enum EntryCompression: String, Sendable {
    /// Data as is (`archive_write_zip_set_compression_store`).
    case store
    /// Deflate (`archive_write_zip_set_compression_deflate`).
    case deflate
}

/// The header of an entry to write. Everything host-specific is fixed by the writer: uid/gid 0, no names.
public struct ArchiveWriteEntry: Sendable {
    /// The name, stored as UTF-8 (zip sets its UTF-8 flag for non-ASCII names; pax adds a `path` record).
    public var path: String
    /// `.file` or `.directory`.
    public var kind: ArchiveEntryKind
    /// Exact number of bytes that `write` will supply (files only).
    public var size: Int64
    /// Mode bits; only `0o7777` is kept.
    public var permissions: UInt32
    /// Seconds since 1970; the nanosecond part is always 0.
    public var modificationTime: Int64
    /// Zip only; tar.gz compresses the whole stream.
    public var compression: EntryCompression
    /// The data's CRC-32, known before the data: a stored zip entry then records it and its sizes in its local
    /// header, without a data descriptor (`ArchiveWriter.begin`). Nil: libarchive's descriptor is kept.
    public var crc32: UInt32?

    /// Describes one entry; `size` is required for files and must be 0 for directories.
    public init(
        path: String, kind: ArchiveEntryKind, size: Int64 = 0, permissions: UInt32, modificationTime: Int64,
        compression: EntryCompression = .deflate, crc32: UInt32? = nil
    ) {
        self.crc32 = crc32
        self.path = path
        self.kind = kind
        self.size = size
        self.permissions = permissions
        self.modificationTime = modificationTime
        self.compression = compression
    }
}

/// Writes a reproducible archive to an open file descriptor: the same calls give the same bytes.
///
/// Fixed by the writer: uid and gid 0, no user or group names, no atime/ctime/birthtime, mtime with
/// nanoseconds 0, no gzip timestamp, no padding after the last byte (`archive_write_set_bytes_in_last_block`
/// 1), names converted through a pinned UTF-8 locale rather than the host's.
///
/// Zip caveat: libarchive fills each entry's MS-DOS date and time with `localtime_r`, so zip bytes depend on
/// the process time zone (`TZ`). For identical zips across hosts, run with `TZ=UTC0` (set it in `main`
/// before any thread starts). The zip also carries an "UT" extra field (mtime, UTC) and a "ux" extra field
/// (uid 0, gid 0). Deflate output depends on the zlib version.
///
/// Not thread-safe: use one writer from one task at a time.
public final class ArchiveWriter {
    /// The `struct archive *`; nil once `finish()` has freed it.
    private var archive: OpaquePointer?
    private let format: ArchiveWriteFormat

    private enum State {
        case ready
        /// A file entry is open and expects `remaining` more bytes.
        case inFile(path: String, remaining: Int64)
        case finished
        case failed(ArchiveError)
    }
    private var state = State.ready

    /// Receives the archive's bytes as libarchive produces them; a thrown error fails the write.
    public typealias Output = (UnsafeRawBufferPointer) throws(ArchiveError) -> Void

    /// Keeps the output closure alive for libarchive's callbacks and remembers the first error it threw.
    private final class OutputBox {
        let output: Output
        var error: ArchiveError?
        /// Non-nil: libarchive's bytes are kept here instead of going to `output` (a header, a data
        /// descriptor or the central directory that the writer rewrites).
        var captured: [UInt8]?
        init(_ output: @escaping Output) { self.output = output }

        /// Sends bytes of the writer's own to the output, remembering its error as libarchive's callback does.
        func send(_ bytes: [UInt8]) throws(ArchiveError) {
            var failure: ArchiveError?
            bytes.withUnsafeBytes { raw in
                do throws(ArchiveError) { try output(raw) } catch { failure = error }
            }
            if let failure {
                if error == nil { error = failure }
                throw failure
            }
        }
    }
    private var outputBox: OutputBox?

    /// The stored zip entry being written without a data descriptor: its CRC-32 as given, and the length of
    /// the descriptor libarchive will write, which is dropped (`endEntry`).
    private var undescribed: (path: String, crc32: UInt32, descriptorLength: Int)?
    /// Positions, in entry order, of the entries written without a descriptor: their central records lose
    /// bit 3 too (`finish`).
    private var undescribedEntries: [Int] = []
    private var entryCount = 0

    /// Starts an archive whose bytes go to `output` (`archive_write_open2`): the caller can hash and write them
    /// in one pass instead of reading the file back.
    public convenience init(format: ArchiveWriteFormat, output: @escaping Output) throws(ArchiveError) {
        try self.init(format: format, opening: .callback(OutputBox(output)))
    }

    /// Starts an archive on `fileDescriptor` (`archive_write_open_fd`); the caller owns and closes the descriptor.
    public convenience init(fileDescriptor: Int32, format: ArchiveWriteFormat) throws(ArchiveError) {
        try self.init(format: format, opening: .descriptor(fileDescriptor))
    }

    private enum Destination {
        case descriptor(Int32)
        case callback(OutputBox)
    }

    private init(format: ArchiveWriteFormat, opening destination: Destination) throws(ArchiveError) {
        self.format = format
        guard let archive = archive_write_new() else {
            throw ArchiveError(.io, "archive_write_new failed (out of memory)", errno: ENOMEM)
        }
        self.archive = archive
        try withArchiveLocale { () throws(ArchiveError) in
            switch format {
            case .zip:
                try check(archive_write_set_format_zip(archive), archive, "selecting zip", as: .usage)
            case .tarGzip:
                try check(archive_write_set_format_pax_restricted(archive), archive, "selecting pax", as: .usage)
                try check(archive_write_add_filter_gzip(archive), archive, "adding gzip", as: .usage)
                // Without this the gzip header carries the current time.
                try check(
                    archive_write_set_filter_option(archive, "gzip", "timestamp", nil), archive,
                    "disabling the gzip timestamp", as: .usage)
            }
            // To a descriptor, whole MiB writes instead of libarchive's default 10240-byte blocks (26,000 write
            // calls for a 250 MiB archive). To a callback, no blocks: libarchive hands over its own buffers
            // rather than copying every byte into one first (a tenth of a stored build's main thread), and
            // the callback batches. The bytes written do not change.
            let blockSize: Int32 = if case .callback = destination { 0 } else { 1 << 20 }
            try check(
                archive_write_set_bytes_per_block(archive, blockSize), archive, "setting the block size", as: .usage)
            // No padding after the last byte.
            try check(archive_write_set_bytes_in_last_block(archive, 1), archive, "setting block padding", as: .usage)
            switch destination {
            case .descriptor(let fileDescriptor):
                try check(archive_write_open_fd(archive, fileDescriptor), archive, "opening the output", as: .io)
            case .callback(let box):
                outputBox = box
                let rc = archive_write_open2(
                    archive, Unmanaged.passUnretained(box).toOpaque(), nil,
                    { archive, context, buffer, length in
                        guard let context, let buffer else { return -1 }
                        let box = Unmanaged<OutputBox>.fromOpaque(context).takeUnretainedValue()
                        if box.captured != nil {
                            box.captured?.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: length))
                            return length
                        }
                        do throws(ArchiveError) {
                            try box.output(UnsafeRawBufferPointer(start: buffer, count: length))
                            return length
                        } catch {
                            if box.error == nil { box.error = error }
                            carchive_set_error(archive, error.errno ?? EIO, error.message)
                            return -1
                        }
                    }, nil, nil)
                try check(rc, archive, "opening the output", as: .io)
            }
        }
    }

    deinit {
        guard let archive else { return }
        // Not finished: mark the archive failed so that archive_write_free does not write a trailer that
        // would make a partial archive look complete.
        archive_write_fail(archive)
        archive_write_free(archive)
    }

    /// Writes an entry header (`archive_write_header`); a file's data follows through `write`.
    ///
    /// For zip, the entry's compression is chosen just before the header with
    /// `archive_write_zip_set_compression_store`/`_deflate` (the "compression" format option cannot be
    /// changed once the archive is open).
    ///
    /// A stored zip file given its `crc32`, written to an output callback, gets no data descriptor: libarchive
    /// sets general-purpose bit 3 on every file and writes the CRC-32 after the data, and Java's
    /// ZipInputStream (Android's usual reader) refuses bit 3 on a stored entry. Its local header gets the
    /// CRC-32, bit 3 cleared, and a padding extra field as long as the descriptor, which is dropped; so
    /// every offset libarchive counts stays true. `endEntry` checks the CRC-32 against libarchive's.
    /// - Throws: `.usage` for a kind other than `.file`/`.directory`, a bad path or size, or when the previous
    ///   file did not get all its bytes; `.io` when writing fails.
    public func begin(_ entry: ArchiveWriteEntry) throws(ArchiveError) {
        if undescribed != nil { try endEntry() }
        let archive = try usable()
        if case .inFile(let path, let remaining) = state, remaining > 0 {
            throw ArchiveError(.usage, "entry '\(path)' is missing \(remaining) bytes of its declared size")
        }
        guard entry.kind == .file || entry.kind == .directory else {
            throw ArchiveError(.usage, "cannot write '\(entry.path)': only files and directories are written")
        }
        guard !entry.path.isEmpty, !entry.path.utf8.contains(0) else {
            throw ArchiveError(.usage, "entry path must be non-empty and contain no NUL byte")
        }
        guard entry.size >= 0, entry.kind == .file || entry.size == 0 else {
            throw ArchiveError(.usage, "entry '\(entry.path)' has an invalid size \(entry.size)")
        }
        guard let header = archive_entry_new() else {
            throw ArchiveError(.io, "archive_entry_new failed (out of memory)", errno: ENOMEM)
        }
        defer { archive_entry_free(header) }
        try failing { () throws(ArchiveError) in
            try withArchiveLocale { () throws(ArchiveError) in
                archive_entry_set_pathname_utf8(header, entry.path)
                archive_entry_set_filetype(header, entry.kind == .directory ? 0o040000 : 0o100000)  // AE_IFDIR/REG
                archive_entry_set_perm(header, mode_t(entry.permissions & 0o7777))
                if entry.kind == .file { archive_entry_set_size(header, entry.size) }
                archive_entry_set_mtime(header, time_t(entry.modificationTime), 0)
                archive_entry_set_uid(header, 0)
                archive_entry_set_gid(header, 0)
                if format == .zip {
                    let rc =
                        entry.compression == .store
                        ? archive_write_zip_set_compression_store(archive)
                        : archive_write_zip_set_compression_deflate(archive)
                    try check(rc, archive, "choosing compression for '\(entry.path)'", as: .usage)
                }
                let box = outputBox
                let crc32 = format == .zip && entry.kind == .file && entry.compression == .store ? entry.crc32 : nil
                if crc32 != nil {
                    // The previous entry's descriptor goes out first, not into the captured header.
                    try check(archive_write_finish_entry(archive), archive, "finishing the entry before '\(entry.path)'", as: .io)
                    box?.captured = []
                }
                defer { box?.captured = nil }
                try check(archive_write_header(archive, header), archive, "writing header of '\(entry.path)'", as: .io)
                if let box, let crc32, let written = box.captured {
                    box.captured = nil
                    let (local, descriptorLength) = try Self.undescribedHeader(written, crc32: crc32, size: entry.size, path: entry.path)
                    try box.send(local)
                    undescribed = (entry.path, crc32, descriptorLength)
                    undescribedEntries.append(entryCount)
                }
            }
        }
        entryCount += 1
        state = entry.kind == .file ? .inFile(path: entry.path, remaining: entry.size) : .ready
    }

    static let localSignature: UInt32 = 0x0403_4b50
    static let descriptorSignature: UInt32 = 0x0807_4b50
    static let centralSignature: UInt32 = 0x0201_4b50
    /// The padding extra field's ID ("hc"): zeros where libarchive's data descriptor was.
    static let paddingID: UInt16 = 0x6368

    /// A stored entry's local header as libarchive wrote it (bit 3, CRC-32 0, its sizes), made into one without
    /// a data descriptor: the CRC-32 in place, bit 3 cleared, and a padding extra field as long as the
    /// descriptor libarchive will write (24 bytes for a zip64 entry, 16 otherwise).
    static func undescribedHeader(
        _ header: [UInt8], crc32: UInt32, size: Int64, path: String
    ) throws(ArchiveError) -> (bytes: [UInt8], descriptorLength: Int) {
        func unexpected(_ what: String) -> ArchiveError {
            ArchiveError(.io, "libarchive wrote the local header of '\(path)' \(what); this libarchive writes zips hcpack cannot rewrite")
        }
        guard header.count >= 30, header.uint32(0) == localSignature, header.uint16(8) == 0 else {
            throw unexpected("in a shape not known")
        }
        let flags = header.uint16(6)
        let extraLength = Int(header.uint16(28))
        guard flags & 0x0008 != 0, header.count == 30 + Int(header.uint16(26)) + extraLength else {
            throw unexpected("without a data descriptor, or with more than its name and extra fields")
        }
        let compressed = header.uint32(18)
        let uncompressed = header.uint32(22)
        let zip64 = compressed == 0xFFFF_FFFF && uncompressed == 0xFFFF_FFFF
        guard zip64 || (Int64(compressed) == size && Int64(uncompressed) == size) else {
            throw unexpected("with sizes other than the entry's")
        }
        let descriptorLength = zip64 ? 24 : 16
        guard extraLength + descriptorLength <= 0xFFFF else { throw unexpected("with a full extra area") }
        var bytes = header
        bytes.storeUInt16(flags & ~0x0008, at: 6)
        bytes.storeUInt32(crc32, at: 14)
        bytes.storeUInt16(UInt16(extraLength + descriptorLength), at: 28)
        bytes += [UInt8](repeating: 0, count: descriptorLength)
        bytes.storeUInt16(paddingID, at: header.count)
        bytes.storeUInt16(UInt16(descriptorLength - 4), at: header.count + 2)
        return (bytes, descriptorLength)
    }

    /// Clears bit 3 in the central records at `positions` (ascending) of libarchive's central directory.
    static func clearDescriptorFlags(_ trailer: inout [UInt8], at positions: [Int]) throws(ArchiveError) {
        var at = 0
        var position = 0
        for wanted in positions {
            while true {
                guard trailer.count - at >= 46, trailer.uint32(at) == centralSignature else {
                    throw ArchiveError(.io, "libarchive's central directory holds fewer records than entries; this libarchive writes zips hcpack cannot rewrite")
                }
                let length = 46 + Int(trailer.uint16(at + 28)) + Int(trailer.uint16(at + 30)) + Int(trailer.uint16(at + 32))
                defer {
                    at += length
                    position += 1
                }
                if position == wanted {
                    trailer.storeUInt16(trailer.uint16(at + 8) & ~0x0008, at: at + 8)
                    break
                }
            }
        }
    }

    /// Writes data for the current file entry (`archive_write_data`, repeated until every byte is taken).
    /// - Throws: `.usage` without a current file or past its declared size; `.io` (with `errno`, e.g.
    ///   `ENOSPC`) when the output fails. Buffered output may fail only in a later `write` or in `finish`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        let archive = try usable()
        guard case .inFile(let path, let remaining) = state else {
            throw ArchiveError(.usage, "write called without a current file entry")
        }
        guard Int64(bytes.count) <= remaining else {
            throw ArchiveError(.usage, "'\(path)' gets more bytes than its declared size")
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        try failing { () throws(ArchiveError) in
            var offset = 0
            while offset < bytes.count {
                let written = withArchiveLocale { archive_write_data(archive, base + offset, bytes.count - offset) }
                if written < 0 {
                    throw ArchiveError(libarchive: archive, code: .io, operation: "writing data of '\(path)'")
                }
                if written == 0 {
                    throw ArchiveError(.io, "writing data of '\(path)': libarchive accepted no bytes")
                }
                offset += written
            }
        }
        state = .inFile(path: path, remaining: remaining - Int64(bytes.count))
    }

    /// Ends the current entry (`archive_write_finish_entry`): a zip entry's data descriptor is written now
    /// rather than by the next `begin` or `finish`.
    /// - Throws: `.usage` when the file did not get all its bytes; `.io` when writing fails.
    /// For an entry written without a descriptor (see `begin`), the descriptor libarchive writes is dropped,
    /// and its CRC-32 must be the one given.
    /// - Throws: `.io` also when the data's CRC-32 is not the one given to `begin` (the source changed).
    public func endEntry() throws(ArchiveError) {
        guard let pending = undescribed, let box = outputBox else {
            try finishing("finishing an entry", archive_write_finish_entry)
            state = .ready
            return
        }
        undescribed = nil
        box.captured = []
        defer { box.captured = nil }
        try finishing("finishing an entry", archive_write_finish_entry)
        let descriptor = box.captured ?? []
        try failing { () throws(ArchiveError) in
            guard descriptor.count == pending.descriptorLength, descriptor.uint32(0) == Self.descriptorSignature else {
                throw ArchiveError(
                    .io, "libarchive ended '\(pending.path)' with \(descriptor.count) bytes, not the \(pending.descriptorLength)-byte data descriptor expected; this libarchive writes zips hcpack cannot rewrite")
            }
            let crc32 = descriptor.uint32(4)
            guard crc32 == pending.crc32 else {
                throw ArchiveError(
                    .io, "'\(pending.path)' was written with CRC-32 \(Self.hex(crc32)), not the \(Self.hex(pending.crc32)) it was read with: it changed while it was written")
            }
        }
        state = .ready
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// Finishes the archive (`archive_write_close`, then `archive_write_free`); nothing may be written afterwards.
    /// - Throws: `.usage` when the last file did not get all its bytes; `.io` when flushing fails.
    public func finish() throws(ArchiveError) {
        if undescribed != nil { try endEntry() }
        let box = undescribedEntries.isEmpty ? nil : outputBox
        if box != nil {
            // The last entry's descriptor goes out first, not into the captured directory.
            try finishing("finishing an entry", archive_write_finish_entry)
        }
        box?.captured = []
        defer { box?.captured = nil }
        let archive = try finishing("finishing the archive", archive_write_close)
        if let box, var trailer = box.captured {
            box.captured = nil
            try failing { () throws(ArchiveError) in
                try Self.clearDescriptorFlags(&trailer, at: undescribedEntries)
                try box.send(trailer)
            }
        }
        archive_write_free(archive)
        self.archive = nil
        state = .finished
    }

    /// Runs libarchive's `call` once the current file has all its declared bytes.
    @discardableResult
    private func finishing(_ operation: String, _ call: (OpaquePointer) -> Int32) throws(ArchiveError) -> OpaquePointer {
        let archive = try usable()
        if case .inFile(let path, let remaining) = state, remaining > 0 {
            throw ArchiveError(.usage, "entry '\(path)' is missing \(remaining) bytes of its declared size")
        }
        try failing { () throws(ArchiveError) in
            try withArchiveLocale { () throws(ArchiveError) in
                try check(call(archive), archive, operation, as: .io)
            }
        }
        return archive
    }

    private func usable() throws(ArchiveError) -> OpaquePointer {
        switch state {
        case .failed(let error): throw error
        case .finished: throw ArchiveError(.usage, "the archive is already finished")
        case .ready, .inFile: break
        }
        guard let archive else { throw ArchiveError(.usage, "the archive is already finished") }
        return archive
    }

    /// Runs `body`; a failure leaves the writer unusable (libarchive's state is then fatal anyway).
    private func failing(_ body: () throws(ArchiveError) -> Void) throws(ArchiveError) {
        do {
            try body()
        } catch {
            // The output's own error (with its errno) says more than libarchive's retelling of it.
            let reported = outputBox?.error ?? error
            state = .failed(reported)
            throw reported
        }
    }
}
