/// An exclusive lock on `DEST/.hcpack/lock`, so two installs into one folder never interleave.
///
/// A crash never leaves DEST locked (`LockFile`). A failed install that created the lock file removes it again
/// (DEST is left as it was); a waiting install then notices that the file it locked is no longer the one at
/// the path and starts over.
public final class DestinationLock {
    /// The lock file's name inside `DEST/.hcpack/`.
    public static let fileName = "lock"

    private let lock: LockFile
    /// True when this install created the lock file.
    public var createdFile: Bool { lock.createdFile }

    /// Takes the lock on `folder/lock`, creating the file when absent.
    /// - Parameter wait: block until the other install finishes, instead of failing at once.
    /// - Returns: nil when the lock file was removed or replaced while waiting (the caller starts over).
    /// - Throws: `HCPackError` `.locked` when another install holds it and `wait` is false.
    static func acquire(in folder: DirectoryHandle, destination: String, wait: Bool) throws(HCPackError) -> DestinationLock? {
        switch try LockFile.acquire(fileName, in: folder, wait: wait) {
        case .acquired(let lock): return DestinationLock(lock)
        case .replaced: return nil
        case .busy:
            throw HCPackError(
                .locked, "another hcpack install is running in \(destination); wait for it to finish, or pass --wait",
                path: destination)
        }
    }

    private init(_ lock: LockFile) { self.lock = lock }

    /// Removes the lock file (while still holding the lock), then releases it.
    func removeFileAndRelease() { lock.removeFileAndRelease() }

    /// Releases the lock.
    func release() { lock.release() }
}
