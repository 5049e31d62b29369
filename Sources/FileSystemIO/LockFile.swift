#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An exclusive `flock` on a file in a folder, created when absent. The kernel drops it when the process dies
/// (even by SIGKILL), so a crash never leaves it held.
public final class LockFile {
    private var descriptor: Int32
    private let folder: DirectoryHandle
    private let name: String
    /// True when taking the lock created the file.
    public let createdFile: Bool

    /// What `acquire` found.
    public enum Outcome {
        case acquired(LockFile)
        /// Another process holds it (only when not waiting).
        case busy
        /// The file was removed or replaced while waiting for it: a lock on an unlinked inode protects nothing,
        /// so the caller starts over.
        case replaced
    }

    /// Takes the lock on `folder/name`, creating the file when absent.
    /// - Parameter wait: block until the holder releases it, instead of returning `.busy`.
    public static func acquire(_ name: String, in folder: DirectoryHandle, wait: Bool) throws(HCPackError) -> Outcome {
        var created = true
        var descriptor = openat(folder.descriptor, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if descriptor < 0 && errno == EEXIST {
            created = false
            descriptor = openat(folder.descriptor, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        }
        guard descriptor >= 0 else { throw HCPackError.system("open", path: folder.describe(name), errno: errno) }
        // Without waiting, a busy lock is tried again for a moment before giving up: a process forked by the
        // last holder (a library user spawning a tool) keeps its descriptor, and so the lock, until it execs.
        var busyRetries = wait ? 0 : busyGraceSteps
        while flock(descriptor, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EWOULDBLOCK && busyRetries > 0 {
                busyRetries -= 1
                usleep(busyGraceStepMicroseconds)
                continue
            }
            close(descriptor)
            if code == EWOULDBLOCK { return .busy }
            throw HCPackError.system("flock", path: folder.describe(name), errno: code)
        }
        var held = stat()
        var current = stat()
        guard fstat(descriptor, &held) == 0, fstatat(folder.descriptor, name, &current, AT_SYMLINK_NOFOLLOW) == 0,
            held.st_ino == current.st_ino, held.st_dev == current.st_dev
        else {
            close(descriptor)
            return .replaced
        }
        return .acquired(LockFile(descriptor: descriptor, folder: folder, name: name, createdFile: created))
    }

    /// How long a busy lock is tried again before `.busy`: 20 x 50 ms, one second at most.
    static let busyGraceSteps = 20
    static let busyGraceStepMicroseconds: useconds_t = 50_000

    private init(descriptor: Int32, folder: DirectoryHandle, name: String, createdFile: Bool) {
        self.descriptor = descriptor
        self.folder = folder
        self.name = name
        self.createdFile = createdFile
    }

    deinit { release() }

    /// Removes the lock file (while still holding the lock), then releases it.
    public func removeFileAndRelease() {
        if descriptor >= 0 { unlinkat(folder.descriptor, name, 0) }
        release()
    }

    /// Releases the lock (closing the descriptor drops the `flock`).
    public func release() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
    }
}
