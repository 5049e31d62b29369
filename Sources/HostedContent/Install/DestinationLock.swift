#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An exclusive `flock` on `DEST/.hcpack/lock`, so two installs into one folder never interleave.
///
/// The kernel drops the lock when the process dies (even by SIGKILL), so a crash never leaves DEST locked.
/// A failed install that created the lock file removes it again (DEST is left as it was); a waiting
/// install then notices that the file it locked is no longer the one at the path and starts over.
public final class DestinationLock {
    /// The lock file's name inside `DEST/.hcpack/`.
    public static let fileName = "lock"

    private var descriptor: Int32
    /// True when this install created the lock file.
    public let createdFile: Bool
    private let folder: DirectoryHandle

    /// Takes the lock on `folder/lock`, creating the file when absent.
    /// - Parameter wait: block until the other install finishes, instead of failing at once.
    /// - Returns: nil when the lock file was removed or replaced while waiting (the caller starts over).
    /// - Throws: `HCPackError` `.locked` when another install holds it and `wait` is false.
    static func acquire(in folder: DirectoryHandle, destination: String, wait: Bool) throws(HCPackError) -> DestinationLock? {
        var created = true
        var descriptor = openat(folder.descriptor, fileName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if descriptor < 0 && errno == EEXIST {
            created = false
            descriptor = openat(folder.descriptor, fileName, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        }
        guard descriptor >= 0 else { throw HCPackError.system("open", path: folder.describe(fileName), errno: errno) }
        while flock(descriptor, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            close(descriptor)
            if code == EWOULDBLOCK {
                throw HCPackError(
                    .locked, "another hcpack install is running in \(destination); wait for it to finish, or pass --wait",
                    path: destination)
            }
            throw HCPackError.system("flock", path: folder.describe(fileName), errno: code)
        }
        // The holder we waited for may have removed the file: a lock on an unlinked inode protects nothing.
        var held = stat()
        var current = stat()
        guard fstat(descriptor, &held) == 0, fstatat(folder.descriptor, fileName, &current, AT_SYMLINK_NOFOLLOW) == 0,
            held.st_ino == current.st_ino, held.st_dev == current.st_dev
        else {
            close(descriptor)
            return nil
        }
        return DestinationLock(descriptor: descriptor, createdFile: created, folder: folder)
    }

    private init(descriptor: Int32, createdFile: Bool, folder: DirectoryHandle) {
        self.descriptor = descriptor
        self.createdFile = createdFile
        self.folder = folder
    }

    deinit { release() }

    /// Removes the lock file (while still holding the lock), then releases it.
    func removeFileAndRelease() {
        if descriptor >= 0 { unlinkat(folder.descriptor, Self.fileName, 0) }
        release()
    }

    /// Releases the lock (closing the descriptor drops the `flock`).
    func release() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
    }
}
