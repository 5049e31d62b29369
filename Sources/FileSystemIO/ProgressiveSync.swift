import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Puts a file on disk while it is still being written, from a thread of its own: writeback of every new
/// few MiB, and an `fdatasync` every `flushInterval` bytes, so the final `fsync` finds little left to do.
///
/// Why a thread: on a virtual disk the final `fsync` of a 270 MB archive spent a third of a second in the
/// host's cache flush after the last byte was written; flushing as the file grows overlaps that with
/// writing (measured in bench/README.md). Neither call may run on the writing thread: both wait for the
/// disk's queue, which stalled the writes.
public final class ProgressiveSync: @unchecked Sendable {
    // @unchecked: the thread owns `descriptor`; the rest is behind the mutex or a semaphore.
    private let state = Mutex<(finishing: Bool, failure: Int32)>((false, 0))
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let path: String
    private var finished = false

    /// `fdatasync` once this much more has been written.
    public static let flushInterval: Int64 = 64 << 20
    /// How often the thread looks at the file's size.
    private static let pollInterval = DispatchTimeInterval.milliseconds(3)

    /// Starts the thread on a duplicate of `original`; `path` names the file in errors. With `durable` false
    /// it only starts writeback (no `fdatasync`): for a file that need not survive a crash but should not be
    /// left for a later `syncfs` to write all at once (a download that an install reads next).
    public init(_ original: Int32, path: String, durable: Bool = true) {
        self.path = path
        let descriptor = dup(original)
        guard descriptor >= 0 else {
            state.withLock { $0.failure = errno }
            done.signal()
            return
        }
        WorkerThread.start(name: "hcpack-flush") { [self] in
            var started: Int64 = 0
            var flushed: Int64 = 0
            while !state.withLock({ $0.finishing }) {
                var info = stat()
                if fstat(descriptor, &info) == 0 {
                    let size = Int64(info.st_size)
                    // The file was cut back (a download starting over): write back from there.
                    if size < started { started = size }
                    if size - started >= FileSystemSync.writebackChunk {
                        FileSystemSync.startWriteback(descriptor, from: started, length: size - started)
                        started = size
                    }
                    if durable && size - flushed >= Self.flushInterval {
                        // Its error must be kept: the final fsync shares this open file and would not see it again.
                        if fdatasync(descriptor) != 0 { record(errno) }
                        flushed = size
                    }
                }
                _ = wake.wait(timeout: .now() + Self.pollInterval)
            }
            close(descriptor)
            done.signal()
        }
    }

    deinit {
        if !finished {
            stop()
        }
    }

    /// Stops the thread once the file is complete; throws the first failure it met. The caller still makes
    /// the file durable (`fsync`): what was flushed here makes that quick.
    public func finish() throws(HCPackError) {
        stop()
        let failure = state.withLock { $0.failure }
        if failure != 0 { throw HCPackError.system("fdatasync", path: path, errno: failure) }
    }

    private func stop() {
        guard !finished else { return }
        finished = true
        state.withLock { $0.finishing = true }
        wake.signal()
        done.wait()
    }

    private func record(_ code: Int32) {
        state.withLock { if $0.failure == 0 { $0.failure = code } }
    }
}
