import Digest
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An open folder: every operation is relative to its descriptor (`openat`, `mkdirat`, `renameat`, ...)
/// and never follows a symlink, so nothing it does can land outside the folder it was opened on.
public final class DirectoryHandle {
    /// The descriptor, closed in `deinit`.
    public let descriptor: Int32
    /// The folder's path, for messages only (operations never use it).
    public let path: String

    /// Takes ownership of an open folder descriptor.
    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// Opens a folder by path, refusing a symlink as its last component (`open(O_DIRECTORY|O_NOFOLLOW)`).
    public static func open(_ path: String) throws(HCPackError) -> DirectoryHandle {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw HCPackError.system("open", path: path, errno: errno) }
        return DirectoryHandle(descriptor: descriptor, path: path)
    }

    /// The path of `name` inside this folder, for messages.
    public func describe(_ name: String) -> String { path + "/" + name }

    /// Opens the folder `name` inside this one (`openat(O_DIRECTORY|O_NOFOLLOW)`); nil when it does not exist.
    /// - Throws: when `name` is not a folder (a file or symlink: `ENOTDIR`/`ELOOP`) or cannot be opened.
    public func openDirectory(_ name: String) throws(HCPackError) -> DirectoryHandle? {
        let child = openat(descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard child >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            if code == ENOTDIR || code == ELOOP {
                throw HCPackError(
                    .io, "\(describe(name)) is not a folder (a file or symlink is in the way); move it away and run again",
                    path: describe(name))
            }
            throw HCPackError.system("open", path: describe(name), errno: code)
        }
        return DirectoryHandle(descriptor: child, path: describe(name))
    }

    /// Opens the folder `name`, creating it first when absent (`mkdirat` then `openat`).
    /// - Returns: the folder, and whether this call created it.
    @discardableResult
    public func makeDirectory(_ name: String, mode: mode_t = 0o755) throws(HCPackError) -> (DirectoryHandle, created: Bool) {
        var created = false
        if mkdirat(descriptor, name, mode) == 0 {
            created = true
        } else if errno != EEXIST {
            throw HCPackError.system("mkdir", path: describe(name), errno: errno)
        }
        guard let child = try openDirectory(name) else {
            throw HCPackError(.io, "\(describe(name)) vanished right after it was created", path: describe(name))
        }
        return (child, created)
    }

    /// Opens (creating as needed) the folder at a '/'-separated relative path, one component at a time.
    public func makeDirectories(_ relative: [Substring]) throws(HCPackError) -> DirectoryHandle {
        var current = self
        for component in relative { current = try current.makeDirectory(String(component)).0 }
        return current
    }

    /// Opens the folder at a relative path without creating anything; nil when a component is missing.
    public func openDirectories(_ relative: [Substring]) throws(HCPackError) -> DirectoryHandle? {
        var current = self
        for component in relative {
            guard let next = try current.openDirectory(String(component)) else { return nil }
            current = next
        }
        return current
    }

    /// `fstatat(AT_SYMLINK_NOFOLLOW)`; nil when `name` does not exist.
    public func status(_ name: String) throws(HCPackError) -> FileSystem.Status? {
        var info = stat()
        guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw HCPackError.system("lstat", path: describe(name), errno: code)
        }
        return FileSystem.Status(info)
    }

    /// Creates `name` for writing; fails if anything already has that name (`O_CREAT|O_EXCL|O_NOFOLLOW`).
    public func createFile(_ name: String, mode: mode_t = 0o644) throws(HCPackError) -> WritableFile {
        let file = openat(descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard file >= 0 else { throw HCPackError.system("create", path: describe(name), errno: errno) }
        return WritableFile(descriptor: file, path: describe(name))
    }

    /// Replaces `name` with `bytes` atomically: a temporary file written and fsync'd, then renamed over it,
    /// then the folder fsync'd so the rename itself survives a crash.
    public func writeAtomically(_ name: String, _ bytes: [UInt8]) throws(HCPackError) {
        try writeAtomically(name) { file throws(HCPackError) in try file.write(bytes) }
    }

    /// `writeAtomically`, with the content written by `produce` (in pieces, so it is never whole in memory).
    public func writeAtomically(_ name: String, producing produce: (WritableFile) throws(HCPackError) -> Void) throws(HCPackError) {
        let temporary = try writeTemporary(name, producing: produce)
        do throws(HCPackError) {
            try rename(temporary, to: self, name)
        } catch {
            unlinkat(descriptor, temporary, 0)
            throw error
        }
        try synchronize()
    }

    /// The first half of `writeAtomically`: writes and fsyncs `name.tmp` (replacing a leftover one) and returns
    /// its name; renaming it over `name`, then syncing this folder, completes the write.
    public func writeTemporary(_ name: String, _ bytes: [UInt8]) throws(HCPackError) -> String {
        try writeTemporary(name) { file throws(HCPackError) in try file.write(bytes) }
    }

    /// `writeTemporary`, with the content written by `produce`.
    public func writeTemporary(_ name: String, producing produce: (WritableFile) throws(HCPackError) -> Void) throws(HCPackError) -> String {
        let temporary = name + ".tmp"
        if unlinkat(descriptor, temporary, 0) != 0 && errno != ENOENT {
            throw HCPackError.system("unlink", path: describe(temporary), errno: errno)
        }
        do throws(HCPackError) {
            let file = try createFile(temporary)
            try produce(file)
            try file.finish()
        } catch {
            unlinkat(descriptor, temporary, 0)  // a half-written temporary is of no use to anyone
            throw error
        }
        return temporary
    }

    /// `renameat2(RENAME_NOREPLACE)`: moves `name` to `targetName` in `target` unless that name is taken.
    /// - Returns: false when it is taken, or when the system cannot promise not to replace (no `renameat2`,
    ///   or a file system without `RENAME_NOREPLACE`): the caller then moves things its other way.
    public func renameWithoutReplacing(_ name: String, to target: DirectoryHandle, _ targetName: String) throws(HCPackError) -> Bool {
        guard let renameat2 = Self.renameat2 else { return false }
        if renameat2(descriptor, name, target.descriptor, targetName, 1 /* RENAME_NOREPLACE */) == 0 { return true }
        let code = errno
        if code == EEXIST || code == EINVAL || code == ENOSYS || code == ENOTEMPTY { return false }
        throw HCPackError.system("rename", path: describe(name), errno: code)
    }

    private typealias RenameFunction = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    private static let renameat2 = gnuFunction("renameat2", as: RenameFunction.self)

    /// `linkat`: a second name for the file `name`, in `target` (same file system; never follows a symlink).
    public func link(_ name: String, to target: DirectoryHandle, _ targetName: String) throws(HCPackError) {
        guard linkat(descriptor, name, target.descriptor, targetName, 0) == 0 else {
            throw HCPackError.system("link", path: describe(name), errno: errno)
        }
    }

    /// Opens a regular file for reading without following a symlink; nil when it does not exist.
    public func openForReading(_ name: String) throws(HCPackError) -> Int32? {
        let file = openat(descriptor, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else {
            if errno == ENOENT { return nil }
            throw HCPackError.system("open", path: describe(name), errno: errno)
        }
        return file
    }

    /// Reads a whole regular file of at most `limit` bytes; nil when it does not exist.
    public func readFile(_ name: String, limit: Int) throws(HCPackError) -> [UInt8]? {
        guard let file = try openForReading(name) else { return nil }
        defer { close(file) }
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("read", path: describe(name), errno: errno)
            }
            if count == 0 { return result }
            guard result.count + count <= limit else {
                throw HCPackError(
                    .io, "\(describe(name)) is larger than \(limit) bytes; it is not a file hcpack wrote, remove it",
                    path: describe(name))
            }
            result += buffer[..<count]
        }
    }

    /// The size and SHA-256 of a regular file, read without following symlinks; nil when it does not exist.
    public func digest(_ name: String) throws(HCPackError) -> FileRecord? {
        guard let file = try openForReading(name) else { return nil }
        defer { close(file) }
        let hasher = Digest.Hasher(.sha256)
        var total: Int64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(file, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("read", path: describe(name), errno: errno)
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            total += Int64(count)
        }
        return FileRecord(size: total, sha256: hasher.finalize().hexString)
    }

    /// `renameat` from this folder to another on the same file system (replaces a file at the target).
    public func rename(_ name: String, to target: DirectoryHandle, _ targetName: String) throws(HCPackError) {
        guard renameat(descriptor, name, target.descriptor, targetName) == 0 else {
            throw HCPackError.system("rename", path: target.describe(targetName), errno: errno)
        }
    }

    /// Removes a file (`unlinkat`); true when it existed.
    @discardableResult
    public func removeFile(_ name: String) throws(HCPackError) -> Bool {
        if unlinkat(descriptor, name, 0) == 0 { return true }
        if errno == ENOENT { return false }
        throw HCPackError.system("unlink", path: describe(name), errno: errno)
    }

    /// Removes an empty folder; false when it is missing or not empty.
    @discardableResult
    public func removeEmptyDirectory(_ name: String) -> Bool {
        unlinkat(descriptor, name, AT_REMOVEDIR) == 0
    }

    /// Removes `name` and everything under it, never following a symlink (each is unlinked as a file).
    public func removeTree(_ name: String) throws(HCPackError) {
        guard let status = try status(name) else { return }
        if status.kind == .directory {
            guard let child = try openDirectory(name) else { return }
            for item in try child.list() { try child.removeTree(item) }
            guard unlinkat(descriptor, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
                throw HCPackError.system("rmdir", path: describe(name), errno: errno)
            }
        } else {
            try removeFile(name)
        }
    }

    /// The names in this folder (not `.` or `..`), sorted.
    public func list() throws(HCPackError) -> [String] {
        let copy = dup(descriptor)
        guard copy >= 0 else { throw HCPackError.system("dup", path: path, errno: errno) }
        guard let stream = fdopendir(copy) else {
            let code = errno
            close(copy)
            throw HCPackError.system("opendir", path: path, errno: code)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        return try FileSystem.readItems(stream, path: path).map(\.name)
    }

    /// `fsync` on the folder, so renames and removals in it are durable.
    public func synchronize() throws(HCPackError) {
        guard fsync(descriptor) == 0 else { throw HCPackError.system("fsync", path: path, errno: errno) }
    }
}

/// A file being written; `finish()` sets its mode, fsyncs and closes it.
public final class WritableFile {
    private var descriptor: Int32
    /// The file's path, for messages.
    public let path: String

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Writes all of `bytes`, retrying short writes.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("write", path: path, errno: errno)
            }
            offset += count
        }
    }

    /// Writes all of `bytes`.
    public func write(_ bytes: [UInt8]) throws(HCPackError) {
        var failure: HCPackError?
        bytes.withUnsafeBytes { raw in
            do throws(HCPackError) { try write(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Sets the mode exactly (whatever the umask), flushes the data to disk (unless `synchronize` is false:
    /// the caller then syncs the whole file system once) and closes the file.
    public func finish(mode: mode_t = 0o644, synchronize: Bool = true) throws(HCPackError) {
        guard fchmod(descriptor, mode) == 0 else { throw HCPackError.system("chmod", path: path, errno: errno) }
        if synchronize {
            guard fsync(descriptor) == 0 else { throw HCPackError.system("fsync", path: path, errno: errno) }
        }
        let result = close(descriptor)
        descriptor = -1
        guard result == 0 else { throw HCPackError.system("close", path: path, errno: errno) }
    }
}

/// A C library function that Glibc's Swift module does not export (GNU extensions such as `syncfs`,
/// `sync_file_range`, `renameat2`), looked up with `dlsym`; nil where the C library lacks it.
private func gnuFunction<Function>(_ name: String, as type: Function.Type) -> Function? {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
    return unsafeBitCast(symbol, to: Function.self)
}

/// `syncfs(2)` and `sync_file_range(2)`, looked up once with `gnuFunction`.
enum FileSystemSync {
    private typealias Function = @convention(c) (Int32) -> Int32
    private static let function = gnuFunction("syncfs", as: Function.self)

    private typealias RangeFunction = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
    private static let syncFileRange = gnuFunction("sync_file_range", as: RangeFunction.self)

    /// How much written data to let pile up before starting its writeback.
    static let writebackChunk: Int64 = 8 << 20

    /// Starts writing a range of a file to disk without waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`),
    /// so that the final fsync of a large output finds most of it already on disk. Advisory: errors are
    /// left for fsync to report.
    static func startWriteback(_ descriptor: Int32, from offset: Int64, length: Int64) {
        _ = syncFileRange?(descriptor, offset, length, 2 /* SYNC_FILE_RANGE_WRITE */)
    }

    /// True when `syncfs` exists; otherwise callers fsync file by file.
    static var isAvailable: Bool { function != nil }

    /// Flushes every file of the file system holding `directory` to disk.
    static func synchronize(_ directory: DirectoryHandle) throws(HCPackError) {
        guard let function else { return }
        guard function(directory.descriptor) == 0 else { throw HCPackError.system("syncfs", path: directory.path, errno: errno) }
    }

    /// `syncfs` on its own thread. With `whileWriting`, it runs again and again until `finish()` (so the disk
    /// works while files are still being written, instead of all at once at the end), then once more;
    /// `wait()` returns after that last one and throws the first failure.
    final class Background: @unchecked Sendable {
        // @unchecked: the state is behind the mutex; the semaphores hand over the rest.
        private let done = DispatchSemaphore(value: 0)
        private let wake = DispatchSemaphore(value: 0)
        private let state = Mutex<(finishing: Bool, failure: Int32)>((false, 0))
        private let path: String
        private var waited = false

        /// Starts syncing the file system of `directory` (through a duplicate descriptor the thread owns).
        init(_ directory: DirectoryHandle, whileWriting: Bool) {
            path = directory.path
            let descriptor = dup(directory.descriptor)
            guard descriptor >= 0, let function = FileSystemSync.function else {
                let failure = descriptor >= 0 ? 0 : errno
                state.withLock { $0.failure = failure }
                if descriptor >= 0 { close(descriptor) }
                done.signal()
                return
            }
            if !whileWriting { state.withLock { $0.finishing = true } }
            let thread = Thread { [self] in
                while !state.withLock({ $0.finishing }) {
                    sync(function, descriptor)
                    _ = wake.wait(timeout: .now() + .milliseconds(20))
                }
                sync(function, descriptor)
                close(descriptor)
                done.signal()
            }
            thread.name = "hcpack-syncfs"
            thread.start()
        }

        private func sync(_ function: Function, _ descriptor: Int32) {
            if function(descriptor) != 0 {
                let code = errno
                state.withLock { if $0.failure == 0 { $0.failure = code } }
            }
        }

        deinit {
            if !waited {
                finish()
                done.wait()
            }
        }

        /// Everything is written: one last syncfs, then `wait()` returns.
        func finish() {
            state.withLock { $0.finishing = true }
            wake.signal()
        }

        func wait() throws(HCPackError) {
            finish()
            if !waited {
                done.wait()
                waited = true
            }
            let failure = state.withLock { $0.failure }
            if failure != 0 { throw HCPackError.system("syncfs", path: path, errno: failure) }
        }
    }
}

extension FileSystem.Status {
    /// From a `stat` structure.
    init(_ info: stat) {
        self.init(
            kind: EntryKind(mode: UInt32(info.st_mode)), size: Int64(info.st_size),
            permissions: UInt32(info.st_mode) & 0o7777, device: UInt64(info.st_dev), inode: UInt64(info.st_ino),
            linkCount: UInt64(info.st_nlink))
    }
}
