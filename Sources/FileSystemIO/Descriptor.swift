#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One Swift call per system call on an open file descriptor, for code that holds descriptors itself (archive
/// sinks, pipelines, locks). Failures are `HCPackError`s that name `path` and keep the `errno`.
public enum Descriptor {
    /// Writes all of `bytes`, retrying short and interrupted writes (`write`).
    public static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(HCPackError) {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let count = write(descriptor, base + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("write", path: path, errno: errno)
            }
            offset += count
        }
    }

    /// Copies up to `count` bytes from `offset` in `source` to `destination` at its file offset, inside the
    /// kernel (`copy_file_range`: no copy through user memory; shared blocks where the file system can). The
    /// count copied, 0 when `source` ends; nil when the kernel cannot copy between these two files (different
    /// file systems, no such call), for the caller to read and write instead. Failures name `path`.
    public static func copyRange(
        from source: Int32, at offset: Int64, to destination: Int32, count: Int, path: String
    ) throws(HCPackError) -> Int? {
        guard let copyFileRange else { return nil }
        var from = offset
        while true {
            let copied = copyFileRange(source, &from, destination, nil, count, 0)
            if copied >= 0 { return copied }
            switch errno {
            case EINTR: continue
            case EXDEV, EINVAL, ENOSYS, EOPNOTSUPP: return nil
            default: throw HCPackError.system("write", path: path, errno: errno)
            }
        }
    }

    private typealias CopyFileRange = @convention(c) (
        Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32
    ) -> Int
    private static let copyFileRange = gnuFunction("copy_file_range", as: CopyFileRange.self)

    /// Reads up to `buffer.count` bytes, retrying when interrupted (`read`); 0 at the end of the file.
    public static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) throws(HCPackError)
        -> Int
    {
        while true {
            let count = CLibrary.read(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno != EINTR { throw HCPackError.system("read", path: path, errno: errno) }
        }
    }

    /// Reads up to `buffer.count` bytes into an array, as `read(_:into:path:)`.
    public static func read(_ descriptor: Int32, into buffer: inout [UInt8], path: String) throws(HCPackError) -> Int {
        var result: Result<Int, HCPackError> = .success(0)
        buffer.withUnsafeMutableBytes { raw in
            result = Result { () throws(HCPackError) in try read(descriptor, into: raw, path: path) }
        }
        return try result.get()
    }

    /// Flushes the file's data and metadata to stable storage (`fsync`; on macOS `fcntl(F_FULLFSYNC)`, since
    /// its `fsync` leaves the data in the drive's cache). `EINVAL` (a file or folder that cannot be synced,
    /// on some file systems) is accepted when `tolerateUnsupported` is set.
    public static func synchronize(_ descriptor: Int32, path: String, tolerateUnsupported: Bool = false) throws(HCPackError) {
        #if canImport(Darwin)
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
        #endif
        guard fsync(descriptor) == 0 || (tolerateUnsupported && errno == EINVAL) else {
            throw HCPackError.system("fsync", path: path, errno: errno)
        }
    }

    /// Closes the descriptor (`close`); a failure (a deferred write error on some file systems) is thrown.
    public static func close(_ descriptor: Int32, path: String) throws(HCPackError) {
        guard CLibrary.close(descriptor) == 0 else { throw HCPackError.system("close", path: path, errno: errno) }
    }

    /// Closes the descriptor on a path that is already failing or done with it; errors are of no use there.
    public static func release(_ descriptor: Int32) {
        _ = CLibrary.close(descriptor)
    }

    /// A second descriptor for the same open file (`dup`), which its holder closes.
    public static func duplicate(_ descriptor: Int32, path: String) throws(HCPackError) -> Int32 {
        let copy = dup(descriptor)
        guard copy >= 0 else { throw HCPackError.system("dup", path: path, errno: errno) }
        return copy
    }

    /// Sets the permission bits exactly, whatever the umask (`fchmod`).
    public static func setMode(_ descriptor: Int32, _ mode: UInt32, path: String) throws(HCPackError) {
        guard fchmod(descriptor, mode_t(mode)) == 0 else { throw HCPackError.system("chmod", path: path, errno: errno) }
    }

    /// Sets access and modification times to `seconds` since the epoch (`futimens`).
    public static func setTimes(_ descriptor: Int32, seconds: Int64, path: String) throws(HCPackError) {
        let time = timespec(tv_sec: Int(seconds), tv_nsec: 0)
        var times = [time, time]
        guard futimens(descriptor, &times) == 0 else { throw HCPackError.system("set times of", path: path, errno: errno) }
    }

    /// The file's current size (`fstat`).
    public static func size(_ descriptor: Int32, path: String) throws(HCPackError) -> Int64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw HCPackError.system("fstat", path: path, errno: errno) }
        return Int64(info.st_size)
    }
}
