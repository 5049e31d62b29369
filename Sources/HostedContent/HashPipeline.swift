import Digest
import Dispatch
import Foundation
import Synchronization

/// SHA-256 on a second thread, so that hashing overlaps reading and decompressing an archive.
///
/// The caller hands over a stream of files, chunk by chunk; chunks are copied into a few fixed buffers
/// (bounded memory: `slotCount` x `slotSize`), hashed in order by one worker thread, and each file's digest
/// comes back under the ticket `end()` returned.
final class HashPipeline: @unchecked Sendable {
    // @unchecked: the slots are handed between the two threads by the semaphores; everything else the
    // worker shares sits behind the mutex.
    private enum Job {
        case data(slot: Int, count: Int)
        case end(ticket: Int)
        case stop
    }

    private let slotCount = 4
    private let slotSize = 1 << 20
    private let slots: [UnsafeMutableRawBufferPointer]
    private let freeSlots: DispatchSemaphore
    private let pendingJobs = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let shared = Mutex<(jobs: [Job], digests: [[UInt8]])>(([], []))
    private var nextSlot = 0
    private var nextTicket = 0
    private var isFinished = false

    init() {
        slots = (0..<slotCount).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64) }
        freeSlots = DispatchSemaphore(value: slotCount)
        let thread = Thread { [self] in work() }
        thread.name = "hcpack-sha256"
        thread.start()
    }

    deinit {
        if !isFinished { _ = finish() }
        for slot in slots { slot.deallocate() }
    }

    /// Adds bytes to the current file's hash (copied: `bytes` may be reused as soon as this returns).
    func update(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let count = min(slotSize, bytes.count - offset)
            freeSlots.wait()
            let slot = nextSlot
            nextSlot = (nextSlot + 1) % slotCount
            slots[slot].copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            submit(.data(slot: slot, count: count))
            offset += count
        }
    }

    /// Ends the current file; its digest will be `finish()[ticket]`.
    func end() -> Int {
        defer { nextTicket += 1 }
        submit(.end(ticket: nextTicket))
        return nextTicket
    }

    /// Waits for the worker and returns every ended file's digest, by ticket. Bytes given after the last
    /// `end()` (a file cut short by an error) are dropped.
    func finish() -> [[UInt8]] {
        if !isFinished {
            isFinished = true
            submit(.stop)
            stopped.wait()
        }
        return shared.withLock { $0.digests }
    }

    private func submit(_ job: Job) {
        shared.withLock { $0.jobs.append(job) }
        pendingJobs.signal()
    }

    private func work() {
        var hasher = Digest.Hasher(.sha256)
        var head = 0
        while true {
            pendingJobs.wait()
            let job = shared.withLock { state -> Job in
                let job = state.jobs[head]
                head += 1
                // Compact now and then so the queue does not grow with the archive.
                if head > 1024 {
                    state.jobs.removeFirst(head)
                    head = 0
                }
                return job
            }
            switch job {
            case .data(let slot, let count):
                hasher.update(UnsafeRawBufferPointer(rebasing: slots[slot][..<count]))
                freeSlots.signal()
            case .end:
                let digest = hasher.finalize()
                shared.withLock { $0.digests.append(digest) }
                hasher = Digest.Hasher(.sha256)
            case .stop:
                stopped.signal()
                return
            }
        }
    }
}
