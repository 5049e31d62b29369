import Dispatch
import Foundation
import Synchronization

/// Hashes a build's source files in the background (a thread of its own, and one per core as the scan does)
/// while they are copied into the archive: the copy waits for nothing, and the plist's digests are known
/// long before the last file is written, so the archive can be hashed behind its writer
/// (`ArchiveFollower`) rather than read back at the end. On every core rather than one: the follower can
/// only start once every digest is known, and with one thread it started late (measured, bench/README.md).
///
/// Its own read of each file (from the page cache, just read by the copy or about to be) rather than the
/// copy's chunks: handing those over cost the copying thread a memcpy per byte. The stamp of each file is
/// compared with the one the copy checks, so both reads saw the same bytes.
final class SourceHashing: @unchecked Sendable {
    // @unchecked: `outcome` is written once by the thread before `done` is signalled, read only after it.
    private let cancelled = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private var outcome: Result<[PackageScanner.FileFacts], HCPackError>?
    private var waited = false

    /// Starts hashing `files` (relative to `root`).
    init(_ files: [PackageScanner.PendingFile], root: String) {
        let thread = Thread { [self] in
            do throws(HCPackError) {
                outcome = .success(try PackageScanner.readAll(files, root: root) { [self] in cancelled.load(ordering: .relaxed) })
            } catch {
                outcome = .failure(error)
            }
            done.signal()
        }
        thread.name = "hcpack-sources"
        thread.start()
    }

    /// Each file's facts, in the order given; waits for the thread. Call once, from one thread (the follower's).
    func results() throws(HCPackError) -> [PackageScanner.FileFacts] {
        if !waited {
            done.wait()
            waited = true
        }
        // Handed over, not kept: 4 MB of facts at 26,000 files.
        defer { outcome = nil }
        switch outcome {
        case .success(let facts)?: return facts
        case .failure(let error)?: throw error
        case nil: return []  // a second call; not made
        }
    }

    /// Stops starting new files (a build that failed no longer needs them).
    func cancel() {
        cancelled.store(true, ordering: .relaxed)
    }
}
