import ArchiveIO
import Digest


/// Where `Builder` writes a package: an archive or a folder. Entries arrive in archive order.
protocol PackageSink: AnyObject {
    func addFolder(_ path: String) throws(HCPackError)
    /// Starts a file of exactly `size` bytes; its data follows through `write`, then `endFile`. `crc32`, the
    /// data's when known: a stored zip entry then needs no data descriptor (`ArchiveWriter.begin`).
    func addFile(_ path: String, size: Int64, compression: EntryCompression, crc32: UInt32?) throws(HCPackError)
    func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError)
    func endFile() throws(HCPackError)
    /// Runs `action` once the bytes given to `write` so far are out of their buffers (at once, or later on
    /// another thread): until then the caller keeps them as they are.
    func afterWritten(_ action: @escaping @Sendable () -> Void)
    /// Flushes everything to stable storage.
    func finish() throws(HCPackError)
}

extension PackageSink {
    /// Writes bytes held in an array.
    func write(_ bytes: [UInt8]) throws(HCPackError) {
        var failure: HCPackError?
        bytes.withUnsafeBytes { raw in
            do throws(HCPackError) { try write(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}

/// Writes a zip or tar.gz to a temporary file descriptor, which it owns and closes. The archive's bytes go
/// through an `ArchiveOutput`, whose thread writes them to the file while this thread runs libarchive (a
/// stored entry's data without a copy: libarchive hands it over in the caller's own buffer), and a
/// `ProgressiveSync` thread puts them on disk as they come.
///
/// The summary's SHA-256 of the archive is taken as it is written, by the output's hashing thread (off this
/// thread, which runs libarchive and its deflate).
///
/// An assembled zip (`assembling`) is written as a run of this thread's entries (`ZipRunWriter`) with entries
/// made on other cores (`PreparedEntries`) in between (`add`); the sink writes the central directory from all
/// runs' records. Same bytes as one writer's: see `ZipRunWriter`.
final class ArchiveSink: PackageSink {
    private let descriptor: Int32
    private var isOpen = true
    private var writer: ArchiveWriter?
    /// Assembling: this thread's run, where each entry's local header is and which run's record it has, the
    /// directory's expected size, and the other runs' records (`placeRuns`).
    private var run: ZipRunWriter?
    private var placements: [Placement] = []
    private var directorySize = 0
    private var otherRuns: [ZipCentralRecords] = []
    private var ownRunCount = 0

    private struct Placement {
        /// -1: this thread's run; else the worker's (`PreparedEntries.Entry.run`).
        var run: Int32
        var positionInRun: Int32
        var offset: Int64
    }
    private let output: String
    private let modificationTime: Int64
    /// Writes and hashes the stream through a duplicate of `descriptor`, which it closes.
    private let stream: ArchiveOutput
    /// The bytes `write` is handing libarchive: what libarchive passes on from within them is lent, not copied.
    private var lendable: UnsafeRawBufferPointer?
    /// The output's write failure, once seen: it names the output and keeps the errno (disk full...).
    private var writeFailure: HCPackError?
    /// Puts the archive on disk while it is written.
    private var diskSync: ProgressiveSync?
    /// Bytes of archive written so far.
    private(set) var bytesWritten: Int64 = 0
    /// The archive's SHA-256, once `finish` has run.
    private(set) var digest: [UInt8]?

    /// - Parameter assembling: a zip written entry by entry (format `.zip` only), which `add` can also take
    ///   entries made elsewhere; it must fit `ZipCentralDirectory.fits`. Its value: the central directory's
    ///   expected size.
    ///   - contentBytes: the files' bytes in all; up to `HashPipeline.inlineBytes`, the archive is written on the
    ///     caller's thread and made durable by the final fsync alone (`ArchiveOutput.init(inline:)`).
    init(
        descriptor: Int32, format: ArchiveWriteFormat, output: String, modificationTime: Int64, assembling: Int? = nil,
        contentBytes: Int64 = .max
    ) throws(HCPackError) {
        self.descriptor = descriptor
        self.output = output
        self.modificationTime = modificationTime
        let small = contentBytes <= HashPipeline.inlineBytes
        stream = ArchiveOutput(
            descriptor: try Descriptor.duplicate(descriptor, path: output), path: output, inline: small)
        diskSync = small ? nil : ProgressiveSync(descriptor, path: output)
        do {
            if let directorySize = assembling, format == .zip {
                self.directorySize = directorySize
                run = try ZipRunWriter()
                return
            }
            writer = try ArchiveWriter(format: format) { [unowned self] (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in
                try self.emit(bytes)
            }
        } catch {
            stream.abandon()
            throw Self.translate(error, output: output)
        }
    }

    /// A file's header as every build writes it.
    static func fileEntry(
        _ path: String, size: Int64, compression: EntryCompression, modificationTime: Int64, crc32: UInt32?
    ) -> ArchiveWriteEntry {
        ArchiveWriteEntry(
            path: path, kind: .file, size: size, permissions: 0o644, modificationTime: modificationTime,
            compression: compression, crc32: crc32)
    }

    /// Hands archive bytes to the output, lent when they lie in the bytes `write` was given; fails libarchive
    /// once a write on its thread has failed.
    private func emit(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        var isLent = false
        if let lendable, let base = bytes.baseAddress, let start = lendable.baseAddress {
            isLent = base >= start && base + bytes.count <= start + lendable.count
        }
        try emitChecked(bytes, lent: isLent)
    }

    /// Hands bytes of hcpack's own (an entry made elsewhere, the central directory) to the output, copied.
    private func emit(copying bytes: [UInt8]) throws(ArchiveError) {
        var failure: ArchiveError?
        bytes.withUnsafeBytes { raw in
            do throws(ArchiveError) { try emitChecked(raw, lent: false) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func emitChecked(_ bytes: UnsafeRawBufferPointer, lent: Bool) throws(ArchiveError) {
        do {
            try stream.check()
        } catch {
            writeFailure = error
            throw ArchiveError(.io, error.message)
        }
        if lent { stream.write(lent: bytes) } else { stream.write(bytes) }
        bytesWritten += Int64(bytes.count)
    }

    deinit {
        stream.abandon()
        if isOpen { Descriptor.release(descriptor) }
    }

    func addFolder(_ path: String) throws(HCPackError) {
        try begin(ArchiveWriteEntry(path: path, kind: .directory, permissions: 0o755, modificationTime: modificationTime))
        try endFile()
    }

    func addFile(_ path: String, size: Int64, compression: EntryCompression, crc32: UInt32?) throws(HCPackError) {
        try begin(Self.fileEntry(path, size: size, compression: compression, modificationTime: modificationTime, crc32: crc32))
    }

    private func begin(_ entry: ArchiveWriteEntry) throws(HCPackError) {
        try archive { () throws(ArchiveError) in
            guard let run else {
                try writer?.begin(entry)
                return
            }
            placements.append(Placement(run: -1, positionInRun: Int32(ownRunCount), offset: bytesWritten))
            ownRunCount += 1
            try run.begin(entry) { [unowned self] (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in try self.emit(bytes) }
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        lendable = bytes
        defer { lendable = nil }
        try archive { () throws(ArchiveError) in
            if let run { try run.write(bytes) } else { try writer?.write(bytes) }
        }
    }

    func endFile() throws(HCPackError) {
        try archive { () throws(ArchiveError) in try run?.end() }
    }

    /// Adds an entry made elsewhere (assembling only).
    func add(_ entry: PreparedEntries.Entry) throws(HCPackError) {
        placements.append(Placement(run: Int32(entry.run), positionInRun: Int32(entry.positionInRun), offset: bytesWritten))
        try archive { () throws(ArchiveError) in try emit(copying: entry.local) }
    }

    /// The central records of the runs whose entries `add` took (`PreparedEntries.centralRecords()`), by run.
    func placeRuns(_ records: [ZipCentralRecords]) {
        otherRuns = records
    }

    /// Every entry's central record, placed, then the end record; the runs' records are let go as it goes.
    private func centralDirectory(ownRun: ZipCentralRecords) throws(ArchiveError) -> [UInt8] {
        var directory = ZipCentralDirectory(reservingCapacity: directorySize)
        for placement in placements {
            let position = Int(placement.positionInRun)
            if placement.run < 0 {
                try directory.append(ownRun, position, localHeaderOffset: placement.offset)
            } else {
                let run = Int(placement.run)
                guard run < otherRuns.count, position < otherRuns[run].count else {
                    throw ArchiveError(.usage, "an assembled entry's central record is missing")
                }
                try directory.append(otherRuns[run], position, localHeaderOffset: placement.offset)
            }
        }
        placements = []
        otherRuns = []
        return try directory.finish(at: bytesWritten)
    }

    func afterWritten(_ action: @escaping @Sendable () -> Void) {
        stream.afterWritten(action)
    }

    func finish() throws(HCPackError) {
        try archive { () throws(ArchiveError) in
            try writer?.finish()
            if let run {
                try emit(copying: try centralDirectory(ownRun: try run.finish()))
            }
        }
        writer = nil
        // The output's close also sets the mode: owner-readable mkstemp mode becomes an ordinary file's,
        // whatever the umask.
        digest = try stream.finish()
        try diskSync?.finish()
        diskSync = nil
        try Descriptor.synchronize(descriptor, path: output)
        isOpen = false
        try Descriptor.close(descriptor, path: output)
    }

    private func archive(_ body: () throws(ArchiveError) -> Void) throws(HCPackError) {
        do {
            try body()
        } catch {
            throw writeFailure ?? Self.translate(error, output: output)
        }
    }

    /// An archive failure in terms of the output: disk full, permission, or the library's message.
    static func translate(_ error: ArchiveError, output: String) -> HCPackError {
        if let code = error.errno { return HCPackError.system("write", path: output, errno: code) }
        return HCPackError(.io, "\(output): \(error.message)", path: output)
    }
}

/// Writes a package folder: folders 0755, files 0644, every timestamp the build's, each file fsync'd.
final class FolderSink: PackageSink {
    private let root: String
    private let output: String
    private let modificationTime: Int64
    private var folders: [String] = []
    private var current: WritableFile?

    init(root: String, output: String, modificationTime: Int64) {
        self.root = root
        self.output = output
        self.modificationTime = modificationTime
    }

    func addFolder(_ path: String) throws(HCPackError) {
        let full = root + "/" + path
        try FileSystem.makeDirectory(full, mode: 0o755, exactMode: true)  // despite the umask
        folders.append(full)
    }

    func addFile(_ path: String, size: Int64, compression: EntryCompression, crc32: UInt32?) throws(HCPackError) {
        let full = root + "/" + path
        let file = try FileSystem.createFile(full)
        current = file
        try Descriptor.setMode(file.fileDescriptor, 0o644, path: full)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        try current?.write(bytes)
    }

    func afterWritten(_ action: @escaping @Sendable () -> Void) { action() }

    func endFile() throws(HCPackError) {
        guard let file = current else { return }
        current = nil
        try Descriptor.setTimes(file.fileDescriptor, seconds: modificationTime, path: file.path)
        try file.finish(mode: nil)
    }

    func finish() throws(HCPackError) {
        // Deepest first: stamping a folder after its contents keeps the stamp.
        for folder in ([root] + folders).reversed() {
            try FileSystem.withDirectoryDescriptor(folder) { (descriptor) throws(HCPackError) in
                try Descriptor.setTimes(descriptor, seconds: modificationTime, path: folder)
                try Descriptor.synchronize(descriptor, path: folder)
            }
        }
    }
}
