import ArchiveIO
import Digest
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where `Builder` writes a package: an archive or a folder. Entries arrive in archive order.
protocol PackageSink: AnyObject {
    func addFolder(_ path: String) throws(HCPackError)
    /// Starts a file of exactly `size` bytes; its data follows through `write`, then `endFile`.
    func addFile(_ path: String, size: Int64, compression: EntryCompression) throws(HCPackError)
    func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError)
    func endFile() throws(HCPackError)
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
/// through a `HashPipeline`, whose worker thread writes them to the file while this thread reads sources,
/// runs libarchive and hashes the bytes for the summary's SHA-256 (no second read). Hashing here rather than
/// on the worker: with both there, the worker was busy all through writing and this thread two thirds idle.
///
/// A sink whose first file is rewritten at the end (`finish(rewritingFirstFile:)`) cannot hash the stream:
/// it reads the finished archive back instead, while the final `fsync` waits for the disk.
final class ArchiveSink: PackageSink {
    private let descriptor: Int32
    /// A duplicate of `descriptor` that the pipeline writes to and closes.
    private let pipelineDescriptor: Int32
    private var isOpen = true
    private var writer: ArchiveWriter?
    private let output: String
    private let modificationTime: Int64
    private let pipeline = HashPipeline()
    /// Hashes the stream as it is written; nil when the first file will be rewritten.
    private let hasher: Digest.Hasher?
    /// The pipeline's write failure, once seen: it names the output and keeps the errno (disk full...).
    private var writeFailure: HCPackError?
    /// Puts the archive on disk while it is written.
    private var diskSync: ProgressiveSync?
    /// Bytes of archive written so far.
    private(set) var bytesWritten: Int64 = 0
    /// The archive's SHA-256, once `finish` has run.
    private(set) var digest: [UInt8]?

    init(
        descriptor: Int32, format: ArchiveWriteFormat, output: String, modificationTime: Int64, hashingStream: Bool = true
    ) throws(HCPackError) {
        self.descriptor = descriptor
        hasher = hashingStream ? Digest.Hasher(.sha256) : nil
        self.output = output
        self.modificationTime = modificationTime
        pipelineDescriptor = dup(descriptor)
        guard pipelineDescriptor >= 0 else { throw HCPackError.system("dup", path: output, errno: errno) }
        pipeline.adopt(pipelineDescriptor, path: output, startsWriteback: false)
        diskSync = ProgressiveSync(descriptor, path: output)
        do {
            writer = try ArchiveWriter(format: format) { [unowned self] (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in
                try self.emit(bytes)
            }
        } catch {
            throw Self.translate(error, output: output)
        }
    }

    /// Hands archive bytes to the pipeline; fails libarchive once a write on the worker has failed.
    private func emit(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        do {
            try pipeline.check()
        } catch {
            writeFailure = error
            throw ArchiveError(.io, error.message)
        }
        hasher?.update(bytes)
        pipeline.update(bytes, writingTo: pipelineDescriptor, hashing: false)
        bytesWritten += Int64(bytes.count)
    }

    deinit { if isOpen { close(descriptor) } }

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
        try archive { () throws(ArchiveError) in try writer?.write(bytes) }
    }

    func endFile() throws(HCPackError) {}

    func finish() throws(HCPackError) {
        try finish(rewritingFirstFile: nil)
    }

    /// Ends the archive; with `rewrite`, first writes `final` over the first file's `reserved` data (see
    /// `ZipEntryRewrite`), then hashes the archive from disk while `fsync` runs.
    func finish(rewritingFirstFile rewrite: (name: String, reserved: [UInt8], final: [UInt8])?) throws(HCPackError) {
        try archive { () throws(ArchiveError) in try writer?.finish() }
        writer = nil
        // The worker's close also sets the mode: owner-readable mkstemp mode becomes an ordinary file's,
        // whatever the umask.
        pipeline.close(pipelineDescriptor, keep: true)
        try pipeline.finishWriting()
        try diskSync?.finish()
        diskSync = nil
        if let hasher {
            digest = hasher.finalize()
            guard fsync(descriptor) == 0 else { throw HCPackError.system("fsync", path: output, errno: errno) }
        } else {
            if let rewrite {
                try ZipEntryRewrite.replaceFirstEntry(
                    in: descriptor, path: output, name: rewrite.name, reserved: rewrite.reserved, final: rewrite.final)
            }
            digest = try hashWhileSyncing()
        }
        isOpen = false
        guard close(descriptor) == 0 else { throw HCPackError.system("close", path: output, errno: errno) }
    }

    /// The archive's SHA-256, read back from the page cache on this thread while another waits for `fsync`.
    private func hashWhileSyncing() throws(HCPackError) -> [UInt8] {
        let descriptor = descriptor
        let syncFailure = ErrnoBox()
        let synced = DispatchSemaphore(value: 0)
        let syncing = Thread {
            if fsync(descriptor) != 0 { syncFailure.code.withLock { $0 = errno } }
            synced.signal()
        }
        syncing.start()
        let hasher = Digest.Hasher(.sha256)
        var readFailure: Int32 = 0
        let chunkSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        var offset: off_t = 0
        while true {
            let count = pread(descriptor, buffer.baseAddress, chunkSize, offset)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { readFailure = errno }
            if count <= 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += off_t(count)
        }
        buffer.deallocate()
        synced.wait()
        let code = syncFailure.code.withLock { $0 }
        guard code == 0 else { throw HCPackError.system("fsync", path: output, errno: code) }
        guard readFailure == 0 else { throw HCPackError.system("read back", path: output, errno: readFailure) }
        return hasher.finalize()
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

/// An errno set on another thread.
private final class ErrnoBox: Sendable {
    let code = Mutex<Int32>(0)
}

/// Writes a package folder: folders 0755, files 0644, every timestamp the build's, each file fsync'd.
final class FolderSink: PackageSink {
    private let root: String
    private let output: String
    private let modificationTime: Int64
    private var folders: [String] = []
    private var current: (descriptor: Int32, path: String)?

    init(root: String, output: String, modificationTime: Int64) {
        self.root = root
        self.output = output
        self.modificationTime = modificationTime
    }

    deinit { if let current { close(current.descriptor) } }

    func addFolder(_ path: String) throws(HCPackError) {
        let full = root + "/" + path
        guard mkdir(full, 0o755) == 0 else { throw HCPackError.system("mkdir", path: full, errno: errno) }
        guard chmod(full, 0o755) == 0 else { throw HCPackError.system("chmod", path: full, errno: errno) }  // despite the umask
        folders.append(full)
    }

    func addFile(_ path: String, size: Int64, compression: EntryCompression) throws(HCPackError) {
        let full = root + "/" + path
        let descriptor = open(full, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard descriptor >= 0 else { throw HCPackError.system("create", path: full, errno: errno) }
        current = (descriptor, full)
        guard fchmod(descriptor, 0o644) == 0 else { throw HCPackError.system("chmod", path: full, errno: errno) }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        guard let (descriptor, path) = current, let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.write(descriptor, base + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("write", path: path, errno: errno)
            }
            offset += count
        }
    }

    func endFile() throws(HCPackError) {
        guard let (descriptor, path) = current else { return }
        current = nil
        defer { close(descriptor) }
        try stamp(descriptor: descriptor, path: path)
        guard fsync(descriptor) == 0 else { throw HCPackError.system("fsync", path: path, errno: errno) }
    }

    func finish() throws(HCPackError) {
        // Deepest first: stamping a folder after its contents keeps the stamp.
        for folder in ([root] + folders).reversed() {
            let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { throw HCPackError.system("open", path: folder, errno: errno) }
            defer { close(descriptor) }
            try stamp(descriptor: descriptor, path: folder)
            guard fsync(descriptor) == 0 else { throw HCPackError.system("fsync", path: folder, errno: errno) }
        }
    }

    /// Sets access and modification times to the build's timestamp.
    private func stamp(descriptor: Int32, path: String) throws(HCPackError) {
        let time = timespec(tv_sec: Int(modificationTime), tv_nsec: 0)
        var times = [time, time]
        guard futimens(descriptor, &times) == 0 else { throw HCPackError.system("set times of", path: path, errno: errno) }
    }
}
