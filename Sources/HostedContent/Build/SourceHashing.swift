import Dispatch
import Foundation
import Synchronization

/// Hashes a build's source files in the background (a thread of its own, and one per core as the scan does),
/// started by `prepare` once the scan is done, so the hashing runs beside the rules and the plist's making
/// rather than after them; `write` waits for it before the plist, the archive's first entry.
///
/// The stamp of each file is compared with the one the copy checks, so both reads saw the same bytes.
final class SourceHashing: @unchecked Sendable {
    // @unchecked: `outcome` is written once by the thread before `done` is signalled, read only after it.
    private let cancelled = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private var outcome: Result<[PackageScanner.FileFacts], HCPackError>?
    private var waited = false
    private let claimed = Atomic<Bool>(false)

    /// Starts hashing `files` (relative to `root`).
    init(_ files: [PackageScanner.PendingFile], root: String) {
        WorkerThread.start(name: "hcpack-sources") { [self] in
            do throws(HCPackError) {
                outcome = .success(try PackageScanner.readAll(files, root: root) { [self] in cancelled.load(ordering: .relaxed) })
            } catch {
                outcome = .failure(error)
            }
            done.signal()
        }
    }

    /// True for the first caller only: the one whose `results` these are.
    func claim() -> Bool {
        !claimed.exchange(true, ordering: .relaxed)
    }

    /// Each file's facts, in the order given; waits for the thread. Call once, from one thread (`Builder.write`'s).
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
