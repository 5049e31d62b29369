import Digest
import Dispatch
import Foundation
import Synchronization

/// SHA-256 on a second thread, so that hashing overlaps reading and decompressing an archive.
///
/// The caller hands over a stream of files, chunk by chunk; chunks are packed into a few fixed buffers
/// (bounded memory: `slotCount` x `slotSize`), hashed in order by one worker thread, and each file's digest
/// comes back under the ticket `end()` returned. Small files share a buffer, and the worker is woken once per
/// full buffer rather than once per file: with thousands of small files, per-file wake-ups were 15,000
/// futex calls.
final class HashPipeline: @unchecked Sendable {
    // @unchecked: a slot belongs to the caller until its jobs are submitted and to the worker until it is
    // released through `freeSlots`; everything else the worker shares sits behind the mutex.
    private enum Job {
        case data(slot: Int, start: Int, count: Int)
        case end(ticket: Int)
        /// The worker is done with the slot once it reaches this job.
        case release(slot: Int)
        case stop
    }

    private let slotCount = 4
    private let slotSize = 1 << 20
    private let slots: [UnsafeMutableRawBufferPointer]
    private let freeSlots: DispatchSemaphore
    private let pendingJobs = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let shared = Mutex<(jobs: [Job], digests: [[UInt8]])>(([], []))
    /// Jobs for the slot being filled, handed over together when it is full.
    private var batch: [Job] = []
    /// The slot being filled (owned by the caller) and how many bytes it holds; nil before the first byte.
    private var filling: (slot: Int, used: Int)?
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
            let (slot, used) = filling ?? takeSlot()
            let count = min(slotSize - used, bytes.count - offset)
            UnsafeMutableRawBufferPointer(rebasing: slots[slot][used..<(used + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            batch.append(.data(slot: slot, start: used, count: count))
            filling = (slot, used + count)
            offset += count
            if used + count == slotSize { handOver() }
        }
    }

    /// Ends the current file; its digest will be `finish()[ticket]`.
    func end() -> Int {
        defer { nextTicket += 1 }
        batch.append(.end(ticket: nextTicket))
        return nextTicket
    }

    /// Waits for the worker and returns every ended file's digest, by ticket. Bytes given after the last
    /// `end()` (a file cut short by an error) are dropped.
    func finish() -> [[UInt8]] {
        if !isFinished {
            isFinished = true
            handOver()
            submit([.stop])
            stopped.wait()
        }
        return shared.withLock { $0.digests }
    }

    private func takeSlot() -> (slot: Int, used: Int) {
        freeSlots.wait()
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % slotCount
        return (slot, 0)
    }

    /// Gives the worker the filled slot and every job so far.
    private func handOver() {
        if let (slot, _) = filling { batch.append(.release(slot: slot)) }
        filling = nil
        if batch.isEmpty { return }
        submit(batch)
        batch.removeAll(keepingCapacity: true)
    }

    private func submit(_ jobs: [Job]) {
        shared.withLock { $0.jobs.append(contentsOf: jobs) }
        pendingJobs.signal()
    }

    private func work() {
        var hasher = Digest.Hasher(.sha256)
        while true {
            pendingJobs.wait()
            let jobs = shared.withLock { state -> [Job] in
                let taken = state.jobs
                state.jobs = []
                return taken
            }
            for job in jobs {
                switch job {
                case .data(let slot, let start, let count):
                    hasher.update(UnsafeRawBufferPointer(rebasing: slots[slot][start..<(start + count)]))
                case .end:
                    let digest = hasher.finalize()
                    shared.withLock { $0.digests.append(digest) }
                    hasher = Digest.Hasher(.sha256)
                case .release:
                    freeSlots.signal()
                case .stop:
                    stopped.signal()
                    return
                }
            }
        }
    }
}
