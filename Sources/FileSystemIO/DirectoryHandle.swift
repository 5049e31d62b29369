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
    public init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// Opens a folder by path, refusing a symlink as its last component (`open(O_DIRECTORY|O_NOFOLLOW)`).
    public static func open(_ path: String) throws(HCPackError) -> DirectoryHandle {
        let descriptor = CLibrary.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw HCPackError.system("open", path: path, errno: errno) }
        return DirectoryHandle(descriptor: descriptor, path: path)
    }

    /// The path of `name` inside this folder, for messages.
    public func describe(_ name: String) -> String { path + "/" + name }

    /// Refuses a name with a `..` component: `openat(fd, "..", O_NOFOLLOW)` is allowed (`..` is no symlink),
    /// so one would reach the parent. Whatever the caller checked, opening, renaming and removal stay inside.
    @inline(__always)
    func refuseParent(_ name: String) throws(HCPackError) {
        guard name.utf8.count >= 2, Self.hasParentComponent(name) else { return }
        throw HCPackError(
            .permissionDenied, "\(describe(name)): refusing a '..' component; hcpack never works outside the folder it opened",
            path: describe(name))
    }

    /// Whether a '/'-separated component of `name` is `..`.
    static func hasParentComponent(_ name: String) -> Bool {
        var length = 0
        var dots = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: "/") {
                if length == 2 && dots == 2 { return true }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        return length == 2 && dots == 2
    }

    /// Opens the folder `name` inside this one (`openat(O_DIRECTORY|O_NOFOLLOW)`); nil when it does not exist.
    /// - Throws: when `name` is not a folder (a file or symlink: `ENOTDIR`/`ELOOP`) or cannot be opened.
    public func openDirectory(_ name: String) throws(HCPackError) -> DirectoryHandle? {
        try refuseParent(name)
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
        try refuseParent(name)
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

    /// Creates the folder `name` (`mkdirat`); false when something already has that name.
    public func createDirectory(_ name: String, mode: mode_t) throws(HCPackError) -> Bool {
        try refuseParent(name)
        if mkdirat(descriptor, name, mode) == 0 { return true }
        if errno == EEXIST { return false }
        throw HCPackError.system("mkdir", path: describe(name), errno: errno)
    }

    /// Opens the folder `name`; nil when it is missing, or is not a folder (a file or a symlink).
    public func openDirectoryIfFolder(_ name: String) throws(HCPackError) -> DirectoryHandle? {
        try refuseParent(name)
        let child = openat(descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard child >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR || code == ELOOP { return nil }
            throw HCPackError.system("open", path: describe(name), errno: code)
        }
        return DirectoryHandle(descriptor: child, path: describe(name))
    }

    /// Sets the mode of `name` exactly, whatever the umask (`fchmodat`).
    public func setPermissions(_ name: String, _ mode: mode_t) throws(HCPackError) {
        guard fchmodat(descriptor, name, mode, 0) == 0 else {
            throw HCPackError.system("chmod", path: describe(name), errno: errno)
        }
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

    /// Creates `name` for writing and returns its descriptor, which the caller owns (`openat(O_CREAT|O_EXCL|
    /// O_NOFOLLOW)`); nil when the name is taken by anything (a file, a folder, a symlink).
    public func createFileDescriptor(_ name: String, mode: mode_t) throws(HCPackError) -> Int32? {
        let file = openat(descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard file >= 0 else {
            let code = errno
            if code == EEXIST || code == EISDIR || code == ELOOP { return nil }
            throw HCPackError.system("create", path: describe(name), errno: code)
        }
        return file
    }

    /// Replaces `name` with `bytes` atomically: a temporary file written and fsync'd, then renamed over it,
    /// then the folder fsync'd so the rename itself survives a crash.
    public func writeAtomically(_ name: String, _ bytes: [UInt8]) throws(HCPackError) {
        try writeAtomically(name) { file throws(HCPackError) in try file.write(bytes) }
    }

    /// `writeAtomically`, with the content written by `produce` (in pieces, so it is never whole in memory).
    public func writeAtomically(_ name: String, producing produce: (WritableFile) throws(HCPackError) -> Void) throws(HCPackError)
    {
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
    public func writeTemporary(_ name: String, producing produce: (WritableFile) throws(HCPackError) -> Void) throws(HCPackError)
        -> String
    {
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

    /// `renameat2(RENAME_NOREPLACE)` (macOS: `renameatx_np(RENAME_EXCL)`): moves `name` to `targetName` in
    /// `target` unless that name is taken.
    /// - Returns: false when it is taken, or when the system cannot promise not to replace (no such call,
    ///   or a file system without `RENAME_NOREPLACE`): the caller then moves things its other way.
    public func renameWithoutReplacing(_ name: String, to target: DirectoryHandle, _ targetName: String) throws(HCPackError)
        -> Bool
    {
        try refuseParent(name)
        try refuseParent(targetName)
        if FileSystemIO.renameWithoutReplacing(descriptor, name, target.descriptor, targetName) == 0 { return true }
        let code = errno
        if code == EEXIST || code == EINVAL || code == ENOSYS || code == ENOTEMPTY { return false }
        throw HCPackError.system("rename", path: describe(name), errno: code)
    }

    /// `linkat`: a second name for the file `name`, in `target` (same file system; never follows a symlink).
    public func link(_ name: String, to target: DirectoryHandle, _ targetName: String) throws(HCPackError) {
        try refuseParent(name)
        try refuseParent(targetName)
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

    /// Reads a regular file to its end without following symlinks, a `buffer` at a time; false when it does
    /// not exist.
    public func readChunks(
        _ name: String, buffer: UnsafeMutableRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(HCPackError) -> Bool {
        guard let file = try openForReading(name) else { return false }
        defer { close(file) }
        while true {
            let count = read(file, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw HCPackError.system("read", path: describe(name), errno: errno)
            }
            if count == 0 { return true }
            body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// `renameat` from this folder to another on the same file system (replaces a file at the target).
    public func rename(_ name: String, to target: DirectoryHandle, _ targetName: String) throws(HCPackError) {
        try refuseParent(name)
        try refuseParent(targetName)
        guard renameat(descriptor, name, target.descriptor, targetName) == 0 else {
            throw HCPackError.system("rename", path: target.describe(targetName), errno: errno)
        }
    }

    /// Removes a file (`unlinkat`); true when it existed.
    @discardableResult
    public func removeFile(_ name: String) throws(HCPackError) -> Bool {
        try refuseParent(name)
        if unlinkat(descriptor, name, 0) == 0 { return true }
        if errno == ENOENT { return false }
        throw HCPackError.system("unlink", path: describe(name), errno: errno)
    }

    /// Removes an empty folder; false when it is missing or not empty.
    @discardableResult
    public func removeEmptyDirectory(_ name: String) -> Bool {
        !Self.hasParentComponent(name) && unlinkat(descriptor, name, AT_REMOVEDIR) == 0
    }

    /// Removes the folder `name` if it is empty; false when it is not empty or missing.
    public func removeDirectoryIfEmpty(_ name: String) throws(HCPackError) -> Bool {
        try refuseParent(name)
        if unlinkat(descriptor, name, AT_REMOVEDIR) == 0 { return true }
        let code = errno
        if code == ENOTEMPTY || code == EEXIST || code == ENOENT { return false }
        throw HCPackError.system("rmdir", path: describe(name), errno: code)
    }

    /// Removes `name` and everything under it, never following a symlink (each is unlinked as a file).
    ///
    /// Bounded whatever the depth: at most `removalDepth` folders are open at once, and a folder deeper than
    /// that has its subfolders moved up to the top (renames within the tree being removed) and emptied on a
    /// later pass. A 30,000-deep tree planted by whoever can write there costs no descriptor, stack frame or
    /// message per level; a package's usual depth is removed without a single rename.
    public func removeTree(_ name: String) throws(HCPackError) {
        try refuseParent(name)
        guard let status = try status(name) else { return }
        guard status.kind == .directory, let top = try openDirectoryIfFolder(name) else {
            try removeFile(name)
            return
        }
        var moved = 0
        while true {
            let items = try top.list()
            if items.isEmpty { break }
            for item in items { try top.removeEntry(item, depth: 1, top: top, moved: &moved) }
        }
        guard unlinkat(descriptor, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
            throw HCPackError.system("rmdir", path: describe(name), errno: errno)
        }
    }

    /// Folders `removeTree` keeps open at most.
    static let removalDepth = 16

    /// Removes `name` (in this folder, `depth` levels below `top`) and what it holds, down to `removalDepth`;
    /// deeper folders go up to `top` as `.removing-N`, and the top's next pass removes them.
    private func removeEntry(_ name: String, depth: Int, top: DirectoryHandle, moved: inout Int) throws(HCPackError) {
        guard try status(name)?.kind == .directory else {
            try removeFile(name)
            return
        }
        if try removeDirectoryIfEmpty(name) { return }
        guard let child = try openDirectoryIfFolder(name) else { return }
        for inner in try child.list() {
            let isFolder = try child.status(inner)?.kind == .directory
            if depth < Self.removalDepth || !isFolder {
                try child.removeEntry(inner, depth: depth + 1, top: top, moved: &moved)
                continue
            }
            var fresh: String
            repeat {
                moved += 1
                fresh = ".removing-\(moved)"
            } while try top.status(fresh) != nil
            try child.rename(inner, to: top, fresh)
        }
        _ = try removeDirectoryIfEmpty(name)
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

    /// The open descriptor, for code that hands it to a library (libarchive writes through it); -1 once
    /// `finish` has closed it.
    public var fileDescriptor: Int32 { descriptor }

    /// Writes all of `bytes`, retrying short writes.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        try Descriptor.writeAll(descriptor, bytes, path: path)
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
    /// - Parameter mode: nil leaves the mode the file was created with.
    public func finish(mode: mode_t? = 0o644, synchronize: Bool = true) throws(HCPackError) {
        if let mode { try Descriptor.setMode(descriptor, UInt32(mode), path: path) }
        if synchronize { try Descriptor.synchronize(descriptor, path: path) }
        let result = close(descriptor)
        descriptor = -1
        guard result == 0 else { throw HCPackError.system("close", path: path, errno: errno) }
    }
}

extension FileSystem.Status {
    /// From a `stat` structure.
    init(_ info: stat) {
        self.init(
            kind: EntryKind(mode: UInt32(info.st_mode)), size: Int64(info.st_size),
            permissions: UInt32(info.st_mode) & 0o7777, device: UInt64(info.st_dev), inode: UInt64(info.st_ino),
            linkCount: UInt64(info.st_nlink), modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }
}
