import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `syncfs(2)` and `sync_file_range(2)`, looked up once with `gnuFunction`.
public enum FileSystemSync {
    private typealias Function = @convention(c) (Int32) -> Int32
    private static let function = gnuFunction("syncfs", as: Function.self)

    private typealias RangeFunction = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
    private static let syncFileRange = gnuFunction("sync_file_range", as: RangeFunction.self)

    /// How much written data to let pile up before starting its writeback.
    public static let writebackChunk: Int64 = 8 << 20

    /// Starts writing a range of a file to disk without waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`),
    /// so that the final fsync of a large output finds most of it already on disk. Advisory: errors are
    /// left for fsync to report.
    public static func startWriteback(_ descriptor: Int32, from offset: Int64, length: Int64) {
        _ = syncFileRange?(descriptor, offset, length, 2 /* SYNC_FILE_RANGE_WRITE */)
    }

    /// True when `syncfs` exists; otherwise callers fsync file by file.
    public static var isAvailable: Bool { function != nil }

    /// Flushes every file of the file system holding `directory` to disk.
    public static func synchronize(_ directory: DirectoryHandle) throws(HCPackError) {
        guard let function else { return }
        guard function(directory.descriptor) == 0 else { throw HCPackError.system("syncfs", path: directory.path, errno: errno) }
    }

    /// `syncfs` on its own thread. With `whileWriting`, it runs again and again until `finish()` (so the disk
    /// works while files are still being written, instead of all at once at the end), then once more;
    /// `wait()` returns after that last one and throws the first failure.
    public final class Background: @unchecked Sendable {
        // @unchecked: the state is behind the mutex; the semaphores hand over the rest.
        private let done = DispatchSemaphore(value: 0)
        private let wake = DispatchSemaphore(value: 0)
        private let state = Mutex<(finishing: Bool, failure: Int32)>((false, 0))
        private let path: String
        private var waited = false

        /// Starts syncing the file system of `directory` (through a duplicate descriptor the thread owns).
        public init(_ directory: DirectoryHandle, whileWriting: Bool) {
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
            WorkerThread.start(name: "hcpack-syncfs") { [self] in
                while !state.withLock({ $0.finishing }) {
                    sync(function, descriptor)
                    _ = wake.wait(timeout: .now() + .milliseconds(20))
                }
                sync(function, descriptor)
                close(descriptor)
                done.signal()
            }
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
        public func finish() {
            state.withLock { $0.finishing = true }
            wake.signal()
        }

        public func wait() throws(HCPackError) {
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
