import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A whole regular file mapped into memory (`mmap`, `MAP_SHARED`): read without copying it, or written in
/// place after its blocks are reserved (`posix_fallocate`, so a full disk is an error here, never a `SIGBUS`
/// while writing through the mapping). Unmapped in `deinit`.
///
/// Mapped pages count in the process's resident set: `release(below:)` drops those of a range from this
/// process (`madvise(MADV_DONTNEED)`; the file's pages stay in the page cache, written ones included, and are
/// mapped again on the next access), so a pass over a large file keeps a bounded part of it resident.
public final class MappedFile {
    /// The file's path, for errors.
    public let path: String
    /// Bytes mapped: the file's size.
    public let count: Int
    private let base: UnsafeMutableRawPointer?

    /// Maps the regular file open on `descriptor` for reading, as large as it is now (`fstat`, `mmap`).
    /// The descriptor may be closed afterwards.
    public init(reading descriptor: Int32, path: String) throws(HCPackError) {
        self.path = path
        let size = try Descriptor.size(descriptor, path: path)
        guard size >= 0, size <= Int64(Int.max) else { throw HCPackError(.io, "\(path): size \(size) cannot be mapped", path: path) }
        count = Int(size)
        base = try Self.map(descriptor, count: count, writable: false, path: path)
    }

    /// Sets the file open (read-write) on `descriptor` to `count` bytes, reserves its blocks, writes zeros
    /// over it and maps it for writing (`ftruncate`, `posix_fallocate`, `pwrite`, `mmap`).
    public init(writing descriptor: Int32, count: Int, path: String) throws(HCPackError) {
        self.path = path
        self.count = count
        if ftruncate(descriptor, off_t(count)) != 0 { throw HCPackError.system("ftruncate", path: path, errno: errno) }
        if count > 0 {
            let code = posix_fallocate(descriptor, 0, off_t(count))
            // EOPNOTSUPP: a file system without reservations (glibc emulates it on most); writing still works.
            if code != 0 && code != EOPNOTSUPP && code != EINVAL { throw HCPackError.system("fallocate", path: path, errno: code) }
            try Self.writeZeros(descriptor, count: count, path: path)
        }
        base = try Self.map(descriptor, count: count, writable: true, path: path)
    }

    /// Fills the page cache through `pwrite` before the mapping is written: a write fault on a reserved,
    /// never-written range reads it as zero-filled large folios, which cost 0.7 to 0.9 s of system time for
    /// 257 MiB on ext4 (Linux 6.18), against 0.24 s with the zeros written first (bench/README.md).
    private static func writeZeros(_ descriptor: Int32, count: Int, path: String) throws(HCPackError) {
        let chunk = min(count, 1 << 20)
        let zeros = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 4096)
        defer { zeros.deallocate() }
        zeros.initializeMemory(as: UInt8.self, repeating: 0, count: chunk)
        var offset = 0
        while offset < count {
            let written = pwrite(descriptor, zeros, min(chunk, count - offset), off_t(offset))
            if written <= 0 {
                if written < 0 && errno == EINTR { continue }
                throw HCPackError.system("write", path: path, errno: written < 0 ? errno : EIO)
            }
            offset += written
        }
    }

    private static func map(_ descriptor: Int32, count: Int, writable: Bool, path: String) throws(HCPackError)
        -> UnsafeMutableRawPointer?
    {
        guard count > 0 else { return nil }  // mmap refuses length 0: an empty file maps to nothing
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        guard let pointer = mmap(nil, count, protection, MAP_SHARED, descriptor, 0), pointer != MAP_FAILED else {
            throw HCPackError.system("mmap", path: path, errno: errno)
        }
        return pointer
    }

    deinit {
        if let base { munmap(base, count) }
    }

    /// The mapped bytes (empty for an empty file).
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: base == nil ? 0 : count) }

    /// The mapped bytes, writable (only for a mapping made with `init(writing:count:path:)`).
    public var mutableBytes: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base, count: base == nil ? 0 : count)
    }

    /// The smallest mapping `releasingWhile` drops pages of.
    public static let releasedFromBytes = 16 << 20

    /// Drops the pages of the first `offset` bytes (whole pages only) from this process (`madvise`).
    public func release(below offset: Int) {
        guard let base else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let length = min(offset, count) / page * page
        if length > 0 { _ = madvise(base, length, Int32(MADV_DONTNEED)) }
    }

    /// Runs `body` while a thread of its own drops this read-only mapping's pages every 5 ms, for a C call
    /// that reads all of a large mapping at once (zstd loading a prefix): the pages it needs come back from
    /// the page cache as it reads them, and the process keeps a bounded part of the file resident. A mapping
    /// under `releasedFromBytes` is left resident: starting and stopping the thread cost more than its pages
    /// (40 patches of 15 KiB JSON: a thread and two semaphore waits each).
    public func releasingWhile<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let base, count >= Self.releasedFromBytes else { return try body() }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let address = UInt(bitPattern: base)
        let length = count / page * page
        // Woken by the stop signal, not only by the timer: a caller with a small file (40 patches of 15 KiB
        // JSON) waited up to 20 ms a call for a sleep to end. Every 5 ms, not 20: zstd loads a
        // prefix at up to a GiB a second, and a fault can map a large folio at once.
        let stop = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        WorkerThread.start(name: "hcpack-release") {
            repeat {
                _ = madvise(UnsafeMutableRawPointer(bitPattern: address), length, Int32(MADV_DONTNEED))
            } while stop.wait(timeout: .now() + .milliseconds(5)) == .timedOut
            finished.signal()
        }
        defer {
            stop.signal()
            finished.wait()
        }
        return try body()
    }
}

extension DirectoryHandle {
    /// Creates `name` open for reading and writing, as a mapping for writing needs (`openat(O_RDWR|O_CREAT|
    /// O_EXCL|O_NOFOLLOW)`); the caller owns the descriptor. Fails if anything already has that name.
    public func createFileForMapping(_ name: String, mode: mode_t = 0o644) throws(HCPackError) -> Int32 {
        let file = openat(descriptor, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard file >= 0 else { throw HCPackError.system("create", path: describe(name), errno: errno) }
        return file
    }
}
