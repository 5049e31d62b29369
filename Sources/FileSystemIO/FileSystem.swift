#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Thin, errno-checked POSIX file system calls. POSIX rather than FileManager: `lstat` semantics, raw names
/// (which may not be UTF-8) and no per-call allocation in the hot paths.
public enum FileSystem {
    /// What `lstat` says about a path (never follows a symlink).
    public struct Status: Sendable, Equatable {
        public var kind: EntryKind
        public var size: Int64
        public var permissions: UInt32
        public var device: UInt64
        public var inode: UInt64
        public var linkCount: UInt64
        /// Last modification, in nanoseconds since 1970 (`st_mtim`; not changed by a rename).
        public var modified: Int64 = 0

        /// The file itself, whatever name reaches it.
        public var identity: FileIdentity { FileIdentity(device: device, inode: inode, modified: modified) }
    }

    /// This process's ID.
    public static var processID: Int32 { getpid() }

    /// Whether a process with this ID exists (`kill(pid, 0)`), so a folder named after it may be in use.
    public static func processExists(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }

    /// `lstat(path)`; nil when the path does not exist.
    public static func status(_ path: String) throws(HCPackError) -> Status? {
        try status(pathBytes: Array(path.utf8))
    }

    /// `lstat` on a raw path, for names that are not valid UTF-8.
    public static func status(pathBytes: [UInt8]) throws(HCPackError) -> Status? {
        var info = stat()
        let result = (pathBytes + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { lstat($0.baseAddress!, &info) }
        }
        guard result == 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw HCPackError.system("lstat", path: String(decoding: pathBytes, as: UTF8.self), errno: code)
        }
        return Status(
            kind: EntryKind(mode: UInt32(info.st_mode)), size: Int64(info.st_size),
            permissions: UInt32(info.st_mode) & 0o7777, device: UInt64(info.st_dev), inode: UInt64(info.st_ino),
            linkCount: UInt64(info.st_nlink), modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }

    /// One name in a folder, as raw bytes (names need not be UTF-8).
    public struct DirectoryItem: Sendable {
        public var nameBytes: [UInt8]
        /// The name as UTF-8, or a lossy decoding when `isUTF8` is false.
        public var name: String
        public var isUTF8: Bool
    }

    /// The names in a folder (not `.` or `..`), sorted by bytes so results never depend on listing order.
    public static func listDirectory(_ path: String) throws(HCPackError) -> [DirectoryItem] {
        guard let directory = opendir(path) else { throw HCPackError.system("opendir", path: path, errno: errno) }
        defer { closedir(directory) }
        return try readItems(directory, path: path)
    }

    /// Reads an open directory stream to its end (names sorted by bytes); `path` is for messages.
    static func readItems(_ directory: OpaquePointer, path: String) throws(HCPackError) -> [DirectoryItem] {
        var items: [DirectoryItem] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw HCPackError.system("readdir", path: path, errno: errno) }
                break
            }
            let nameBytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix(while: { $0 != 0 }))
            }
            if nameBytes == [0x2e] || nameBytes == [0x2e, 0x2e] { continue }
            let strict = String(validating: nameBytes, as: UTF8.self)
            items.append(
                DirectoryItem(
                    nameBytes: nameBytes, name: strict ?? String(decoding: nameBytes, as: UTF8.self),
                    isUTF8: strict != nil))
        }
        items.sort { $0.nameBytes.lexicographicallyPrecedes($1.nameBytes) }
        return items
    }

    /// The target of a symlink.
    public static func readLink(_ path: String) throws(HCPackError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count >= 0 else { throw HCPackError.system("readlink", path: path, errno: errno) }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Reads a whole file, refusing one larger than `limit` bytes.
    public static func readFile(_ path: String, limit: Int) throws(HCPackError) -> [UInt8] {
        let file = try OpenFile(reading: path)
        var result: [UInt8] = []
        // Sized once: grown by doubling, an 8 MB plist took 16 MB.
        result.reserveCapacity(Int(clamping: min(max(try file.stamp().size, 0), Int64(limit))))
        try file.readChunks(chunkSize: 64 << 10) { (chunk: UnsafeRawBufferPointer) throws(HCPackError) in
            guard result.count + chunk.count <= limit else {
                throw HCPackError(.invalidRequest, "\(path): larger than \(limit) bytes", path: path)
            }
            result.append(contentsOf: chunk)
        }
        return result
    }

    /// Whether the path exists (without following a final symlink).
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}

/// What identifies one version of a file's contents without reading them: any write changes the
/// change time, which not even the file's owner can set back.
public struct FileStamp: Sendable, Equatable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var modificationNanoseconds: Int64
    public var changeNanoseconds: Int64

    /// `fstat` of an open file: a write to it in place changes the stamp (its modification and change times).
    public init(of descriptor: Int32, path: String) throws(HCPackError) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw HCPackError.system("fstat", path: path, errno: errno) }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modificationNanoseconds = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        changeNanoseconds = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
    }
}

/// A file descriptor opened for reading, closed on deinit.
public final class OpenFile {
    public let descriptor: Int32
    public let path: String

    /// Opens `path` read-only, refusing to follow a final symlink (`O_NOFOLLOW`) and refusing a fifo, socket or
    /// device: opened without `O_NONBLOCK`, a fifo blocks until a writer comes, which may be never.
    public init(reading path: String) throws(HCPackError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { throw HCPackError.system("open", path: path, errno: errno) }
        self.descriptor = descriptor
        self.path = path
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw HCPackError.system("fstat", path: path, errno: errno) }
        let kind = EntryKind(mode: UInt32(info.st_mode))
        // A folder fails its first read (EISDIR) and callers say so in their own words.
        guard kind == .file || kind == .directory else {
            throw HCPackError(.invalidRequest, "\(path) is a \(kind.noun), not a regular file; pass a file", path: path)
        }
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
            throw HCPackError.system("fcntl", path: path, errno: errno)
        }
    }

    deinit { close(descriptor) }

    /// `fstat` of the open file, as a stamp.
    public func stamp() throws(HCPackError) -> FileStamp { try FileStamp(of: descriptor, path: path) }

    /// Reads the file to its end in chunks, handing each to `body`.
    public func readChunks(
        chunkSize: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) throws(HCPackError) -> Void
    ) throws(HCPackError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(descriptor, buffer.baseAddress, chunkSize)
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("read", path: path, errno: errno)
            }
            if count == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }
}

/// One file on one file system: two names with the same identity are one file. Device and inode, and the
/// modification time: an inode number is reused once its file is gone, and a file written in its place
/// later was modified later.
public struct FileIdentity: Sendable, Equatable, Hashable {
    /// `st_dev`.
    public var device: UInt64
    /// `st_ino`.
    public var inode: UInt64
    /// `st_mtim`, in nanoseconds.
    public var modified: Int64

    /// The identity with these numbers.
    public init(device: UInt64, inode: UInt64, modified: Int64) {
        self.device = device
        self.inode = inode
        self.modified = modified
    }
}
