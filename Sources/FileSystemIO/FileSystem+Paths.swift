#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Path-based calls for outputs that live beside their final name (build, init, Transporter): creating,
/// renaming into place, syncing the folder. Code inside a destination folder uses `DirectoryHandle` instead.
extension FileSystem {
    /// Creates `path` for writing; fails if anything has that name (`open(O_CREAT|O_EXCL|O_NOFOLLOW)`).
    public static func createFile(_ path: String, mode: UInt32 = 0o644) throws(HCPackError) -> WritableFile {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
        guard descriptor >= 0 else { throw HCPackError.system("create", path: path, errno: errno) }
        return WritableFile(descriptor: descriptor, path: path)
    }

    /// Creates a new file holding `bytes`, synced to disk; a failed write removes the partial file.
    /// - Parameter mode: exact permissions; nil keeps what `open` gave (0644 less the umask).
    public static func writeNewFile(_ path: String, _ bytes: [UInt8], mode: UInt32? = nil) throws(HCPackError) {
        let file = try createFile(path)
        do throws(HCPackError) {
            try file.write(bytes)
            try file.finish(mode: mode.map { mode_t($0) })
        } catch {
            removeFile(path)
            throw error
        }
    }

    /// Creates a folder (`mkdir`), then sets its mode exactly, whatever the umask.
    public static func makeDirectory(_ path: String, mode: UInt32 = 0o755, exactMode: Bool = false) throws(HCPackError) {
        guard mkdir(path, mode_t(mode)) == 0 else { throw HCPackError.system("mkdir", path: path, errno: errno) }
        if exactMode { try setPermissions(path, mode) }
    }

    /// Sets a path's permission bits (`chmod`).
    public static func setPermissions(_ path: String, _ mode: UInt32) throws(HCPackError) {
        guard chmod(path, mode_t(mode)) == 0 else { throw HCPackError.system("chmod", path: path, errno: errno) }
    }

    /// Renames `source` to `target`, replacing a file there (`rename`). Errors name `target`, or `naming`.
    public static func rename(
        _ source: String, to target: String, operation: String = "rename", naming: String? = nil
    ) throws(HCPackError) {
        guard CLibrary.rename(source, target) == 0 else {
            throw HCPackError.system(operation, path: naming ?? target, errno: errno)
        }
    }

    /// What `linkWithoutReplacing` did.
    public enum LinkOutcome: Sendable {
        case linked
        /// Something already has the target name.
        case targetExists
        /// The file system has no hard links (or refused this one): the caller renames instead.
        case unsupported
    }

    /// A second name for `source` at `target` (`link`), which, unlike `rename`, never replaces anything there.
    public static func linkWithoutReplacing(_ source: String, to target: String) -> LinkOutcome {
        if link(source, target) == 0 { return .linked }
        return errno == EEXIST ? .targetExists : .unsupported
    }

    /// Removes a file (`unlink`); true when it was there to remove.
    @discardableResult
    public static func removeFile(_ path: String) -> Bool {
        unlink(path) == 0
    }

    /// Creates a new, uniquely named file from `template` ("...XXXXXX", `mkstemp`), close-on-exec.
    /// - Returns: its descriptor (the caller closes it) and path. Errors name `output`, the file it stands in for.
    public static func makeTemporaryFile(template: String, for output: String) throws(HCPackError) -> (Int32, String) {
        var buffer = Array(template.utf8CString)
        let descriptor = buffer.withUnsafeMutableBufferPointer { pointer -> Int32 in
            guard let base = pointer.baseAddress else { return -1 }
            return mkstemp(base)
        }
        guard descriptor >= 0 else { throw HCPackError.system("create a temporary file beside", path: output, errno: errno) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return (descriptor, String(decoding: buffer.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Creates a new, uniquely named folder from `template` ("...XXXXXX", `mkdtemp`, mode 0700).
    public static func makeTemporaryDirectory(template: String, for output: String) throws(HCPackError) -> String {
        var buffer = Array(template.utf8CString)
        let created = buffer.withUnsafeMutableBufferPointer { pointer -> Bool in
            guard let base = pointer.baseAddress else { return false }
            return mkdtemp(base) != nil
        }
        guard created else { throw HCPackError.system("create a temporary folder beside", path: output, errno: errno) }
        return String(decoding: buffer.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Opens a folder by path for `body` (`open(O_DIRECTORY)`), closing it afterwards.
    public static func withDirectoryDescriptor<T>(
        _ path: String, _ body: (Int32) throws(HCPackError) -> T
    ) throws(HCPackError) -> T {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw HCPackError.system("open", path: path, errno: errno) }
        defer { _ = CLibrary.close(descriptor) }
        return try body(descriptor)
    }

    /// Syncs a folder, so that a rename or a new name in it survives a crash.
    public static func synchronizeFolder(_ path: String) throws(HCPackError) {
        try withDirectoryDescriptor(path) { (descriptor) throws(HCPackError) in
            try Descriptor.synchronize(descriptor, path: path, tolerateUnsupported: true)
        }
    }
}
