import Dispatch
import Synchronization

/// Work started on another thread whose result is collected later: for the parts of a scan that need the
/// input but not the scan (a zip's records, the plist's parse), so they use the core the scan leaves idle.
final class BackgroundResult<Value: Sendable>: Sendable {
    private let result = Mutex<Result<Value, HCPackError>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    /// Starts `work` at once on a thread of its own; with `inline`, does it here before returning (for small
    /// inputs, where starting a thread and waiting for it costs more CPU than the overlap saves).
    init(inline: Bool = false, _ work: @escaping @Sendable () throws(HCPackError) -> Value) {
        if inline {
            finish(work)
            return
        }
        // A thread of its own, not a dispatch queue: libdispatch retries a thread it cannot start forever.
        WorkerThread.start(name: "hcpack-background") { [self] in finish(work) }
    }

    private func finish(_ work: () throws(HCPackError) -> Value) {
        let outcome: Result<Value, HCPackError>
        do throws(HCPackError) { outcome = .success(try work()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }

    /// What the work returned or threw, when it is done; nil while it runs. Does not wait.
    func outcomeIfDone() -> Result<Value, HCPackError>? {
        result.withLock { $0 }
    }

    /// Waits for the work: what it returned or threw.
    func outcome() -> Result<Value, HCPackError> {
        done.wait()
        done.signal()  // later calls do not wait
        return result.withLock { $0! }
    }

    /// Waits for the work and returns what it returned, or throws what it threw.
    func value() throws(HCPackError) -> Value {
        try outcome().get()
    }
}
