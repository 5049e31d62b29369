import ArchiveIO
import Digest


/// Where `Builder` writes a package: an archive or a folder. Entries arrive in archive order.
protocol PackageSink: AnyObject {
    func addFolder(_ path: String) throws(HCPackError)
    /// Starts a file of exactly `size` bytes; its data follows through `write`, then `endFile`.
    func addFile(_ path: String, size: Int64, compression: EntryCompression) throws(HCPackError)
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
/// The summary's SHA-256 of the archive is taken as it is written: by the output's thread as it writes the
/// bytes (off this thread, which runs libarchive and its deflate), or, for
/// an archive whose first file is a reservation (a plist awaiting its digests), by an `ArchiveFollower` that
/// writes the final first file over the reservation and reads the archive back behind the writer.
final class ArchiveSink: PackageSink {
    private let descriptor: Int32
    private var isOpen = true
    private var writer: ArchiveWriter?
    private let output: String
    private let modificationTime: Int64
    /// Writes (and hashes) the stream through a duplicate of `descriptor`, which it closes.
    private let stream: ArchiveOutput
    /// True when the output's thread hashes the stream as it writes it (off this thread, which runs
    /// libarchive's deflate); false when the first file is a reservation (the follower hashes the archive).
    private let hashesStream: Bool
    /// Hashes the archive when the first file is a reservation.
    private let follower: ArchiveFollower?
    /// The reserved first file, once its final bytes are known: name and CRC-32s, for its central record.
    private var firstFileRewrite: (name: [UInt8], reservedCRC: UInt32, finalCRC: UInt32)?
    private let reservedFirstFileName: String?
    private var centralRecordPatched = false
    /// Set when libarchive starts writing the central directory: no file data passes after that.
    private var finishing = false
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

    /// - Parameter reservedFirstFile: a zip's first file (stored) written as `reserved`, whose final bytes, the
    ///   same length, `final` gives (it may wait); the archive is hashed once they are written over it.
    init(
        descriptor: Int32, format: ArchiveWriteFormat, output: String, modificationTime: Int64,
        reservedFirstFile: (name: String, reserved: [UInt8], final: @Sendable () throws(HCPackError) -> FilledReservation)? = nil
    ) throws(HCPackError) {
        self.descriptor = descriptor
        hashesStream = reservedFirstFile == nil
        reservedFirstFileName = reservedFirstFile?.name
        follower = reservedFirstFile.map {
            ArchiveFollower(descriptor, path: output, name: $0.name, reserved: $0.reserved, finalFirstFile: $0.final)
        }
        self.output = output
        self.modificationTime = modificationTime
        stream = ArchiveOutput(
            descriptor: try Descriptor.duplicate(descriptor, path: output), path: output, hashing: reservedFirstFile == nil)
        diskSync = ProgressiveSync(descriptor, path: output)
        do {
            writer = try ArchiveWriter(format: format) { [unowned self] (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in
                try self.emit(bytes)
            }
        } catch {
            stream.abandon()
            throw Self.translate(error, output: output)
        }
    }

    /// Hands archive bytes to the output; fails libarchive once a write on its thread has failed.
    private func emit(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        do {
            try stream.check()
        } catch {
            writeFailure = error
            throw ArchiveError(.io, error.message)
        }
        // libarchive hands over each part of the central directory whole (no blocks, see ArchiveWriter), so
        // the reserved file's record, the first, starts a part: it gets its final CRC-32 before it is written.
        if finishing, !centralRecordPatched, let rewrite = firstFileRewrite,
            let patched = ZipEntryRewrite.patchedCentralRecord(
                bytes, name: rewrite.name, reservedCRC: rewrite.reservedCRC, finalCRC: rewrite.finalCRC)
        {
            centralRecordPatched = true
            patched.withUnsafeBytes { stream.write($0) }
        } else if let lendable, let base = bytes.baseAddress, let start = lendable.baseAddress,
            base >= start, base + bytes.count <= start + lendable.count
        {
            stream.write(lent: bytes)
        } else {
            stream.write(bytes)
        }
        bytesWritten += Int64(bytes.count)
    }

    deinit {
        follower?.stop()
        stream.abandon()
        if isOpen { Descriptor.release(descriptor) }
    }

    func addFolder(_ path: String) throws(HCPackError) {
        try archive { () throws(ArchiveError) in
            try writer?.begin(
                ArchiveWriteEntry(path: path, kind: .directory, permissions: 0o755, modificationTime: modificationTime))
        }
    }

    func addFile(_ path: String, size: Int64, compression: EntryCompression) throws(HCPackError) {
        try archive { () throws(ArchiveError) in
            try writer?.begin(
                ArchiveWriteEntry(
                    path: path, kind: .file, size: size, permissions: 0o644, modificationTime: modificationTime,
                    compression: compression))
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        lendable = bytes
        defer { lendable = nil }
        try archive { () throws(ArchiveError) in try writer?.write(bytes) }
    }

    func endFile() throws(HCPackError) {}

    func afterWritten(_ action: @escaping @Sendable () -> Void) {
        stream.afterWritten(action)
    }

    func finish() throws(HCPackError) {
        if let follower, let name = reservedFirstFileName {
            // The central directory, written next, needs the first file's final CRC-32.
            guard let checksums = follower.firstFileChecksums() else {
                _ = try follower.finish(length: bytesWritten)
                throw HCPackError(
                    .io, "\(output): the reserved first file got no final bytes; report this as a bug", path: output)
            }
            firstFileRewrite = (Array(name.utf8), checksums.reserved, checksums.final)
        }
        finishing = true
        try archive { () throws(ArchiveError) in try writer?.finish() }
        writer = nil
        // The output's close also sets the mode: owner-readable mkstemp mode becomes an ordinary file's,
        // whatever the umask. Its digest, when it hashes, is the archive's.
        let streamDigest = try stream.finish()
        try diskSync?.finish()
        diskSync = nil
        if hashesStream {
            digest = streamDigest
        } else if let follower, let rewrite = firstFileRewrite {
            let followed = try follower.finish(length: bytesWritten)
            if centralRecordPatched {
                digest = followed
            } else {
                // Not handed over as expected: patch the written record, and hash the archive once more.
                try ZipEntryRewrite.replaceCentralCRC(
                    in: descriptor, path: output, name: String(decoding: rewrite.name, as: UTF8.self),
                    reservedCRC: rewrite.reservedCRC, finalCRC: rewrite.finalCRC)
                let hasher = Digest.Hasher(.sha256)
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
                defer { buffer.deallocate() }
                try hasher.update(
                    contentsOf: PositionedFile(descriptor: descriptor, path: output), range: 0..<bytesWritten, buffer: buffer)
                digest = hasher.finalize()
            }
        }
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

    func addFile(_ path: String, size: Int64, compression: EntryCompression) throws(HCPackError) {
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
