#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file kept across runs and grown in place (a partial download): opened or created without following a
/// symlink, written at offsets, cut back with `ftruncate`.
public final class UpdatableFile {
    private var descriptor: Int32
    /// The file's path, for messages.
    public let path: String

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { if descriptor >= 0 { Descriptor.release(descriptor) } }

    /// The current size (`fstat`).
    public func size() throws(HCPackError) -> Int64 { try Descriptor.size(descriptor, path: path) }

    /// Cuts the file to `length` bytes (`ftruncate`).
    public func truncate(to length: Int64) throws(HCPackError) {
        while ftruncate(descriptor, off_t(length)) != 0 {
            if errno == EINTR { continue }
            throw HCPackError.system("truncate", path: path, errno: errno)
        }
    }

    /// Writes all of `bytes` at `offset` (`pwrite`, retrying short writes).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(HCPackError) {
        var done = 0
        while done < bytes.count {
            let count = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset + Int64(done)))
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("write", path: path, errno: errno)
            }
            done += count
        }
    }

    /// Reads up to `buffer.count` bytes at `offset` (`pread`); 0 at the end.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(HCPackError) -> Int {
        while true {
            let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if count >= 0 { return count }
            if errno == EINTR { continue }
            throw HCPackError.system("read", path: path, errno: errno)
        }
    }

    /// Starts writing the file back to disk as it grows, on a thread of its own, without making it durable
    /// (`ProgressiveSync` with `durable: false`); `finish()` the result when done writing.
    public func startWriteBehind() -> ProgressiveSync { ProgressiveSync(descriptor, path: path, durable: false) }

    /// Flushes the file's data to disk (`fsync`).
    public func synchronize() throws(HCPackError) { try Descriptor.synchronize(descriptor, path: path) }

    /// Closes the file.
    public func close() {
        if descriptor >= 0 { Descriptor.release(descriptor) }
        descriptor = -1
    }
}

extension DirectoryHandle {
    /// Opens `name` for reading and writing, creating it (mode 0644) when absent; never follows a symlink
    /// (`openat(O_RDWR|O_CREAT|O_NOFOLLOW)`), and refuses anything but a regular file with one name: writing
    /// through a hard link would change the file's other name too. Checked on the open descriptor, so a link
    /// made between a caller's check and the open is caught.
    public func openForUpdate(_ name: String) throws(HCPackError) -> UpdatableFile {
        let file = openat(descriptor, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o644)
        guard file >= 0 else { throw HCPackError.system("open", path: describe(name), errno: errno) }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            Descriptor.release(file)
            throw HCPackError(.io, "\(describe(name)) is not a regular file; remove it", path: describe(name))
        }
        guard info.st_nlink <= 1 else {
            Descriptor.release(file)
            throw HCPackError(.io, "\(describe(name)) has another name (a hard link); remove it", path: describe(name))
        }
        return UpdatableFile(descriptor: file, path: describe(name))
    }
}

extension FileSystem {
    /// Bytes an unprivileged process may still write on the file system holding `path` (`statvfs`: `f_bavail`
    /// blocks of `f_frsize`).
    public static func availableBytes(_ path: String) throws(HCPackError) -> Int64 {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { throw HCPackError.system("statvfs", path: path, errno: errno) }
        let blocks = Int64(clamping: UInt64(info.f_bavail))
        let size = Int64(clamping: UInt64(info.f_frsize))
        return blocks.multipliedReportingOverflow(by: size).overflow ? Int64.max : blocks * size
    }
}
